// End-to-end tests of --simulate N --delay MODEL through ./hogwild (src/train/simulate.c): a
// simulated run replays bit for bit; --simulate 1 --delay fixed:0 trains what --workers 1 trains,
// weights and metrics; the delay changes what is trained; a --measure run's metrics feed
// measured:FILE; checkpoints record the simulation and --resume goes on only as it; a divergence
// names the virtual worker; every combination that does not apply is refused before any work.
//
// Each test writes small synthetic digits (`hogwild synth`, 3000 train / 1000 test) into its own
// temporary folder; runs are a fraction of a second each.
#include "e2e_util.h"
#include "hw/ckpt.h"

TestSuite(e2e_simulate, .init = e2e_setup, .fini = e2e_teardown, .timeout = 180);

enum { MAX_ROWS = 64 };

// The weights of two checkpoints, bit for bit (their metadata may differ: a simulated run's
// records the simulation).
static int same_weights(const char *a, const char *b) {
    size_t na, nb, da, db;
    uint8_t *fa = e2e_own(read_bytes(a, &na)), *fb = e2e_own(read_bytes(b, &nb));
    const uint8_t *wa = e2e_safetensors_data(fa, na, &da), *wb = e2e_safetensors_data(fb, nb, &db);
    return da == db && memcmp(wa, wb, da) == 0;
}

// The results of two metrics files, row for row: epochs, samples, losses and accuracies.
static void expect_same_results(const char *a, const char *b, const char *why) {
    e2e_metrics_row ra[MAX_ROWS], rb[MAX_ROWS];
    int na = e2e_read_metrics(a, ra, MAX_ROWS), nb = e2e_read_metrics(b, rb, MAX_ROWS);
    cr_assert_eq(na, nb, "%s: %d and %d rows", why, na, nb);
    for (int i = 0; i < na; i++) {
        cr_expect_eq(ra[i].epoch, rb[i].epoch, "%s: row %d", why, i + 1);
        cr_expect_eq(ra[i].samples, rb[i].samples, "%s: row %d", why, i + 1);
        cr_expect(ra[i].train_loss == rb[i].train_loss || (isnan(ra[i].train_loss) && isnan(rb[i].train_loss)),
                  "%s: row %d train loss %.9g and %.9g", why, i + 1, ra[i].train_loss, rb[i].train_loss);
        cr_expect_eq(ra[i].test_loss, rb[i].test_loss, "%s: row %d test loss", why, i + 1);
        cr_expect_eq(ra[i].accuracy, rb[i].accuracy, "%s: row %d accuracy", why, i + 1);
    }
}

// ---- what it trains ----

// LeNet (dropout: each worker's own generator) over 2 epochs: the same batches, draws and steps.
Test(e2e_simulate, one_virtual_worker_at_delay_0_is_one_worker_bit_for_bit) {
    char *data = e2e_synth(61);
    char *sim = e2e_path("sim.safetensors"), *real = e2e_path("real.safetensors");
    char *sim_csv = e2e_path("sim.csv"), *real_csv = e2e_path("real.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--epochs", "2", "--simulate", "1", "--delay", "fixed:0", "--quiet", "--save",
            sim, "--metrics", sim_csv);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "simulated: 1 virtual worker,", "stdout");
    e2e_run(&r, NULL, "--data", data, "--epochs", "2", "--workers", "1", "--quiet", "--save", real, "--metrics",
            real_csv);
    e2e_assert_exit(&r, 0);
    cr_expect(same_weights(sim, real), "--simulate 1 --delay fixed:0 trained other weights than --workers 1");
    expect_same_results(sim_csv, real_csv, "--simulate 1 against --workers 1");
    // The same results, yet another setup: compare does not count the simulation as a real run.
    e2e_metrics_row sim_rows[MAX_ROWS], real_rows[MAX_ROWS];
    e2e_read_metrics(sim_csv, sim_rows, MAX_ROWS);
    e2e_read_metrics(real_csv, real_rows, MAX_ROWS);
    cr_expect_str_neq(sim_rows[0].setup, real_rows[0].setup, "a simulation has a real run's setup hash");
    cr_expect_eq(sim_rows[0].workers, 1);
    // --simulate 1 with no --delay is delay 0 too.
    char *plain = e2e_path("plain.safetensors");
    e2e_run(&r, NULL, "--data", data, "--epochs", "2", "--simulate", "1", "--quiet", "--save", plain);
    e2e_assert_exit(&r, 0);
    cr_expect(same_weights(plain, real), "--simulate 1's default delay is not 0");
}

// 8 virtual workers at a random delay, twice: the same file, the same rows. Another delay, or
// another seed, trains other weights: the delay and the interleaving are in what is trained.
Test(e2e_simulate, a_simulated_run_replays_bit_for_bit) {
    char *data = e2e_synth(62);
    char *a = e2e_path("a.safetensors"), *b = e2e_path("b.safetensors"), *c = e2e_path("c.safetensors");
    char *d = e2e_path("d.safetensors");
    char *a_csv = e2e_path("a.csv"), *b_csv = e2e_path("b.csv");
    e2e_run_result r;
    for (int i = 0; i < 2; i++) {
        e2e_run(&r, NULL, "--data", data, "--epochs", "2", "--simulate", "8", "--delay", "uniform:8", "--quiet",
                "--eval-every", "1000", "--save", i ? b : a, "--metrics", i ? b_csv : a_csv);
        e2e_assert_exit(&r, 0);
    }
    size_t na, nb;
    uint8_t *fa = e2e_own(read_bytes(a, &na)), *fb = e2e_own(read_bytes(b, &nb));
    cr_assert_eq(na, nb);
    cr_expect_eq(memcmp(fa, fb, na), 0, "two runs of the same simulation saved different checkpoints");
    expect_same_results(a_csv, b_csv, "a rerun");
    e2e_metrics_row rows[MAX_ROWS];
    int n = e2e_read_metrics(a_csv, rows, MAX_ROWS);
    cr_expect_eq(n, 1 + 2 * 3, "the first row, then 2 --eval-every rows and the end of each epoch: %d rows", n);
    cr_expect_str_eq(rows[0].mode, "hogwild");
    cr_expect_eq(rows[0].workers, 8, "the workers column is the virtual workers");
    e2e_run(&r, NULL, "--data", data, "--epochs", "2", "--simulate", "8", "--delay", "fixed:0", "--quiet", "--save", c);
    e2e_assert_exit(&r, 0);
    cr_expect(!same_weights(a, c), "uniform:8 trained what delay 0 trains");
    char *c_csv = e2e_path("c.csv");
    e2e_run(&r, NULL, "--data", data, "--epochs", "2", "--simulate", "8", "--delay", "fixed:0", "--quiet",
            "--eval-every", "1000", "--metrics", c_csv);
    e2e_assert_exit(&r, 0);
    e2e_metrics_row other[MAX_ROWS];
    e2e_read_metrics(c_csv, other, MAX_ROWS);
    cr_expect_str_neq(rows[0].setup, other[0].setup, "two delay models share a setup hash");
    e2e_run(&r, NULL, "--data", data, "--epochs", "2", "--simulate", "8", "--delay", "uniform:8", "--seed", "2",
            "--quiet", "--save", d);
    e2e_assert_exit(&r, 0);
    cr_expect(!same_weights(a, d), "another seed trained the same weights");
}

// The MLP, which learns the synthetic digits well in 2 epochs: a short delay costs little.
Test(e2e_simulate, sixty_four_workers_at_a_delay_still_learn) {
    char *data = e2e_synth(63);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--epochs", "3", "--lr", "0.05", "--simulate", "64",
            "--delay", "geometric:0.25", "--batch-size", "16");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "simulated Hogwild, virtual workers 64 (delay geometric:0.25", "stdout");
    e2e_assert_contains(r.out, "simulated: 64 virtual workers", "stdout");
    e2e_done_line done = e2e_parse_done(r.out);
    cr_expect_gt(done.accuracy, 80.0, "64 virtual workers at geometric:0.25 ended at %.2f%%:\n%s", done.accuracy,
                 r.out);
}

// A --measure run's metrics are a delay model: its staleness histogram.
Test(e2e_simulate, measured_delays_come_from_a_measure_runs_metrics) {
    char *data = e2e_synth(64);
    char *measured = e2e_path("measured.csv"), *plain = e2e_path("plain.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--measure", "--quiet", "--metrics",
            measured);
    e2e_assert_exit(&r, 0);
    char delay[1200];
    snprintf(delay, sizeof delay, "measured:%s", measured);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--simulate", "2", "--delay", delay, "--quiet");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, delay, "stdout");
    // Without the measurement's columns, refused before any work.
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--quiet", "--metrics", plain);
    e2e_assert_exit(&r, 0);
    snprintf(delay, sizeof delay, "measured:%s", plain);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--simulate", "2", "--delay", delay, "--quiet");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "no staleness histogram", "stderr");
    e2e_assert_contains(r.err, "--measure", "stderr");
}

// ---- checkpoints and --resume ----

// The checkpoint records the simulation; --resume goes on as the same one, and refuses another
// delay, a real run, or a simulation of a real run's checkpoint.
Test(e2e_simulate, resume_goes_on_only_as_the_same_simulation) {
    char *data = e2e_synth(65);
    char *sim = e2e_path("sim.safetensors"), *real = e2e_path("real.safetensors");
    char *next = e2e_path("next.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--simulate", "4", "--delay", "uniform:4", "--quiet",
            "--save", sim);
    e2e_assert_exit(&r, 0);
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load_meta(sim, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(meta.simulate, 4);
    cr_expect_str_eq(meta.delay, "uniform:4");
    e2e_run(&r, NULL, "--data", data, "--epochs", "2", "--simulate", "4", "--delay", "uniform:04", "--quiet",
            "--resume", sim, "--save", next);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "epoch 2/2", "stdout");
    cr_assert_eq(hw_ckpt_load_meta(next, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(meta.epoch, 2);
    cr_expect_eq(meta.simulate, 4);
    const char *const cases[][6] = {
        {"--simulate", "4", "--delay", "uniform:5", NULL},
        {"--simulate", "2", "--delay", "uniform:4", NULL},
        {"--workers", "4", NULL},
        {NULL},
    };
    for (int i = 0; i < 4; i++) {
        const char *args[20] = {"--data", data, "--epochs", "2", "--quiet", "--resume", sim};
        int n = 7;
        for (int k = 0; cases[i][k]; k++) args[n++] = cases[i][k];
        e2e_run_argv(&r, NULL, args);
        e2e_assert_exit(&r, 2);
        e2e_assert_contains(r.err, "was trained by --simulate 4 --delay uniform:4", "stderr");
        cr_expect_null(strstr(r.out, "epoch 2/2"), "case %d: nothing trains:\n%s", i, r.out);
    }
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--quiet", "--save", real);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--data", data, "--epochs", "2", "--simulate", "1", "--quiet", "--resume", real);
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "was trained by real workers", "stderr");
}

// A simulated run that diverges ends as any run does, naming the virtual worker.
Test(e2e_simulate, a_divergence_names_the_virtual_worker) {
    char *data = e2e_synth(66);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--simulate", "4", "--delay", "fixed:2", "--lr", "1000",
            "--quiet");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "virtual worker ", "stderr");
    e2e_assert_contains(r.err, "training diverged", "stderr");
}

// Ctrl-C stops a simulated run as any run: exit 130, the current weights saved, a checkpoint that
// records the simulation and resumes as it.
Test(e2e_simulate, ctrl_c_saves_and_the_save_resumes) {
    char *data = e2e_synth(68);
    char *ckpt = e2e_path("stopped.safetensors"), *csv = e2e_path("stopped.csv");
    const char *args[] = {"--data",       data,  "--epochs",  "1000", "--simulate", "8",  "--delay", "uniform:8",
                          "--eval-every", "500", "--metrics", csv,    "--save",     ckpt, "--quiet", NULL};
    e2e_run_result r;
    e2e_interrupt_once_training(&r, args, csv);
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load_meta(ckpt, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(meta.simulate, 8);
    cr_expect_str_eq(meta.delay, "uniform:8");
    char epochs[16];
    snprintf(epochs, sizeof epochs, "%d", meta.epoch + 1);
    e2e_run(&r, NULL, "--data", data, "--epochs", epochs, "--simulate", "8", "--delay", "uniform:8", "--quiet",
            "--resume", ckpt);
    e2e_assert_exit(&r, 0);
}

// ---- the refusals ----

Test(e2e_simulate, what_does_not_apply_is_refused_before_any_work) {
    char *data = e2e_synth(67);
    char *missing = e2e_path("missing.csv");
    char measured_missing[1200];
    snprintf(measured_missing, sizeof measured_missing, "measured:%s", missing);
    const struct {
        const char *env;
        const char *args[8];
        const char *says;
    } cases[] = {
        {NULL, {"--simulate", "0"}, "--simulate"},
        {NULL, {"--simulate", "x"}, "--simulate"},
        {NULL, {"--simulate", "4", "--delay", "bogus"}, "--delay expects fixed:K"},
        {NULL, {"--simulate", "4", "--delay", "uniform:1025"}, "bounded by 1024"},
        {NULL, {"--simulate", "4", "--delay", "fixed:-1"}, "--delay fixed:K expects"},
        {NULL, {"--simulate", "4", "--delay", "geometric:0.001"}, "at least 0.0090"},
        {NULL, {"--simulate", "4", "--delay", measured_missing}, missing},
        {NULL, {"--delay", "uniform:4"}, "give --simulate N"},
        {NULL, {"--simulate", "4", "--mode", "dataparallel"}, "--mode dataparallel"},
        {NULL, {"--simulate", "4", "--workers", "4"}, "drop --workers 4"},
        {NULL, {"--simulate", "4", "--device", "cuda"}, "drop --device cuda"},
        {NULL, {"--simulate", "4", "--gpus", "0"}, "drop --gpus"},
        {NULL, {"--simulate", "4", "--measure"}, "--measure measures the races of real workers"},
        {NULL, {"--simulate", "4", "--prefetch"}, "--prefetch"},
        {"OMPI_COMM_WORLD_SIZE=2", {"--simulate", "4"}, "without mpirun"},
        {NULL, {"--simulate", "4", "--eval-only", "--resume", missing}, "--simulate does not apply to --eval-only"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[20] = {"--model", e2e.mlp, "--data", data, "--quiet"};
        int n = 5;
        for (int k = 0; cases[i].args[k]; k++) args[n++] = cases[i].args[k];
        e2e_run_result r;
        e2e_run_argv(&r, cases[i].env, args);
        e2e_assert_exit(&r, 2);
        e2e_assert_contains(r.err, cases[i].says, "stderr");
        cr_expect_null(strstr(r.out, "epoch"), "case %zu: nothing trains:\n%s", i, r.out);
    }
    // The sparse models have a trainer of their own, without a simulation (exit 1, before any work).
    char sparse[1200];
    snprintf(sparse, sizeof sparse, "%s/models/logreg.model", e2e.root);
    e2e_run_result sp;
    e2e_run(&sp, NULL, "--model", sparse, "--data", data, "--quiet", "--simulate", "2");
    e2e_assert_exit(&sp, 1);
    e2e_assert_contains(sp.err, "cannot run with --simulate", "stderr");
    // --workers 1 says what --simulate 1 means: allowed.
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--quiet", "--simulate", "1", "--workers", "1");
    e2e_assert_exit(&r, 0);
}

Test(e2e_simulate, help_lists_both_flags) {
    e2e_run_result r;
    e2e_run(&r, NULL, "--help");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "--simulate N", "--help");
    e2e_assert_contains(r.out, "--delay MODEL", "--help");
    e2e_assert_contains(r.out, "geometric:P", "--help");
}
