// End-to-end tests of a sparse run's momentum across epochs (src/train/sparse_train.c,
// sparse_run.c): a worker's velocity outlives the epoch's fork, so 2 epochs over 3 copies of one
// example take the 6 steps of 1 epoch over 6 copies, to the bit, weights and velocities, with one
// Hogwild worker and with DataParallel; a checkpoint keeps the velocities, so 1 epoch resumed for
// a second saves the 2 epochs' file byte for byte; a checkpoint of another worker count or
// momentum resumes its weights and says in one line why the optimizer state restarts, as a dense
// run's does.
#include "e2e_util.h"

#include <sys/stat.h>

TestSuite(e2e_sparse_momentum, .init = e2e_setup, .fini = e2e_teardown, .timeout = 300);

// Writes `text` to dir/name.
static void write_file(const char *dir, const char *name, const char *text) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

// A libsvm folder whose training set is `copies` copies of one example, so that every order of it
// is the same: an epoch of it is `copies` steps on that example at batch 1.
static char *copies_of_one_example(const char *name, int copies) {
    char *dir = e2e_path(name);
    cr_assert_eq(mkdir(dir, 0755), 0, "cannot make %s", dir);
    char train[256] = "";
    for (int k = 0; k < copies; k++) strcat(train, "1 1:1 2:0.5\n");
    write_file(dir, "train.libsvm", train);
    write_file(dir, "test.libsvm", "1 1:1\n-1 2:1\n1 1:0.5 2:0.5\n");
    return dir;
}

// The checkpoint's tensors' bytes (after its header), owned; their count in *n.
static uint8_t *tensor_bytes(const char *path, size_t *n) {
    size_t size;
    uint8_t *file = e2e_own(read_bytes(path, &size));
    cr_assert_geq(size, 8, "%s: %zu bytes", path, size);
    uint64_t header = 0;
    for (int b = 7; b >= 0; b--) header = header << 8 | file[b];
    cr_assert_leq(8 + header, size, "%s: a header of %llu bytes", path, (unsigned long long)header);
    *n = size - 8 - header;
    return file + 8 + header;
}

// The checkpoint's JSON header, owned.
static char *header_of(const char *path) {
    size_t size;
    uint8_t *file = e2e_own(read_bytes(path, &size));
    return e2e_own(strndup((const char *)file + 8, size - 8));
}

// The two modes: one Hogwild worker, DataParallel's two replicas; and the velocity each saves.
static const char *const modes[][5] = {{"--workers", "1", "--mode", "hogwild", "\"optim.velocity.worker0.fm.rows\""},
                                       {"--replicas", "2", "--mode", "dataparallel", "\"optim.velocity.fm.rows\""}};

// Trains models/logreg.model at momentum 0.9, lr 0.1, batches of 1 in mode m for `epochs` on `data`
// into `save` (from `resume` when not NULL).
static void train(e2e_run_result *r, int m, const char *data, const char *epochs, const char *save,
                  const char *resume) {
    const char *argv[32] = {"--model",      "models/logreg.model",
                            "--data",       data,
                            "--epochs",     epochs,
                            "--momentum",   "0.9",
                            "--lr",         "0.1",
                            "--batch-size", "1",
                            "--quiet",      "--save",
                            save,           "--overwrite",
                            modes[m][0],    modes[m][1],
                            modes[m][2],    modes[m][3]};
    int n = 20;
    if (resume) argv[n++] = "--resume", argv[n++] = resume;
    argv[n] = NULL;
    e2e_run_argv(r, NULL, argv);
}

// Epoch 2 starts with the velocity epoch 1 ended with: 2 epochs over 3 copies are 1 epoch over
// 6 (the same 6 steps, the same rate), weights and velocities alike to the bit. A velocity that
// restarted at epoch 2 would take epoch 2's first step without the 3 steps before it.
Test(e2e_sparse_momentum, two_epochs_step_as_one_epoch_of_both) {
    char *three = copies_of_one_example("three", 3), *six = copies_of_one_example("six", 6);
    for (int m = 0; m < 2; m++) {
        char *twice = e2e_path("twice.safetensors"), *once = e2e_path("once.safetensors");
        e2e_run_result r;
        train(&r, m, three, "2", twice, NULL);
        e2e_assert_exit(&r, 0);
        train(&r, m, six, "1", once, NULL);
        e2e_assert_exit(&r, 0);
        size_t n_twice, n_once;
        uint8_t *a = tensor_bytes(twice, &n_twice), *b = tensor_bytes(once, &n_once);
        cr_assert_eq(n_twice, n_once, "%s: %zu and %zu bytes of tensors", modes[m][3], n_twice, n_once);
        cr_expect_eq(memcmp(a, b, n_once), 0, "%s: 2 epochs of 3 steps and 1 epoch of 6 differ", modes[m][3]);
        e2e_assert_contains(header_of(twice), modes[m][4], "the checkpoint's header");
    }
}

// Planted classes (`hogwild synth --kind sparse`), small: a second an epoch at batch 1.
static char *planted_classes(void) {
    char *dir = e2e_path("sp");
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--kind", "sparse", "--dir", dir, "--train", "2000", "--test", "500", "--features",
            "100", "--nnz", "5", "--noise", "0");
    e2e_assert_exit(&r, 0);
    return dir;
}

// 2 epochs unbroken against 1 epoch and --resume for the second: the same file, byte for byte,
// its velocities restored (nothing on stderr says they restart).
Test(e2e_sparse_momentum, one_epoch_resumed_saves_the_two_epochs_file) {
    char *data = planted_classes();
    for (int m = 0; m < 2; m++) {
        char *whole = e2e_path("whole.safetensors"), *cut = e2e_path("cut.safetensors");
        char *resumed = e2e_path("resumed.safetensors");
        e2e_run_result r;
        train(&r, m, data, "2", whole, NULL);
        e2e_assert_exit(&r, 0);
        train(&r, m, data, "1", cut, NULL);
        e2e_assert_exit(&r, 0);
        e2e_assert_contains(header_of(cut), modes[m][4], "the checkpoint's header");
        train(&r, m, data, "2", resumed, cut);
        e2e_assert_exit(&r, 0);
        cr_expect_null(strstr(r.err, "restarts"), "%s: the state was restored, not restarted:\n%s", modes[m][3], r.err);
        size_t n_whole, n_resumed;
        uint8_t *a = e2e_own(read_bytes(whole, &n_whole)), *b = e2e_own(read_bytes(resumed, &n_resumed));
        cr_assert_eq(n_whole, n_resumed, "%s: %zu and %zu bytes", modes[m][3], n_whole, n_resumed);
        cr_expect_eq(memcmp(a, b, n_whole), 0, "%s: the resumed run's checkpoint differs", modes[m][3]);
    }
}

// Another worker count or momentum: the weights resume (the run goes on at epoch 2) and one line
// of stderr says why the optimizer state restarts, naming the flag, as for a dense run.
Test(e2e_sparse_momentum, a_mismatched_state_restarts_with_a_one_line_reason) {
    char *data = planted_classes();
    char *cut = e2e_path("cut.safetensors"), *out = e2e_path("out.safetensors");
    e2e_run_result r;
    train(&r, 0, data, "1", cut, NULL);
    e2e_assert_exit(&r, 0);
    const char *again[][4] = {{"--workers", "2", "--momentum", "0.9"}, {"--workers", "1", "--momentum", "0.5"}};
    const char *flags[] = {"(--workers)", "(--momentum)"};
    for (int i = 0; i < 2; i++) {
        e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--epochs", "2", "--lr", "0.1",
                "--batch-size", "1", again[i][0], again[i][1], again[i][2], again[i][3], "--resume", cut, "--save", out,
                "--overwrite");
        e2e_assert_exit(&r, 0);
        e2e_assert_contains(r.err, "hogwild: the optimizer state restarts", "stderr");
        e2e_assert_contains(r.err, flags[i], "stderr");
        const char *newline = strchr(r.err, '\n');
        cr_expect(newline && newline[1] == '\0', "one line:\n%s", r.err);
        e2e_assert_contains(r.out, "epoch 2/2", "stdout");
        cr_expect_null(strstr(r.out, "epoch 1/2"), "the weights resumed after epoch 1:\n%s", r.out);
    }
}
