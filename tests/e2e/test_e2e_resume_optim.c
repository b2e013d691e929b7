// End-to-end tests of the optimizer state in checkpoints (src/train/resume_optim.c) through
// ./hogwild: with the default momentum (0.5) and LeNet's two dropout layers, a run of 2 epochs and
// a run of 1 epoch resumed for the second save the same checkpoint, byte for byte, with one
// Hogwild worker and with DataParallel's replicas; a checkpoint of another trainer, worker count
// or momentum, or one that keeps no state (an older hogwild's), resumes its weights and says in
// one line why the optimizer state restarts; --eval-only reads the weights of a checkpoint that
// keeps the state.
//
// Each test writes small synthetic digits (`hogwild synth`, 3000 train / 1000 test) into its own
// temporary folder; runs are a fraction of a second each.
#include "e2e_util.h"
#include "hw/ckpt.h"

#include <math.h>
#include <stdlib.h>

TestSuite(e2e_resume_optim, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

static void expect_same_file(const char *a, const char *b, const char *why) {
    size_t na, nb;
    uint8_t *ba = e2e_own(read_bytes(a, &na)), *bb = e2e_own(read_bytes(b, &nb));
    cr_assert_eq(na, nb, "%s: %zu and %zu bytes", why, na, nb);
    cr_expect_eq(memcmp(ba, bb, na), 0, "%s: the checkpoints differ", why);
}

// The metadata value `key` of the checkpoint at path ("" when absent).
static char *text_of(const char *path, const char *key) {
    char *value = NULL;
    cr_assert_eq(hw_ckpt_load_text(path, key, &value), HW_OK, "%s", hw_error());
    return e2e_own(value ? value : strdup(""));
}

// Trains `epochs` of LeNet with `mode` ("--workers", "1" or "--mode", "dataparallel", ...) into
// `save`, from `resume` when it is not NULL; the run's result in *r.
static void train(e2e_run_result *r, const char *data, const char *const *mode, const char *epochs, const char *resume,
                  const char *save) {
    const char *argv[32] = {"--model", e2e.lenet, "--data", data, "--epochs",
                            epochs,    "--quiet", "--save", save, "--overwrite"};
    int n = 10;
    for (int i = 0; mode[i]; i++) argv[n++] = mode[i];
    if (resume) argv[n++] = "--resume", argv[n++] = resume;
    argv[n] = NULL;
    e2e_run_argv(r, NULL, argv);
}

// 2 epochs unbroken against 1 epoch and --resume for the second: the same file, byte for byte.
static void expect_resume_bit_for_bit(const char *const *mode, const char *trainer, const char *velocity) {
    char *data = e2e_synth(91);
    char *whole = e2e_path("whole.safetensors"), *cut = e2e_path("cut.safetensors");
    char *resumed = e2e_path("resumed.safetensors");
    e2e_run_result r;
    train(&r, data, mode, "2", NULL, whole);
    e2e_assert_exit(&r, 0);
    train(&r, data, mode, "1", NULL, cut);
    e2e_assert_exit(&r, 0);
    cr_expect_str_eq(text_of(cut, "optim_trainer"), trainer);
    cr_expect_str_eq(text_of(cut, "optim_momentum"), "0.5");
    cr_expect_neq(strlen(text_of(cut, "dropout_rng")), 0, "no dropout generators saved");
    // The velocities are tensors of their own, which the weights' reader skips.
    size_t n;
    uint8_t *file = e2e_own(read_bytes(cut, &n));
    char *header = e2e_own(strndup((const char *)file + 8, n - 8));
    e2e_assert_contains(header, velocity, "the checkpoint's header");
    train(&r, data, mode, "2", cut, resumed);
    e2e_assert_exit(&r, 0);
    cr_expect_null(strstr(r.err, "restarts"), "the state was restored, not restarted:\n%s", r.err);
    expect_same_file(whole, resumed, trainer);
}

Test(e2e_resume_optim, one_hogwild_worker_resumes_bit_for_bit) {
    const char *mode[] = {"--workers", "1", NULL};
    expect_resume_bit_for_bit(mode, "hogwild", "\"optim.velocity.worker0.conv1.weight\"");
}

Test(e2e_resume_optim, dataparallel_resumes_bit_for_bit) {
    const char *mode[] = {"--mode", "dataparallel", "--replicas", "2", NULL};
    expect_resume_bit_for_bit(mode, "dataparallel", "\"optim.velocity.fc2.bias\"");
}

// Another worker count, momentum or trainer: the weights resume (the run goes on from epoch 1),
// and one line of stderr says why the optimizer state restarts, naming the flag.
Test(e2e_resume_optim, a_mismatched_state_restarts_with_a_one_line_reason) {
    char *data = e2e_synth(92);
    char *cut = e2e_path("cut.safetensors"), *out = e2e_path("out.safetensors");
    const char *one[] = {"--workers", "1", NULL};
    e2e_run_result r;
    train(&r, data, one, "1", NULL, cut);
    e2e_assert_exit(&r, 0);
    const char *two[] = {"--workers", "2", NULL};
    const char *momentum[] = {"--workers", "1", "--momentum", "0.9", NULL};
    const char *dp[] = {"--mode", "dataparallel", NULL};
    const char *const *modes[] = {two, momentum, dp};
    const char *flags[] = {"(--workers)", "(--momentum)", "(--mode)"};
    for (int i = 0; i < 3; i++) {
        train(&r, data, modes[i], "2", cut, out);
        e2e_assert_exit(&r, 0);
        e2e_assert_contains(r.err, "hogwild: the optimizer state restarts", "stderr");
        e2e_assert_contains(r.err, flags[i], "stderr");
        const char *newline = strchr(r.err, '\n');
        cr_expect(newline && newline[1] == '\0', "one line:\n%s", r.err);
        e2e_assert_contains(r.out, "epoch 2/2", "stdout");
        cr_expect_null(strstr(r.out, "epoch 1/2"), "the weights resumed after epoch 1:\n%s", r.out);
    }
}

// A checkpoint without the state (as hogwild wrote them before it kept one: the weights and the
// metadata only) still resumes, saying that the state restarts; --eval-only reads the weights of
// one that keeps the state, and so does the library's reader.
Test(e2e_resume_optim, an_old_checkpoint_resumes_and_eval_skips_the_state) {
    char *data = e2e_synth(93);
    char *cut = e2e_path("cut.safetensors"), *old = e2e_path("old.safetensors"), *out = e2e_path("out.safetensors");
    const char *one[] = {"--workers", "1", NULL};
    e2e_run_result r;
    train(&r, data, one, "1", NULL, cut);
    e2e_assert_exit(&r, 0);
    hw_model model;
    cr_assert_eq(hw_model_load(&model, e2e.lenet), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_alloc_weights(&model), HW_OK, "%s", hw_error());
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load(cut, &model, model.weights, &meta), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_ckpt_save(old, &model, model.weights, &meta), HW_OK, "%s", hw_error());
    hw_model_free(&model);
    cr_assert_str_empty(text_of(old, "optim_trainer"));
    train(&r, data, one, "2", old, out);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.err, "the optimizer state restarts", "stderr");
    e2e_assert_contains(r.err, "keeps none", "stderr");
    e2e_assert_contains(r.out, "epoch 2/2", "stdout");
    e2e_run(&r, NULL, "--data", data, "--eval-only", "--resume", cut);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "accuracy", "stdout");
}

// The simulator keeps no state in its checkpoints: a resumed simulation says that it restarts.
Test(e2e_resume_optim, a_resumed_simulation_says_its_state_restarts) {
    char *data = e2e_synth(94);
    char *cut = e2e_path("cut.safetensors"), *out = e2e_path("out.safetensors");
    const char *sim[] = {"--simulate", "2", NULL};
    e2e_run_result r;
    train(&r, data, sim, "1", NULL, cut);
    e2e_assert_exit(&r, 0);
    cr_expect_str_empty(text_of(cut, "optim_trainer"));
    train(&r, data, sim, "2", cut, out);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.err, "the optimizer state restarts", "stderr");
    e2e_assert_contains(r.err, "simulated runs keep none", "stderr");
}

// `bytes` (n of them, a checkpoint) with the first `from` replaced by `to`, of the same length.
static void replace_once(uint8_t *bytes, size_t n, const char *from, const char *to) {
    size_t len = strlen(from);
    cr_assert_eq(strlen(to), len);
    for (size_t i = 0; i + len <= n; i++) {
        if (memcmp(bytes + i, from, len) == 0) {
            memcpy(bytes + i, to, len);
            return;
        }
    }
    cr_assert_fail("no '%s' in the checkpoint", from);
}

// The first float of tensor `name` of the checkpoint `bytes`, set to `value`.
static void set_first_float(uint8_t *bytes, size_t n, const char *name, float value) {
    uint64_t header;
    memcpy(&header, bytes, 8);
    char key[128];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *at = memmem(bytes + 8, header, key, strlen(key));
    cr_assert_not_null(at, "no tensor %s", name);
    at = strstr(at, "\"data_offsets\":[");
    long long begin;
    cr_assert(at && sscanf(at, "\"data_offsets\":[%lld", &begin) == 1);
    cr_assert_leq(8 + header + (uint64_t)begin + 4, n);
    memcpy(bytes + 8 + header + begin, &value, 4);
}

// A hand-edited state is refused before any training, naming the file and what is wrong, and the
// file is left as it was: a velocity that is not finite (it would make the first step's weights
// so), a worker count or a momentum that is not one.
Test(e2e_resume_optim, a_broken_state_is_refused_naming_what) {
    char *data = e2e_synth(92), *cut = e2e_path("cut.safetensors");
    static const char *const one_worker[] = {"--workers", "1", NULL};
    e2e_run_result r;
    train(&r, data, one_worker, "1", NULL, cut);
    e2e_assert_exit(&r, 0);
    size_t n;
    uint8_t *good = e2e_own(read_bytes(cut, &n));
    const struct {
        const char *from, *to, *tensor, *said;
    } cases[] = {
        {NULL, NULL, "optim.velocity.worker0.conv1.weight", "hold values that are not finite (NaN or inf)"},
        {"\"optim_momentum\":\"0.5\"", "\"optim_momentum\":\"nan\"", NULL, "'optim_momentum' is 'nan'"},
        {"\"optim_momentum\":\"0.5\"", "\"optim_momentum\":\"5.x\"", NULL, "'optim_momentum' is '5.x'"},
        {"\"optim_workers\":\"1\"", "\"optim_workers\":\"0\"", NULL, "'optim_workers' is '0'"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *broken = e2e_path("broken.safetensors");
        uint8_t *bytes = e2e_own(malloc(n));
        memcpy(bytes, good, n);
        if (cases[c].tensor) set_first_float(bytes, n, cases[c].tensor, INFINITY);
        if (cases[c].from) replace_once(bytes, n, cases[c].from, cases[c].to);
        write_bytes(broken, bytes, n);
        train(&r, data, one_worker, "2", broken, broken);
        e2e_assert_exit(&r, 1);
        e2e_assert_contains(r.err, cases[c].said, "stderr");
        e2e_assert_contains(r.err, broken, "stderr");
        size_t after_n;
        uint8_t *after = e2e_own(read_bytes(broken, &after_n));
        cr_expect(after_n == n && memcmp(after, bytes, n) == 0, "case %zu: the refused checkpoint was changed", c);
    }
}
