// End-to-end tests of the ./hogwild command line itself: every bad flag is a usage error (exit
// 2) naming the flag, with the usage; bad inputs (data folder, model file, checkpoint) fail with
// exit 1 and a message naming the file at fault; the small commands (--list-sharing-strategies,
// --summary, --clean-shm) do what they say.
#include "e2e_util.h"
#include "hw/err.h"
#include "hw/nn.h"

#include <stb_image_write.h>

#include <sched.h>
#include <sys/mount.h>

TestSuite(e2e_flags, .init = e2e_setup, .fini = e2e_teardown, .timeout = 60);

// ---- 7. usage errors: exit 2, the flag named, the usage shown, nothing run ----

typedef struct {
    const char *args[8];   // after --data <missing folder>, NULL-terminated
    const char *names[2];  // what the message must name
} usage_case;

static const usage_case usage_cases[] = {
    {{"--workers", "0"}, {"--workers", "'0'"}},
    {{"--lr", "-1"}, {"--lr", "'-1'"}},
    {{"--batch-size", "0"}, {"--batch-size", "'0'"}},
    {{"--epochs", "two"}, {"--epochs", "'two'"}},
    {{"--no-such-flag"}, {"--no-such-flag", "unknown option"}},
    {{"--seed"}, {"--seed", "needs a value"}},  // the last flag, its value missing
    {{"--mode", "bogus"}, {"--mode", "bogus"}},
    {{"--device", "gpu"}, {"--device", "gpu"}},
    {{"--sharing-strategy", "bogus"}, {"--sharing-strategy", "file_descriptor, file_system"}},
    {{"--mode", "dataparallel", "--workers", "2"}, {"--workers", "--replicas"}},
    {{"--replicas", "3"}, {"--replicas", "--mode dataparallel"}},
    {{"--eval-only"}, {"--eval-only", "--resume"}},
    {{"stray-argument"}, {"stray-argument", "unexpected"}},
    {{"--normalize", "0.1"}, {"--normalize", "'0.1'"}},
    {{"--normalize", "0.1,0"}, {"--normalize", "STD > 0"}},
    {{"--normalize", "0.1,-1"}, {"--normalize", "'0.1,-1'"}},
    {{"--normalize", "nan,1"}, {"--normalize", "'nan,1'"}},
    {{"--normalize", "0.1,nan"}, {"--normalize", "finite"}},
    {{"--normalize", "inf,1"}, {"--normalize", "'inf,1'"}},
    {{"--normalize", "-inf,1"}, {"--normalize", "finite"}},
    {{"--normalize", "0,inf"}, {"--normalize", "'0,inf'"}},
    {{"--normalize", "1e39,1"}, {"--normalize", "'1e39,1'"}},
    {{"--gpus", "0,x"}, {"--gpus", "'0,x'"}},
    {{"--gpus", "0,1", "--workers", "1"}, {"--gpus", "--workers"}},
    {{"--gpus", "0", "--device", "cuda"}, {"--gpus", "--device"}},
    {{"--sync-rule", "sum", "--gpus", "0"}, {"--sync-rule", "mpirun"}},
    {{"--mode", "dataparallel", "--gpus", "0", "--replicas", "2"}, {"--replicas", "--gpus"}},
    {{"--momentum", "0", "--nesterov"}, {"--nesterov", "--momentum"}},
    {{"--eval-every", "0"}, {"--eval-every", "'0'"}},
    {{"--lr=0x10"}, {"--lr", "'0x10'"}},
    {{"--momentum", "1e10"}, {"--momentum", "from 0 to 1e9"}},
    {{"--nesterov=1"}, {"--nesterov", "takes no value"}},
    {{"--epochs", "5", "--epochs=1"}, {"--epochs", "given twice ('5', then '1')"}},
    // --help and --version do only that, but a bad flag beside them is refused, not passed over.
    {{"--version", "--bogus"}, {"--bogus", "unknown option"}},
    {{"--help", "--bogus"}, {"--bogus", "unknown option"}},
    {{"--", "--lr", "1"}, {"'--'", "ends the options"}},
};

// The data folder does not exist: a usage error must be found before anything is loaded (exit
// 2, not the exit 1 of a missing folder).
Test(e2e_flags, every_bad_flag_is_a_usage_error_naming_it) {
    char *missing = e2e_path("no-data-here");
    for (size_t c = 0; c < sizeof usage_cases / sizeof usage_cases[0]; c++) {
        const usage_case *uc = &usage_cases[c];
        const char *args[12] = {"--data", missing};
        int n = 2;
        for (int i = 0; uc->args[i]; i++) args[n++] = uc->args[i];
        args[n] = NULL;
        e2e_run_result r;
        e2e_run_argv(&r, NULL, args);
        cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2, "%s %s: expected exit 2, status %#x\n%s",
                  uc->args[0], uc->args[1] ? uc->args[1] : "", r.status, r.err);
        for (int k = 0; k < 2; k++) {
            cr_expect_not_null(strstr(r.err, uc->names[k]), "%s: stderr does not name \"%s\":\n%s", uc->args[0],
                               uc->names[k], r.err);
        }
        cr_expect_not_null(strstr(r.err, "usage: hogwild"), "%s: no usage on stderr:\n%s", uc->args[0], r.err);
        cr_expect_str_empty(r.out, "%s: a usage error prints nothing on stdout", uc->args[0]);
    }
}

// download and synth answer --help as compare does: their usage and options, exit 0.
Test(e2e_flags, download_and_synth_have_help) {
    e2e_run_result r;
    e2e_run(&r, NULL, "download", "--help");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "usage: hogwild download NAME", "stdout");
    e2e_assert_contains(r.out, "--dir DIR", "stdout");
    e2e_run(&r, NULL, "synth", "-h");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "usage: hogwild synth", "stdout");
    e2e_assert_contains(r.out, "--train N        training examples (digits: default 60000; sparse: 20000)", "stdout");
    e2e_run(&r, NULL, "synth", "--help", "--bogus");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "unknown option '--bogus'", "stderr");
}

// ---- 7. bad inputs: exit 1 and a message naming the file ----

// Tiny data: these runs fail before (or just after) training starts.
static char *tiny_data(void) { return e2e_synth_n("data", 3, 200, 100); }

Test(e2e_flags, a_missing_data_folder_is_named_with_what_to_do) {
    char *missing = e2e_path("no-data-here");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", missing, "--quiet");
    e2e_assert_exit(&r, 1);
    // The flag to change and the commands that write a dataset there (src/cli/preflight_inputs.c).
    char want[1200];
    snprintf(want, sizeof want,
             "the data folder %s (--data) does not exist: get MNIST with `hogwild download mnist "
             "--dir %s`, or write synthetic digits with `hogwild synth --dir %s`",
             missing, missing, missing);
    e2e_assert_contains(r.err, want, "stderr");
    // The same for --eval-only, and for a folder that is there but holds no dataset.
    e2e_run(&r, NULL, "--data", missing, "--eval-only", "--resume", e2e_path("none.safetensors"), "--model", e2e.mlp);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, want, "stderr");
    char *empty = e2e_path("empty-data");
    cr_assert_eq(mkdir(empty, 0755), 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", empty, "--quiet");
    e2e_assert_exit(&r, 1);
    snprintf(want, sizeof want, "the data folder %s (--data) holds no dataset", empty);
    e2e_assert_contains(r.err, want, "stderr");
    snprintf(want, sizeof want, "`hogwild synth --dir %s`", empty);
    e2e_assert_contains(r.err, want, "stderr");
    // Half a dataset is the loader's to name, in its terms, the flag added.
    char *half = e2e_path("empty-data/train");
    cr_assert_eq(mkdir(half, 0755), 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", empty, "--quiet");
    e2e_assert_exit(&r, 1);
    snprintf(want, sizeof want, "data folder %s (--data) has train/ but no test/ image folder", empty);
    e2e_assert_contains(r.err, want, "stderr");
}

Test(e2e_flags, a_model_whose_input_does_not_fit_the_data) {
    char *data = tiny_data();
    char *model = e2e_path("cifar.model");
    const char *text = "input 3 32 32\nflatten\nlinear 10\nlog_softmax\n";
    write_bytes(model, text, strlen(text));
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", model, "--data", data, "--quiet");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, model, "stderr");
    e2e_assert_contains(r.err, "[3, 32, 32]", "stderr");
    e2e_assert_contains(r.err, "[1, 28, 28]", "stderr");
}

Test(e2e_flags, a_corrupt_model_file_is_named_with_its_line) {
    char *data = tiny_data();
    char *model = e2e_path("broken.model");
    const char *text = "input 1 28 28\nflatten\nlinear many\nlog_softmax\n";
    write_bytes(model, text, strlen(text));
    char where[1200];
    snprintf(where, sizeof where, "%s:3", model);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", model, "--data", data, "--quiet");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, where, "stderr");
    e2e_assert_contains(r.err, "many", "stderr");
    // --summary reads the same file the same way.
    e2e_run(&r, NULL, "--model", model, "--summary");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, where, "stderr");
}

Test(e2e_flags, resume_of_a_missing_or_truncated_checkpoint_fails) {
    char *data = tiny_data();
    char *missing = e2e_path("missing.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--quiet", "--resume", missing);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, missing, "stderr");

    // A good checkpoint cut in half.
    char *good = e2e_path("good.safetensors");
    char *cut = e2e_path("cut.safetensors");
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--quiet", "--save", good);
    e2e_assert_exit(&r, 0);
    size_t n;
    uint8_t *bytes = e2e_own(read_bytes(good, &n));
    write_bytes(cut, bytes, n / 2);
    const char *modes[2][4] = {{"--quiet", "--epochs", "2", NULL}, {"--eval-only", NULL}};
    for (int m = 0; m < 2; m++) {
        const char *args[12] = {"--model", e2e.mlp, "--data", data, "--resume", cut};
        int k = 6;
        for (int i = 0; modes[m][i]; i++) args[k++] = modes[m][i];
        args[k] = NULL;
        e2e_run_argv(&r, NULL, args);
        e2e_assert_exit(&r, 1);
        e2e_assert_contains(r.err, cut, "stderr");
        cr_expect_null(strstr(r.out, "done:"), "%s", r.out);
    }
    // The untouched one still loads.
    e2e_ckpt_info info = e2e_eval_checkpoint(data, e2e.mlp, good);
    cr_expect_eq(info.epoch, 1);
    cr_expect_eq(info.samples, 200);
}

// ---- 9. the small commands ----

Test(e2e_flags, list_sharing_strategies_marks_the_current_one) {
    e2e_run_result r;
    e2e_run(&r, NULL, "--list-sharing-strategies");
    e2e_assert_exit(&r, 0);
    cr_expect_str_eq(r.out, "file_descriptor (current)\nfile_system\n");
    e2e_run(&r, NULL, "--sharing-strategy", "file_system", "--list-sharing-strategies");
    e2e_assert_exit(&r, 0);
    cr_expect_str_eq(r.out, "file_descriptor\nfile_system (current)\n");
}

Test(e2e_flags, summary_counts_lenets_parameters) {
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.lenet, "--summary");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "total parameters: 21840\n", "stdout");
    e2e_assert_contains(r.out, "conv1", "stdout");
    e2e_assert_contains(r.out, "fc2", "stdout");
    e2e_run(&r, NULL, "--model", e2e.mlp, "--summary");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "total parameters: 101770\n", "stdout");
    e2e_run(&r, NULL, "--model", e2e.lenet, "--summary", "--freeze", "conv1");
    e2e_assert_exit(&r, 0);
}

// Issue 44: --summary printed the model and ignored a training flag beside it in silence.
Test(e2e_flags, summary_refuses_the_training_flags_it_would_ignore) {
    const char *const ignored[][2] = {{"--epochs", "5"}, {"--workers", "4"}, {"--save", "x.safetensors"}};
    for (size_t k = 0; k < sizeof ignored / sizeof ignored[0]; k++) {
        e2e_run_result r;
        e2e_run(&r, NULL, "--model", e2e.lenet, "--summary", ignored[k][0], ignored[k][1]);
        e2e_assert_exit(&r, 2);
        char said[96];
        snprintf(said, sizeof said, "%s does not apply to --summary", ignored[k][0]);
        e2e_assert_contains(r.err, said, "stderr");
        cr_expect_null(strstr(r.out, "total parameters"), "the summary was printed: %s", r.out);
    }
}

// --clean-shm scans /dev/shm, where other tests (test_shm's own clean-up test, other runs on the
// machine) put stale names of their own at any time: with a private /dev/shm (a mount namespace
// of this test process, inherited by the hogwild it runs) the count is exact and theirs are left
// alone. Skipped, not passed, where no mount namespace can be made.
static void use_a_private_dev_shm(void) {
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0) {
        cr_skip_test("cannot mount a private /dev/shm here: %s", strerror(errno));
    }
}

static int clean_shm_count(void) {
    e2e_run_result r;
    e2e_run(&r, NULL, "--clean-shm");
    e2e_assert_exit(&r, 0);
    int removed = -1;
    cr_assert_eq(sscanf(r.out, "removed %d stale shared-memory segment(s)\n", &removed), 1, "stdout: %s", r.out);
    return removed;
}

// Names left by a dead run are removed; one of a live process (this test) and names of another
// pattern are kept.
Test(e2e_flags, clean_shm_removes_names_of_dead_runs_only) {
    use_a_private_dev_shm();
    pid_t dead = fork();
    cr_assert_neq(dead, -1);
    if (dead == 0) _exit(0);
    cr_assert_eq(waitpid(dead, NULL, 0), dead);
    char stale[2][128], kept[2][128];
    snprintf(stale[0], 128, "/dev/shm/hogwild-%d-0", (int)dead);
    snprintf(stale[1], 128, "/dev/shm/hogwild-%d-7", (int)dead);
    snprintf(kept[0], 128, "/dev/shm/hogwild-%d-7", (int)getpid());
    snprintf(kept[1], 128, "/dev/shm/other-%d-7", (int)dead);
    for (int i = 0; i < 2; i++) {
        write_bytes(stale[i], "x", 1);
        write_bytes(kept[i], "x", 1);
    }
    cr_expect_eq(clean_shm_count(), 2);
    for (int i = 0; i < 2; i++) {
        cr_expect_not(e2e_file_exists(stale[i]), "%s is still there", stale[i]);
        cr_expect(e2e_file_exists(kept[i]), "%s was removed", kept[i]);
    }
    cr_expect_eq(clean_shm_count(), 0, "nothing stale is left");
}

// Issue 21: when one removal failed, --clean-shm printed only the error, not what it had removed
// and kept. A stale name that is a folder cannot be unlinked: the list still comes, with it.
Test(e2e_flags, clean_shm_reports_what_it_removed_when_a_removal_fails) {
    use_a_private_dev_shm();
    pid_t dead = fork();
    cr_assert_neq(dead, -1);
    if (dead == 0) _exit(0);
    cr_assert_eq(waitpid(dead, NULL, 0), dead);
    char stale[128], stuck[128];
    snprintf(stale, sizeof stale, "/dev/shm/hogwild-%d-0", (int)dead);
    snprintf(stuck, sizeof stuck, "/dev/shm/hogwild-%d-1", (int)dead);
    write_bytes(stale, "x", 1);
    cr_assert_eq(mkdir(stuck, 0700), 0);
    e2e_run_result r;
    e2e_run(&r, NULL, "--clean-shm");
    e2e_assert_exit(&r, 1);
    char removed[200], kept[200];
    snprintf(removed, sizeof removed, "removed %s: its process is gone", stale);
    snprintf(kept, sizeof kept, "could not remove %s", stuck);
    e2e_assert_contains(r.out, "removed 1 stale", "stdout");
    e2e_assert_contains(r.out, removed, "stdout");
    e2e_assert_contains(r.out, kept, "stdout");
    e2e_assert_contains(r.err, "could not remove 1", "stderr");
    rmdir(stuck);
}

// The small commands' own usage errors (exit 2) and failures (exit 1), each naming what is wrong.
Test(e2e_flags, download_and_synth_refuse_bad_arguments) {
    e2e_run_result r;
    e2e_run(&r, NULL, "download");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "download: which dataset name?", "stderr");
    e2e_run(&r, NULL, "download", "mnist", "--bogus");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "download: unknown option '--bogus'", "stderr");
    e2e_run(&r, NULL, "download", "mnist", "fashion-mnist");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "one dataset name at a time, got also 'fashion-mnist'", "stderr");
    // Issue 21: an unknown name exited 1, as a failed download does, not 2; `--dir` with no value
    // said "unknown option".
    const char *const unknown[] = {"cifar", "kmnist"};
    for (int i = 0; i < 2; i++) {
        char *dir = e2e_path(unknown[i]);
        e2e_run(&r, NULL, "download", unknown[i], "--dir", dir);
        e2e_assert_exit(&r, 2);
        e2e_assert_contains(r.err, "download: unknown dataset", "stderr");
        e2e_assert_contains(r.err, unknown[i], "stderr");
        cr_expect_not(e2e_file_exists(dir), "nothing made for an unknown dataset");
    }
    e2e_run(&r, NULL, "download", "mnist", "--dir");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "download: option '--dir' needs a folder", "stderr");
    e2e_run(&r, NULL, "synth", "--dir", "");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "synth: option '--dir' needs a value", "stderr");
    e2e_run(&r, NULL, "synth", "--bogus", "1");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "synth: unknown option '--bogus'", "stderr");
    // A folder given as a name is no option: it said "unknown option 'data/x'".
    e2e_run(&r, NULL, "synth", "data/x");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "synth: unexpected argument 'data/x' (it takes no name: --dir DIR)", "stderr");
    e2e_run(&r, NULL, "synth", "--dir", "/proc/version/data", "--train", "10", "--test", "10");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "hogwild synth: ", "stderr");
    e2e_assert_contains(r.err, "cannot create folder /proc/version", "stderr");
}

// --normalize takes MEAN,STD or auto (checked like every flag, before anything is loaded).
Test(e2e_flags, normalize_values_and_auto_are_accepted) {
    // A run of one step (--summary refuses the training flags, --normalize among them: issue 44).
    char *data = e2e_synth_n("data", 26, 64, 64);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--normalize", "0.5,0.25", "--quiet");
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--normalize", "auto", "--quiet");
    e2e_assert_exit(&r, 0);
}

// Issue 21: the mixed-size image error advised "give a size to resize them", and no option did.
// --resize HxW does, for training and for --eval-only; bad values are usage errors.
static void write_gray_png(const char *path, int w, int h, uint8_t value) {
    uint8_t *pixels = malloc((size_t)(w * h));
    memset(pixels, value, (size_t)(w * h));
    cr_assert(stbi_write_png(path, w, h, 1, pixels, w), "cannot write %s", path);
    free(pixels);
}

Test(e2e_flags, resize_trains_on_image_folders_of_mixed_sizes) {
    char *data = e2e_path("images");
    const char *const folders[] = {"train/a", "train/b", "test/a", "test/b"};
    for (int f = 0; f < 4; f++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", data, folders[f]);
        cr_assert_eq(hw_mkdir_p(path), HW_OK, "%s", hw_error());
        for (int i = 0; i < 6; i++) {
            char file[1300];
            snprintf(file, sizeof file, "%s/%d.png", path, i);
            write_gray_png(file, 10 + 3 * i, 12 + i, (uint8_t)(f % 2 ? 200 : 30));  // every size another
        }
    }
    char *model = e2e_path("small.model");
    write_bytes(model, "input 1 8 8\nflatten\nlinear 2\nlog_softmax\n", 40);
    char *ckpt = e2e_path("small.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", model, "--quiet");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "resize every image to one size (--resize)", "stderr");
    e2e_run(&r, NULL, "--data", data, "--model", model, "--quiet", "--resize", "8x8", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "done: 12 samples", "stdout");
    e2e_run(&r, NULL, "--data", data, "--eval-only", "--resume", ckpt, "--resize", "8x8");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "accuracy", "stdout");
    const char *const bad[] = {"8", "8x", "x8", "0x8", "8x8x8", "5000x8", " 8x8", "8x 8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e2e_run(&r, NULL, "--data", data, "--model", model, "--resize", bad[i]);
        e2e_assert_exit(&r, 2);
        e2e_assert_contains(r.err, "--resize expects HEIGHTxWIDTH", "stderr");
    }
}

// ---- found by the adversarial pass of issue 21 ----

// --normalize 0,1e-45 (a STD that rounds to a denormal) sent pixels to 1e45, then inf: the first
// batch "diverged" with a hint to lower --lr. A normalisation beyond +-1e6 is refused.
Test(e2e_flags, a_normalisation_that_overflows_is_refused) {
    const char *const bad[] = {"0,1e-45", "1e30,1", "0,1e-7"};
    for (int i = 0; i < 3; i++) {
        e2e_run_result r;
        e2e_run(&r, NULL, "--model", e2e.mlp, "--normalize", bad[i], "--data", e2e_path("none"));
        e2e_assert_exit(&r, 2);
        e2e_assert_contains(r.err, "beyond +-1e6", "stderr");
    }
}

// Every parameter frozen: the run "trained" an epoch, changed nothing and printed a result.
Test(e2e_flags, a_run_with_every_parameter_frozen_is_refused) {
    char *data = e2e_synth(35);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--freeze", "fc1,fc2", "--quiet");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "is frozen, by the parameters to freeze (--freeze) or by 'frozen'", "stderr");
    e2e_assert_contains(r.err, "nothing would train", "stderr");
    cr_expect_null(strstr(r.out, "done:"), "%s", r.out);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--freeze", "fc1", "--quiet");
    e2e_assert_exit(&r, 0);
}

// A model with no parameters at all is the same: nothing trains (on the simulated GPU it failed
// later, in cudaIpcGetMemHandle of a weight buffer of no bytes). Refused before the data is opened.
Test(e2e_flags, a_model_without_parameters_is_refused) {
    char *data = e2e_synth(37);
    char *model = e2e_path("noparams.model");
    const char *text = "input 1 28 28\nmaxpool2d 2\nflatten\nlog_softmax\n";
    write_bytes(model, text, strlen(text));
    const char *const modes[] = {"hogwild", "dataparallel"};
    for (int i = 0; i < 2; i++) {
        e2e_run_result r;
        e2e_run(&r, NULL, "--model", model, "--mode", modes[i], "--data", data, "--quiet");
        e2e_assert_exit(&r, 1);
        e2e_assert_contains(r.err, "noparams.model has no parameters", "stderr");
        e2e_assert_contains(r.err, "nothing would train", "stderr");
    }
}

// `hogwild synth --dir data/mnist` replaced the real dataset without a word, and an interrupted
// synth left truncated files under the real names. It refuses a folder that holds a dataset
// unless --overwrite, and writes each file whole (a temporary file renamed into place).
Test(e2e_flags, synth_does_not_replace_a_dataset_unless_told) {
    char *data = e2e_synth(36);
    char *images = e2e_path("data/train-images-idx3-ubyte.gz");
    size_t n;
    uint8_t *before = e2e_own(read_bytes(images, &n));
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--dir", data, "--train", "10", "--test", "10", "--seed", "9");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "already holds a dataset", "stderr");
    e2e_assert_contains(r.err, "--overwrite", "stderr");
    size_t n_after;
    uint8_t *after = e2e_own(read_bytes(images, &n_after));
    cr_expect(n == n_after && memcmp(before, after, n) == 0, "the dataset was changed");
    e2e_run(&r, NULL, "synth", "--dir", data, "--train", "10", "--test", "10", "--seed", "9", "--overwrite");
    e2e_assert_exit(&r, 0);
    hw_dataset train, test;
    cr_assert_eq(hw_dataset_open(data, &train, &test), HW_OK, "%s", hw_error());
    cr_expect_eq(train.n, 10);
    hw_dataset_free(&train);
    hw_dataset_free(&test);
    // Interrupted half way through a large set: no file under a real name is cut short, and no
    // temporary file is left.
    char *big = e2e_path("big");
    e2e_start_argv(&r, NULL, (const char *const[]){"synth", "--dir", big, "--train", "150000", "--test", "10", NULL});
    char partial[1200];
    snprintf(partial, sizeof partial, "%s/train-images-idx3-ubyte.gz.tmp.%d", big, (int)r.pid);
    double deadline = hw_now() + 60;
    while (!e2e_file_exists(partial) && hw_now() < deadline) e2e_sleep_ms(5);
    cr_assert(e2e_file_exists(partial), "synth wrote no temporary file within 60 s");
    kill(r.pid, SIGINT);
    e2e_wait(&r);
    cr_expect(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGINT, "status %#x", r.status);
    cr_expect(!e2e_file_exists(partial), "%s was left", partial);
    char final[1200];
    snprintf(final, sizeof final, "%s/train-images-idx3-ubyte.gz", big);
    cr_expect(!e2e_file_exists(final), "a cut file under the real name");
}

// A stack size limit of 64 KiB (ulimit -s 64): the parent, or a worker, died of SIGSEGV without a
// word. Below 512 KiB a run is refused, naming the limit.
Test(e2e_flags, a_stack_limit_too_small_is_refused_not_a_segfault) {
#ifdef __SANITIZE_ADDRESS__
    cr_skip_test("built with ASan, whose own frames need more than the stack under test");
#endif
    char *data = e2e_synth(37);
    e2e.child_stack_bytes = 64 << 10;
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.lenet, "--data", data, "--quiet");
    e2e.child_stack_bytes = 0;
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "the stack size limit (ulimit -s) is 64 KiB", "stderr");
    e2e_assert_left_nothing(&r);
}

// HOGWILD_CPU_PATH (the copy of the CPU kernels, issue 28): a value that names no copy (case and
// spaces count), or a copy this CPU cannot run, ends every command that computes, training,
// DataParallel and --eval-only alike, before any work, with status 1 and the copies it runs;
// a copy it runs is used and named in the run's header.
Test(e2e_flags, a_cpu_path_that_is_not_a_copy_or_cannot_run_is_refused_before_any_work) {
    char *data = tiny_data();
    char *ckpt = e2e_path("x.safetensors");
    e2e_run_result r;
    e2e_run(&r, "HOGWILD_CPU_PATH=baseline", "--model", e2e.mlp, "--data", data, "--workers", "1", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "CPU kernels baseline (forced by HOGWILD_CPU_PATH", "stdout");
    const char *bad[] = {"HOGWILD_CPU_PATH=nonesuch", "HOGWILD_CPU_PATH=AVX2", "HOGWILD_CPU_PATH= avx2",
                         "HOGWILD_CPU_PATH=avx512"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *name = bad[i] + strlen("HOGWILD_CPU_PATH=");
        if (strcmp(name, "avx512") == 0 && hw_nn_kernels_runnable(name)) continue;  // this CPU runs it
        const char *runs[3][12] = {
            {"--model", e2e.mlp, "--data", data, "--workers", "1", "--quiet", NULL},
            {"--mode", "dataparallel", "--replicas", "3", "--model", e2e.mlp, "--data", data, "--quiet", NULL},
            {"--resume", ckpt, "--eval-only", "--data", data, NULL},
        };
        for (int k = 0; k < 3; k++) {
            e2e_run_argv(&r, bad[i], runs[k]);
            e2e_assert_exit(&r, 1);
            char want[96];
            snprintf(want, sizeof want, "hogwild: %s: ", bad[i]);
            e2e_assert_contains(r.err, want, "stderr");
            e2e_assert_contains(r.err, strcmp(name, "avx512") == 0 ? "this CPU cannot run it" : "no such CPU path",
                                "stderr");
            e2e_assert_contains(r.err, "baseline", "stderr");  // what this CPU runs, the baseline always
            cr_expect(!strstr(r.out, "epoch") && !strstr(r.out, "test loss"), "%s, run %d: worked anyway:\n%s", bad[i],
                      k, r.out);
        }
    }
}
