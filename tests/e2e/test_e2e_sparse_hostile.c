// End-to-end tests of a sparse run given what it cannot use, as a hostile user gives it: a
// checkpoint with nothing left to train or with weights that are not finite, outputs that are the
// dataset's own files, a warm-up longer than the run. Each is refused before any training, naming
// what is wrong, as a dense run refuses it; nothing is printed as a result, no input destroyed.
#include "e2e_util.h"
#include "hw/sparse_train.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(e2e_sparse_hostile, .init = e2e_setup, .fini = e2e_teardown, .timeout = 300);

// A small planted classification (hogwild synth --kind sparse).
static char *planted_classes(void) {
    char *dir = e2e_path("sp");
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--kind", "sparse", "--dir", dir, "--train", "2000", "--test", "500", "--features",
            "200", "--nnz", "10");
    e2e_assert_exit(&r, 0);
    return dir;
}

// A one-epoch logistic regression's checkpoint at `name` in the test's folder.
static char *one_epoch_checkpoint(const char *data, const char *name) {
    char *ckpt = e2e_path(name);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--epochs", "1", "--lr", "0.5", "--save", ckpt,
            "--quiet");
    e2e_assert_exit(&r, 0);
    return ckpt;
}

// The checkpoint at `from` copied to `to` with its first weight (fm.rows[0], the first tensor's
// first float) replaced by `value`.
static void checkpoint_with_first_weight(const char *from, const char *to, float value) {
    size_t n, data_bytes;
    uint8_t *bytes = e2e_own(read_bytes(from, &n));
    uint8_t *data = (uint8_t *)e2e_safetensors_data(bytes, n, &data_bytes);
    cr_assert_geq(data_bytes, sizeof value);
    memcpy(data, &value, sizeof value);
    write_bytes(to, bytes, n);
}

// A checkpoint that has trained every epoch asked for leaves nothing to train: refused, as a dense
// run refuses it, not a "done" line of zeros.
Test(e2e_sparse_hostile, a_checkpoint_with_every_epoch_trained_is_refused) {
    char *data = planted_classes();
    char *ckpt = one_epoch_checkpoint(data, "one.st");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--resume", ckpt, "--epochs", "1");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "has already trained 1 epoch(s); ask for more epochs", "stderr");
    cr_expect_null(strstr(r.out, "done:"), "no result of a run that trained nothing:\n%s", r.out);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--resume", ckpt, "--epochs", "2", "--quiet");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "done: test loss", "one more epoch trains");
}

// Weights that are not finite (a checkpoint edited, or written by another tool) are refused by
// name, before training, and --eval-only prints no NaN as a result; finite weights that have blown
// up give a test loss that is no result either.
Test(e2e_sparse_hostile, a_checkpoint_with_nan_weights_is_refused) {
    char *data = planted_classes();
    char *good = one_epoch_checkpoint(data, "good.st");
    char *bad = e2e_path("nan.st"), *huge = e2e_path("huge.st");
    checkpoint_with_first_weight(good, bad, NAN);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--resume", bad, "--epochs", "3");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "holds weights that are not finite", "stderr");
    cr_expect_null(strstr(r.err, "diverged in epoch"), "nothing trained on NaN weights:\n%s", r.err);
    cr_expect_null(strstr(r.out, "epoch 2/3"), "stdout:\n%s", r.out);
    e2e_run(&r, NULL, "--eval-only", "--resume", bad, "--data", data);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "holds weights that are not finite", "stderr");
    cr_expect_null(strstr(r.out, "nan"), "no NaN printed as a result:\n%s", r.out);
    checkpoint_with_first_weight(good, huge, 1e30f);
    e2e_run(&r, NULL, "--eval-only", "--resume", huge, "--data", data);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "its weights have blown up", "stderr");
    cr_expect_null(strstr(r.out, "accuracy"), "no result from blown-up weights:\n%s", r.out);
}

// --save and --metrics onto the sparse dataset's own files (any spelling, .gz too, even with
// --overwrite) are refused before the run, and the files are left as they were; so is a name that
// would make the folder hold a second layout. Another name in the folder is written.
Test(e2e_sparse_hostile, outputs_onto_the_sparse_dataset_files_are_refused) {
    char *data = planted_classes();
    char *train = e2e_path("sp/train.libsvm"), *again = e2e_path("sp/../sp/test.libsvm");
    char *gz = e2e_path("sp/test.libsvm.gz"), *ratings = e2e_path("sp/train.csv"), *fine = e2e_path("sp/run.csv");
    size_t n_before, n_after;
    uint8_t *before = e2e_own(read_bytes(train, &n_before));
    const char *const tries[][3] = {{"--save", train, "--overwrite"},
                                    {"--metrics", train, NULL},
                                    {"--metrics", again, NULL},
                                    {"--save", gz, NULL},
                                    {"--metrics", ratings, NULL}};
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        e2e_run_result r;
        e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--lr", "0.5", "--quiet", tries[i][0],
                tries[i][1], tries[i][2]);
        e2e_assert_exit(&r, 1);
        e2e_assert_contains(r.err, "is a file of the sparse dataset in", tries[i][1]);
        cr_expect_null(strstr(r.out, "done:"), "refused before training:\n%s", r.out);
    }
    uint8_t *after = e2e_own(read_bytes(train, &n_after));
    cr_expect(n_after == n_before && memcmp(before, after, n_before) == 0, "train.libsvm was changed");
    cr_expect(!e2e_file_exists(gz) && !e2e_file_exists(ratings), "no file of the dataset's names was made");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--lr", "0.5", "--quiet", "--metrics", fine);
    e2e_assert_exit(&r, 0);
    cr_expect(e2e_file_exists(fine), "another name in the folder is written");
}

// A warm-up as long as the whole run would keep the rate below --lr to the end: refused before
// training, naming the run's samples, as for a dense run; a shorter one trains.
Test(e2e_sparse_hostile, a_warmup_as_long_as_the_run_is_refused) {
    char *data = planted_classes();
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--epochs", "2", "--warmup", "4000", "--quiet");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "the warm-up of 4000 samples (--warmup) is as long as the whole run", "stderr");
    e2e_assert_contains(r.err, "2 epoch(s) of 2000 samples: 4000", "stderr");
    cr_expect_null(strstr(r.out, "done:"), "stdout:\n%s", r.out);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--epochs", "2", "--warmup", "3999", "--quiet");
    e2e_assert_exit(&r, 0);
}

// Ctrl-C ends a --measure run as a dense one: saved, 128 + SIGINT, and no measure block, which
// for a run stopped before its first update would be NaN throughout.
Test(e2e_sparse_hostile, a_stopped_measure_run_prints_no_measure_block) {
    char *data = planted_classes();
    char *csv = e2e_path("m.csv"), *ckpt = e2e_path("m.st");
    const char *args[] = {
        "--model", "models/logreg.model", "--data", data, "--workers", "2", "--epochs", "100000", "--lr",
        "0.5",     "--measure",           "--save", ckpt, "--metrics", csv, NULL};
    e2e_run_result r;
    e2e_interrupt_once_training(&r, args, csv);
    cr_expect_null(strstr(r.out, "measure:"), "a stopped run's stdout:\n%s", r.out);
    cr_expect_null(strstr(r.out, "nan"), "a stopped run's stdout:\n%s", r.out);
}

// A sparse checkpoint resumes without --model, from the model text it records, as a dense one
// does (it was taken for a dense model file, and the run looked for MNIST in the sparse folder).
Test(e2e_sparse_hostile, a_sparse_checkpoint_resumes_from_its_own_model_text) {
    char *data = planted_classes();
    char *ckpt = one_epoch_checkpoint(data, "own.st");
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--resume", ckpt, "--epochs", "2", "--lr", "0.5");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "epoch 2/2: test loss", "stdout");
}

// A checkpoint of BF16 tensors (another tool's, or a dense habit) loads into the sparse trainer's
// float weights, as the README says either dtype loads into either run: no refusal of a
// --weights bf16 the user never gave.
Test(e2e_sparse_hostile, a_bf16_checkpoint_resumes_a_sparse_model) {
    char *data = planted_classes();
    char *model_path = e2e_path("lr200.model"), *ckpt = e2e_path("bf16.st");
    static const char text[] = "input sparse 200\nfm 0\nloss logistic\n";
    write_bytes(model_path, text, sizeof text - 1);
    hw_sparse_model model;
    cr_assert_eq(hw_sparse_model_parse(&model, text, model_path), HW_OK, "%s", hw_error());
    model.dims.dim = model.input_dim;
    hw_model view;
    hw_sparse_model_ckpt_view(&model, &view);
    float *weights = e2e_own(calloc(view.n_weights, sizeof *weights));
    hw_ckpt_meta meta = {.epoch = 1, .samples_seen = 2000, .seed = 1, .bf16 = 1};
    cr_assert_eq(hw_ckpt_save(ckpt, &view, weights, &meta), HW_OK, "%s", hw_error());
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", model_path, "--data", data, "--resume", ckpt, "--epochs", "2", "--lr", "0.5");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "epoch 2/2: test loss", "stdout");
    cr_expect_null(strstr(r.err, "--weights"), "stderr:\n%s", r.err);
}

// A libsvm file with one huge index (a stray token, a hash written unreduced) is refused before
// anything is allocated for it, naming the file, line and index and the limit; an existing --save
// file is left as it was.
Test(e2e_sparse_hostile, a_huge_feature_index_is_refused_before_any_work) {
    char *data = e2e_path("huge"), *ckpt = e2e_path("kept.st");
    mkdir(data, 0755);
    char *train = e2e_path("huge/train.libsvm"), *test = e2e_path("huge/test.libsvm");
    static const char train_text[] = "1 1:1\n-1 2000000000:1\n", test_text[] = "1 1:1\n";
    write_bytes(train, train_text, sizeof train_text - 1);
    write_bytes(test, test_text, sizeof test_text - 1);
    static const char saved[] = "an earlier run's checkpoint";
    write_bytes(ckpt, saved, sizeof saved - 1);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--save", ckpt, "--overwrite", "--quiet");
    e2e_assert_exit(&r, 1);
    char where[600];
    snprintf(where, sizeof where, "%s:2:4: index 2000000000 is past 67108864", train);
    e2e_assert_contains(r.err, where, "stderr");
    cr_expect_null(strstr(r.err, "shared memory"), "refused by the reader, not by an allocation:\n%s", r.err);
    cr_expect_null(strstr(r.out, "done:"), "stdout:\n%s", r.out);
    size_t n;
    char *after = e2e_own(read_bytes(ckpt, &n));
    cr_expect(n == sizeof saved - 1 && memcmp(after, saved, n) == 0, "the --save file was changed");
}

// More workers than training examples: a sparse run trains, as a dense one does, and --measure
// says which worker had no examples instead of printing nan for it.
Test(e2e_sparse_hostile, a_worker_without_examples_measures_as_no_examples) {
    char *data = e2e_path("tiny");
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--kind", "sparse", "--dir", data, "--train", "3", "--test", "5", "--features", "20",
            "--nnz", "3");
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "4", "--epochs", "1", "--measure");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "(no examples)", "stdout");
    e2e_assert_contains(r.out, "1 worker(s) had no examples to train", "stdout");
    cr_expect_null(strstr(r.out, "nan"), "no nan for the idle worker:\n%s", r.out);
}
