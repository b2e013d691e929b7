// End-to-end tests of a run whose training diverges (issue #11, item 3): with --lr 100 LeNet's
// loss goes to NaN or past 1e4 (the rule, hw_loss_diverged) within a few hundred samples. The run must stop at once with exit 1 and a
// message naming the worker or replica, the epoch, the samples seen and the last loss before it,
// suggesting a lower --lr; keep every metrics row written before, and end the file with the row
// that marks the run diverged; never save the diverged weights over the last good checkpoint,
// which still loads; and print nothing that looks like a result.
#include "e2e_util.h"
#include "hw/ckpt.h"
#include "hw/err.h"
#include "hw/nn.h"

TestSuite(e2e_diverge, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

enum { MAX_ROWS = 256 };

// The last good checkpoint: LeNet, one epoch at the default --lr, in `mode_args`' mode.
static char *good_checkpoint(const char *data, const char *const *mode_args) {
    char *ckpt = e2e_path("good.safetensors");
    const char *args[16] = {"--data", data, "--epochs", "1", "--quiet", "--save", ckpt};
    int n = 7;
    for (int i = 0; mode_args[i]; i++) args[n++] = mode_args[i];
    args[n] = NULL;
    e2e_run_result r;
    e2e_run_argv(&r, NULL, args);
    e2e_assert_exit(&r, 0);
    return ckpt;
}

// --resume the good checkpoint with --lr `lr` and --save to the same file (allowed: it is the
// file the run resumed from), --epochs 3: the run diverges in epoch 2 (Hogwild's workers race, so
// their losses vary from run to run: it may diverge later).
//
// Without --eval-every (`eval_every` NULL) the only evaluation before it is the resumed model's,
// so the worker's or replica's loss is what finds it: the message names `who`. --lr 100 blows the
// weights up in the first step. With evaluations every batch, the run must diverge some batches
// in, after some evaluations that are results; an evaluation may find the weights or the test
// loss diverged first (the message then says "the weights" or "the evaluation"); either way the
// rows before are kept. DataParallel is deterministic: --lr 3 diverges a few hundred samples in.
// Hogwild's racing workers are not: at --lr 3 they diverge within the first batches, a few hundred
// samples later, or (about 1 run in 10) not at all, the network dying at a loss of 2.3; so its
// test injects the NaN loss at a known batch (`env`: HOGWILD_FAIL_WORKER=RANK:BATCH:nan).
static void check_divergence(const char *const *mode_args, const char *who, const char *eval_every, const char *lr,
                             const char *env) {
    char *data = e2e_synth(31);
    char *ckpt = good_checkpoint(data, mode_args);
    size_t good_n;
    uint8_t *good = e2e_own(read_bytes(ckpt, &good_n));
    e2e_ckpt_info before = e2e_eval_checkpoint(data, e2e.lenet, ckpt);

    char *csv = e2e_path("diverged.csv");
    const char *args[24] = {"--data", data, "--epochs",  "3", "--lr",         lr,        "--resume", ckpt,
                            "--save", ckpt, "--metrics", csv, "--eval-every", eval_every};
    int n = eval_every ? 14 : 12;
    for (int i = 0; mode_args[i]; i++) args[n++] = mode_args[i];
    args[n] = NULL;
    e2e_run_result r;
    e2e_run_argv(&r, env, args);
    e2e_assert_exit(&r, 1);
    e2e_assert_left_nothing(&r);

    // The message: who, the epoch, the samples seen, the last loss before it, what to do.
    if (!eval_every) {
        e2e_assert_contains(r.err, who, "stderr");
        e2e_assert_diverged_loss(r.err, "its training loss");
    }
    e2e_assert_contains(r.err, "training diverged in epoch ", "stderr");
    e2e_assert_contains(r.err, "the last training loss before it was ", "stderr");
    // In the trainer's terms, with the flag that sets it, which only the command line knows.
    char try_lower[80];
    snprintf(try_lower, sizeof try_lower, "Try a lower learning rate than this run's %s (--lr)", lr);
    e2e_assert_contains(r.err, try_lower, "stderr");
    e2e_assert_contains(r.err, "nothing was saved", "stderr");
    // Where: the epoch (the resumed run's first, 2, unless the losses happen to stay finite a
    // little longer) and the samples seen, which fall in that epoch.
    long long said = -1;
    int epoch = 0;
    const char *at = strstr(r.err, "training diverged in epoch ");
    cr_assert_eq(sscanf(at, "training diverged in epoch %d/3 after %lld samples seen", &epoch, &said), 2, "stderr: %s",
                 r.err);
    cr_expect(epoch >= 2 && epoch <= 3, "epoch %d: %s", epoch, r.err);
    const char *last = strstr(r.err, "the last training loss before it was ");
    double last_loss = strtod(last + strlen("the last training loss before it was "), NULL);
    cr_expect(isfinite(last_loss) && last_loss > 0 && last_loss <= 1e4, "last loss before it %g: %s", last_loss, r.err);

    // Nothing on stdout looks like a result: no epoch result, no summary, no NaN.
    cr_expect_null(strstr(r.out, "done:"), "a diverged run prints no summary:\n%s", r.out);
    char epoch_line[32];
    snprintf(epoch_line, sizeof epoch_line, "epoch %d/3", epoch);
    cr_expect_null(strstr(r.out, epoch_line), "no epoch result of the diverged epoch:\n%s", r.out);
    cr_expect_null(strstr(r.out, "nan"), "stdout shows a NaN:\n%s", r.out);

    // The CSV: the resumed model's row, the points before the divergence, then the row that marks it.
    e2e_metrics_row rows[MAX_ROWS];
    int rows_n = e2e_read_metrics_of(csv, rows, MAX_ROWS, 1);
    cr_assert_geq(rows_n, eval_every ? 3 : 1, "the resumed model's row and the evaluations are kept, got %d",
                  rows_n - 1);
    cr_expect_eq(rows[0].samples, E2E_TRAIN, "the first row is the resumed model");
    cr_expect_eq(rows[0].epoch, 1);
    for (int i = 1; i < rows_n - 1; i++) cr_expect_gt(rows[i].samples, rows[i - 1].samples);
    if (rows_n > 1) cr_expect_geq(rows[rows_n - 1].samples, rows[rows_n - 2].samples);
    // It stopped at once: within the epoch where it diverged, at the samples it names.
    cr_expect_gt(said, (long long)(epoch - 1) * E2E_TRAIN);
    cr_expect_lt(said, (long long)epoch * E2E_TRAIN, "it went on after diverging: %lld samples", said);
    char needle[64];
    snprintf(needle, sizeof needle, ",%d,%lld,", epoch - 1, said);
    char *text = e2e_read_text(csv);
    const char *tail = text + strlen(text) - 1;
    while (tail > text && tail[-1] != '\n') tail--;
    e2e_assert_contains(tail, needle, "the diverged row (epoch 1 done, the samples of the message)");

    // The last good checkpoint is untouched, and loads.
    size_t after_n;
    uint8_t *after_bytes = e2e_own(read_bytes(ckpt, &after_n));
    cr_expect(after_n == good_n && memcmp(after_bytes, good, good_n) == 0, "the good checkpoint was overwritten");
    e2e_ckpt_info kept = e2e_eval_checkpoint(data, e2e.lenet, ckpt);
    cr_expect_eq(kept.epoch, 1);
    cr_expect_eq(kept.samples, E2E_TRAIN);
    cr_expect_eq(kept.accuracy, before.accuracy);
}

static const char *const hogwild_args[] = {"--workers", "2", NULL};
static const char *const dataparallel_args[] = {"--mode", "dataparallel", "--replicas", "2", NULL};

Test(e2e_diverge, hogwild_stops_naming_the_worker) {
    check_divergence(hogwild_args, "hogwild: worker ", NULL, "100", NULL);
}

// Worker 0's 20th batch: late in the resumed run's first epoch (each of the 2 workers has 24
// batches an epoch), after many evaluation points.
Test(e2e_diverge, hogwild_keeps_the_rows_before) {
    check_divergence(hogwild_args, NULL, "64", "0.01", "HOGWILD_FAIL_WORKER=0:20:nan");
}

Test(e2e_diverge, dataparallel_stops_naming_the_replica) {
    check_divergence(dataparallel_args, "hogwild: replica ", NULL, "100", NULL);
}

Test(e2e_diverge, dataparallel_keeps_the_rows_before) { check_divergence(dataparallel_args, NULL, "64", "3", NULL); }

// Issue 21: with --momentum 5 the hint was to try a lower --lr alone; a momentum of 1 or more grows
// without bound at any learning rate, and the hint says so, naming --momentum.
Test(e2e_diverge, a_momentum_of_1_or_more_is_named_in_the_hint) {
    char *data = e2e_synth(34);
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--workers", "1", "--momentum", "5", "--quiet");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "training diverged", "stderr");
    e2e_assert_contains(r.err, "Use a momentum below 1 (--momentum), e.g. 0.9: this run's is 5,", "stderr");
    cr_expect_null(strstr(r.err, "Try a lower"), "%s", r.err);
    e2e_assert_left_nothing(&r);
}

// `hogwild compare` does not rank a diverged run: it says "diverged".
Test(e2e_diverge, compare_marks_the_diverged_run) {
    char *data = e2e_synth(32);
    char *good_csv = e2e_path("good.csv");
    char *bad_csv = e2e_path("bad.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--epochs", "2", "--lr", "0.05", "--quiet", "--metrics",
            good_csv);
    e2e_assert_exit(&r, 0);
    // One worker: no race, so it diverges the same way every time (at 192 samples). With two,
    // once in a while the losses stayed finite (if huge) through the one epoch.
    e2e_run(&r, NULL, "--data", data, "--lr", "100", "--workers", "1", "--quiet", "--metrics", bad_csv);
    e2e_assert_exit(&r, 1);
    char *plot = e2e_path("plot.svg");
    e2e_run(&r, NULL, "compare", bad_csv, good_csv, "--target", "10", "--plot", plot);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "diverged", "the table");
    e2e_assert_contains(r.out, "fastest to 10%: good.csv", "the fastest line names the good run");
    e2e_assert_contains(e2e_read_text(plot), "diverged", "the plot's legend");
}

// A checkpoint with NaN weights (written by an older hogwild, or by hand) is refused, not trained
// on nor evaluated as a result.
Test(e2e_diverge, a_checkpoint_with_nan_weights_is_refused) {
    char *data = e2e_synth_n("data", 33, 300, 100);
    char *ckpt = e2e_path("nan.safetensors");
    hw_model model;
    cr_assert_eq(hw_model_load(&model, e2e.mlp), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_alloc_weights(&model), HW_OK);
    hw_model_init_weights(&model, 1);
    model.weights[7] = NAN;
    hw_ckpt_meta meta = {.epoch = 1, .samples_seen = 300, .seed = 1};
    cr_assert_eq(hw_ckpt_save(ckpt, &model, model.weights, &meta), HW_OK, "%s", hw_error());
    hw_model_free(&model);

    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--eval-only", "--resume", ckpt);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, ckpt, "stderr");
    e2e_assert_contains(r.err, "not finite", "stderr");
    cr_expect_null(strstr(r.out, "accuracy"), "no result from NaN weights:\n%s", r.out);
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--epochs", "2", "--resume", ckpt, "--quiet");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "not finite", "stderr");
    e2e_assert_left_nothing(&r);
}

// One replica of a DataParallel step diverged, the other not (e2e_check_replica_loss_reported).
Test(e2e_diverge, dataparallel_reports_the_diverged_replicas_loss_not_the_mean) {
    e2e_check_replica_loss_reported((const char *const[]){"--replicas", "2", NULL});
}
