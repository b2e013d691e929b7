// End-to-end tests of --weights bf16 (CPU Hogwild with its shared weights in bfloat16): one worker
// trains bit for bit the same on a rerun with the same seed; two workers train the MLP to an
// accuracy near float's; checkpoints hold BF16 tensors and load into either kind of run, and
// --eval-only reads them; what bf16 cannot run with is refused, naming both flags.
#include "e2e_util.h"
#include "hw/ckpt.h"
#include "hw/err.h"

TestSuite(e2e_bf16, .init = e2e_setup, .fini = e2e_teardown, .timeout = 180);

// The tensor bytes of the checkpoint at `path` (e2e-owned); *n gets their count.
static const uint8_t *checkpoint_data(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    static uint8_t *bytes;
    bytes = e2e_own(malloc(1 << 20));
    size_t got = fread(bytes, 1, 1 << 20, f);
    fclose(f);
    return e2e_safetensors_data(bytes, got, n);
}

enum { MLP_WEIGHTS = 101770 };

// One worker, the same seed: the same roundings, so the same weights bit for bit; they are
// bfloat16 (2 bytes each in the checkpoint), and not float's.
Test(e2e_bf16, one_worker_reruns_bit_for_bit) {
    char *data = e2e_synth(41);
    const char *names[] = {"a.safetensors", "b.safetensors", "f32.safetensors"};
    const uint8_t *tensors[3];
    size_t n[3];
    for (int i = 0; i < 3; i++) {
        char *ckpt = e2e_path(names[i]);
        e2e_run_result r;
        e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "2", "--weights",
                i == 2 ? "f32" : "bf16", "--save", ckpt);
        e2e_assert_exit(&r, 0);
        if (i < 2) e2e_assert_contains(r.out, "Hogwild (bf16 weights)", "the run's header");
        tensors[i] = checkpoint_data(ckpt, &n[i]);
    }
    cr_assert_eq(n[0], 2 * (size_t)MLP_WEIGHTS, "a bf16 checkpoint holds 2 bytes a weight");
    cr_assert_eq(n[1], n[0]);
    cr_expect_eq(memcmp(tensors[0], tensors[1], n[0]), 0, "two bf16 runs with one seed differ");
    cr_assert_eq(n[2], 4 * (size_t)MLP_WEIGHTS);
}

// Two workers on 6000 synthetic digits, 3 epochs: bf16 trains to within a few points of float
// (bound loosely: the races differ from run to run).
Test(e2e_bf16, two_workers_train_about_as_well_as_float) {
    char *data = e2e_synth_n("data", 42, 6000, E2E_TEST);
    double accuracy[2];
    for (int i = 0; i < 2; i++) {
        e2e_run_result r;
        e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "3", "--weights",
                i ? "bf16" : "f32", "--quiet");
        e2e_assert_exit(&r, 0);
        accuracy[i] = e2e_parse_done(r.out).accuracy;
        e2e_assert_left_nothing(&r);
    }
    cr_expect_gt(accuracy[0], 80.0, "f32: %.2f%%", accuracy[0]);
    cr_expect_gt(accuracy[1], 80.0, "bf16: %.2f%%", accuracy[1]);
    cr_expect_gt(accuracy[1], accuracy[0] - 5.0, "bf16 %.2f%% against f32 %.2f%%", accuracy[1], accuracy[0]);
}

// --measure with bf16: one worker loses exactly nothing (the increments it wrote telescope through
// the bfloat16 values), and the summary names the bytes an update writes, half of float's.
Test(e2e_bf16, measure_shows_half_the_bytes_and_one_worker_loses_nothing) {
    char *data = e2e_synth(43);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--weights", "bf16", "--quiet",
            "--measure");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "): 0% in total", "one worker's lost fraction");
    e2e_assert_contains(r.out, "each update writes 203540 bytes of shared weights (101770 trainable weights, bf16: 2",
                        "the bytes of a bf16 update");
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--quiet", "--measure");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "each update writes 407080 bytes of shared weights (101770 trainable weights, f32: 4",
                        "the bytes of a float update");
}

// A bf16 run's checkpoint records BF16 tensors; --eval-only reads it (to the accuracy the run
// printed: the saved weights are exactly the ones it evaluated); --resume continues in bf16
// unless --weights says otherwise, and a float checkpoint resumes into bf16 the same way.
Test(e2e_bf16, checkpoints_keep_the_dtype_and_load_into_either) {
    char *data = e2e_synth(44);
    char *bf16 = e2e_path("bf16.safetensors"), *f32 = e2e_path("f32.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--weights", "bf16", "--quiet", "--save",
            bf16);
    e2e_assert_exit(&r, 0);
    double trained = e2e_parse_done(r.out).accuracy;
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load_meta(bf16, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(meta.bf16, 1, "the checkpoint's tensors are BF16");
    e2e_assert_contains(e2e_read_text(bf16) + 8, "\"dtype\":\"BF16\"", "the header");
    e2e_ckpt_info info = e2e_eval_checkpoint(data, e2e.mlp, bf16);
    cr_expect_eq(info.accuracy, trained, "--eval-only %.2f%%, the run %.2f%%", info.accuracy, trained);

    // Resumed without --weights: bf16 again, and saved so.
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "2", "--resume", bf16, "--save",
            bf16);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "(bf16 weights)", "the resumed run's header");
    cr_assert_eq(hw_ckpt_load_meta(bf16, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(meta.bf16, 1);
    cr_expect_eq(meta.epoch, 2);

    // Into a float run: F32 tensors from then on.
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "3", "--resume", bf16,
            "--weights", "f32", "--save", f32);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.err, "holds bf16 weights; this run uses --weights f32", "stderr");
    cr_assert_eq(hw_ckpt_load_meta(f32, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(meta.bf16, 0, "the float run saved F32 tensors");
    cr_expect_eq(meta.epoch, 3);
    e2e_assert_contains(e2e_read_text(f32) + 8, "\"dtype\":\"F32\"", "the header");
    e2e_eval_checkpoint(data, e2e.mlp, f32);

    // And back: a float checkpoint into a bf16 run.
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "1", "--epochs", "4", "--resume", f32,
            "--weights", "bf16", "--save", bf16, "--overwrite");
    e2e_assert_exit(&r, 0);
    cr_assert_eq(hw_ckpt_load_meta(bf16, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(meta.bf16, 1);
    cr_expect_eq(meta.epoch, 4);
}

static void expect_refused(const char *env, const char *const *args, int code, const char *why) {
    e2e_run_result r;
    e2e_run_argv(&r, env, args);
    e2e_assert_exit(&r, code);
    e2e_assert_contains(r.err, "--weights", "stderr");
    e2e_assert_contains(r.err, why, "stderr");
    e2e_assert_left_nothing(&r);
}

Test(e2e_bf16, what_bf16_cannot_run_with_is_refused) {
    char *data = e2e_synth(45);
    expect_refused(NULL, (const char *const[]){"--data", data, "--weights", "fp16", NULL}, 2, "expects f32 or bf16");
    expect_refused(NULL, (const char *const[]){"--data", data, "--weights", "bf16", "--mode", "dataparallel", NULL}, 2,
                   "--mode");
    expect_refused(NULL, (const char *const[]){"--data", data, "--weights", "bf16", "--device", "cuda", NULL}, 2,
                   "--device cuda");
    expect_refused(NULL, (const char *const[]){"--data", data, "--weights", "bf16", "--gpus", "0", NULL}, 2, "--gpus");
    expect_refused(NULL, (const char *const[]){"--data", data, "--weights", "bf16", "--simulate", "2", NULL}, 2,
                   "--simulate");
    expect_refused(NULL, (const char *const[]){"--data", data, "--weights", "bf16", "--update", "atomic", NULL}, 2,
                   "--update atomic");
    expect_refused("OMPI_COMM_WORLD_SIZE=2", (const char *const[]){"--data", data, "--weights", "bf16", NULL}, 2,
                   "mpirun");
    char *sparse = e2e_path("sp");
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--kind", "sparse", "--dir", sparse, "--train", "200", "--test", "50", "--features",
            "30", "--nnz", "5");
    e2e_assert_exit(&r, 0);
    char model[1200];
    snprintf(model, sizeof model, "%s/models/logreg.model", e2e.root);
    expect_refused(NULL, (const char *const[]){"--model", model, "--data", sparse, "--weights", "bf16", NULL}, 1,
                   "sparse");
    // --update locked with bf16 runs: the lock orders the writes whatever their width.
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--weights", "bf16", "--update", "locked",
            "--quiet", "--measure");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "): 0% in total", "locked bf16 updates lose nothing");
}
