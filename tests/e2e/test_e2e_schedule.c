// End-to-end tests of the learning-rate schedules through ./hogwild: --lr-schedule and --warmup
// refused when malformed, before anything runs; the metrics' lr column is hw_lr_at at each row's
// samples, in both modes; a run resumed from a checkpoint goes on with the checkpoint's seed and
// schedule, and with one worker ends with the same weights, bit for bit, as the run that was
// never stopped.
//
// Each test writes small synthetic digits (`hogwild synth`, 3000 train / 1000 test) into its own
// temporary folder; runs are a fraction of a second each.
#include "e2e_util.h"
#include "hw/ckpt.h"

TestSuite(e2e_schedule, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

enum { MAX_ROWS = 64 };

// ---- the flags ----

Test(e2e_schedule, malformed_schedules_are_refused_naming_the_flag) {
    const char *specs[] = {"bogus",        "step:0:0.5",
                           "step:2",       "exponential:1.5",
                           "exponential:", "cosine:1",
                           "linear:0.5",   "exponential:0x0.8",
                           "step:2:nan",   ""};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        e2e_run_result r;
        e2e_run(&r, NULL, "--data", e2e_path("missing"), "--lr-schedule", specs[i]);
        e2e_assert_exit(&r, 2);
        e2e_assert_contains(r.err, "--lr-schedule", "stderr");
        cr_expect_null(strstr(r.out, "epoch"), "'%s': nothing trains:\n%s", specs[i], r.out);
    }
    const char *warmups[] = {"-1", "x", "1.5", " 3"};
    for (size_t i = 0; i < sizeof warmups / sizeof warmups[0]; i++) {
        e2e_run_result r;
        e2e_run(&r, NULL, "--data", e2e_path("missing"), "--warmup", warmups[i]);
        e2e_assert_exit(&r, 2);
        e2e_assert_contains(r.err, "--warmup", "stderr");
    }
}

Test(e2e_schedule, help_lists_both_flags) {
    e2e_run_result r;
    e2e_run(&r, NULL, "--help");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "--lr-schedule SPEC", "--help");
    e2e_assert_contains(r.out, "step:EVERY:GAMMA", "--help");
    e2e_assert_contains(r.out, "--warmup N", "--help");
}

// ---- the lr column ----

Test(e2e_schedule, hogwild_rows_hold_the_schedules_rate) {
    char *data = e2e_synth(41);
    char *csv = e2e_path("cosine.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "2", "--lr", "0.05",
            "--lr-schedule", "cosine", "--warmup", "1000", "--eval-every", "700", "--metrics", csv, "--quiet");
    e2e_assert_exit(&r, 0);
    e2e_expect_lr_column(csv, "cosine", 1000, 0.05, 2, E2E_TRAIN);
    e2e_metrics_row rows[MAX_ROWS];
    int n = e2e_read_metrics(csv, rows, MAX_ROWS);
    cr_expect_eq(rows[0].lr, 0.0, "the warm-up starts at 0");
    cr_expect_eq(rows[n - 1].lr, 0.0, "cosine ends at 0");
}

Test(e2e_schedule, dataparallel_rows_hold_the_schedules_rate) {
    char *data = e2e_synth(42);
    char *csv = e2e_path("step.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--mode", "dataparallel", "--replicas", "2", "--epochs", "3",
            "--lr", "0.05", "--lr-schedule", "step:1:0.5", "--metrics", csv, "--quiet");
    e2e_assert_exit(&r, 0);
    e2e_expect_lr_column(csv, "step:1:0.5", 0, 0.05, 3, E2E_TRAIN);
}

// A constant schedule is --lr on every row, and the run's weights are those of a run that names
// no schedule (a warm-up of 0 is none).
Test(e2e_schedule, constant_is_the_default_bit_for_bit) {
    char *data = e2e_synth(43);
    char *a = e2e_path("a.safetensors"), *b = e2e_path("b.safetensors"), *csv = e2e_path("constant.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--quiet", "--save", a, "--metrics", csv);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--quiet", "--save", b, "--lr-schedule",
            "constant", "--warmup", "0");
    e2e_assert_exit(&r, 0);
    size_t na, nb;
    uint8_t *ba = e2e_own(read_bytes(a, &na)), *bb = e2e_own(read_bytes(b, &nb));
    cr_assert_eq(na, nb);
    cr_expect_eq(memcmp(ba, bb, na), 0, "--lr-schedule constant trained other weights than no schedule");
    e2e_metrics_row rows[MAX_ROWS];
    int n = e2e_read_metrics(csv, rows, MAX_ROWS);
    for (int i = 0; i < n; i++) cr_expect_eq((float)rows[i].lr, 0.01f, "row %d: lr %.9g", i + 1, rows[i].lr);
}

// ---- --resume ----

// The checkpoint's metadata (hw_ckpt_load_meta).
static hw_ckpt_meta meta_of(const char *path) {
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load_meta(path, &meta), HW_OK, "%s", hw_error());
    return meta;
}

static void expect_same_file(const char *a, const char *b, const char *why) {
    size_t na, nb;
    uint8_t *ba = e2e_own(read_bytes(a, &na)), *bb = e2e_own(read_bytes(b, &nb));
    cr_assert_eq(na, nb, "%s: %zu and %zu bytes", why, na, nb);
    cr_expect_eq(memcmp(ba, bb, na), 0, "%s: the checkpoints differ", why);
}

// One worker, --momentum 0 and the MLP (no dropout: the schedule alone, the optimizer state's own
// test is test_e2e_resume_optim.c): a 2-epoch run stopped after epoch 1 and
// resumed, given neither its seed nor its schedule, saves the same checkpoint as the run never
// stopped, for a schedule that depends on the whole run (cosine) and a warm-up, with a seed
// other than the default. The stop is worker 0 failing at its first batch of epoch 2
// (HOGWILD_FAIL_WORKER), after the epoch-1 checkpoint was saved.
Test(e2e_schedule, resumed_run_equals_the_unbroken_one_bit_for_bit) {
    char *data = e2e_synth(44);
    char *whole = e2e_path("whole.safetensors"), *cut = e2e_path("cut.safetensors");
    char *resumed = e2e_path("resumed.safetensors"), *csv = e2e_path("resumed.csv");
    const char *specs[] = {"cosine", "linear", "exponential:0.5"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        e2e_run_result r;
        e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "2", "--momentum", "0",
                "--seed", "7", "--lr", "0.05", "--lr-schedule", specs[i], "--warmup", "500", "--quiet", "--save", whole,
                "--overwrite");
        e2e_assert_exit(&r, 0);
        // 3000 samples of batch 64: 47 batches an epoch; batch 48 is the first of epoch 2.
        e2e_run(&r, "HOGWILD_FAIL_WORKER=0:48", "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "2",
                "--momentum", "0", "--seed", "7", "--lr", "0.05", "--lr-schedule", specs[i], "--warmup", "500",
                "--quiet", "--save", cut, "--overwrite");
        e2e_assert_exit(&r, 1);
        hw_ckpt_meta meta = meta_of(cut);
        cr_assert_eq(meta.epoch, 1, "%s: the cut run saved epoch %d", specs[i], meta.epoch);
        cr_expect_eq(meta.seed, 7u);
        cr_expect_str_eq(meta.lr_schedule, specs[i]);
        cr_expect_eq(meta.lr_warmup, 500);
        cr_expect_eq(meta.lr, 0.05f, "%s: the cut run saved lr %g", specs[i], (double)meta.lr);
        // No --lr: the checkpoint's 0.05 is restored, as its seed and schedule are.
        e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "2", "--momentum", "0",
                "--quiet", "--resume", cut, "--save", resumed, "--overwrite", "--metrics", csv);
        e2e_assert_exit(&r, 0);
        cr_expect_str_empty(r.err, "%s: nothing to say when nothing is overridden", specs[i]);
        meta = meta_of(resumed);
        cr_expect_eq(meta.seed, 7u, "%s: the resumed run saved seed %llu", specs[i], (unsigned long long)meta.seed);
        cr_expect_str_eq(meta.lr_schedule, specs[i]);
        expect_same_file(whole, resumed, specs[i]);
        // The resumed run's rows go on with the schedule where it stopped (epoch 1, 3000 samples).
        e2e_expect_lr_column(csv, specs[i], 500, 0.05, 2, E2E_TRAIN);
    }
}

// A schedule that changes at epoch ends only (step): a run of 2 epochs resumed to 3 is the 3-epoch
// run, since the schedule does not depend on the run's length; the rate falls in the resumed epoch.
Test(e2e_schedule, step_schedule_resumed_after_one_epoch_goes_on) {
    char *data = e2e_synth(45);
    char *whole = e2e_path("whole.safetensors"), *first = e2e_path("first.safetensors");
    char *resumed = e2e_path("resumed.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "3", "--momentum", "0",
            "--seed", "3", "--lr", "0.05", "--lr-schedule", "step:2:0.25", "--quiet", "--save", whole);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "2", "--momentum", "0",
            "--seed", "3", "--lr", "0.05", "--lr-schedule", "step:2:0.25", "--quiet", "--save", first);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "3", "--momentum", "0", "--lr",
            "0.05", "--quiet", "--resume", first, "--save", resumed);
    e2e_assert_exit(&r, 0);
    expect_same_file(whole, resumed, "step:2:0.25 resumed after 2 of 3 epochs");
}

// A flag given beside --resume wins over what the checkpoint records, and stderr says so.
Test(e2e_schedule, a_given_seed_or_schedule_wins_and_is_named) {
    char *data = e2e_synth(46);
    char *ckpt = e2e_path("seven.safetensors"), *next = e2e_path("next.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--epochs", "1", "--seed", "7", "--lr-schedule", "cosine",
            "--quiet", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--epochs", "2", "--seed", "3", "--lr-schedule", "linear",
            "--lr", "0.2", "--quiet", "--resume", ckpt, "--save", next);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.err, "trained with --lr 0.01; this run uses --lr 0.2 as given", "stderr");
    e2e_assert_contains(r.err, "seed 7", "stderr");
    e2e_assert_contains(r.err, "--seed 3", "stderr");
    e2e_assert_contains(r.err, "cosine", "stderr");
    e2e_assert_contains(r.err, "linear", "stderr");
    hw_ckpt_meta meta = meta_of(next);
    cr_expect_eq(meta.seed, 3u);
    cr_expect_str_eq(meta.lr_schedule, "linear");
    cr_expect_eq(meta.lr, 0.2f);
    // The same seed given again is no override: nothing said.
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--epochs", "2", "--seed", "7", "--quiet", "--resume", ckpt);
    e2e_assert_exit(&r, 0);
    cr_expect_str_empty(r.err, "stderr");
}

// A schedule in the checkpoint that this build cannot read is refused, not replaced by constant.
Test(e2e_schedule, an_unreadable_recorded_schedule_is_refused) {
    char *data = e2e_synth(47);
    char *ckpt = e2e_path("odd.safetensors");
    hw_model model;
    cr_assert_eq(hw_model_load(&model, e2e.mlp), HW_OK, "%s", hw_error());
    float *w = calloc(model.n_weights, sizeof *w);
    hw_ckpt_meta meta = {.epoch = 1, .samples_seen = E2E_TRAIN, .seed = 1, .lr_warmup = 0};
    snprintf(meta.lr_schedule, sizeof meta.lr_schedule, "polynomial:2");
    cr_assert_eq(hw_ckpt_save(ckpt, &model, w, &meta), HW_OK, "%s", hw_error());
    free(w);
    hw_model_free(&model);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--epochs", "2", "--quiet", "--resume", ckpt);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "polynomial:2", "stderr");
    e2e_assert_contains(r.err, ckpt, "stderr");
    cr_expect_null(strstr(r.out, "epoch 2/2"), "nothing trains:\n%s", r.out);
}

// Without --model, --resume trains the network the checkpoint records (the MLP here), not the
// default model file (LeNet, which its tensors do not fit); with --model, that file.
Test(e2e_schedule, resume_without_model_trains_the_checkpoints_own) {
    char *data = e2e_synth(48);
    char *ckpt = e2e_path("mlp.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--epochs", "1", "--quiet", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--data", data, "--epochs", "2", "--quiet", "--resume", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "epoch 2/2", "stdout");
    e2e_run(&r, NULL, "--model", e2e.lenet, "--data", data, "--epochs", "2", "--quiet", "--resume", ckpt);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, ckpt, "stderr");
}

// A run resumed without --lr, --lr-schedule or --warmup trains with the checkpoint's, so its
// metrics' setup hash is the unbroken run's, not that of a run at the defaults: compare must not
// group it with runs at --lr 0.01, constant.
Test(e2e_schedule, a_resumed_runs_setup_names_the_restored_rate_and_schedule) {
    char *data = e2e_synth(47);
    char *ckpt = e2e_path("first.safetensors");
    char *whole = e2e_path("whole.csv"), *resumed = e2e_path("resumed.csv"), *plain = e2e_path("plain.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "1", "--lr", "0.05",
            "--lr-schedule", "exponential:0.5", "--warmup", "500", "--quiet", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "2", "--lr", "0.05",
            "--lr-schedule", "exponential:0.5", "--warmup", "500", "--quiet", "--metrics", whole);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "2", "--quiet", "--resume",
            ckpt, "--metrics", resumed);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "2", "--quiet", "--metrics",
            plain);
    e2e_assert_exit(&r, 0);
    e2e_metrics_row a[MAX_ROWS], b[MAX_ROWS], c[MAX_ROWS];
    cr_assert_gt(e2e_read_metrics_of(whole, a, MAX_ROWS, 0), 0);
    cr_assert_gt(e2e_read_metrics_of(resumed, b, MAX_ROWS, 0), 0);
    cr_assert_gt(e2e_read_metrics_of(plain, c, MAX_ROWS, 0), 0);
    cr_expect_str_eq(b[0].setup, a[0].setup, "the resumed run's setup is the unbroken run's");
    cr_expect_str_neq(b[0].setup, c[0].setup, "and not that of a run at the default rate");
    char *text = e2e_read_text(resumed);
    e2e_assert_contains(text, "lr=0.05 lr-schedule=exponential:0.5 warmup=500", "the resumed run's settings");
}

// The review of issue 40: a warm-up longer than the run was accepted, and the run trained at a
// fraction of --lr throughout (9.4% accuracy after 2000 samples at --warmup 1000000). It is
// refused before any work, naming the warm-up and the run's length.
Test(e2e_schedule, a_warmup_as_long_as_the_run_is_refused) {
    char *data = e2e_synth_n("data", 41, 300, 100);
    char *metrics = e2e_path("m.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--epochs", "2", "--warmup", "600", "--metrics", metrics);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "the warm-up of 600 samples", "stderr");
    e2e_assert_contains(r.err, "2 epoch(s) of 300 samples: 600", "stderr");
    cr_expect(!e2e_file_exists(metrics), "a metrics file was written");
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--epochs", "2", "--warmup", "599", "--quiet");
    e2e_assert_exit(&r, 0);
}
