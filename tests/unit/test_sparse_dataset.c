// Tests of the ratings readers (tab, "::" and comma layouts, headers, the shared id map and cold
// start, every error) and of the sparse dataset folder (its names, what it refuses, the shared
// dimension and label kind).
#include "data_util.h"
#include "hw/err.h"
#include "hw/sparse_data.h"

#include <criterion/criterion.h>
#include <math.h>
#include <zlib.h>

static char dir[512];
static void setup(void) { make_temp_dir(dir, sizeof dir); }
static void teardown(void) { rm_tree(dir); }

TestSuite(sparse_dataset, .init = setup, .fini = teardown, .timeout = 30);

static void write_text(char *path, size_t cap, const char *name, const char *text) {
    snprintf(path, cap, "%s/%s", dir, name);
    write_bytes(path, text, strlen(text));
}

// The example's user and item (dense indices) and rating.
static void expect_rating(const hw_sparse_set *s, int64_t e, int32_t user, int32_t item, float rating) {
    cr_assert_lt(e, s->n);
    cr_assert_eq(s->row_start[e], 2 * e);
    cr_assert_eq(s->row_start[e + 1], 2 * e + 2);
    cr_expect_eq(s->index[2 * e], user, "example %lld: user %d, expected %d", (long long)e, s->index[2 * e], user);
    cr_expect_eq(s->index[2 * e + 1], s->n_users + item, "example %lld: item feature %d, expected %lld", (long long)e,
                 s->index[2 * e + 1], (long long)(s->n_users + item));
    cr_expect_eq(s->value[2 * e], 1.0f);
    cr_expect_eq(s->value[2 * e + 1], 1.0f);
    cr_expect_eq(s->label[e], rating, "example %lld: rating %g", (long long)e, (double)s->label[e]);
}

// The same ratings in the three layouts: MovieLens 100K's u.data (tabs, timestamps), 1M's
// ratings.dat ("::"), ml-latest's ratings.csv (a header, half-star ratings).
static const char *const train_texts[3] = {
    "196\t242\t3\t881250949\n186\t302\t3\t891717742\n22\t377\t1\t878887116\n196\t377\t4.5\t881251000\n",
    "196::242::3::881250949\n186::302::3::891717742\n22::377::1::878887116\n196::377::4.5::881251000\n",
    ("userId,movieId,rating,timestamp\n196,242,3,881250949\n186,302,3,891717742\n22,377,1,878887116\n"
     "196,377,4.5,881251000\n"),
};
static const char *const test_texts[3] = {
    "22\t242\t2\n7\t242\t5\n186\t999\t1.5\n",  // no timestamps; user 7 and item 999 are new
    "22::242::2\n7::242::5\n186::999::1.5\n",
    "22, 242 ,2\n7,242,5\n186,999,1.5\n",  // spaces around fields are ignored
};

static void expect_ratings_example(const hw_sparse_set *train, const hw_sparse_set *test) {
    // Users in first-seen order: 196 -> 0, 186 -> 1, 22 -> 2, then 7 (test only) -> 3;
    // items 242 -> 0, 302 -> 1, 377 -> 2, then 999 (test only) -> 3.
    cr_expect_eq(train->n, 4);
    cr_expect_eq(test->n, 3);
    for (int i = 0; i < 2; i++) {
        const hw_sparse_set *s = i ? test : train;
        cr_expect_eq(s->n_users, 4);
        cr_expect_eq(s->n_items, 4);
        cr_expect_eq(s->dim, 8);
        cr_expect_eq(s->label_kind, HW_LABEL_REAL);
        cr_expect_eq(s->n_classes, 0);
    }
    expect_rating(train, 0, 0, 0, 3);
    expect_rating(train, 1, 1, 1, 3);
    expect_rating(train, 2, 2, 2, 1);
    expect_rating(train, 3, 0, 2, 4.5f);
    expect_rating(test, 0, 2, 0, 2);
    expect_rating(test, 1, 3, 0, 5);
    expect_rating(test, 2, 1, 3, 1.5f);
}

Test(sparse_dataset, ratings_in_three_layouts_share_one_id_map) {
    const char *names[3][2] = {{"r.tsv", "t.tsv"}, {"r.dat", "t.dat"}, {"r.csv", "t.csv"}};
    hw_ratings_layout layouts[3] = {HW_RATINGS_TSV, HW_RATINGS_DAT, HW_RATINGS_CSV};
    for (int l = 0; l < 3; l++) {
        char train_path[600], test_path[600];
        write_text(train_path, sizeof train_path, names[l][0], train_texts[l]);
        write_text(test_path, sizeof test_path, names[l][1], test_texts[l]);
        hw_sparse_set train, test;
        cr_assert_eq(hw_ratings_load(&train, &test, train_path, test_path, layouts[l]), HW_OK, "%s", hw_error());
        expect_ratings_example(&train, &test);
        cr_expect_str_eq(train.source, train_path);
        hw_sparse_set_free(&train);
        hw_sparse_set_free(&test);
        // The training file alone: the same map for what it holds.
        cr_assert_eq(hw_ratings_load(&train, NULL, train_path, NULL, layouts[l]), HW_OK, "%s", hw_error());
        cr_expect_eq(train.n_users, 3);
        cr_expect_eq(train.n_items, 3);
        cr_expect_eq(train.dim, 6);
        expect_rating(&train, 3, 0, 2, 4.5f);
        hw_sparse_set_free(&train);
    }
}

Test(sparse_dataset, ids_are_text_and_lines_may_end_in_crlf) {
    char path[600];
    write_text(path, sizeof path, "ids.tsv", "u7\titem-a\t1\r\n07\titem-a\t2\r\n\r\n7\titem-b\t-0.5\r\nu7\titem-b\t3");
    hw_sparse_set s;
    cr_assert_eq(hw_ratings_load(&s, NULL, path, NULL, HW_RATINGS_TSV), HW_OK, "%s", hw_error());
    cr_expect_eq(s.n_users, 3, "u7, 07 and 7 are three users");
    cr_expect_eq(s.n_items, 2);
    expect_rating(&s, 1, 1, 0, 2);
    expect_rating(&s, 2, 2, 1, -0.5f);
    expect_rating(&s, 3, 0, 1, 3);
    hw_sparse_set_free(&s);
}

static void expect_ratings_fault(const char *text, hw_ratings_layout layout, int line, int column, const char *fault) {
    char path[600], where[700];
    write_text(path, sizeof path, "bad.ratings", text);
    hw_sparse_set s;
    cr_assert_eq(hw_ratings_load(&s, NULL, path, NULL, layout), HW_ERR, "accepted: %s", text);
    cr_expect_null(s.index);
    snprintf(where, sizeof where, "%s:%d:%d: ", path, line, column);
    const char *msg = hw_error();
    cr_expect(strncmp(msg, where, strlen(where)) == 0, "'%s' does not start with '%s'", msg, where);
    cr_expect(strstr(msg, fault) != NULL, "'%s' does not say '%s'", msg, fault);
}

Test(sparse_dataset, every_ratings_error_names_file_line_and_column) {
    expect_ratings_fault("1\t2\t3\n1\t2\tgood\n", HW_RATINGS_TSV, 2, 5, "malformed rating 'good'");
    expect_ratings_fault("1\t2\t3\n1\t2\tNaN\n", HW_RATINGS_TSV, 2, 5, "non-finite rating 'NaN'");
    expect_ratings_fault("1::2::3\n1::2::1e99\n", HW_RATINGS_DAT, 2, 7, "rating '1e99' is out of the range");
    expect_ratings_fault("1,2,3\n1,2\n", HW_RATINGS_CSV, 2, 1, "2 fields: expected user, item, rating");
    expect_ratings_fault("1\t2\t3\n1 2 3\n", HW_RATINGS_TSV, 2, 1,
                         "1 field: expected user, item, rating and an optional "
                         "timestamp separated by tabs");
    expect_ratings_fault("1,2,3,4,5\n", HW_RATINGS_CSV, 1, 8, "more than 4 fields");
    expect_ratings_fault("1,2,3\n,2,3\n", HW_RATINGS_CSV, 2, 1, "empty user id");
    expect_ratings_fault("1::2::3\n1:: ::3\n", HW_RATINGS_DAT, 2, 5, "empty item id");
    // A first line of numeric ids with a bad rating is a bad rating, not a header to skip; a
    // header names its columns.
    expect_ratings_fault("1\t2\tgood\n1\t2\t3\n", HW_RATINGS_TSV, 1, 5, "malformed rating 'good'");
    expect_ratings_fault("196::242::\n1::2::3\n", HW_RATINGS_DAT, 1, 11, "malformed rating ''");
    expect_ratings_fault("7, 8.5 ,3..5\n", HW_RATINGS_CSV, 1, 9, "the header only when its user or item is not");
    // A header is only ever the first line.
    expect_ratings_fault("user,item,rating\n1,2,3\nuser,item,rating\n", HW_RATINGS_CSV, 3, 11, "malformed rating");
    char path[600];
    hw_sparse_set s;
    write_text(path, sizeof path, "header.csv", "user,item,rating\n");
    cr_expect_eq(hw_ratings_load(&s, NULL, path, NULL, HW_RATINGS_CSV), HW_ERR);
    cr_expect(strstr(hw_error(), "no ratings") != NULL, "%s", hw_error());
    write_text(path, sizeof path, "named.tsv", "user\t42\trating\n1\t2\t3\n");
    cr_assert_eq(hw_ratings_load(&s, NULL, path, NULL, HW_RATINGS_TSV), HW_OK, "%s", hw_error());
    cr_expect_eq(s.n, 1, "a first line naming its user column is the header");
    hw_sparse_set_free(&s);
}

// A NUL in a ratings file is binary data, named with its place, in either file of the pair.
Test(sparse_dataset, binary_ratings_are_refused_as_such) {
    char train[600], test[600];
    write_text(train, sizeof train, "train.tsv", "1\t2\t3\n");
    snprintf(test, sizeof test, "%s/test.tsv", dir);
    static const char bytes[] = "1\t2\t3\n2\t\0\t4\n";
    write_bytes(test, bytes, sizeof bytes - 1);
    hw_sparse_set s, t;
    cr_assert_eq(hw_ratings_load(&s, &t, train, test, HW_RATINGS_TSV), HW_ERR);
    char where[700];
    snprintf(where, sizeof where, "%s:2:3: binary data (a NUL byte, 0x00)", test);
    cr_expect(strncmp(hw_error(), where, strlen(where)) == 0, "'%s' does not start with '%s'", hw_error(), where);
    cr_expect(strstr(hw_error(), "not a text ratings file") != NULL, "%s", hw_error());
}

// ---- the folder ----

Test(sparse_dataset, kind_by_names_alone) {
    char path[600], sub[600];
    cr_expect_eq(hw_sparse_dataset_kind(dir), HW_SPARSE_NONE);
    snprintf(sub, sizeof sub, "%s/absent", dir);
    cr_expect_eq(hw_sparse_dataset_kind(sub), HW_SPARSE_NONE);
    write_text(path, sizeof path, "train-images-idx3-ubyte.gz", "x");
    cr_expect_eq(hw_sparse_dataset_kind(dir), HW_SPARSE_NONE, "MNIST's names are not sparse");
    write_text(path, sizeof path, "test.libsvm.gz", "not even read");
    cr_expect_eq(hw_sparse_dataset_kind(dir), HW_SPARSE_LIBSVM);
    write_text(path, sizeof path, "train.csv", "x");
    cr_expect_eq(hw_sparse_dataset_kind(dir), HW_SPARSE_MIXED);
    unlink(path);
    snprintf(path, sizeof path, "%s/test.libsvm.gz", dir);
    unlink(path);
    write_text(path, sizeof path, "train.dat", "x");
    cr_expect_eq(hw_sparse_dataset_kind(dir), HW_SPARSE_RATINGS);
}

Test(sparse_dataset, libsvm_folder_shares_dimension_and_label_kind) {
    char path[600];
    // The test file holds feature 9, which the training file never had, and only 0 labels; the
    // training file's 0/1 labels make both binary.
    write_text(path, sizeof path, "train.libsvm", "1 1:1 3:2\n0 2:1\n");
    write_text(path, sizeof path, "test.libsvm", "0 9:1\n0 1:1\n");
    hw_sparse_set train, test;
    cr_assert_eq(hw_sparse_dataset_kind(dir), HW_SPARSE_LIBSVM);
    cr_assert_eq(hw_sparse_dataset_open(dir, &train, &test), HW_OK, "%s", hw_error());
    cr_expect_eq(train.dim, 9);
    cr_expect_eq(test.dim, 9);
    cr_expect_eq(train.label_kind, HW_LABEL_BINARY);
    cr_expect_eq(test.label_kind, HW_LABEL_BINARY);
    cr_expect_eq(test.label[0], -1.0f, "0 is -1 in the test file too");
    cr_expect_eq(test.index[0], 8);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    // Classes decided over both files: the test file's 2 makes a third class.
    write_text(path, sizeof path, "test.libsvm", "2 9:1\n0 1:1\n");
    cr_assert_eq(hw_sparse_dataset_open(dir, &train, &test), HW_OK, "%s", hw_error());
    cr_expect_eq(train.label_kind, HW_LABEL_CLASSES);
    cr_expect_eq(train.n_classes, 3);
    cr_expect_eq(test.n_classes, 3);
    cr_expect_eq(train.label[1], 0.0f, "classes keep their values");
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    // The model's dimension.
    cr_assert_eq(hw_sparse_dataset_open_dim(dir, 20, &train, &test), HW_OK, "%s", hw_error());
    cr_expect_eq(train.dim, 20);
    cr_expect_eq(test.dim, 20);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    cr_expect_eq(hw_sparse_dataset_open_dim(dir, 5, &train, &test), HW_ERR);
    snprintf(path, sizeof path, "%s/test.libsvm:1:3: index 9 is past the dimension 5", dir);
    cr_expect(strstr(hw_error(), path) != NULL, "%s", hw_error());
    cr_expect_null(train.index, "the training set is freed when the test file fails");
}

Test(sparse_dataset, gzip_names_and_what_the_folder_refuses) {
    char path[600], other[600];
    hw_sparse_set train, test;
    cr_expect_eq(hw_sparse_dataset_open(dir, &train, &test), HW_ERR);
    cr_expect(strstr(hw_error(), "holds no sparse dataset") != NULL, "%s", hw_error());
    snprintf(path, sizeof path, "%s/absent", dir);
    cr_expect_eq(hw_sparse_dataset_open(path, &train, &test), HW_ERR);
    cr_expect(strstr(hw_error(), "does not exist") != NULL, "%s", hw_error());

    // train.libsvm.gz (gzip) and a plain test.libsvm.
    gzFile gz;
    snprintf(path, sizeof path, "%s/train.libsvm.gz", dir);
    cr_assert_not_null(gz = gzopen(path, "wb"));
    gzputs(gz, "-1 2:1\n+1 1:1\n");
    cr_assert_eq(gzclose(gz), Z_OK);
    cr_expect_eq(hw_sparse_dataset_open(dir, &train, &test), HW_ERR, "no test file");
    cr_expect(strstr(hw_error(), "no test.libsvm (nor test.libsvm.gz)") != NULL, "%s", hw_error());
    write_text(other, sizeof other, "test.libsvm", "+1 3:1\n");
    cr_assert_eq(hw_sparse_dataset_open(dir, &train, &test), HW_OK, "%s", hw_error());
    cr_expect_eq(train.n, 2);
    cr_expect_eq(train.dim, 3);
    cr_expect_str_eq(train.source, path);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    write_text(other, sizeof other, "test.libsvm.gz", "x");
    cr_expect_eq(hw_sparse_dataset_open(dir, &train, &test), HW_ERR, "test.libsvm and test.libsvm.gz");
    cr_expect(strstr(hw_error(), "holds both test.libsvm and test.libsvm.gz") != NULL, "%s", hw_error());
    unlink(other);
    write_text(other, sizeof other, "train.tsv", "1\t2\t3\n");
    cr_expect_eq(hw_sparse_dataset_open(dir, &train, &test), HW_ERR, "two layouts");
    cr_expect(strstr(hw_error(), "two sparse layouts (train.libsvm and train.tsv)") != NULL, "%s", hw_error());
}

Test(sparse_dataset, ratings_folders_in_each_layout) {
    const char *names[3][2] = {{"train.tsv", "test.tsv"}, {"train.dat", "test.dat"}, {"train.csv", "test.csv"}};
    for (int l = 0; l < 3; l++) {
        char sub[600], path[700];
        snprintf(sub, sizeof sub, "%s/layout%d", dir, l);
        cr_assert_eq(mkdir(sub, 0755), 0);
        snprintf(path, sizeof path, "%s/%s", sub, names[l][0]);
        write_bytes(path, train_texts[l], strlen(train_texts[l]));
        snprintf(path, sizeof path, "%s/%s", sub, names[l][1]);
        write_bytes(path, test_texts[l], strlen(test_texts[l]));
        cr_expect_eq(hw_sparse_dataset_kind(sub), HW_SPARSE_RATINGS);
        hw_sparse_set train, test;
        cr_assert_eq(hw_sparse_dataset_open(sub, &train, &test), HW_OK, "%s", hw_error());
        expect_ratings_example(&train, &test);
        hw_sparse_set_free(&train);
        hw_sparse_set_free(&test);
        cr_assert_eq(hw_sparse_dataset_open_dim(sub, 10, &train, &test), HW_OK, "%s", hw_error());
        cr_expect_eq(train.dim, 10);
        cr_expect_eq(test.dim, 10);
        cr_expect_eq(test.index[5], 4 + 3, "items still follow the users");
        hw_sparse_set_free(&train);
        hw_sparse_set_free(&test);
        cr_expect_eq(hw_sparse_dataset_open_dim(sub, 7, &train, &test), HW_ERR);
        cr_expect(strstr(hw_error(), "4 users and 4 items, 8 features: more than the dimension 7") != NULL, "%s",
                  hw_error());
    }
}
