// Tests of md5 and hw_download: offline only (a local mirror folder and file:// URLs), so they
// are fast and never wait on the network.
#include "data_util.h"
#include "hw/data.h"
#include "hw/err.h"

#include <criterion/criterion.h>

static char dir[512];
static void setup(void) { make_temp_dir(dir, sizeof dir); }
static void teardown(void) { rm_tree(dir); }

TestSuite(fetch, .init = setup, .fini = teardown, .timeout = 60);

static const char *const mnist_files[4] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
static const char *const mnist_md5[4] = {"f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
                                         "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c"};
static const char *const no_urls[] = {NULL};

static void expect_error(const char *fragment1, const char *fragment2) {
    const char *msg = hw_error();
    cr_expect(strstr(msg, fragment1) != NULL, "message lacks '%s': %s", fragment1, msg);
    if (fragment2) cr_expect(strstr(msg, fragment2) != NULL, "message lacks '%s': %s", fragment2, msg);
}

static int curl_installed(void) { return system("command -v curl >/dev/null 2>&1") == 0; }

// A mirror folder <dir>/bad-mirror/mnist holding a wrong copy of every file.
static void make_corrupt_mirror(char *mirror, size_t cap) {
    snprintf(mirror, cap, "%s/bad-mirror", dir);
    char path[1200];
    snprintf(path, sizeof path, "%s/mnist", mirror);
    cr_assert_eq(hw_mkdir_p(path), HW_OK, "%s", hw_error());
    for (int f = 0; f < 4; f++) {
        snprintf(path, sizeof path, "%s/mnist/%s", mirror, mnist_files[f]);
        write_bytes(path, "corrupted copy", 14);
    }
}

static void expect_no_leftovers(const char *dest) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -q tmp", dest);
    cr_expect_neq(system(cmd), 0, "a temporary file was left in %s", dest);
}

// ---- md5 ----

// hw_md5_file over libmd: the RFC's test vectors, and lengths around the 64-byte block, the
// 56-byte padding limit and the 64 KiB read chunk.
Test(fetch, md5_file_rfc1321_test_suite) {
    const char *inputs[7] = {
        "",
        "a",
        "abc",
        "message digest",
        "abcdefghijklmnopqrstuvwxyz",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
    };
    const char *digests[7] = {
        "d41d8cd98f00b204e9800998ecf8427e", "0cc175b9c0f1b6a831c399e269772661", "900150983cd24fb0d6963f7d28e17f72",
        "f96b697d7cb7938d525a2f31aaf161d0", "c3fcd3d76192e4007dfb496cca67e13b", "d174ab98d277d9f5a5611c2c9f419d9f",
        "57edf4a22be3c955ac49da2e2107b67a",
    };
    char path[600], hex[33];
    snprintf(path, sizeof path, "%s/vector", dir);
    for (int i = 0; i < 7; i++) {
        write_bytes(path, inputs[i], strlen(inputs[i]));
        cr_assert_eq(hw_md5_file(path, hex), HW_OK, "%s", hw_error());
        cr_expect_str_eq(hex, digests[i], "md5(\"%s\")", inputs[i]);
    }
}

Test(fetch, md5_file_long_inputs_and_errors) {
    char path[600], b[33];
    snprintf(path, sizeof path, "%s/blob", dir);
    // A million 'a's, read in chunks: the RFC's extra vector.
    uint8_t *data = malloc(200000);
    memset(data, 'a', 200000);
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 5; i++) fwrite(data, 1, 200000, f);
    fclose(f);
    cr_assert_eq(hw_md5_file(path, b), HW_OK);
    cr_expect_str_eq(b, "7707d6ae4e027c70eea2a935c2296f21");
    free(data);
    cr_expect_eq(hw_md5_file("/nonexistent/file", b), HW_ERR);
    expect_error("/nonexistent/file", "No such file");
}

// ---- downloads ----

Test(fetch, unknown_name) {
    cr_assert_eq(hw_download_from("cifar", dir, NULL, no_urls, NULL), HW_ERR);
    expect_error("cifar", "mnist, fashion-mnist");
}

Test(fetch, real_mirror_copy_then_already_present) {
    const char *mirror = real_data_dir();
    if (!mirror) cr_skip_test("no real MNIST mirror: set HOGWILD_DATA_MIRROR to a folder with mnist/*.gz");
    char dest[600];
    snprintf(dest, sizeof dest, "%s/data/mnist", dir);  // created with its parents
    char *log = NULL;
    size_t log_len = 0;
    FILE *progress = open_memstream(&log, &log_len);
    cr_assert_eq(hw_download_from("mnist", dest, mirror, no_urls, progress), HW_OK, "%s", hw_error());
    fclose(progress);
    int lines = 0;
    for (char *p = log; *p; p++) lines += *p == '\n';
    cr_expect_eq(lines, 4, "one progress line per file:\n%s", log);
    cr_expect(strstr(log, "copied from") != NULL && strstr(log, mirror) != NULL, "%s", log);
    free(log);
    for (int f = 0; f < 4; f++) {
        char path[1200], md5[33];
        snprintf(path, sizeof path, "%s/%s", dest, mnist_files[f]);
        cr_assert_eq(hw_md5_file(path, md5), HW_OK, "%s", hw_error());
        cr_expect_str_eq(md5, mnist_md5[f]);
    }
    expect_no_leftovers(dest);
    // A second run finds them all in place and copies nothing: not even a mirror is needed.
    progress = open_memstream(&log, &log_len);
    cr_assert_eq(hw_download_from("mnist", dest, NULL, no_urls, progress), HW_OK, "%s", hw_error());
    fclose(progress);
    cr_expect(strstr(log, "already present") != NULL && strstr(log, "copied") == NULL, "%s", log);
    free(log);
}

Test(fetch, corrupt_mirror_copy_is_refused) {
    char mirror[600], dest[600];
    make_corrupt_mirror(mirror, sizeof mirror);
    snprintf(dest, sizeof dest, "%s/dest", dir);
    cr_assert_eq(hw_download_from("mnist", dest, mirror, no_urls, NULL), HW_ERR);
    expect_error("md5 mismatch", "expected f68b3c2dcbeaaa9fbdd348bbdeb94873");
    expect_error("bad-mirror/mnist/train-images-idx3-ubyte.gz", "HOGWILD_DATA_MIRROR");
    char path[1200];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dest);
    cr_expect_neq(access(path, F_OK), 0, "the bad copy was not kept under the real name");
    expect_no_leftovers(dest);
}

Test(fetch, nothing_to_try) {
    cr_assert_eq(hw_download_from("fashion-mnist", dir, NULL, no_urls, NULL), HW_ERR);
    expect_error("fashion-mnist train-images-idx3-ubyte.gz", "tried: nothing");
    expect_error("HOGWILD_DATA_MIRROR", NULL);
}

Test(fetch, mirror_without_the_dataset) {
    cr_assert_eq(hw_download_from("fashion-mnist", dir, dir, no_urls, NULL), HW_ERR);
    char expected[700];
    snprintf(expected, sizeof expected, "%s/fashion-mnist/train-images-idx3-ubyte.gz: No such file", dir);
    expect_error(expected, NULL);
}

Test(fetch, wrong_file_already_present_is_replaced) {
    const char *mirror = real_data_dir();
    if (!mirror) cr_skip_test("no real MNIST mirror: set HOGWILD_DATA_MIRROR to a folder with mnist/*.gz");
    char path[1200];
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", dir);
    write_bytes(path, "stale", 5);
    cr_assert_eq(hw_download_from("mnist", dir, mirror, no_urls, NULL), HW_OK, "%s", hw_error());
    char md5[33];
    cr_assert_eq(hw_md5_file(path, md5), HW_OK);
    cr_expect_str_eq(md5, "ec29112dd5afa0611ce80d1b7f02629c");
}

Test(fetch, urls_fall_through_to_a_good_one) {
    const char *mirror = real_data_dir();
    if (!mirror) cr_skip_test("no real MNIST mirror: set HOGWILD_DATA_MIRROR to a folder with mnist/*.gz");
    if (!curl_installed()) cr_skip_test("curl is not installed (file:// URLs need curl)");
    char bad_mirror[600], bad_url[700], good_url[1200], missing_url[700];
    make_corrupt_mirror(bad_mirror, sizeof bad_mirror);
    snprintf(missing_url, sizeof missing_url, "file://%s/no-such-folder/", dir);
    snprintf(bad_url, sizeof bad_url, "file://%s/mnist/", bad_mirror);
    snprintf(good_url, sizeof good_url, "file://%s/mnist/", mirror);
    const char *urls[] = {missing_url, bad_url, good_url, NULL};
    char dest[600];
    snprintf(dest, sizeof dest, "%s/dest", dir);
    char *log = NULL;
    size_t log_len = 0;
    FILE *progress = open_memstream(&log, &log_len);
    cr_assert_eq(hw_download_from("mnist", dest, NULL, urls, progress), HW_OK, "%s", hw_error());
    fclose(progress);
    cr_expect(strstr(log, "downloaded from file://") != NULL && strstr(log, good_url) != NULL, "%s", log);
    free(log);
    expect_no_leftovers(dest);
}

Test(fetch, all_urls_failing_lists_them) {
    if (!curl_installed()) cr_skip_test("curl is not installed (file:// URLs need curl)");
    char bad_mirror[600], bad_url[700], missing_url[700];
    make_corrupt_mirror(bad_mirror, sizeof bad_mirror);
    snprintf(missing_url, sizeof missing_url, "file://%s/no-such-folder/", dir);
    snprintf(bad_url, sizeof bad_url, "file://%s/mnist/", bad_mirror);
    const char *urls[] = {missing_url, bad_url, NULL};
    char dest[600];
    snprintf(dest, sizeof dest, "%s/dest", dir);
    cr_assert_eq(hw_download_from("mnist", dest, bad_mirror, urls, NULL), HW_ERR);
    expect_error("no-such-folder/train-images-idx3-ubyte.gz: curl failed", "md5 mismatch");
    expect_error("bad-mirror/mnist/train-images-idx3-ubyte.gz: md5 mismatch", "HOGWILD_DATA_MIRROR");
    expect_no_leftovers(dest);
}

Test(fetch, hw_download_reads_the_environment) {
    const char *mirror = real_data_dir();
    if (!mirror) cr_skip_test("no real MNIST mirror: set HOGWILD_DATA_MIRROR to a folder with mnist/*.gz");
    // Each Criterion test runs in its own process, so the environment changes stay here.
    setenv("HOGWILD_DATA_MIRROR", mirror, 1);
    setenv("HOGWILD_DATA_OFFLINE", "1", 1);
    cr_assert_eq(hw_download("mnist", dir), HW_OK, "%s", hw_error());
    char bad_mirror[600];
    make_corrupt_mirror(bad_mirror, sizeof bad_mirror);
    char dest[600];
    snprintf(dest, sizeof dest, "%s/other", dir);
    setenv("HOGWILD_DATA_MIRROR", bad_mirror, 1);
    cr_assert_eq(hw_download("mnist", dest), HW_ERR, "offline: the public mirrors are not tried");
    expect_error("md5 mismatch", NULL);
    cr_expect(strstr(hw_error(), "https://") == NULL, "%s", hw_error());
}
