// Tests of the ImageFolder reader: order, decoding, grayscale, resizing, and bad folders.
#include "data_util.h"
#include "hw/data.h"
#include "hw/err.h"
#include "hw/option.h"

#include <criterion/criterion.h>
#include <stb_image_write.h>
#include <strings.h>

static char dir[512];
static void setup(void) { make_temp_dir(dir, sizeof dir); }
static void teardown(void) { rm_tree(dir); }

TestSuite(image_folder, .init = setup, .fini = teardown, .timeout = 30);

static void make_folder(const char *rel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    cr_assert_eq(hw_mkdir_p(path), HW_OK, "%s", hw_error());
}

// A w x h image of one gray value, in the format the extension names (RGB for png, to test the
// conversion to grayscale).
static void write_image(const char *rel, int w, int h, uint8_t value) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    uint8_t *rgb = malloc((size_t)(w * h * 3));
    memset(rgb, value, (size_t)(w * h * 3));
    const char *ext = strrchr(rel, '.');
    int ok;
    if (strcasecmp(ext, ".png") == 0) {
        ok = stbi_write_png(path, w, h, 3, rgb, w * 3);
    } else if (strcasecmp(ext, ".bmp") == 0) {
        ok = stbi_write_bmp(path, w, h, 1, rgb);
    } else {
        ok = stbi_write_jpg(path, w, h, 1, rgb, 100);
    }
    cr_assert(ok, "cannot write %s", path);
    free(rgb);
}

static void expect_error(const char *fragment1, const char *fragment2) {
    const char *msg = hw_error();
    cr_expect(strstr(msg, fragment1) != NULL, "message lacks '%s': %s", fragment1, msg);
    if (fragment2) cr_expect(strstr(msg, fragment2) != NULL, "message lacks '%s': %s", fragment2, msg);
}

Test(image_folder, classes_and_files_in_sorted_order) {
    make_folder("b_second");
    make_folder("a_first");
    write_image("b_second/2.png", 6, 4, 200);
    write_image("b_second/10.PNG", 6, 4, 100);  // "10" sorts before "2"
    write_image("a_first/x.bmp", 6, 4, 50);
    write_image("a_first/y.jpg", 6, 4, 128);
    write_image("a_first/.hidden.png", 9, 9, 1);  // skipped: a dot-file
    char readme[600];
    snprintf(readme, sizeof readme, "%s/README.txt", dir);
    write_bytes(readme, "not a sample", 12);  // files beside the class folders are ignored
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, dir, 0, 0), HW_OK, "%s", hw_error());
    cr_expect_eq(ds.n, 4);
    cr_expect_eq(ds.n_classes, 2);
    cr_expect_eq(ds.height, 4);
    cr_expect_eq(ds.width, 6);
    cr_expect_eq(ds.channels, 1);
    const uint8_t labels[4] = {0, 0, 1, 1};
    const int values[4] = {50, 128, 100, 200};
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(ds.labels[i], labels[i], "sample %d", i);
        // png and bmp are lossless; a flat jpeg at quality 100 is within a step or two.
        for (int p = 0; p < 24; p++) {
            int got = ds.images[i * 24 + p];
            cr_expect(got >= values[i] - 2 && got <= values[i] + 2, "sample %d pixel %d: %d, expected %d", i, p, got,
                      values[i]);
        }
    }
    cr_expect_eq(ds.images[0], 50, "bmp exact");
    cr_expect_eq(ds.images[2 * 24], 100, "RGB png to gray exact");
    hw_dataset_free(&ds);
}

Test(image_folder, area_resize_averages_blocks) {
    make_folder("c");
    // 4 x 4 image made of four 2 x 2 blocks: resized to 2 x 2 each output pixel is one block.
    uint8_t px[16] = {10, 10, 90, 90, 10, 10, 90, 90, 30, 30, 250, 250, 30, 30, 250, 250};
    px[0] = 14;  // the block's mean becomes 11
    char path[1024];
    snprintf(path, sizeof path, "%s/c/blocks.png", dir);
    cr_assert(stbi_write_png(path, 4, 4, 1, px, 4));
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, dir, 2, 2), HW_OK, "%s", hw_error());
    cr_expect_eq(ds.images[0], 11);
    cr_expect_eq(ds.images[1], 90);
    cr_expect_eq(ds.images[2], 30);
    cr_expect_eq(ds.images[3], 250);
    hw_dataset_free(&ds);
}

Test(image_folder, area_resize_non_integer_factor_and_bilinear_enlarge) {
    make_folder("c");
    write_image("c/flat.png", 50, 37, 77);  // 50 x 37 -> 28 x 28 (area) keeps a flat image flat
    uint8_t px[4] = {0, 200, 0, 200};       // 2 x 2 -> 2 x 4: bilinear between the columns
    char path[1024];
    snprintf(path, sizeof path, "%s/c/grad.png", dir);
    cr_assert(stbi_write_png(path, 2, 2, 1, px, 2));
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, dir, 28, 28), HW_OK, "%s", hw_error());
    cr_assert_eq(ds.n, 2);
    for (int p = 0; p < 28 * 28; p++) cr_assert_eq(ds.images[p], 77, "pixel %d", p);
    // Second image (grad.png), row 0: 0 at the left edge, 200 at the right, rising in between.
    const uint8_t *row = ds.images + 28 * 28;
    cr_expect_eq(row[0], 0);
    cr_expect_eq(row[27], 200);
    for (int x = 1; x < 28; x++) cr_expect_geq(row[x], row[x - 1]);
    cr_expect(row[13] > 60 && row[14] < 140, "middle values %d %d", row[13], row[14]);
    hw_dataset_free(&ds);
}

Test(image_folder, different_sizes_without_a_target_size) {
    make_folder("a");
    write_image("a/1.png", 5, 5, 1);
    write_image("a/2.png", 6, 5, 1);
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, dir, 0, 0), HW_ERR);
    expect_error("a/2.png", "5 x 6");
    // The way out it names exists (issue 21), with its flag once the command line names it.
    expect_error("resize every image to one size", NULL);
    hw_option_hint_set(HW_OPTION_RESIZE, " (--resize)");
    cr_assert_eq(hw_image_folder_load(&ds, dir, 0, 0), HW_ERR);
    expect_error("resize every image to one size (--resize)", NULL);
}

// --resize HxW: image folders of mixed sizes load, every image (train and test) at that size; IDX
// files, all of one size already, refuse it.
Test(image_folder, dataset_open_resized_takes_mixed_sizes) {
    make_folder("train/zero");
    make_folder("train/one");
    make_folder("test/zero");
    make_folder("test/one");
    write_image("train/zero/a.png", 8, 8, 10);
    write_image("train/one/a.png", 12, 6, 20);
    write_image("test/zero/a.png", 16, 16, 40);
    write_image("test/one/a.png", 4, 4, 50);
    hw_dataset train, test;
    cr_assert_eq(hw_dataset_open(dir, &train, &test), HW_ERR);
    expect_error("resize every image to one size", NULL);
    cr_assert_eq(hw_dataset_open_resized(dir, 5, 7, &train, &test), HW_OK, "%s", hw_error());
    cr_expect(train.height == 5 && train.width == 7 && test.height == 5 && test.width == 7);
    cr_expect_eq(train.images[0], 20, "a uniform image stays uniform");
    cr_expect_eq(test.images[35], 40);
    hw_dataset_free(&train);
    hw_dataset_free(&test);
    char idx_dir[600];
    snprintf(idx_dir, sizeof idx_dir, "%s/idx", dir);
    cr_assert_eq(hw_synth_write(idx_dir, 20, 10, 1), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_dataset_open_resized(idx_dir, 14, 14, &train, &test), HW_ERR);
    expect_error("resizing applies to train/ and test/ image folders", NULL);
}

Test(image_folder, missing_folder) {
    char path[600];
    snprintf(path, sizeof path, "%s/nothing-here", dir);
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, path, 0, 0), HW_ERR);
    expect_error(path, "No such file");
}

Test(image_folder, empty_folder) {
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, dir, 0, 0), HW_ERR);
    expect_error(dir, "no class folders");
}

Test(image_folder, class_folder_without_images) {
    make_folder("cat");
    make_folder("dog");
    write_image("cat/1.png", 3, 3, 1);
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, dir, 0, 0), HW_ERR);
    expect_error("/dog", "class folder holds no images");
}

Test(image_folder, non_image_file) {
    make_folder("cat");
    write_image("cat/1.png", 3, 3, 1);
    char path[600];
    snprintf(path, sizeof path, "%s/cat/notes.txt", dir);
    write_bytes(path, "hello", 5);
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, dir, 0, 0), HW_ERR);
    expect_error(path, "not an image");
}

Test(image_folder, undecodable_image) {
    make_folder("cat");
    write_image("cat/1.png", 3, 3, 1);
    char path[600];
    snprintf(path, sizeof path, "%s/cat/2.jpg", dir);
    write_bytes(path, "this is no jpeg at all", 22);
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, dir, 0, 0), HW_ERR);
    expect_error(path, "cannot decode image");
}

Test(image_folder, nested_folder) {
    make_folder("cat/inner");
    write_image("cat/1.png", 3, 3, 1);
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, dir, 0, 0), HW_ERR);
    expect_error("cat/inner", "a folder inside a class folder");
}

Test(image_folder, too_many_classes) {
    // 257 class folders; the error comes before any image is decoded, so they can stay empty.
    for (int c = 0; c < 257; c++) {
        char rel[32];
        snprintf(rel, sizeof rel, "c%03d", c);
        make_folder(rel);
        if (c < 256) {
            snprintf(rel, sizeof rel, "c%03d/i.bmp", c);
            write_image(rel, 1, 1, 3);
        }
    }
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, dir, 0, 0), HW_ERR);
    expect_error(dir, "more than 256 class folders");
}

Test(image_folder, dataset_open_train_and_test_folders) {
    make_folder("train/zero");
    make_folder("train/one");
    make_folder("test/zero");
    make_folder("test/one");
    write_image("train/zero/a.png", 8, 8, 10);
    write_image("train/one/a.png", 8, 8, 20);
    write_image("train/one/b.png", 8, 8, 30);
    write_image("test/zero/a.png", 16, 16, 40);  // test images are resized to the training size
    write_image("test/one/a.png", 4, 4, 50);
    hw_dataset train, test;
    cr_assert_eq(hw_dataset_open(dir, &train, &test), HW_OK, "%s", hw_error());
    cr_expect_eq(train.n, 3);
    cr_expect_eq(test.n, 2);
    cr_expect_eq(test.height, 8);
    cr_expect_eq(test.width, 8);
    cr_expect_eq(train.labels[0], 0, "'one' sorts before 'zero': class 0");
    cr_expect_eq(train.images[0], 20);
    cr_expect_eq(train.labels[2], 1);
    cr_expect_eq(train.images[2 * 64], 10);
    cr_expect_eq(test.images[0], 50);
    cr_expect_eq(test.images[64], 40);
    hw_dataset_free(&train);
    hw_dataset_free(&test);
}

Test(image_folder, dataset_open_class_mismatch) {
    make_folder("train/cat");
    make_folder("train/dog");
    make_folder("test/cat");
    make_folder("test/cow");
    write_image("train/cat/a.png", 4, 4, 1);
    write_image("train/dog/a.png", 4, 4, 1);
    write_image("test/cat/a.png", 4, 4, 1);
    write_image("test/cow/a.png", 4, 4, 1);
    hw_dataset train, test;
    cr_assert_eq(hw_dataset_open(dir, &train, &test), HW_ERR);
    expect_error("train/dog", "no matching class folder");
    cr_expect_null(train.images);
}

Test(image_folder, dataset_open_train_without_test) {
    make_folder("train/cat");
    write_image("train/cat/a.png", 4, 4, 1);
    hw_dataset train, test;
    cr_assert_eq(hw_dataset_open(dir, &train, &test), HW_ERR);
    expect_error(dir, "no test/ image folder");
}

// A real image of `rel`'s format whose header is patched to claim w x h (`w` < 0: unchanged).
static void write_claiming(const char *rel, int64_t w, int64_t h) {
    write_image(rel, 3, 3, 7);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    size_t n;
    uint8_t *b = read_bytes(path, &n);
    const char *ext = strrchr(rel, '.');
    if (strcasecmp(ext, ".png") == 0) {
        for (int i = 0; i < 4; i++)
            b[16 + i] = (uint8_t)((uint64_t)w >> (24 - 8 * i)), b[20 + i] = (uint8_t)((uint64_t)h >> (24 - 8 * i));
    } else if (strcasecmp(ext, ".bmp") == 0) {
        for (int i = 0; i < 4; i++)
            b[18 + i] = (uint8_t)((uint64_t)w >> (8 * i)), b[22 + i] = (uint8_t)((uint64_t)h >> (8 * i));
    } else {
        size_t at = 2;
        while (at + 9 < n && !(b[at] == 0xFF && b[at + 1] == 0xC0)) at += 2 + ((size_t)b[at + 2] << 8 | b[at + 3]);
        cr_assert_lt(at + 9, n, "no SOF0 in the JPEG");
        b[at + 5] = (uint8_t)(h >> 8), b[at + 6] = (uint8_t)h, b[at + 7] = (uint8_t)(w >> 8), b[at + 8] = (uint8_t)w;
    }
    write_bytes(path, b, n);
    free(b);
}

// A header that claims 100000 x 100000, 20000000 x 1 or 0 x 0 got "stb_image: unknown image type"
// (stb_image's own limit refused it without a word of the size): now the limit's own message,
// naming the claimed size, before anything is decoded.
Test(image_folder, a_header_claiming_a_size_beyond_the_limit_or_none_is_named) {
    struct {
        const char *name;
        int64_t w, h;
        const char *needle;
    } cases[] = {
        {"cat/big.png", 100000, 100000, "claims an image of 100000 x 100000"},
        {"cat/wide.png", 20000000, 1, "claims an image of 20000000 x 1"},
        {"cat/empty.png", 0, 0, "at least one pixel"},
        {"cat/big.bmp", 100000, 100000, "claims an image of 100000 x 100000"},
        {"cat/empty.bmp", 0, 0, "at least one pixel"},
        {"cat/big.jpg", 60000, 60000, "claims an image of 60000 x 60000"},
        {"cat/empty.jpg", 0, 0, "at least one pixel"},
    };
    make_folder("cat");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_claiming(cases[i].name, cases[i].w, cases[i].h);
        hw_dataset ds;
        cr_expect_eq(hw_image_folder_load(&ds, dir, 0, 0), HW_ERR, "%s was read", cases[i].name);
        expect_error(cases[i].name, cases[i].needle);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, cases[i].name);
        unlink(path);
    }
}

// A PNG cut short got "cannot decode image (stb_image: IDAT)".
Test(image_folder, a_truncated_png_says_its_data_is_cut_short) {
    make_folder("cat");
    char path[1024];
    snprintf(path, sizeof path, "%s/cat/cut.png", dir);
    enum { SIDE = 64 };
    uint8_t *noise = malloc(SIDE * SIDE * 3);
    for (int i = 0; i < SIDE * SIDE * 3; i++) noise[i] = (uint8_t)(i * 2654435761u >> 13);
    cr_assert(stbi_write_png(path, SIDE, SIDE, 3, noise, SIDE * 3));
    free(noise);
    size_t n;
    uint8_t *b = read_bytes(path, &n);
    write_bytes(path, b, n / 2);
    free(b);
    hw_dataset ds;
    cr_assert_eq(hw_image_folder_load(&ds, dir, 0, 0), HW_ERR);
    expect_error("cut.png", "damaged or cut short");
    expect_error("PNG image of 64 x 64", NULL);
}
