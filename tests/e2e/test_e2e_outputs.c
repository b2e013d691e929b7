// End-to-end tests of the outputs of a run (issue 21, cases 3 and 12): every --save path that
// cannot be saved fails before training, not at the first save an epoch later; and a --metrics
// file is replaced only once training has started, so that a run that fails in its set-up (no
// GPU) leaves the previous file as it was.
#include "e2e_util.h"

TestSuite(e2e_outputs, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

// A run that fails must fail before it trains: no epoch line, exit 1 (or 2 for bad usage).
static void expect_refused_before_training(const e2e_run_result *r, int code, const char *needle) {
    e2e_assert_exit(r, code);
    e2e_assert_contains(r->err, needle, "stderr");
    cr_expect_null(strstr(r->out, "epoch 1/"), "it trained before failing: %s", r->out);
}

Test(e2e_outputs, a_save_path_that_cannot_be_saved_fails_before_training) {
    char *data = e2e_synth(84);
    e2e_run_result r;
    // An empty name.
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--save", "");
    expect_refused_before_training(&r, 2, "--save");
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--metrics", "");
    expect_refused_before_training(&r, 2, "--metrics");
    // A name of 250 characters: it fits, but its temporary file, NAME.tmp.<pid>, does not.
    char name[251];
    memset(name, 'c', 250);
    name[250] = '\0';
    char *long_path = e2e_path(name);
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--save", long_path);
    expect_refused_before_training(&r, 1, "too long");
    cr_expect(!e2e_file_exists(long_path));
}

// As an ordinary user, a file of another user in a sticky folder (as /tmp is) can be opened but
// not replaced: --overwrite passed the check, and the rename of the first save failed.
Test(e2e_outputs, a_file_of_another_user_in_a_sticky_folder_fails_before_training) {
    if (geteuid() != 0) cr_skip_test("needs root, to make a file of another user and run as an ordinary one");
    char *data = e2e_synth(85);
    cr_assert_eq(chmod(e2e.dir, 0755), 0);  // the ordinary user reaches the data and the folder
    char *sticky = e2e_path("sticky");
    cr_assert_eq(mkdir(sticky, 0777), 0);
    cr_assert_eq(chmod(sticky, 01777), 0);
    char *theirs = e2e_path("sticky/theirs.safetensors");
    write_bytes(theirs, "someone else's file", 19);
    e2e.child_uid = 65534;  // nobody
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--save", theirs, "--overwrite");
    e2e.child_uid = 0;
    expect_refused_before_training(&r, 1, "sticky");
    size_t n;
    char *kept = e2e_own(read_bytes(theirs, &n));
    cr_expect(n == 19 && memcmp(kept, "someone else's file", 19) == 0, "the file was changed");
    // Their own file in the same folder is fine.
    char *mine = e2e_path("sticky/mine.safetensors");
    e2e.child_uid = 65534;
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--save", mine);
    e2e.child_uid = 0;
    e2e_assert_exit(&r, 0);
    cr_expect_eq(e2e_eval_checkpoint(data, e2e.mlp, mine).epoch, 1);
}

// Under a low `ulimit -n` a run either trains and saves, or fails before it trains: the workers'
// pipes and pidfds took the last descriptors and the first save, an epoch in, failed (at 8 here).
Test(e2e_outputs, a_low_open_file_limit_fails_before_training_or_saves) {
    char *data = e2e_synth(86);
    int saved = 0, refused = 0;
    for (rlim_t limit = 5; limit <= 12; limit++) {
        char name[64];
        snprintf(name, sizeof name, "n%d.safetensors", (int)limit);
        char *ckpt = e2e_path(name);
        e2e.child_open_files = limit;
        e2e_run_result r;
        e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--epochs", "2", "--save", ckpt);
        e2e.child_open_files = 0;
        char how[128];
        cr_assert(WIFEXITED(r.status), "ulimit -n %d: %s", (int)limit, e2e_describe_status(r.status, how, sizeof how));
        if (WEXITSTATUS(r.status) == 0) {
            saved++;
            cr_expect_eq(e2e_eval_checkpoint(data, e2e.mlp, ckpt).epoch, 2, "ulimit -n %d", (int)limit);
        } else {
            refused++;
            cr_expect_eq(WEXITSTATUS(r.status), 1, "ulimit -n %d", (int)limit);
            cr_expect_null(strstr(r.out, "epoch 1/"), "ulimit -n %d: trained, then failed:\n%s%s", (int)limit, r.out,
                           r.err);
            cr_expect(!e2e_file_exists(ckpt));
        }
    }
    cr_expect_gt(saved, 0, "no limit let the run save: the test shows nothing");
    cr_expect_gt(refused, 0, "no limit was too low: the test shows nothing");
}

// Issue 21, case 12: an existing M.csv, then a GPU run without a GPU: the CSV was replaced by a
// header and one CPU row labelled cuda:0. CUDA_VISIBLE_DEVICES= hides any GPU there is.
Test(e2e_outputs, a_gpu_run_that_cannot_start_keeps_the_metrics_file) {
    char *data = e2e_synth(87);
    char *metrics = e2e_path("M.csv");
    static const char earlier[] = "mode,workers,device,wall_seconds\nan earlier run's rows\n";
    write_bytes(metrics, earlier, sizeof earlier - 1);
    const char *const runs[][6] = {{"--device", "cuda", NULL},
                                   {"--device", "cuda:7", NULL},
                                   {"--mode", "dataparallel", "--gpus", "0", NULL},
                                   {"--mode", "dataparallel", "--device", "cuda", NULL}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const char *args[16] = {"--data", data, "--model", e2e.mlp, "--quiet", "--metrics", metrics};
        int k = 7;
        for (int j = 0; runs[i][j]; j++) args[k++] = runs[i][j];
        args[k] = NULL;
        e2e_run_result r;
        e2e_run_argv(&r, "CUDA_VISIBLE_DEVICES=", args);
        e2e_assert_exit(&r, 1);
        size_t n;
        char *now = e2e_own(read_bytes(metrics, &n));
        cr_expect(n == sizeof earlier - 1 && memcmp(now, earlier, n) == 0, "run %zu (%s %s) changed %s", i, runs[i][0],
                  runs[i][1], metrics);
    }
    // Nor is a file left where there was none.
    char *fresh = e2e_path("fresh.csv");
    e2e_run_result r;
    e2e_run(&r, "CUDA_VISIBLE_DEVICES=", "--data", data, "--model", e2e.mlp, "--quiet", "--metrics", fresh, "--device",
            "cuda");
    e2e_assert_exit(&r, 1);
    cr_expect(!e2e_file_exists(fresh), "a run that never trained left %s", fresh);
    // A run that trains replaces it as before.
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--metrics", metrics);
    e2e_assert_exit(&r, 0);
    e2e_metrics_row rows[4];
    cr_expect_eq(e2e_read_metrics(metrics, rows, 4), 2);
}

// Found by the adversarial pass of issue 21: `--resume X --save X` with X a symbolic link wrote a
// new file in the link's place and left the checkpoint it named at the old epoch. The save goes
// through the link now: the file it names is replaced, and the link stays.
Test(e2e_outputs, save_through_a_symbolic_link_updates_the_file_it_names) {
    char *data = e2e_synth(94);
    char *real = e2e_path("real.safetensors"), *link = e2e_path("link.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--save", real);
    e2e_assert_exit(&r, 0);
    cr_assert_eq(symlink(real, link), 0);
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--epochs", "2", "--resume", link, "--save", link);
    e2e_assert_exit(&r, 0);
    struct stat st;
    cr_assert_eq(lstat(link, &st), 0);
    cr_expect(S_ISLNK(st.st_mode), "the link was replaced by a file");
    cr_expect_eq(e2e_eval_checkpoint(data, e2e.mlp, real).epoch, 2, "the checkpoint the link names was not updated");
}
