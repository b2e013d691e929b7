// Helpers of the tests that run ./hogwild under Open MPI's mpirun (test_mpi.c, test_mpi_gpu.c):
// finding mpirun, folders of the test's own for Open MPI's files, starting mpirun through the e2e
// harness, and the check that a job left nothing behind.
#ifndef HW_TESTS_MPI_UTIL_H
#define HW_TESTS_MPI_UTIL_H

#include "e2e_util.h"

// Each test's MPI files go to folders of its own, so that tests running at once cannot mask each
// other's leftovers: Open MPI's session folder (orte_tmpdir_base, /tmp by default) in the test's
// folder, and its shared memory segments (btl_vader_backing_directory, /dev/shm by default) in a
// folder of /dev/shm, both checked empty after each job (assert_mpi_left_nothing).
static char session_dir[1100], shm_dir[64];
static char mpirun_path[1024];

// Whether mpirun is on PATH; sets mpirun_path.
static inline int mpi_find_mpirun(void) {
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/bin:/bin");
    for (char *dir = strtok(dirs, ":"); dir; dir = strtok(NULL, ":")) {
        snprintf(mpirun_path, sizeof mpirun_path, "%s/mpirun", dir);
        if (access(mpirun_path, X_OK) == 0) return 1;
    }
    mpirun_path[0] = '\0';
    return 0;
}

// mpirun as these tests start it: as root it needs both variables; the test's own folders for
// Open MPI's files.
static inline void mpi_setup_environment(void) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    snprintf(session_dir, sizeof session_dir, "%s/mpi-session", e2e.dir);
    cr_assert_eq(mkdir(session_dir, 0700), 0, "mkdir %s: %s", session_dir, strerror(errno));
    snprintf(shm_dir, sizeof shm_dir, "/dev/shm/hw-test-mpi-XXXXXX");
    cr_assert_not_null(mkdtemp(shm_dir), "mkdtemp in /dev/shm: %s", strerror(errno));
    setenv("OMPI_MCA_orte_tmpdir_base", session_dir, 1);
    setenv("OMPI_MCA_btl_vader_backing_directory", shm_dir, 1);
    // For make asan: Open MPI's allocations that live until exit are suppressed by library name
    // (tests/lsan.supp), which needs whole stacks (its libraries have no frame pointers for the fast
    // unwinder) and its components still mapped at exit. Nothing else changes for a normal build.
    const char *asan = getenv("ASAN_OPTIONS");
    char options[1024];
    snprintf(options, sizeof options, "%s%sfast_unwind_on_malloc=0", asan ? asan : "", asan && asan[0] ? ":" : "");
    setenv("ASAN_OPTIONS", options, 1);
    setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 1);
}

// The test's shared-memory folder, at teardown.
static inline void mpi_remove_shm_dir(void) {
    if (shm_dir[0]) rm_tree(shm_dir);
}

// Entries under `dir`, recursively, not counting `dir` itself.
static inline int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%.1700s/%.255s", dir, e->d_name);
        n += 1 + count_entries(path);
    }
    closedir(d);
    return n;
}

// After mpirun has exited: within a few seconds (the ranks it killed may still be dying) no
// process of the job is left, nor any MPI session file or shared memory segment.
static inline void assert_mpi_left_nothing(void) {
    double deadline = hw_now() + 5;
    pid_t kids[16];
    while (e2e_children_of(getpid(), kids, 16) > 0 && hw_now() < deadline) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        e2e_sleep_ms(20);
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    e2e_assert_no_leftover_processes();
    cr_expect_eq(count_entries(shm_dir), 0, "MPI shared memory left in %s", shm_dir);
    cr_expect_eq(count_entries(session_dir), 0, "MPI session files left in %s", session_dir);
}

// Runs `launcher` with the words of `head`, then `args` (both NULL-terminated; HW stands for
// $HW_BIN), through the e2e harness: its output files, its time limit, its leftover-process check.
static inline void mpi_start_as(e2e_run_result *r, const char *launcher, const char *const *head,
                                const char *const *args) {
    const char *argv[80];
    int argc = 0;
    char bin[1024];
    snprintf(bin, sizeof bin, "%s", e2e.bin);
    for (int i = 0; head[i]; i++) argv[argc++] = head[i];
    for (int i = 0; args[i]; i++) {
        cr_assert_lt(argc, 78);
        argv[argc++] = strcmp(args[i], "HW") == 0 ? bin : args[i];
    }
    argv[argc] = NULL;
    snprintf(e2e.bin, sizeof e2e.bin, "%s", launcher);
    e2e_start_argv(r, NULL, argv);
    snprintf(e2e.bin, sizeof e2e.bin, "%s", bin);
}

// mpirun with `args` on this host. More ranks and workers than the 2 cores of CI need
// --oversubscribe, and several ranks on one host --bind-to none.
static inline void mpi_start(e2e_run_result *r, const char *const *args) {
    const char *head[] = {"--oversubscribe", "--bind-to", "none", NULL};
    mpi_start_as(r, mpirun_path, head, args);
}
// mpirun as mpi_start starts it, for a test that presses Ctrl-C on it and checks rank 0's save.
// Open MPI 4.1 answers Ctrl-C with SIGCONT to every rank, SIGTERM odls_base_sigkill_timeout (1 s)
// later and SIGKILL as long after that: rank 0's stop (its workers joined, its last round, its
// file written) took longer than that second in a loaded CI and was cut (the last good checkpoint
// stays: saves go through a temporary file). What the code guarantees is the save given time,
// which a user gives it the same way (README); 5 s makes Ctrl-C take about 10. From the Ctrl-C on,
// mpirun forwards no output until the ranks end, and a rank blocks once some 18 KB of it wait (the
// pty's buffers): the test's runs must print less than that in those 5 s (an epoch line is 75
// bytes), or rank 0 is still blocked in a write when its SIGTERM comes.
static inline void mpi_start_for_ctrl_c(e2e_run_result *r, const char *const *args) {
    const char *head[] = {"--oversubscribe", "--bind-to", "none", "--mca", "odls_base_sigkill_timeout", "5", NULL};
    mpi_start_as(r, mpirun_path, head, args);
}
#define mpi_run(r, ...)                                           \
    do {                                                          \
        mpi_start((r), (const char *const[]){__VA_ARGS__, NULL}); \
        e2e_wait_within((r), 180);                                \
    } while (0)

// Waits until mpirun (r) has started exactly 2 ranks (its children: on this host the ranks are
// mpirun's own), by `deadline`; their pids go to ranks[0..2).
static inline void mpi_find_two_ranks(const e2e_run_result *r, pid_t ranks[2], double deadline) {
    pid_t kids[4];
    while (e2e_children_of(r->pid, kids, 4) < 2 && hw_now() < deadline) e2e_sleep_ms(20);
    cr_assert_eq(e2e_children_of(r->pid, kids, 4), 2, "mpirun did not start 2 ranks");
    ranks[0] = kids[0];
    ranks[1] = kids[1];
}

// Stops `rank` (SIGSTOP: alive, but it never answers again) and waits for the job to end: exit 1
// within `bound_s` seconds (not a hang), nothing left behind. The caller checks the message.
static inline void mpi_stop_rank_expecting_the_end(e2e_run_result *r, pid_t rank, double bound_s) {
    kill(rank, SIGSTOP);
    double stopped = hw_now();
    e2e_wait_within(r, 3 * bound_s);
    double took = hw_now() - stopped;
    e2e_assert_exit(r, 1);
    cr_expect_lt(took, bound_s, "the job took %.1f s to end after a rank stopped", took);
    assert_mpi_left_nothing();
}

// The floats of a checkpoint's tensors (owned until teardown).
static inline const float *checkpoint_floats(const char *path, size_t *count) {
    size_t n, bytes;
    const uint8_t *file = e2e_own(read_bytes(path, &n));
    const uint8_t *data = e2e_safetensors_data(file, n, &bytes);
    *count = bytes / sizeof(float);
    return (const float *)data;
}

// The largest difference between the weights of two checkpoints of the same model; `differ`:
// how many weights differ at all.
static inline double checkpoints_max_difference(const char *a_path, const char *b_path, size_t *differ, size_t *count) {
    size_t n_a, n_b;
    const float *a = checkpoint_floats(a_path, &n_a), *b = checkpoint_floats(b_path, &n_b);
    cr_assert_eq(n_a, n_b, "%s and %s hold different numbers of weights", a_path, b_path);
    double worst = 0;
    *differ = 0;
    for (size_t i = 0; i < n_a; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > worst) worst = d;
        *differ += a[i] != b[i];
    }
    *count = n_a;
    return worst;
}

#endif
