// End-to-end tests of `hogwild sweep`: a grid refused before any run, naming the value; a sweep
// interrupted (SIGINT) and started again runs only the runs it had not finished, keeps the ones
// done, and ends with compare's group table over the folder.
#include "e2e_util.h"

TestSuite(e2e_sweep, .init = e2e_setup, .fini = e2e_teardown, .timeout = 300);

// A refused sweep: exit 2, `needle` on stderr, and no run made (the folder not even made).
static void expect_refused(const e2e_run_result *r, const char *dir, const char *needle) {
    e2e_assert_exit(r, 2);
    e2e_assert_contains(r->err, needle, "stderr");
    cr_expect(!e2e_file_exists(dir), "the sweep made %s before refusing", dir);
}

Test(e2e_sweep, a_bad_grid_is_refused_before_any_run_naming_the_value) {
    char *data = e2e_synth_n("data", 7, 200, 100);
    char *dir = e2e_path("sweep");
    e2e_run_result r;
    e2e_run(&r, NULL, "sweep", "--dir", dir, "--workers", "1,0", "--", "--data", data, "--model", e2e.mlp);
    expect_refused(&r, dir, "'0' is not a count of workers");
    e2e_run(&r, NULL, "sweep", "--dir", dir, "--workers", "2,2", "--", "--data", data, "--model", e2e.mlp);
    expect_refused(&r, dir, "2 is given twice");
    e2e_run(&r, NULL, "sweep", "--dir", dir, "--mode", "hogwild,sgd", "--", "--data", data, "--model", e2e.mlp);
    expect_refused(&r, dir, "'sgd' is not a mode");
    e2e_run(&r, NULL, "sweep", "--dir", dir, "--seeds", "5-1", "--", "--data", data, "--model", e2e.mlp);
    expect_refused(&r, dir, "'5-1' runs backwards");
    e2e_run(&r, NULL, "sweep", "--dir", dir, "--seeds", "1,,2", "--", "--data", data, "--model", e2e.mlp);
    expect_refused(&r, dir, "empty value");
    e2e_run(&r, NULL, "sweep", "--dir", dir, "--lr", "0.1,-1", "--", "--data", data, "--model", e2e.mlp);
    expect_refused(&r, dir, "'-1' is not a learning rate");
    // Training flags the sweep sets itself, or that a run would refuse, before the first run too.
    e2e_run(&r, NULL, "sweep", "--dir", dir, "--", "--data", data, "--model", e2e.mlp, "--seed", "3");
    expect_refused(&r, dir, "--seed after '--' is the sweep's");
    e2e_run(&r, NULL, "sweep", "--dir", dir, "--lr", "0.1", "--", "--data", data, "--lr", "0.2");
    expect_refused(&r, dir, "--lr is given both");
    e2e_run(&r, NULL, "sweep", "--dir", dir, "--", "--data", data, "--epochs", "0");
    expect_refused(&r, dir, "--epochs expects an integer");
    e2e_run(&r, NULL, "sweep", "--dir", dir, "--", "--data", data, "--nesterov", "--momentum", "0");
    expect_refused(&r, dir, "--nesterov needs --momentum");
    e2e_run(&r, NULL, "sweep", "--workers", "1", "--", "--data", data);
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "--dir DIR is required", "stderr");
}

// How many times `needle` occurs in `text`.
static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

Test(e2e_sweep, an_interrupted_sweep_started_again_runs_only_what_is_missing) {
    char *data = e2e_synth_n("data", 11, 1500, 500);
    char *dir = e2e_path("sweep");
    char first[1200], second_part[1200], second[1200], third[1200];
    snprintf(first, sizeof first, "%s/hogwild-w1-s1.csv", dir);
    snprintf(second_part, sizeof second_part, "%s/.hogwild-w1-s2.csv.part", dir);
    snprintf(second, sizeof second, "%s/hogwild-w1-s2.csv", dir);
    snprintf(third, sizeof third, "%s/hogwild-w1-s3.csv", dir);
    // Evaluations every 150 samples make each run last long enough to be interrupted in it.
    const char *args[] = {"sweep",
                          "--dir",
                          dir,
                          "--workers",
                          "1",
                          "--mode",
                          "hogwild",
                          "--seeds",
                          "1-3",
                          "--target",
                          "50",
                          "--",
                          "--data",
                          data,
                          "--model",
                          e2e.mlp,
                          "--eval-every",
                          "150",
                          "--test-batch-size",
                          "500",
                          NULL};
    e2e_run_result r;
    pid_t pid = e2e_start_argv(&r, NULL, args);
    double deadline = hw_now() + 120;
    while (!e2e_file_exists(second_part) && !e2e_file_exists(second) && hw_now() < deadline) e2e_sleep_ms(5);
    kill(pid, SIGINT);
    e2e_wait_within(&r, 120);
    e2e_assert_exit(&r, 128 + SIGINT);
    e2e_assert_contains(r.out, "interrupted by", "stdout");
    cr_assert(e2e_file_exists(first), "the first run's CSV is complete: %s", r.out);
    cr_assert(!e2e_file_exists(third), "the third run never started: %s", r.out);
    int done_before = 1 + e2e_file_exists(second);
    struct stat kept;
    cr_assert_eq(stat(first, &kept), 0);

    e2e_run_result again;
    e2e_run_argv_within(&again, 240, NULL, args);
    e2e_assert_exit(&again, 0);
    cr_expect_eq(count_of(again.out, ": done before ("), done_before, "skipped the runs done: %s", again.out);
    cr_expect_eq(count_of(again.out, ", final accuracy "), 3 - done_before, "ran only the others: %s", again.out);
    e2e_assert_contains(again.out, "hogwild-w1-s1: done before", "stdout");
    struct stat after;
    cr_assert_eq(stat(first, &after), 0);
    cr_expect(after.st_ino == kept.st_ino && after.st_mtime == kept.st_mtime, "the first run's CSV was left alone");
    cr_expect(e2e_file_exists(second) && e2e_file_exists(third));
    // Every run's CSV carries its identity, and compare groups the three seeds.
    e2e_metrics_row rows[64];
    int n = e2e_read_metrics(third, rows, 64);
    cr_assert_gt(n, 1);
    cr_expect_str_eq(rows[0].model, "mlp");
    cr_expect_eq(rows[0].seed, 3);
    e2e_metrics_row first_rows[64];
    e2e_read_metrics(first, first_rows, 64);
    cr_expect_str_eq(first_rows[0].setup, rows[0].setup, "the seeds share one setup");
    e2e_assert_contains(again.out, "hogwild 1 mlp     3", "the group table");
    char summary[1200];
    snprintf(summary, sizeof summary, "%s/summary.csv", dir);
    cr_expect(e2e_file_exists(summary), "the summary CSV");
    // A third time: nothing to run, and the sweep's compare leaves out the summary it writes again
    // without a word; a compare of the folder that writes no summary names it as skipped.
    e2e_run_result third_time;
    e2e_run_argv_within(&third_time, 120, NULL, args);
    e2e_assert_exit(&third_time, 0);
    cr_expect_eq(count_of(third_time.out, ": done before ("), 3, "%s", third_time.out);
    cr_expect(!strstr(third_time.err, "a table of groups"), "the sweep named its own summary: %s", third_time.err);
    cr_expect(strstr(third_time.out, "hogwild 1 mlp     3"), "the group table of the three runs: %s", third_time.out);
    e2e_run_result plain;
    e2e_run(&plain, NULL, "compare", dir, "--no-plot");
    e2e_assert_exit(&plain, 0);
    e2e_assert_contains(plain.err, "summary.csv: a table of groups", "stderr");
    e2e_assert_no_leftover_processes();
}

// A sweep killed outright (SIGKILL) cannot pass a stop on: its run gets SIGTERM from the kernel
// (the parent-death signal) and stops as a run stops, rather than train on unseen.
Test(e2e_sweep, a_killed_sweep_stops_its_run) {
    char *data = e2e_synth_n("data", 12, 1500, 500);
    char *dir = e2e_path("sweep");
    char part[1200], log[1200];
    snprintf(part, sizeof part, "%s/.hogwild-w1-s1.csv.part", dir);
    snprintf(log, sizeof log, "%s/hogwild-w1-s1.log", dir);
    const char *args[] = {"sweep",
                          "--dir",
                          dir,
                          "--workers",
                          "1",
                          "--mode",
                          "hogwild",
                          "--seeds",
                          "1",
                          "--",
                          "--data",
                          data,
                          "--model",
                          e2e.mlp,
                          "--epochs",
                          "1000",
                          "--eval-every",
                          "150",
                          "--test-batch-size",
                          "500",
                          NULL};
    e2e_run_result r;
    pid_t pid = e2e_start_argv(&r, NULL, args);
    double deadline = hw_now() + 120;
    while (e2e_count_lines(part) < 3 && hw_now() < deadline) e2e_sleep_ms(10);
    cr_assert_geq(e2e_count_lines(part), 3, "the run wrote no metrics rows within 120 s");
    kill(pid, SIGKILL);
    e2e_wait_within(&r, 60);
    // The run, now the test's child (the test process is a subreaper), ends of the SIGTERM.
    int status = 0;
    pid_t got;
    deadline = hw_now() + 60;
    while ((got = waitpid(-1, &status, WNOHANG)) == 0 && hw_now() < deadline) e2e_sleep_ms(20);
    cr_assert_gt(got, 0, "the run outlived its killed sweep by 60 s");
    char how[64];
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM, "the run ended %s",
              e2e_describe_status(status, how, sizeof how));
    e2e_assert_contains(e2e_read_text(log), "interrupted by SIGTERM", "the run's log");
    e2e_assert_no_leftover_processes();
}
