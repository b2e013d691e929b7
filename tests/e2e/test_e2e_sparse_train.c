// End-to-end tests of the sparse models on data `hogwild synth` plants: the logistic regression
// and the linear SVM learn the planted classification in both modes, one worker the same run
// every time; matrix factorisation of rank 10 reaches a test RMSE within 1.1 sigma of planted
// rank-10 ratings; a run saved, resumed and evaluated alone gives the uninterrupted run's
// figures; --summary shows the input's dimension; what a sparse run cannot do is refused
// by name before it starts.
#include "e2e_util.h"
#include "hw/metrics.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(e2e_sparse_train, .init = e2e_setup, .fini = e2e_teardown, .timeout = 300);

// The number after `key` on the run's "done:" line.
static double done_figure(const char *out, const char *key) {
    const char *done = strstr(out, "done: ");
    cr_assert_not_null(done, "no done line in:\n%s", out);
    const char *at = strstr(done, key);
    cr_assert_not_null(at, "no '%s' in the done line: %s", key, done);
    return strtod(at + strlen(key), NULL);
}

static char *planted_classes(void) {
    char *dir = e2e_path("sp");
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--kind", "sparse", "--dir", dir, "--train", "8000", "--test", "2000", "--features",
            "300", "--nnz", "10", "--noise", "0");
    e2e_assert_exit(&r, 0);
    return dir;
}

// The figures of the done line up to the speed: the same run twice prints the same.
static void done_results(const char *out, char *buf, size_t cap) {
    const char *done = strstr(out, "done: ");
    cr_assert_not_null(done);
    size_t n = strcspn(done, "%");
    snprintf(buf, cap, "%.*s", (int)n, done);
}

Test(e2e_sparse_train, logistic_and_svm_learn_the_planted_labels_in_both_modes) {
    char *data = planted_classes();
    e2e_run_result r;
    char first[256], again[256];
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "1", "--epochs", "8", "--lr",
            "0.5", "--batch-size", "10");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "300 features", "stdout");
    e2e_assert_contains(r.out, "301 parameters", "stdout");
    double one = done_figure(r.out, "accuracy ");
    cr_expect_gt(one, 93.0, "one worker's test accuracy on noiseless planted labels: %.2f%%", one);
    done_results(r.out, first, sizeof first);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "1", "--epochs", "8", "--lr",
            "0.5", "--batch-size", "10");
    done_results(r.out, again, sizeof again);
    cr_expect_str_eq(first, again, "one worker: the same run twice");
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "2", "--epochs", "8", "--lr",
            "0.5", "--batch-size", "10");
    e2e_assert_exit(&r, 0);
    double two = done_figure(r.out, "accuracy ");
    cr_expect_gt(two, one - 1.5, "two workers %.2f%% against one's %.2f%%", two, one);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--mode", "dataparallel", "--replicas", "2",
            "--epochs", "8", "--lr", "0.5", "--batch-size", "10");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "DataParallel, replicas 2", "stdout");
    double dp = done_figure(r.out, "accuracy ");
    cr_expect_gt(dp, one - 1.5, "DataParallel %.2f%% against one worker's %.2f%%", dp, one);
    e2e_run(&r, NULL, "--model", "models/svm.model", "--data", data, "--workers", "2", "--epochs", "8", "--lr", "0.1",
            "--batch-size", "10", "--weight-decay", "0.0001");
    e2e_assert_exit(&r, 0);
    double svm = done_figure(r.out, "accuracy ");
    cr_expect_gt(svm, 90.0, "the linear SVM's test accuracy: %.2f%%", svm);
}

Test(e2e_sparse_train, matrix_factorisation_within_1_1_sigma) {
    char *data = e2e_path("mf");
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--kind", "ratings", "--dir", data, "--users", "600", "--items", "400", "--density",
            "0.4", "--sigma", "0.5", "--rank", "10");
    e2e_assert_exit(&r, 0);
    e2e_run_within(&r, 240, NULL, "--model", "models/mf.model", "--data", data, "--workers", "2", "--epochs", "30",
                   "--lr", "0.01", "--momentum", "0", "--batch-size", "1", "--weight-decay", "0.01", "--quiet");
    e2e_assert_exit(&r, 0);
    double rmse = done_figure(r.out, "RMSE ");
    cr_expect_leq(rmse, 1.1 * 0.5, "test RMSE %.4f against sigma 0.5", rmse);
    cr_expect_gt(rmse, 0.45, "no better than the noise allows: %.4f", rmse);
    double mse = done_figure(r.out, "test MSE ");
    cr_expect_float_eq(sqrt(mse), rmse, 1e-4, "the test loss is the MSE");
}

Test(e2e_sparse_train, summary_and_refusals) {
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/mf.model", "--summary");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "input   sparse, dimension from the data", "stdout");
    e2e_assert_contains(r.out, "fm      rank 10", "stdout");
    e2e_assert_contains(r.out, "loss    squared", "stdout");
    char *data = planted_classes();
    e2e_run(&r, NULL, "--model", "models/svm.model", "--data", data, "--summary");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "input   sparse, dimension 300 (the data's)", "stdout");
    e2e_assert_contains(r.out, "parameters: 301", "stdout");
    e2e_run(&r, NULL, "--model", "models/svm.model", "--data", data, "--device", "cuda");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "--device cuda (the GPU has no sparse kernels yet)", "stderr");
    e2e_run(&r, NULL, "--model", "models/svm.model", "--data", data, "--eval-every", "1000");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "cannot run with --eval-every", "stderr");
    char *digits = e2e_synth_n("digits", 1, 50, 20);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", digits);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "needs a sparse dataset folder", "stderr");
    char *ratings = e2e_path("r");
    e2e_run(&r, NULL, "synth", "--kind", "ratings", "--dir", ratings, "--users", "50", "--items", "40");
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", ratings);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "a logistic loss needs binary labels", "stderr");
    // A squared loss has no accuracy for a metrics row: refused before any work, no file made.
    e2e_run(&r, NULL, "--model", "models/mf.model", "--data", ratings, "--metrics", e2e_path("mf.csv"));
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "has the squared loss, and a metrics file (--metrics) needs a test accuracy", "stderr");
    cr_expect(access(e2e_path("mf.csv"), F_OK) != 0, "the refused run made its metrics file");
}

// --metrics of a sparse run: the starting row, then one per epoch, which compare reads; the
// training loss falls; rerun with one worker, the same rows but the times.
Test(e2e_sparse_train, metrics_rows_read_by_compare) {
    char *data = planted_classes();
    char *csv = e2e_path("lr.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "2", "--epochs", "3", "--lr",
            "0.5", "--batch-size", "10", "--seed", "4", "--metrics", csv, "--quiet");
    e2e_assert_exit(&r, 0);
    hw_metrics_table t;
    cr_assert_eq(hw_metrics_table_read(&t, csv), HW_OK, "%s", hw_error());
    cr_expect_eq(t.n_points, 4, "rows: the start and 3 epochs");
    cr_expect_str_eq(t.mode, "hogwild");
    cr_expect_eq(t.workers, 2);
    cr_expect_str_eq(t.model, "logreg");
    cr_expect_eq(t.seed, 4);
    cr_expect_eq(t.points[0].samples_seen, 0);
    cr_expect(isnan(t.points[0].train_loss), "the starting row has no training loss");
    cr_expect_eq(t.points[3].samples_seen, 3 * 8000);
    cr_expect_eq(t.points[3].epoch, 3);
    cr_expect_lt(t.points[3].train_loss, t.points[1].train_loss, "the training loss falls");
    cr_expect_gt(t.points[3].test_accuracy, 85.0, "%.2f%%", t.points[3].test_accuracy);
    cr_expect_lt(t.points[3].test_loss, t.points[0].test_loss);
    hw_metrics_table_free(&t);
    e2e_run(&r, NULL, "compare", csv, "--no-plot");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "hogwild", "compare's table");
}

// A step far too large ends the run as a dense one ends: the diverged row, the message with what
// to try, the checkpoint of the last good epoch kept.
Test(e2e_sparse_train, a_diverged_run_is_named_and_saves_nothing) {
    char *data = planted_classes();
    char *csv = e2e_path("d.csv"), *ckpt = e2e_path("d.st");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--epochs", "1", "--lr", "0.5", "--save", ckpt,
            "--quiet");
    e2e_assert_exit(&r, 0);
    struct stat before;
    cr_assert_eq(stat(ckpt, &before), 0);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--epochs", "3", "--lr", "1e6", "--save", ckpt,
            "--overwrite", "--metrics", csv);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "training diverged in epoch 1/3", "stderr");
    e2e_assert_contains(r.err, "Try a lower learning rate than this run's 1e+06 (--lr)", "stderr");
    cr_expect(strstr(r.out, "nan") == NULL && strstr(r.out, "done:") == NULL, "stdout: %s", r.out);
    hw_metrics_table t;
    cr_assert_eq(hw_metrics_table_read(&t, csv), HW_OK, "%s", hw_error());
    cr_expect(t.diverged, "the metrics mark the run diverged");
    hw_metrics_table_free(&t);
    e2e_run(&r, NULL, "--eval-only", "--resume", ckpt, "--data", data);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "(epoch 1, 8000 samples seen)", "the first run's checkpoint, kept");
    // A NaN (matrix factorisation at a huge rate) is named as NaN.
    char *ratings = e2e_path("r");
    e2e_run(&r, NULL, "synth", "--kind", "ratings", "--dir", ratings, "--users", "200", "--items", "100");
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", "models/mf.model", "--data", ratings, "--epochs", "2", "--lr", "100");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "training diverged in epoch 1/2", "stderr");
    cr_expect(strstr(r.out, "nan") == NULL, "stdout: %s", r.out);
}

// Ctrl-C while a sparse run trains: exit 128 + SIGINT, the weights saved, nothing left behind;
// the checkpoint resumes.
Test(e2e_sparse_train, ctrl_c_saves_and_the_checkpoint_resumes) {
    char *data = planted_classes();
    char *csv = e2e_path("c.csv"), *ckpt = e2e_path("c.st");
    const char *args[] = {
        "--model", "models/logreg.model", "--data", data,     "--workers", "2",         "--epochs", "100000", "--lr",
        "0.5",     "--batch-size",        "10",     "--save", ckpt,        "--metrics", csv,        NULL};
    e2e_run_result r;
    e2e_interrupt_once_training(&r, args, csv);
    e2e_run(&r, NULL, "--eval-only", "--resume", ckpt, "--data", data);
    e2e_assert_exit(&r, 0);
    const char *at = strstr(r.out, "(epoch ");
    cr_assert_not_null(at, "stdout: %s", r.out);
    int epochs_done = atoi(at + strlen("(epoch "));
    cr_expect_geq(epochs_done, 1, "the metrics had an epoch's row before the signal: %s", r.out);
    char epochs[32];
    snprintf(epochs, sizeof epochs, "%d", epochs_done + 1);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--resume", ckpt, "--epochs", epochs, "--lr",
            "0.5", "--batch-size", "10", "--quiet");
    e2e_assert_exit(&r, 0);
    cr_expect_gt(done_figure(r.out, "accuracy "), 80.0, "the resumed run: %s", r.out);
}

// Two epochs saved, then resumed to four, give the four epochs' run; --eval-only of the
// checkpoint, with its own model text, prints the same test loss.
Test(e2e_sparse_train, checkpoint_resume_and_eval_only) {
    char *data = planted_classes();
    char *ckpt = e2e_path("lr.safetensors");
    e2e_run_result r;
    char straight[256], resumed[256];
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "1", "--epochs", "4", "--lr",
            "0.5", "--batch-size", "10");
    e2e_assert_exit(&r, 0);
    done_results(r.out, straight, sizeof straight);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "1", "--epochs", "2", "--lr",
            "0.5", "--batch-size", "10", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "1", "--epochs", "4", "--lr",
            "0.5", "--batch-size", "10", "--save", ckpt, "--resume", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "epoch 3/4", "stdout");
    cr_expect(strstr(r.out, "epoch 1/4") == NULL, "the resumed run starts at epoch 3:\n%s", r.out);
    done_results(r.out, resumed, sizeof resumed);
    cr_expect_str_eq(resumed, straight, "resumed and straight runs end alike");
    double loss = done_figure(r.out, "test loss ");
    e2e_run(&r, NULL, "--eval-only", "--resume", ckpt, "--data", data);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "(epoch 4, 32000 samples seen)", "stdout");
    char want[64];
    snprintf(want, sizeof want, "test loss %.5f", loss);
    e2e_assert_contains(r.out, want, "stdout");
}

// The schedule is the dense trainers': step:1:0.5 over 2 epochs trains epoch 2 at half the rate,
// as a run of one epoch at --lr 0.5 resumed for the second at --lr 0.25 does (one worker; the
// checkpoint keeps the velocity), in both modes; the constant rate ends elsewhere.
Test(e2e_sparse_train, a_step_schedule_trains_as_a_run_resumed_at_the_stepped_rate) {
    char *data = planted_classes();
    char *ckpt = e2e_path("first.safetensors");
    const char *modes[][4] = {{"--workers", "1", "--mode", "hogwild"}, {"--replicas", "2", "--mode", "dataparallel"}};
    for (int m = 0; m < 2; m++) {
        e2e_run_result r;
        char stepped[256], resumed[256], constant[256];
        e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, modes[m][0], modes[m][1], modes[m][2],
                modes[m][3], "--epochs", "2", "--lr", "0.5", "--lr-schedule", "step:1:0.5", "--batch-size", "10");
        e2e_assert_exit(&r, 0);
        done_results(r.out, stepped, sizeof stepped);
        e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, modes[m][0], modes[m][1], modes[m][2],
                modes[m][3], "--epochs", "1", "--lr", "0.5", "--batch-size", "10", "--save", ckpt, "--overwrite");
        e2e_assert_exit(&r, 0);
        e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, modes[m][0], modes[m][1], modes[m][2],
                modes[m][3], "--epochs", "2", "--lr", "0.25", "--batch-size", "10", "--resume", ckpt);
        e2e_assert_exit(&r, 0);
        done_results(r.out, resumed, sizeof resumed);
        cr_expect_str_eq(stepped, resumed, "%s: the stepped run and the one resumed at the lower rate", modes[m][3]);
        e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, modes[m][0], modes[m][1], modes[m][2],
                modes[m][3], "--epochs", "2", "--lr", "0.5", "--batch-size", "10");
        e2e_assert_exit(&r, 0);
        done_results(r.out, constant, sizeof constant);
        cr_expect_str_neq(stepped, constant, "%s: the schedule changed nothing", modes[m][3]);
    }
}

// A sparse step writes the rows its batch touched, not the whole model, and --measure says how
// many on average: between one example's 10 features and the batch's 10 x 10, plus the bias. The
// block is printed with --quiet too, as a dense run's is.
Test(e2e_sparse_train, measure_reports_the_rows_a_sparse_update_writes) {
    char *data = planted_classes();
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "2", "--epochs", "1", "--lr",
            "0.5", "--batch-size", "10", "--measure", "--quiet");
    e2e_assert_exit(&r, 0);
    const char *line = strstr(r.out, "the rows its batch touched: ");
    cr_assert(line, "no sparse bytes line in:\n%s", r.out);
    double written = atof(line + strlen("the rows its batch touched: "));
    cr_expect(written >= 11 && written <= 101, "weights written per update %g, not within [11, 101]", written);
    e2e_assert_contains(r.out, "the training data's sparsity: Omega 10,", "stdout with --quiet");
}

// --measure on a sparse run counts every step: with one worker nothing is stale and nothing lost,
// exactly; with two, every step is still counted, and the paper's sparsity is printed beside.
Test(e2e_sparse_train, measure_counts_every_sparse_update) {
    char *data = planted_classes();
    char *csv = e2e_path("m1.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "1", "--epochs", "2", "--lr",
            "0.5", "--batch-size", "10", "--measure", "--metrics", csv);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "0% in total", "one worker loses nothing");
    e2e_assert_contains(r.out, "the training data's sparsity: Omega 10,", "stdout");
    hw_metrics_table t;
    cr_assert_eq(hw_metrics_table_read(&t, csv), HW_OK, "%s", hw_error());
    cr_assert(t.measure.present, "the --measure columns");
    cr_expect_eq(t.measure.updates, 2 * 8000 / 10, "one step per batch of 10");
    cr_expect_eq(t.measure.staleness_max, 0, "one worker: never stale");
    cr_expect_eq(t.measure.lost_fraction, 0.0, "one worker: nothing lost");
    hw_metrics_table_free(&t);
    csv = e2e_path("m2.csv");
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "2", "--epochs", "2", "--lr",
            "0.5", "--batch-size", "10", "--measure", "--metrics", csv);
    e2e_assert_exit(&r, 0);
    cr_assert_eq(hw_metrics_table_read(&t, csv), HW_OK, "%s", hw_error());
    cr_expect_eq(t.measure.updates, 2 * 8000 / 10, "two workers of 4000 examples each, batches of 10");
    cr_expect(t.measure.lost_fraction >= 0 && isfinite(t.measure.lost_fraction), "lost %g", t.measure.lost_fraction);
    hw_metrics_table_free(&t);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--mode", "dataparallel", "--measure");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "DataParallel has none", "stderr");
}

// --update locked and atomic on a sparse run: every step still counted, and none lost (the
// increments telescope exactly); the run header names the mode.
Test(e2e_sparse_train, locked_and_atomic_updates_lose_nothing) {
    char *data = planted_classes();
    const char *modes[] = {"locked", "atomic"};
    for (int i = 0; i < 2; i++) {
        char csv[600], header[64];
        snprintf(csv, sizeof csv, "%s", e2e_path(modes[i]));
        snprintf(header, sizeof header, "Hogwild (%s updates), workers 2", modes[i]);
        e2e_run_result r;
        e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "2", "--epochs", "2", "--lr",
                "0.5", "--batch-size", "10", "--measure", "--update", modes[i], "--metrics", csv);
        e2e_assert_exit(&r, 0);
        e2e_assert_contains(r.out, header, "stdout");
        e2e_assert_contains(r.out, "): 0% in total", "stdout");
        hw_metrics_table t;
        cr_assert_eq(hw_metrics_table_read(&t, csv), HW_OK, "%s", hw_error());
        cr_expect_eq(t.measure.updates, 2 * 8000 / 10, "%s: every step", modes[i]);
        cr_expect_eq(t.measure.lost_fraction, 0.0, "%s: nothing lost", modes[i]);
        cr_expect_gt(t.points[t.n_points - 1].test_accuracy, 80.0, "%s", modes[i]);
        hw_metrics_table_free(&t);
    }
    // The checkpoint records the mode, as a dense run's does: --resume keeps it.
    char *ckpt = e2e_path("locked.st");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "2", "--epochs", "1", "--update",
            "locked", "--save", ckpt, "--quiet");
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--workers", "2", "--epochs", "2", "--resume",
            ckpt);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "Hogwild (locked updates), workers 2", "the resumed run's header");
}

// A model file of the given text, in the test's folder.
static char *model_file(const char *name, const char *text) {
    char *path = e2e_path(name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return path;
}

// A sparse model file's `default NAME VALUE` lines set what the command line does not give: the
// shipped logistic regression trains at lr 0.5 over batches of 10 without a flag (the dense
// defaults, 0.01 and 64, learn nothing on sparse data), a flag given still wins, and a resumed run
// without --model takes them from the checkpoint's model text.
Test(e2e_sparse_train, a_model_files_defaults_apply_where_no_flag_is_given) {
    char *data = planted_classes();
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--epochs", "2");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "batch 10, lr 0.5, momentum", "the model file's defaults");
    cr_expect_gt(done_figure(r.out, "accuracy "), 85.0, "the defaults learn the planted labels: %s", r.out);
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--epochs", "1", "--lr", "0.2");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "batch 10, lr 0.2, momentum", "--lr given wins over the file's");
    char *ckpt = e2e_path("d.safetensors");
    e2e_run(&r, NULL, "--model", "models/logreg.model", "--data", data, "--epochs", "1", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--data", data, "--epochs", "2", "--resume", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "batch 10, lr 0.5, momentum", "the checkpoint's model text gives its defaults");
    e2e_run(&r, NULL, "--model", "models/mf.model", "--summary");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "default epochs 30 (where the command line gives none)", "--summary");
}

// A `default` line the command line cannot take fails as a model file's other errors do (exit 1,
// no usage text), naming the file, the line and what is wrong, before any work; so does any other
// line after the loss.
Test(e2e_sparse_train, a_bad_default_line_is_named) {
    char *data = planted_classes();
    e2e_run_result r;
    char *m = model_file("w.model", "input sparse\nfm 0\nloss logistic\ndefault workers 4\n");
    e2e_run(&r, NULL, "--model", m, "--data", data);
    e2e_assert_exit(&r, 1);
    cr_expect(!strstr(r.err, "usage:"), "a model file's error printed the usage: %s", r.err);
    e2e_assert_contains(r.err, "w.model:4: `default workers` is no setting a model file may give (those: lr, momentum",
                        "stderr");
    m = model_file("v.model", "input sparse\nfm 0\nloss logistic\n\ndefault lr -1\n");
    e2e_run(&r, NULL, "--model", m, "--data", data);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "v.model:5: `default lr -1`: ", "stderr");
    m = model_file("x.model", "input sparse\nfm 0\nloss logistic\nrelu\n");
    e2e_run(&r, NULL, "--model", m, "--data", data);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "x.model:4: after the loss only `default NAME VALUE` lines may follow", "stderr");
    m = model_file("y.model", "input sparse\nfm 0\nloss logistic\ndefault lr 0.5\ndefault lr 0.1\n");
    e2e_run(&r, NULL, "--model", m, "--data", data);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "y.model:5: `default lr` is given twice (also on line 4)", "stderr");
}

// A `default` line whose name is longer than a word the parser keeps (63 characters) is still a
// `default` line: its name is no setting, said so with the file and line, not taken for another
// line after the loss; a value too long is named likewise.
Test(e2e_sparse_train, a_default_name_too_long_is_named_as_such) {
    char *data = planted_classes();
    char text[256];
    snprintf(text, sizeof text, "input sparse\nfm 0\nloss logistic\n\ndefault %070d 0.5\n", 7);
    char *m = model_file("long.model", text);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", m, "--data", data);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err,
                        "long.model:5: `default 000000000000000000000000...` names no setting: the name is 70 "
                        "characters",
                        "stderr");
    cr_expect(!strstr(r.err, "only `default NAME VALUE` lines may follow"), "taken for another line: %s", r.err);
    snprintf(text, sizeof text, "input sparse\nfm 0\nloss logistic\ndefault lr 0.%070d\n", 5);
    m = model_file("value.model", text);
    e2e_run(&r, NULL, "--model", m, "--data", data);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "value.model:4: `default lr 0.00000", "stderr");
    e2e_assert_contains(r.err, "the value is 72 characters", "stderr");
}

// --nesterov needs momentum, and where the momentum of 0 comes from the model file's `default`
// line the refusal names that file and line, not only the flag; --momentum given wins as ever.
Test(e2e_sparse_train, nesterov_against_a_default_momentum_of_0_names_the_file) {
    char *data = planted_classes();
    char *m = model_file("m0.model", "input sparse\nfm 0\nloss logistic\ndefault lr 0.5\ndefault momentum 0\n");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", m, "--data", data, "--nesterov");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "--nesterov needs --momentum > 0, and the model file ", "stderr");
    e2e_assert_contains(r.err, "m0.model:5 sets it to 0 (`default momentum 0`)", "stderr");
    e2e_run(&r, NULL, "--model", m, "--data", data, "--nesterov", "--momentum", "0.5", "--epochs", "1");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "momentum 0.5", "--momentum given wins over the file's");
}
