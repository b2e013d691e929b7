// bench: the benchmark programs of bench/ (built beside this test binary by `make test` and `make
// asan`) fail with a non-zero status and a message, never quietly, and name what they measured.
#include "data_util.h"

#include <criterion/criterion.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// Runs build/bench_<name> ARGS (from the repository root) through the shell, stdout and stderr
// into out; returns the exit status (-1 when killed by a signal).
static int run_bench(const char *name, const char *args, char *out, size_t cap) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(n > 0);
    self[n] = '\0';
    char cmd[2 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "%s/bench_%s", dirname(self), name);
    cr_assert(access(cmd, X_OK) == 0, "%s is not built: `make test` builds it", cmd);
    snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " %s 2>&1", args);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    size_t used = fread(out, 1, cap - 1, p);
    out[used] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `--layers` with a model that cannot be loaded exited 0 after its message.
Test(bench, nn_step_layers_fails_on_a_model_it_cannot_load) {
    char out[4096];
    int status = run_bench("nn_step", "--layers /nonexistent/x.model 8", out, sizeof out);
    cr_expect_eq(status, 1, "exit status %d:\n%s", status, out);
    cr_expect(strstr(out, "cannot open model file /nonexistent/x.model"), "%s", out);
}

// Bad arguments are refused with the usage, status 2, before the kernels are chosen or anything is
// timed (a BATCH of "abc" or "12x" ran as atoi read it, "abc" as 0).
Test(bench, nn_step_refuses_bad_arguments_before_any_work) {
    static const struct {
        const char *args, *message;
    } bad[] = {
        {"--layers models/lenet.model 0", "BATCH must be a whole number from 1 to 65536, got '0'"},
        {"models/lenet.model abc", "BATCH must be a whole number from 1 to 65536, got 'abc'"},
        {"--layers models/lenet.model 12x", "got '12x'"},
        {"models/lenet.model 64 0", "SECONDS must be a number over 0 and at most 3600, got '0'"},
        {"models/lenet.model 64 nan", "got 'nan'"},
        {"models/lenet.model 65537", "got '65537'"},
        {"models/lenet.model \\ 64", "got ' 64'"},
        {"models/lenet.model +64", "got '+64'"},
        {"models/lenet.model 64 3601", "got '3601'"},
        {"models/lenet.model 64 inf", "got 'inf'"},
        {"models/lenet.model 64 0x10", "got '0x10'"},
        {"models/lenet.model 64 \\ 1", "got ' 1'"},
        {"models/lenet.model 64 1 more", "too many arguments, got 'more'"},
        {"--layer models/lenet.model", "no such option, got '--layer'"},
    };
    char out[4096];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int status = run_bench("nn_step", bad[i].args, out, sizeof out);
        cr_expect_eq(status, 2, "%s: exit status %d:\n%s", bad[i].args, status, out);
        cr_expect(strstr(out, bad[i].message) && strstr(out, "usage: build/bench_nn_step"), "%s:\n%s", bad[i].args,
                  out);
        cr_expect(!strstr(out, "CPU kernels:"), "%s: work began:\n%s", bad[i].args, out);
    }
    int status = run_bench("nn_step", "--help", out, sizeof out);
    cr_expect(status == 0 && strstr(out, "usage: build/bench_nn_step") && !strstr(out, "CPU kernels:"),
              "--help: status %d:\n%s", status, out);
}

// --layers timed 220 steps whatever a step cost: LeNet at batch 65536 ran for over 20 minutes. A
// slow step now gets fewer, said in the header (this one took 220 x 0.2 s before).
Test(bench, nn_step_layers_times_fewer_steps_when_a_step_is_slow) {
    char model[] = "/tmp/hw-bench-wide-XXXXXX";
    write_temp_file(model, "input 784\nlinear 2048\nrelu\nlinear 10\nlog_softmax\n");
    char out[4096], args[128];
    snprintf(args, sizeof args, "--layers %s 1024", model);
    int status = run_bench("nn_step", args, out, sizeof out);
    unlink(model);
    cr_expect_eq(status, 0, "exit status %d:\n%s", status, out);
    const char *mean = strstr(out, "microseconds per batch (mean of ");
    int steps = mean ? atoi(mean + strlen("microseconds per batch (mean of ")) : 0;
    cr_expect(steps >= 3 && steps < 200, "%d steps:\n%s", steps, out);
}

// compute_floor checks its model files before its measurements, which take seconds.
Test(bench, compute_floor_refuses_a_bad_model_before_measuring) {
    char out[4096];
    int status = run_bench("compute_floor", "models/lenet.model /nonexistent/x.model", out, sizeof out);
    cr_expect_eq(status, 1, "exit status %d:\n%s", status, out);
    cr_expect(strstr(out, "cannot open model file /nonexistent/x.model"), "%s", out);
    cr_expect(!strstr(out, "sgemm peak:"), "measured before the check:\n%s", out);
    status = run_bench("compute_floor", "--floor", out, sizeof out);
    cr_expect(status == 2 && strstr(out, "no such option '--floor'") && !strstr(out, "sgemm peak:"), "status %d:\n%s",
              status, out);
    // A CPU path it cannot run: said as bench_nn_step says it, with the program's name.
    setenv("HOGWILD_CPU_PATH", "nonesuch", 1);
    status = run_bench("compute_floor", "models/lenet.model", out, sizeof out);
    unsetenv("HOGWILD_CPU_PATH");
    cr_expect(status == 1 && strstr(out, "compute_floor: HOGWILD_CPU_PATH=nonesuch: no such CPU path") &&
                  !strstr(out, "sgemm peak:"),
              "status %d:\n%s", status, out);
    status = run_bench("compute_floor", "-h", out, sizeof out);
    cr_expect(status == 0 && strstr(out, "usage: build/bench_compute_floor") && !strstr(out, "sgemm peak:"),
              "status %d:\n%s", status, out);
}

// bench/stats.sh's median, which the bench scripts print: the middle two's mean of large rates
// came out as awk's 6 digits (1.23457e+06), and a blank line counted as a number.
Test(bench, stats_median_keeps_its_digits_and_skips_blank_lines) {
    FILE *p = popen("bash -c '. bench/stats.sh; printf \"1234567\\n1234568\\n\" | median; "
                    "printf \"\\n\" | median; printf \"3\\n\\n1\\n2\\n\" | median; "
                    "printf \"\\n4\\n1\\n\" | median_range \"%.1f (%.1f-%.1f)\"' 2>&1",
                    "r");
    cr_assert(p);
    char out[256];
    size_t used = fread(out, 1, sizeof out - 1, p);
    out[used] = '\0';
    cr_expect_eq(pclose(p), 0, "%s", out);
    cr_expect_str_eq(out, "1234567.5\nnan\n2\n2.5 (1.0-4.0)");
}

// The bench scripts' rounds (bench/stats.sh's count_arg): 0, a word or a leading zero is refused
// with status 2 and the argument's name, before any table (0 once printed a whole table of nan and
// exited 0).
Test(bench, scripts_refuse_a_bad_count_of_rounds_before_any_table) {
    static const char *const scripts[][2] = {{"cpu_copies.sh", "ROUNDS"},
                                             {"floor_share.sh", "ROUNDS"},
                                             {"hogwild_vs_torch.sh", "RUNS"},
                                             {"two_workers.sh", "RUNS"}};
    static const char *const bad[] = {"0", "abc", "07", "-1"};
    for (size_t s = 0; s < sizeof scripts / sizeof scripts[0]; s++) {
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            char cmd[256], out[1024], want[128];
            snprintf(cmd, sizeof cmd, "bash bench/%s %s 2>&1", scripts[s][0], bad[b]);
            FILE *p = popen(cmd, "r");
            cr_assert(p);
            size_t used = fread(out, 1, sizeof out - 1, p);
            out[used] = '\0';
            int status = pclose(p);
            snprintf(want, sizeof want, "%s must be a whole number, 1 or more, without leading zeros; got '%s'",
                     scripts[s][1], bad[b]);
            cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 2 && strstr(out, want) && !strstr(out, "|"),
                      "%s: status %d:\n%s", cmd, status, out);
        }
    }
}

// The figures are the CPU kernels': the copy timed is named, and chosen as ./hogwild chooses it.
Test(bench, nn_step_names_the_cpu_kernels_it_times) {
    char out[8192];
    int status = run_bench("nn_step", "--layers models/lenet.model 2", out, sizeof out);
    cr_expect_eq(status, 0, "exit status %d:\n%s", status, out);
    cr_expect(strstr(out, "CPU kernels: ") && strstr(out, "conv1"), "%s", out);
    setenv("HOGWILD_CPU_PATH", "baseline", 1);
    status = run_bench("nn_step", "--layers models/lenet.model 2", out, sizeof out);
    cr_expect_eq(status, 0, "exit status %d:\n%s", status, out);
    cr_expect(strstr(out, "CPU kernels: baseline (forced by HOGWILD_CPU_PATH"), "%s", out);
    setenv("HOGWILD_CPU_PATH", "nonesuch", 1);
    status = run_bench("nn_step", "--layers models/lenet.model 2", out, sizeof out);
    unsetenv("HOGWILD_CPU_PATH");
    cr_expect_eq(status, 1, "exit status %d:\n%s", status, out);
    cr_expect(strstr(out, "HOGWILD_CPU_PATH=nonesuch: no such CPU path"), "%s", out);
}
