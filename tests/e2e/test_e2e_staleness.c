// End-to-end tests of --max-staleness S through ./hogwild (src/train/hogwild_staleness.c): with
// --measure, two MLP workers' largest staleness stays within (W - 1)(2S + 2) = 2S + 2 and every
// step is taken; lockstep (S = 0) trains as well as a believable run does, shards of unequal
// batches included; a stopped worker ends the run at --sync-timeout naming both workers, leaving
// nothing behind; the checkpoint records the bound and --resume keeps it unless the flag is given
// (--sync-timeout alone bounds the wait of the recorded bound);
// every combination that does not apply, and every bad value, is refused before any work.
//
// Each test writes small synthetic digits (`hogwild synth`) into its own temporary folder; runs
// are a fraction of a second each.
#include "e2e_util.h"
#include "hw/ckpt.h"

TestSuite(e2e_staleness, .init = e2e_setup, .fini = e2e_teardown, .timeout = 180);

// The field `name` of the last row of the metrics file at `csv_path`.
static const char *last_row_field(const char *csv_path, const char *name) {
    char *text = e2e_read_text(csv_path);
    char *header = text, *last = NULL;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        last = line;
    }
    cr_assert(last && last != header, "%s has no data rows", csv_path);
    int column = -1, i = 0;
    for (char *save = NULL, *field = strtok_r(header, ",", &save); field; field = strtok_r(NULL, ",", &save), i++) {
        if (strcmp(field, name) == 0) column = i;
    }
    cr_assert_geq(column, 0, "%s has no column %s", csv_path, name);
    i = 0;
    for (char *save = NULL, *field = strtok_r(last, ",", &save); field; field = strtok_r(NULL, ",", &save), i++) {
        if (i == column) return field;
    }
    cr_assert_fail("the last row of %s has no field %d", csv_path, column);
    return NULL;
}

// Two MLP workers over 8000 samples in batches of 16 (250 steps each), under bound `bound`
// ("none": unbounded) with --measure: the largest staleness.
static long long measured_max(const char *data, const char *bound) {
    char name[64];
    snprintf(name, sizeof name, "s%s.csv", bound);
    char *csv = e2e_path(name);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "1", "--batch-size", "16",
            "--max-staleness", bound, "--measure", "--metrics", csv);
    e2e_assert_exit(&r, 0);
    if (strcmp(bound, "none") != 0) {
        char named[48];
        snprintf(named, sizeof named, "max staleness %s", bound);
        e2e_assert_contains(r.out, named, "the run's header");
        snprintf(named, sizeof named, "max-staleness=%s", bound);
        e2e_assert_contains(e2e_read_text(csv), named, "the settings column");
    }
    cr_expect_str_eq(last_row_field(csv, "updates"), "500", "every step of both workers was taken");
    e2e_assert_left_nothing(&r);
    return e2e_parse_integer(last_row_field(csv, "staleness_max"), 0);
}

Test(e2e_staleness, measured_staleness_never_exceeds_the_bound) {
    char *data = e2e_synth_n("data", 41, 8000, E2E_TEST);
    const char *bounds[] = {"0", "2"};
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        long long bound = atoll(bounds[b]), most = 2 * bound + 2;  // (W - 1)(2S + 2), W = 2
        long long seen = measured_max(data, bounds[b]);
        cr_expect_leq(seen, most, "--max-staleness %s: staleness_max %lld above %lld", bounds[b], seen, most);
    }
}

// Lockstep over two epochs of shards whose batches differ by one (8001 samples: 4001 and 4000, in
// batches of 16, 251 and 250 steps): the worker with the extra batch is not held by the one that
// finished, the next epoch starts level, and the MLP learns the digits as an unbounded run does.
Test(e2e_staleness, lockstep_trains_and_a_finished_worker_holds_nobody) {
    char *data = e2e_synth_n("data", 42, 8001, E2E_TEST);
    char *csv = e2e_path("lockstep.csv");
    e2e_run_result r;
    e2e_run_argv_within(&r, 60, NULL,
                        (const char *const[]){"--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "2",
                                              "--batch-size", "16", "--max-staleness", "0", "--sync-timeout", "20",
                                              "--quiet", "--measure", "--metrics", csv, NULL});
    e2e_assert_exit(&r, 0);
    cr_expect_str_eq(last_row_field(csv, "updates"), "1002", "2 epochs of 251 + 250 steps");
    cr_expect_leq(e2e_parse_integer(last_row_field(csv, "staleness_max"), 0), 2, "lockstep's bound: 2");
    double accuracy = e2e_parse_number(last_row_field(csv, "test_accuracy"), 0);
    // The same data trains to ~91% in one unbounded epoch (synthetic digits are easy): lockstep
    // must not be far from it.
    cr_expect_geq(accuracy, 85.0, "lockstep's accuracy %.2f%%", accuracy);
    e2e_assert_left_nothing(&r);
}

// Worker 1 stops itself (SIGSTOP) after 20 steps: worker 0, one step ahead at most, waits for it,
// gives up after --sync-timeout and the run ends naming both, exit 1, nothing left behind.
// Without the bound's timeout the run would wait at the epoch's end for ever.
Test(e2e_staleness, a_stopped_worker_ends_the_run_at_sync_timeout) {
    char *data = e2e_synth_n("data", 43, 8000, E2E_TEST);
    e2e_run_result r;
    double started = hw_now();
    e2e_run_argv_within(&r, 40, "HOGWILD_FAIL_WORKER=1:20:stop",
                        (const char *const[]){"--model", e2e.mlp, "--data", data, "--workers", "2", "--batch-size",
                                              "16", "--max-staleness", "1", "--sync-timeout", "1", "--quiet", NULL});
    double took = hw_now() - started;
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "worker 0 waited", "stderr");
    e2e_assert_contains(r.err, "(--sync-timeout) for worker 1", "stderr");
    e2e_assert_contains(r.err, "worker 1 is stopped, stuck or gone", "stderr");
    e2e_assert_contains(r.err, "--max-staleness", "stderr");
    cr_expect_geq(took, 1.0, "gave up after %g s, before --sync-timeout", took);
    cr_expect_lt(took, 30.0, "took %g s", took);
    e2e_assert_left_nothing(&r);
}

// The checkpoint records the bound; --resume keeps it unless --max-staleness is given, and says so
// when the given one differs (none included).
Test(e2e_staleness, the_checkpoint_records_the_bound_and_resume_keeps_it) {
    char *data = e2e_synth(44);
    char *ckpt = e2e_path("bounded.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--max-staleness", "3", "--quiet", "--save",
            ckpt);
    e2e_assert_exit(&r, 0);
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load_meta(ckpt, &meta), HW_OK, "%s", hw_error());
    cr_expect(meta.has_max_staleness && meta.max_staleness == 3, "recorded %d (%d)", meta.max_staleness,
              meta.has_max_staleness);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "2", "--resume", ckpt, "--save",
            ckpt);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "max staleness 3", "the resumed run's header");
    cr_assert_eq(hw_ckpt_load_meta(ckpt, &meta), HW_OK, "%s", hw_error());
    cr_expect(meta.has_max_staleness && meta.max_staleness == 3);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "3", "--resume", ckpt, "--save",
            ckpt, "--max-staleness", "none", "--quiet");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.err, "was trained with --max-staleness 3; this run uses no --max-staleness as given",
                        "stderr");
    cr_assert_eq(hw_ckpt_load_meta(ckpt, &meta), HW_OK, "%s", hw_error());
    cr_expect(!meta.has_max_staleness, "an unbounded run records no bound");
    e2e_assert_left_nothing(&r);
}

// --sync-timeout bounds the wait of a bound, and a resumed run's bound may be its checkpoint's:
// resuming a bounded run with --sync-timeout alone trains under the recorded bound (issue 42),
// while a resumed unbounded run still has nothing for it to bound.
Test(e2e_staleness, resume_with_sync_timeout_takes_the_checkpoints_bound) {
    char *data = e2e_synth(46);
    char *ckpt = e2e_path("bounded.safetensors");
    char *plain = e2e_path("unbounded.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--max-staleness", "1", "--quiet", "--save",
            ckpt);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "2", "--resume", ckpt,
            "--sync-timeout", "60", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "max staleness 1", "the resumed run's header");
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load_meta(ckpt, &meta), HW_OK, "%s", hw_error());
    cr_expect(meta.has_max_staleness && meta.max_staleness == 1, "recorded %d (%d)", meta.max_staleness,
              meta.has_max_staleness);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--quiet", "--save", plain);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "2", "--resume", plain,
            "--sync-timeout", "60");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "--sync-timeout bounds the wait of --max-staleness", "stderr");
    cr_expect_null(strstr(r.out, "epoch 2/"), "trained before refusing: %s", r.out);
    e2e_assert_left_nothing(&r);
}

static void expect_refused(const char *env, const char *const *args, int code, const char *why) {
    e2e_run_result r;
    e2e_run_argv(&r, env, args);
    e2e_assert_exit(&r, code);
    e2e_assert_contains(r.err, "--max-staleness", "stderr");
    e2e_assert_contains(r.err, why, "stderr");
    cr_expect_null(strstr(r.out, "epoch 1/"), "trained before refusing: %s", r.out);
    e2e_assert_left_nothing(&r);
}

Test(e2e_staleness, combinations_that_do_not_apply_are_refused) {
    char *data = e2e_synth(45);
    expect_refused(NULL, (const char *const[]){"--data", data, "--mode", "dataparallel", "--max-staleness", "1", NULL},
                   2, "DataParallel");
    expect_refused(NULL, (const char *const[]){"--data", data, "--device", "cuda", "--max-staleness", "1", NULL}, 2,
                   "--device cuda");
    expect_refused(NULL, (const char *const[]){"--data", data, "--simulate", "2", "--max-staleness", "0", NULL}, 2,
                   "--simulate");
    expect_refused("OMPI_COMM_WORLD_SIZE=2", (const char *const[]){"--data", data, "--max-staleness", "1", NULL}, 2,
                   "mpirun");
    char *sparse = e2e_path("sp");
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--kind", "sparse", "--dir", sparse, "--train", "500", "--test", "100", "--features",
            "50", "--nnz", "5");
    e2e_assert_exit(&r, 0);
    expect_refused(NULL,
                   (const char *const[]){"--model", "models/svm.model", "--data", sparse, "--max-staleness", "1", NULL},
                   1, "the sparse model");
    // --sync-timeout alone in one process still bounds nothing.
    e2e_run(&r, NULL, "--data", data, "--sync-timeout", "5");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "--sync-timeout bounds the wait of --max-staleness", "stderr");
}

Test(e2e_staleness, bad_values_are_refused) {
    char *data = e2e_synth(46);
    const char *bad[] = {"-1", "1.5", "many", "2steps"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        expect_refused(NULL, (const char *const[]){"--data", data, "--max-staleness", bad[i], NULL}, 2,
                       "expects a whole number of steps from 0 (lockstep)");
    }
    expect_refused(NULL, (const char *const[]){"--data", data, "--max-staleness", NULL}, 2, "needs a value");
}

// Ctrl-C in a lockstep run: a worker held by the bound is woken by the stop, the run saves its
// weights and exits 128 + SIGINT, and the checkpoint records the bound.
Test(e2e_staleness, ctrl_c_stops_a_lockstep_run_and_saves_its_bound) {
    char *data = e2e_synth_n("data", 47, 24000, E2E_TEST);
    char *csv = e2e_path("stopped.csv"), *ckpt = e2e_path("stopped.safetensors");
    e2e_run_result r;
    e2e_interrupt_once_training(&r,
                                (const char *const[]){"--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs",
                                                      "50", "--batch-size", "16", "--eval-every", "2000",
                                                      "--max-staleness", "0", "--metrics", csv, "--save", ckpt, NULL},
                                csv);
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load_meta(ckpt, &meta), HW_OK, "%s", hw_error());
    cr_expect(meta.has_max_staleness && meta.max_staleness == 0, "recorded %d (%d)", meta.max_staleness,
              meta.has_max_staleness);
}
