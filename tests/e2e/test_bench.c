// bench: the benchmark programs of bench/ (built beside this test binary by `make test` and `make
// asan`) fail with a non-zero status and a message, never quietly, and name what they measured.
#include <criterion/criterion.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
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
    status = run_bench("nn_step", "--layers models/lenet.model 0", out, sizeof out);
    cr_expect_eq(status, 1, "batch 0: exit status %d:\n%s", status, out);
    cr_expect(strstr(out, "batch size must be at least 1"), "%s", out);
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
