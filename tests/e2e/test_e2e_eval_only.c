// End-to-end tests of `--eval-only` (issue 21): a checkpoint whose weights have blown up is no
// result, flags that cannot apply are refused rather than ignored, a checkpoint without its model
// text needs --model, and messages about the checkpoint's model say that it is the checkpoint's.
#include "e2e_util.h"
#include "hw/ckpt.h"
#include "hw/err.h"

TestSuite(e2e_eval_only, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

// A checkpoint of the MLP trained one epoch on `data`.
static char *trained_checkpoint(const char *data, const char *name) {
    char *ckpt = e2e_path(name);
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    return ckpt;
}

// Issue 21, case 5: weights of 1e30, finite, give NaN logits. Evaluated, that printed "test loss
// -nan, accuracy 9.80%" and exit 0, while training from the same file is refused as diverged.
Test(e2e_eval_only, a_checkpoint_whose_weights_blew_up_is_no_result) {
    char *data = e2e_synth(80);
    char *ckpt = trained_checkpoint(data, "huge.safetensors");
    size_t n, data_bytes;
    uint8_t *bytes = e2e_own(read_bytes(ckpt, &n));
    uint8_t *weights = (uint8_t *)e2e_safetensors_data(bytes, n, &data_bytes);
    const float huge = 1e30f;
    for (size_t i = 0; i + 4 <= data_bytes; i += 4) memcpy(weights + i, &huge, 4);
    write_bytes(ckpt, bytes, n);
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--eval-only", "--resume", ckpt);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, ckpt, "stderr");
    e2e_assert_contains(r.err, "blown up", "stderr");
    e2e_assert_contains(r.err, "1e+30", "stderr (the weights' magnitude)");
    cr_expect_null(strstr(r.out, "accuracy"), "a result was printed: %s", r.out);
}

// Issue 21, small: --device cuda, --lr, --workers, --mode (and the like) were silently ignored.
Test(e2e_eval_only, flags_that_do_not_apply_are_refused) {
    char *data = e2e_synth(81);
    char *ckpt = trained_checkpoint(data, "m.safetensors");
    const char *const refused[][3] = {
        {"--device", "cuda"}, {"--lr", "0.5"},     {"--workers", "3"},    {"--mode", "hogwild"},
        {"--epochs", "2"},    {"--seed", "7"},     {"--batch-size", "8"}, {"--momentum", "0"},
        {"--replicas", "2"},  {"--freeze", "fc1"}, {"--prefetch"},        {"--sharing-strategy", "file_system"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *args[12] = {"--data", data, "--eval-only", "--resume", ckpt, refused[i][0], refused[i][1], NULL};
        e2e_run_result r;
        e2e_run_argv(&r, NULL, args);
        e2e_assert_exit(&r, 2);
        e2e_assert_contains(r.err, refused[i][0], "stderr");
        e2e_assert_contains(r.err, "--eval-only", "stderr");
    }
    // What does apply is taken: the data, the model, the test batch, normalisation, --device cpu.
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--eval-only", "--resume", ckpt, "--model", e2e.mlp, "--test-batch-size", "7",
            "--normalize", "auto", "--device", "cpu", "--quiet");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "accuracy", "stdout");
}

// A checkpoint written without the model text (as safetensors.torch.save_file writes them) was
// evaluated as models/lenet.model, silently. Now it needs --model.
Test(e2e_eval_only, a_checkpoint_without_model_text_needs_model) {
    char *data = e2e_synth(82);
    hw_model model;
    cr_assert_eq(hw_model_load(&model, e2e.mlp), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_alloc_weights(&model), HW_OK);
    hw_model_init_weights(&model, 3);
    free(model.text);
    model.text = NULL;
    char *ckpt = e2e_path("foreign.safetensors");
    cr_assert_eq(hw_ckpt_save(ckpt, &model, model.weights, NULL), HW_OK, "%s", hw_error());
    hw_model_free(&model);
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--eval-only", "--resume", ckpt);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "holds no model text", "stderr");
    e2e_assert_contains(r.err, "--model", "stderr");
    cr_expect_null(strstr(r.out, "accuracy"), "%s", r.out);
    e2e_run(&r, NULL, "--data", data, "--eval-only", "--resume", ckpt, "--model", e2e.mlp);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "accuracy", "stdout");
}

// The checkpoint's model against data of another shape: the message says the model is the one
// stored in the checkpoint, not a model file of the checkpoint's name.
Test(e2e_eval_only, messages_name_the_checkpoints_model_as_such) {
    char *data = e2e_synth(83);
    char *ckpt = trained_checkpoint(data, "m.safetensors");
    char *small = e2e_path("small");
    cr_assert_eq(mkdir(small, 0755), 0);
    hw_dataset ds;
    make_pattern_dataset(&ds, 50, 14, 14, 10);
    char images[1200], labels[1200];
    const char *const sets[2][2] = {{"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
                                    {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}};
    for (int s = 0; s < 2; s++) {
        snprintf(images, sizeof images, "%s/%s", small, sets[s][0]);
        snprintf(labels, sizeof labels, "%s/%s", small, sets[s][1]);
        cr_assert_eq(hw_idx_save(&ds, images, labels), HW_OK, "%s", hw_error());
    }
    hw_dataset_free(&ds);
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", small, "--eval-only", "--resume", ckpt);
    e2e_assert_exit(&r, 1);
    char expected[1200];
    snprintf(expected, sizeof expected, "the model stored in the checkpoint %s expects input", ckpt);
    e2e_assert_contains(r.err, expected, "stderr");
}

// The CPU seconds (user and system) process `pid` has used, from /proc/PID/stat; -1 once it is gone.
static double cpu_seconds_of(pid_t pid) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *p = strrchr(text, ')');  // the name may hold blanks; the fields after it do not
    unsigned long long utime = 0, stime = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2) return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

// Issue 44, "every signal at every phase of a run": a Ctrl-C while --eval-only evaluated ended the
// process by the signal's default action, without a word. It stops between two batches, says so
// and exits 130, printing no result.
Test(e2e_eval_only, a_ctrl_c_while_evaluating_stops_it_and_says_so) {
#ifdef __SANITIZE_ADDRESS__
    cr_skip_test("built with ASan (make asan): the check waits on the run's CPU time, which ASan's start-up changes");
#endif
    char *data = e2e_synth_n("data", 44, 64, 20000);
    // A wide network and one image a batch: the evaluation takes seconds on any CPU.
    char *model = e2e_path("wide.model");
    const char wide[] = "input 1 28 28\nflatten\nlinear 2048\nrelu\nlinear 10\nlog_softmax\n";
    write_bytes(model, wide, sizeof wide - 1);
    char *ckpt = e2e_path("wide.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", model, "--quiet", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_start_argv(
        &r, NULL,
        (const char *const[]){"--data", data, "--eval-only", "--resume", ckpt, "--test-batch-size", "1", NULL});
    // Past the set-up (loading takes a few hundredths of a CPU second): in the evaluation.
    double waited = 0;
    while (cpu_seconds_of(r.pid) >= 0 && cpu_seconds_of(r.pid) < 0.5 && waited < 60) {
        e2e_sleep_ms(10);
        waited += 0.01;
    }
    cr_assert_geq(cpu_seconds_of(r.pid), 0.5, "the evaluation ended (or never began) before it could be interrupted");
    kill(r.pid, SIGINT);
    e2e_wait(&r);
    e2e_assert_exit(&r, 130);
    e2e_assert_contains(r.err, "interrupted by SIGINT", "stderr");
    e2e_assert_contains(r.err, "no result", "stderr");
    cr_expect_null(strstr(r.out, "accuracy"), "a result was printed: %s", r.out);
}
