// Helpers of the end-to-end tests: run the ./hogwild binary ($HW_BIN, set by `make test`) as a
// child process, the way a user does, and read what it leaves behind: exit status, stdout,
// stderr, metrics CSV, checkpoints, shared memory names, processes.
//
// Every test runs in its own Criterion process with e2e_setup/e2e_teardown as fixtures: a fresh
// temporary folder (e2e.dir) removed afterwards, and the test process made a child subreaper,
// so that a worker which outlives its hogwild parent (alive or a zombie) is handed to the test
// process, where e2e_assert_no_leftover_processes finds it.
#ifndef HW_TESTS_E2E_UTIL_H
#define HW_TESTS_E2E_UTIL_H

#include "data_util.h"
#include "hw/ckpt.h"   // e2e_exact_losses
#include "hw/clock.h"  // hw_now
#include "hw/err.h"
#include "hw/lr_schedule.h"  // e2e_expect_lr_column
#include "hw/nn.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// The synthetic dataset most tests train on (`hogwild synth`): small, so a run takes a fraction
// of a second, yet large enough that the MLP learns it well in a couple of epochs.
enum { E2E_TRAIN = 3000, E2E_TEST = 1000 };

// Longest any single run may take before the test kills it and fails.
#define E2E_RUN_TIMEOUT 60.0

typedef struct {
    char bin[1024];    // $HW_BIN
    char root[1024];   // the checkout it was built in (models/ lives there)
    char dir[1024];    // this test's temporary folder
    pid_t dir_owner;   // the test process that made it (its forked children must not remove it)
    char mlp[1100];    // models/mlp.model
    char lenet[1100];  // models/lenet.model
    pid_t running;     // a run started with e2e_start and not waited for yet (killed at teardown)
    int runs;          // numbers the output files of the runs
    void **owned;      // what the helpers handed out (paths, outputs): freed at teardown
    int n_owned, owned_cap;
    // When set (nonzero), the next runs start with these soft limits, as after `ulimit -s KB;
    // ulimit -v KB` in a shell: set in the child only, never on the test process.
    rlim_t child_stack_bytes, child_address_space_bytes;
    // When set, the next runs start with this soft limit on open files (ulimit -n), and as this
    // user and group (a test run as root that needs an ordinary user): in the child only.
    rlim_t child_open_files;
    uid_t child_uid;
} e2e_state;

static e2e_state e2e;

static inline void e2e_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// Keeps a malloc'ed block the helpers return until e2e_teardown frees it, so that tests use
// paths and outputs without freeing each one.
static inline void *e2e_own(void *block) {
    cr_assert_not_null(block);
    if (e2e.n_owned == e2e.owned_cap) {
        e2e.owned_cap = e2e.owned_cap ? 2 * e2e.owned_cap : 32;
        e2e.owned = realloc(e2e.owned, (size_t)e2e.owned_cap * sizeof *e2e.owned);
        cr_assert_not_null(e2e.owned);
    }
    e2e.owned[e2e.n_owned++] = block;
    return block;
}

// A path in this test's folder (owned until teardown).
static inline char *e2e_path(const char *name) {
    size_t cap = strlen(e2e.dir) + strlen(name) + 2;
    char *path = e2e_own(malloc(cap));
    snprintf(path, cap, "%s/%s", e2e.dir, name);
    return path;
}

// Every process whose parent is `parent`, from /proc/<pid>/stat; returns how many (at most cap
// are stored).
static inline int e2e_children_of(pid_t parent, pid_t *out, int cap) {
    DIR *proc = opendir("/proc");
    cr_assert_not_null(proc, "cannot read /proc");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(proc)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        char path[300], text[1024];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;  // gone meanwhile
        ssize_t got = read(fd, text, sizeof text - 1);
        close(fd);
        if (got <= 0) continue;
        text[got] = '\0';
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses; it ends at the last ')'.
        const char *close_paren = strrchr(text, ')');
        char state;
        int ppid;
        if (!close_paren || sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2) continue;
        if (ppid != parent) continue;
        if (n < cap) out[n] = (pid_t)atoi(e->d_name);
        n++;
    }
    closedir(proc);
    return n;
}

// Kills (by pid) every process that is this test process's child, and reaps it.
static inline void e2e_kill_children(void) {
    pid_t kids[256];
    int n = e2e_children_of(getpid(), kids, 256);
    for (int i = 0; i < n && i < 256; i++) kill(kids[i], SIGKILL);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

// With the hogwild run reaped: no process it started is left. The test process is a child
// subreaper, so any worker still alive or unreaped when hogwild exited became our child.
static inline void e2e_assert_no_leftover_processes(void) {
    pid_t kids[16];
    int n = e2e_children_of(getpid(), kids, 16);
    int status = 0;
    pid_t reaped = waitpid(-1, &status, WNOHANG);
    int err = errno;
    if (n > 0 || reaped != -1) e2e_kill_children();
    cr_assert(n == 0 && reaped == -1 && err == ECHILD,
              "processes outlived the hogwild run: %d still alive (first pid %d), waitpid(-1) gave %d", n,
              n > 0 ? (int)kids[0] : 0, (int)reaped);
}

// The test's folder and all in it, once, by the test process alone.
static inline void e2e_remove_dir(void) {
    if (!e2e.dir[0] || getpid() != e2e.dir_owner) return;
    rm_tree(e2e.dir);
    e2e.dir[0] = '\0';
}

static inline void e2e_setup(void) {
    const char *bin = getenv("HW_BIN");
    if (!bin || !bin[0]) {
        cr_assert_fail("HW_BIN is not set: the end-to-end tests run the ./hogwild binary; run them with "
                       "`make test`, or set HW_BIN to the absolute path of ./hogwild");
    }
    cr_assert(bin[0] == '/', "HW_BIN must be an absolute path, got '%s'", bin);
    cr_assert(access(bin, X_OK) == 0, "HW_BIN=%s is not an executable file (build it with `make`)", bin);
    snprintf(e2e.bin, sizeof e2e.bin, "%s", bin);
    // The checkout is the nearest folder above the binary that holds models/ (./hogwild sits in
    // it; `make asan` builds build-asan/hogwild one level down).
    snprintf(e2e.root, sizeof e2e.root, "%s", bin);
    char *slash;
    while ((slash = strrchr(e2e.root, '/')) != NULL && slash != e2e.root) {
        *slash = '\0';
        snprintf(e2e.mlp, sizeof e2e.mlp, "%s/models/mlp.model", e2e.root);
        if (access(e2e.mlp, R_OK) == 0) break;
    }
    snprintf(e2e.mlp, sizeof e2e.mlp, "%s/models/mlp.model", e2e.root);
    snprintf(e2e.lenet, sizeof e2e.lenet, "%s/models/lenet.model", e2e.root);
    cr_assert(access(e2e.mlp, R_OK) == 0, "cannot read %s", e2e.mlp);
    cr_assert(access(e2e.lenet, R_OK) == 0, "cannot read %s", e2e.lenet);

    const char *base = getenv("TMPDIR");
    snprintf(e2e.dir, sizeof e2e.dir, "%s/hw-e2e-XXXXXX", base && base[0] ? base : "/tmp");
    cr_assert_not_null(mkdtemp(e2e.dir), "mkdtemp %s: %s", e2e.dir, strerror(errno));
    // A test that skips (cr_skip_test) ends without its .fini: the folder goes at exit instead.
    e2e.dir_owner = getpid();
    atexit(e2e_remove_dir);
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0, "PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
    // The check of leftover processes needs a test process without children of its own.
    cr_assert_eq(e2e_children_of(getpid(), (pid_t[1]){0}, 1), 0, "the test process has children already");
}

static inline void e2e_teardown(void) {
    if (e2e.running > 0) {
        kill(e2e.running, SIGKILL);
        waitpid(e2e.running, NULL, 0);
        e2e.running = 0;
    }
    e2e_kill_children();
    e2e_remove_dir();
    for (int i = 0; i < e2e.n_owned; i++) free(e2e.owned[i]);
    free(e2e.owned);
    e2e.owned = NULL;
    e2e.n_owned = e2e.owned_cap = 0;
}

// ---- running ./hogwild ----

typedef struct {
    pid_t pid;
    int status;  // waitpid status
    char *out;   // everything it wrote to stdout
    char *err;   // and to stderr
    char out_path[1100], err_path[1100];
} e2e_run_result;

// A whole file as a string (owned until teardown).
static inline char *e2e_read_text(const char *path) {
    size_t n;
    uint8_t *bytes = e2e_own(read_bytes(path, &n));
    bytes[n] = '\0';
    return (char *)bytes;
}

// Starts HW_BIN with argv[1..] = args (NULL-terminated), stdout and stderr to files in e2e.dir,
// stdin from /dev/null, `env` ("NAME=VALUE" or NULL) added to the environment. The child gets
// the default action for every signal (as from an interactive shell: not the SIG_IGN a
// non-interactive shell's background job has) and no core files.
static inline pid_t e2e_start_argv(e2e_run_result *r, const char *env, const char *const *args) {
    memset(r, 0, sizeof *r);
    int id = ++e2e.runs;
    snprintf(r->out_path, sizeof r->out_path, "%s/run%d.out", e2e.dir, id);
    snprintf(r->err_path, sizeof r->err_path, "%s/run%d.err", e2e.dir, id);
    const char *argv[80];
    int argc = 0;
    argv[argc++] = e2e.bin;
    for (int i = 0; args[i]; i++) {
        cr_assert_lt(argc, 79, "too many arguments");
        argv[argc++] = args[i];
    }
    argv[argc] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1, "fork: %s", strerror(errno));
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        int out = open(r->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(r->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || err < 0) _exit(120);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigemptyset(&dfl.sa_mask);
        for (int sig = 1; sig < NSIG; sig++) sigaction(sig, &dfl, NULL);  // fails harmlessly on KILL/STOP
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        struct rlimit limit;
        if (e2e.child_stack_bytes && getrlimit(RLIMIT_STACK, &limit) == 0) {
            limit.rlim_cur = e2e.child_stack_bytes;
            if (setrlimit(RLIMIT_STACK, &limit) != 0) _exit(122);
        }
        if (e2e.child_address_space_bytes && getrlimit(RLIMIT_AS, &limit) == 0) {
            limit.rlim_cur = e2e.child_address_space_bytes;
            if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(122);
        }
        if (e2e.child_open_files && getrlimit(RLIMIT_NOFILE, &limit) == 0) {
            // The harness's own descriptors above stderr go first: the limit is the run's alone.
            for (int fd = 3; fd < 64; fd++) close(fd);
            limit.rlim_cur = e2e.child_open_files;
            if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(122);
        }
        if (e2e.child_uid &&
            (setgroups(0, NULL) != 0 || setgid((gid_t)e2e.child_uid) != 0 || setuid(e2e.child_uid) != 0)) {
            _exit(122);
        }
        prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
        unsetenv("HOGWILD_FAIL_WORKER");
        if (env) putenv((char *)env);
        execv(e2e.bin, (char *const *)argv);
        _exit(121);
    }
    r->pid = pid;
    e2e.running = pid;
    return pid;
}

// Waits for a run started with e2e_start_argv (killing it and failing the test after `seconds`)
// and reads its output.
static inline void e2e_wait_within(e2e_run_result *r, double seconds) {
    double deadline = hw_now() + seconds;
    pid_t got;
    while ((got = waitpid(r->pid, &r->status, WNOHANG)) == 0) {
        if (hw_now() > deadline) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, &r->status, 0);
            e2e.running = 0;
            cr_assert_fail("hogwild (pid %d) did not end within %.0f s", (int)r->pid, seconds);
        }
        e2e_sleep_ms(2);
    }
    cr_assert_eq(got, r->pid, "waitpid: %s", strerror(errno));
    e2e.running = 0;
    r->out = e2e_read_text(r->out_path);
    r->err = e2e_read_text(r->err_path);
    cr_assert(!(WIFEXITED(r->status) && WEXITSTATUS(r->status) >= 120 && WEXITSTATUS(r->status) <= 122),
              "could not start %s (or set its limits)", e2e.bin);
}

static inline void e2e_wait(e2e_run_result *r) { e2e_wait_within(r, E2E_RUN_TIMEOUT); }

// Runs HW_BIN with the NULL-terminated arguments and waits for it (at most E2E_RUN_TIMEOUT s;
// e2e_run_within: at most `seconds`, for the runs that train longer, such as on a GPU).
#define e2e_run(r, env, ...) e2e_run_argv((r), (env), (const char *const[]){__VA_ARGS__, NULL})
#define e2e_run_within(r, seconds, env, ...) \
    e2e_run_argv_within((r), (seconds), (env), (const char *const[]){__VA_ARGS__, NULL})

static inline void e2e_run_argv_within(e2e_run_result *r, double seconds, const char *env, const char *const *args) {
    e2e_start_argv(r, env, args);
    e2e_wait_within(r, seconds);
}

static inline void e2e_run_argv(e2e_run_result *r, const char *env, const char *const *args) {
    e2e_run_argv_within(r, E2E_RUN_TIMEOUT, env, args);
}

// "exit 2", "killed by SIGSEGV": for messages.
static inline const char *e2e_describe_status(int status, char *buf, size_t cap) {
    if (WIFEXITED(status)) {
        snprintf(buf, cap, "exit %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        snprintf(buf, cap, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    } else {
        snprintf(buf, cap, "wait status %#x", status);
    }
    return buf;
}

// The run exited (not killed) with `code`; on failure the message shows its stderr.
static inline void e2e_assert_exit(const e2e_run_result *r, int code) {
    char how[128];
    cr_assert(WIFEXITED(r->status) && WEXITSTATUS(r->status) == code,
              "expected exit %d, got %s\n--- stdout:\n%s\n--- stderr:\n%s", code,
              e2e_describe_status(r->status, how, sizeof how), r->out, r->err);
}

// `text` contains `needle`; names what was searched for on failure.
static inline void e2e_assert_contains(const char *text, const char *needle, const char *what) {
    cr_assert_not_null(strstr(text, needle), "%s should contain \"%s\"; it is:\n%s", what, needle, text);
}

// `err` says "<subject> is <loss>" of a diverged loss (hw_loss_diverged): "nan", "infinite", or a
// number above HW_LOSS_DIVERGED with "(above 1e+04)". Which one depends on how the run blew up.
static inline void e2e_assert_diverged_loss(const char *err, const char *subject) {
    char needle[64];
    snprintf(needle, sizeof needle, "%s is ", subject);
    const char *at = strstr(err, needle);
    cr_assert_not_null(at, "stderr lacks \"%s\": %s", needle, err);
    at += strlen(needle);
    if (strncmp(at, "nan", 3) == 0 || strncmp(at, "infinite", 8) == 0) return;
    char *end;
    double loss = strtod(at, &end);
    cr_expect(end != at && loss > 1e4, "a diverged loss is nan, infinite or above 1e4: %s", err);
    cr_expect(strncmp(end, " (above 1e+04)", 14) == 0, "the rule's bound is named: %s", err);
}

// Writes n_train + n_test synthetic digits into e2e.dir/<name>; returns the folder.
static inline char *e2e_synth_n(const char *name, uint64_t seed, int n_train, int n_test) {
    char *dir = e2e_path(name);
    char seed_text[32], train_text[32], test_text[32];
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    snprintf(train_text, sizeof train_text, "%d", n_train);
    snprintf(test_text, sizeof test_text, "%d", n_test);
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--dir", dir, "--train", train_text, "--test", test_text, "--seed", seed_text);
    e2e_assert_exit(&r, 0);
    return dir;
}

// A dataset and a checkpoint whose first DataParallel step has exact, chosen losses, whatever the
// CPU: 4x4 images, `n_train` training samples of class 0 whose pixels are 255 in the first
// bright[i] of 16 places and 0 elsewhere, and the linear model e2e_linear_model() resumed from
// weights that give class 1 a logit of `per_pixel` * (bright pixels) - 20 and every other class 0.
// With --normalize 0,1 sample i's loss is then log(9 + e^(per_pixel * bright[i] - 20)): about
// per_pixel * bright[i] - 20 when that is large, log(9) = 2.2 for a dark sample. The checkpoint
// says epoch 1 done, so that --epochs 2 trains one more. Returns the folder; *ckpt gets the
// checkpoint's path (the model file is e2e_linear_model()).
static inline const char *e2e_linear_model(void) { return e2e_path("linear.model"); }

static inline char *e2e_exact_losses(const char *name, const int *bright, int n_train, float per_pixel, char **ckpt) {
    char *dir = e2e_path(name);
    cr_assert_eq(mkdir(dir, 0700), 0, "mkdir %s", dir);
    const char *model_path = e2e_linear_model();
    FILE *f = fopen(model_path, "w");
    cr_assert_not_null(f);
    fputs("input 1 4 4\nflatten\nlinear 10\nlog_softmax\n", f);
    cr_assert_eq(fclose(f), 0);
    for (int split = 0; split < 2; split++) {  // train, then test: the test set two dark samples
        const int n = split ? 2 : n_train;
        uint8_t *images = calloc(16 + (size_t)n * 16, 1), *labels = calloc(8 + (size_t)n, 1);
        cr_assert(images && labels);
        const uint8_t image_head[16] = {0, 0, 8, 3, 0, 0, 0, (uint8_t)n, 0, 0, 0, 4, 0, 0, 0, 4};
        const uint8_t label_head[8] = {0, 0, 8, 1, 0, 0, 0, (uint8_t)n};
        memcpy(images, image_head, 16), memcpy(labels, label_head, 8);
        for (int i = 0; i < n; i++) {
            for (int p = 0; p < 16; p++) images[16 + i * 16 + p] = !split && p < bright[i] ? 255 : 0;
            labels[8 + i] = (uint8_t)(split ? i : 0);
        }
        char path[1200];
        snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split ? "t10k" : "train");
        write_bytes(path, images, 16 + (size_t)n * 16);
        snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split ? "t10k" : "train");
        write_bytes(path, labels, 8 + (size_t)n);
        free(images), free(labels);
    }
    hw_model model;
    cr_assert_eq(hw_model_load(&model, model_path), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_alloc_weights(&model), HW_OK);
    cr_assert_eq(model.n_weights, 10 * 16 + 10, "fc1.weight [10, 16], then fc1.bias [10]");
    memset(model.weights, 0, sizeof(float) * model.n_weights);
    for (int p = 0; p < 16; p++) model.weights[16 + p] = per_pixel;  // class 1's row
    model.weights[160 + 1] = -20.0f;                                 // class 1's bias
    *ckpt = e2e_path("exact.safetensors");
    hw_ckpt_meta meta = {.epoch = 1, .samples_seen = n_train, .seed = 1};
    cr_assert_eq(hw_ckpt_save(*ckpt, &model, model.weights, &meta), HW_OK, "%s", hw_error());
    hw_model_free(&model);
    return dir;
}

// The usual dataset: E2E_TRAIN / E2E_TEST samples in e2e.dir/data.
static inline char *e2e_synth(uint64_t seed) { return e2e_synth_n("data", seed, E2E_TRAIN, E2E_TEST); }

// ---- what a run prints ----

// The summary line "done: N samples, training T s (R samples/s), wall W s; test loss L, accuracy A%".
typedef struct {
    long long samples;
    double test_loss;
    double accuracy;
} e2e_done_line;

static inline e2e_done_line e2e_parse_done(const char *out) {
    const char *line = strstr(out, "done: ");
    cr_assert_not_null(line, "no \"done: \" summary line on stdout:\n%s", out);
    cr_assert(line == out || line[-1] == '\n', "\"done: \" is not at the start of a line:\n%s", out);
    e2e_done_line d;
    double train_s, rate, wall;
    int got =
        sscanf(line, "done: %lld samples, training %lf s (%lf samples/s), wall %lf s; test loss %lf, accuracy %lf%%",
               &d.samples, &train_s, &rate, &wall, &d.test_loss, &d.accuracy);
    cr_assert_eq(got, 6, "cannot parse the summary line (%d fields): %s", got, line);
    return d;
}

// What `--eval-only --resume FILE` prints: "FILE (epoch E, N samples seen): test loss L, accuracy A% ...".
typedef struct {
    int epoch;
    long long samples;
    double accuracy;
} e2e_ckpt_info;

static inline e2e_ckpt_info e2e_eval_checkpoint(const char *data, const char *model, const char *ckpt) {
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", model, "--data", data, "--eval-only", "--resume", ckpt);
    e2e_assert_exit(&r, 0);
    const char *at = strstr(r.out, "(epoch ");
    cr_assert_not_null(at, "--eval-only printed no \"(epoch \": %s", r.out);
    e2e_ckpt_info info;
    double loss;
    cr_assert_eq(sscanf(at, "(epoch %d, %lld samples seen): test loss %lf, accuracy %lf%%", &info.epoch, &info.samples,
                        &loss, &info.accuracy),
                 4, "cannot parse the --eval-only line: %s", r.out);
    return info;
}

// AddressSanitizer (make asan) reserves terabytes of address space for its shadow memory: no
// address space limit (ulimit -v, RLIMIT_AS) can apply to such a binary, so the tests that set one
// skip there, saying so.
static inline void e2e_skip_under_asan(void) {
#ifdef __SANITIZE_ADDRESS__
    cr_skip_test("built with ASan (make asan), whose shadow memory no address space limit can hold");
#endif
}

// ---- the metrics CSV ----

#define E2E_METRICS_HEADER                                                                                        \
    "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy,skipped_eval_points," \
    "lr,model,"                                                                                                   \
    "seed,setup,settings"

typedef struct {
    char mode[32];
    int workers;
    char device[192];
    double wall_seconds;
    int epoch;
    long long samples;
    double train_loss;  // nan where no training happened since the previous row
    double test_loss;
    double accuracy;
    long long skipped;  // --eval-every points not evaluated so far
    double lr;          // the learning rate at the row's samples
    char model[64];     // the run's identity: the model file's base name, the seed, the setup hash
    unsigned long long seed;
    char setup[32];
    char settings[256];  // the settings not at their defaults, as text ("" when none)
} e2e_metrics_row;

static inline double e2e_parse_number(const char *field, int line) {
    char *end;
    double x = strtod(field, &end);
    cr_assert(end != field && *end == '\0', "metrics line %d: '%s' is not a number", line, field);
    return x;
}

static inline long long e2e_parse_integer(const char *field, int line) {
    char *end;
    long long x = strtoll(field, &end, 10);
    cr_assert(end != field && *end == '\0', "metrics line %d: '%s' is not an integer", line, field);
    return x;
}

// Reads a metrics file: asserts the exact header and 15 well-formed fields on every row; returns
// the number of rows (at most cap are stored). With `diverged`, the last row must be the row that
// marks a diverged run (README, "Metrics"): a non-finite train_loss, test_loss and test_accuracy
// nan; every other row a result.
static inline int e2e_read_metrics_of(const char *path, e2e_metrics_row *rows, int cap, int diverged) {
    char *text = e2e_read_text(path);
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    cr_assert_not_null(line, "%s is empty", path);
    cr_assert_str_eq(line, E2E_METRICS_HEADER, "header of %s", path);
    int n = 0, line_no = 1;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        line_no++;
        char *fields[16];
        int count = 0;
        for (char *p = line;; p++) {
            if (count < 16) fields[count] = p;
            count++;
            p = strchr(p, ',');
            if (!p) break;
            *p = '\0';
        }
        cr_assert_eq(count, 15, "metrics line %d has %d fields, not 15", line_no, count);
        for (int i = 0; i < 14; i++) {  // all but the settings, empty at the defaults
            cr_assert(fields[i][0] != '\0', "metrics line %d: field %d is empty", line_no, i + 1);
        }
        cr_assert_lt(n, cap, "more than %d metrics rows", cap);
        e2e_metrics_row *row = &rows[n++];
        snprintf(row->mode, sizeof row->mode, "%s", fields[0]);
        row->workers = (int)e2e_parse_integer(fields[1], line_no);
        snprintf(row->device, sizeof row->device, "%s", fields[2]);
        row->wall_seconds = e2e_parse_number(fields[3], line_no);
        row->epoch = (int)e2e_parse_integer(fields[4], line_no);
        row->samples = e2e_parse_integer(fields[5], line_no);
        row->train_loss = e2e_parse_number(fields[6], line_no);
        row->test_loss = e2e_parse_number(fields[7], line_no);
        row->accuracy = e2e_parse_number(fields[8], line_no);
        row->skipped = e2e_parse_integer(fields[9], line_no);
        row->lr = e2e_parse_number(fields[10], line_no);
        snprintf(row->model, sizeof row->model, "%s", fields[11]);
        row->seed = (unsigned long long)e2e_parse_integer(fields[12], line_no);
        snprintf(row->setup, sizeof row->setup, "%s", fields[13]);
        snprintf(row->settings, sizeof row->settings, "%s", fields[14]);
        cr_assert(strlen(row->setup) == 16 && strspn(row->setup, "0123456789abcdef") == 16,
                  "metrics line %d: setup '%s' is not 16 hex digits", line_no, row->setup);
        cr_assert_geq(row->skipped, 0, "metrics line %d: skipped_eval_points %lld", line_no, row->skipped);
        cr_assert(row->wall_seconds >= 0, "metrics line %d: wall %g", line_no, row->wall_seconds);
        if (diverged && strcmp(fields[7], "nan") == 0) {
            // The row that marks the run diverged: the last, spelled so.
            cr_assert(save == NULL || strtok_r(NULL, "\n", &save) == NULL,
                      "metrics line %d: rows after the diverged row", line_no);
            // train_loss: the diverged loss seen (hw_loss_diverged: nan, inf, above 1e4), or nan.
            cr_assert(!isfinite(row->train_loss) || row->train_loss > 1e4,
                      "metrics line %d: the diverged row's train_loss is '%s'", line_no, fields[6]);
            cr_assert_str_eq(fields[8], "nan", "metrics line %d: the diverged row's accuracy", line_no);
            return n;
        }
        cr_assert(isfinite(row->test_loss) && row->test_loss >= 0, "metrics line %d: test loss %g", line_no,
                  row->test_loss);
        cr_assert(row->accuracy >= 0 && row->accuracy <= 100, "metrics line %d: accuracy %g", line_no, row->accuracy);
    }
    cr_assert(!diverged, "%s: no row marks the run diverged (test_loss nan)", path);
    return n;
}

static inline int e2e_read_metrics(const char *path, e2e_metrics_row *rows, int cap) {
    return e2e_read_metrics_of(path, rows, cap, 0);
}

// Every row of the metrics file `csv` of a run of `epochs` epochs of `epoch_samples` has the lr
// that hw_lr_at gives for `spec`, `warmup` and `lr` at the row's samples (the float, every digit),
// and the rate changes somewhere.
static inline void e2e_expect_lr_column(const char *csv, const char *spec, int64_t warmup, double lr, int epochs,
                                        int64_t epoch_samples) {
    hw_lr_schedule schedule;
    cr_assert_eq(hw_lr_schedule_parse(spec, &schedule), HW_OK, "%s", hw_error());
    schedule.warmup = warmup;
    e2e_metrics_row rows[64];
    int n = e2e_read_metrics(csv, rows, 64);
    cr_assert_geq(n, 2, "%d rows", n);
    int changed = 0;
    for (int i = 0; i < n; i++) {
        float expected =
            (float)hw_lr_at(&schedule, (float)lr, rows[i].samples, epoch_samples, (int64_t)epochs * epoch_samples);
        cr_expect_eq((float)rows[i].lr, expected, "%s, row %d at %lld samples: lr %.9g, expected %.9g", spec, i + 1,
                     rows[i].samples, rows[i].lr, (double)expected);
        changed += i > 0 && rows[i].lr != rows[i - 1].lr;
    }
    cr_expect_gt(changed, 0, "%s: the rate never changed over %d rows", spec, n);
}

// The loss a diverged run reports, in the message and the metrics row (e2e_exact_losses: set
// weights, so independent of the CPU and its kernels): one replica's chunk, a bright sample, at a loss of 14980, the
// other's, a dark one, at 2.2. Their mean, 7491, is below the bound, so it is not what diverged:
// the replica's loss is reported (it was the mean once: "its training loss is 7.49e+03 (above
// 1e+04)", and a train_loss of 7491 in the row that marks the run diverged).
static inline double e2e_reported_loss(const char *err) {
    const char *at = strstr(err, "its training loss is ");
    cr_assert_not_null(at, "stderr: %s", err);
    return strtod(at + strlen("its training loss is "), NULL);
}

// `device_args`: the replicas (--replicas 2 on the CPU, --gpus 0,0), NULL-terminated.
static inline void e2e_check_replica_loss_reported(const char *const *device_args) {
    char *ckpt;
    const int bright[2] = {16, 0};
    char *data = e2e_exact_losses("exact", bright, 2, 938.75f, &ckpt);
    char *csv = e2e_path("diverged.csv");
    const char *args[32] = {"--data",   data, "--model", e2e_linear_model(), "--normalize",  "0,1", "--resume",  ckpt,
                            "--epochs", "2",  "--mode",  "dataparallel",     "--batch-size", "2",   "--metrics", csv,
                            "--quiet"};
    int n = 17;
    for (int i = 0; device_args[i]; i++) args[n++] = device_args[i];
    args[n] = NULL;
    e2e_run_result r;
    e2e_run_argv(&r, NULL, args);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "replica ", "stderr");
    double said = e2e_reported_loss(r.err);
    cr_expect(said > 14900 && said < 15100, "the diverged replica's loss is 14980, the batch's mean 7491; said %g: %s",
              said, r.err);
    e2e_metrics_row rows[8];
    int rows_n = e2e_read_metrics_of(csv, rows, 8, 1);
    double row_loss = rows[rows_n - 1].train_loss;
    cr_expect(row_loss > 14900 && row_loss < 15100, "the diverged row's train_loss %g, not the replica's 14980",
              row_loss);
}

// A one-epoch run of `epoch_samples` whose copies or ranks made no round within the epoch: every
// mid-epoch row (at least one) evaluated the starting weights, to the metrics' last digit, and the
// epoch's end row the trained ones.
static inline void e2e_expect_mid_epoch_rows_are_the_start(const char *metrics, long long epoch_samples) {
    e2e_metrics_row rows[16];
    int n = e2e_read_metrics(metrics, rows, 16);
    cr_assert_geq(n, 3, "no mid-epoch row in %d rows", n);
    for (int i = 1; i < n - 1; i++) {
        cr_expect_lt(rows[i].samples, epoch_samples);
        cr_expect(rows[i].test_loss == rows[0].test_loss && rows[i].accuracy == rows[0].accuracy,
                  "row %d at %lld samples: test loss %.6f, accuracy %.2f%%; the starting weights %.6f, %.2f%%", i,
                  rows[i].samples, rows[i].test_loss, rows[i].accuracy, rows[0].test_loss, rows[0].accuracy);
    }
    cr_expect_eq(rows[n - 1].samples, epoch_samples);
    cr_expect_lt(rows[n - 1].test_loss, rows[0].test_loss, "the epoch's end did not train");
}

// ---- files ----

static inline int e2e_file_exists(const char *path) { return access(path, F_OK) == 0; }

// Complete lines in a file that may still be being written (0 when it does not exist yet).
static inline int e2e_count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0, c;
    while ((c = getc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

// The model's tensor bytes of a safetensors file (after the 8-byte length and the JSON header, up to
// the optimizer state that hogwild writes after them: the first "optim." tensor's offset).
static inline const uint8_t *e2e_safetensors_data(const uint8_t *file, size_t n, size_t *data_bytes) {
    cr_assert_gt(n, 8, "checkpoint too short");
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--) header = header << 8 | file[i];
    cr_assert_leq(8 + header, n, "checkpoint header longer than the file");
    *data_bytes = n - 8 - header;
    char *text = strndup((const char *)file + 8, header);
    cr_assert_not_null(text);
    const char *optim = strstr(text, "\"optim.");
    const char *offsets = optim ? strstr(optim, "\"data_offsets\":[") : NULL;
    if (offsets) *data_bytes = strtoull(offsets + strlen("\"data_offsets\":["), NULL, 10);
    free(text);
    return file + 8 + header;
}

// How many /dev/shm/hogwild-<pid>-* names exist.
static inline int e2e_count_shm_names(pid_t pid) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "hogwild-%d-", (int)pid);
    DIR *dir = opendir("/dev/shm");
    cr_assert_not_null(dir, "cannot read /dev/shm");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(dir);
    return n;
}

// A run that has ended left nothing behind: no process it started, no shared memory name of its.
static inline void e2e_assert_left_nothing(const e2e_run_result *r) {
    e2e_assert_no_leftover_processes();
    int names = e2e_count_shm_names(r->pid);
    cr_assert_eq(names, 0, "%d /dev/shm/hogwild-%d-* name(s) left", names, (int)r->pid);
}

// A training run interrupted as a terminal's Ctrl-C does once it trains: `args` started, SIGINT
// once `metrics` has a mid-epoch row (the header, the starting point, one more), then it must exit
// 128 + SIGINT having saved its weights, and leave nothing behind.
static inline void e2e_interrupt_once_training(e2e_run_result *r, const char *const *args, const char *metrics) {
    pid_t pid = e2e_start_argv(r, NULL, args);
    double deadline = hw_now() + 120;
    while (e2e_count_lines(metrics) < 3 && hw_now() < deadline) e2e_sleep_ms(20);
    int lines = e2e_count_lines(metrics);
    kill(pid, SIGINT);
    e2e_wait_within(r, 60);
    cr_assert_geq(lines, 3, "no training progress within 120 s; stderr: %s", r->err);
    e2e_assert_exit(r, 128 + SIGINT);
    cr_expect(strstr(r->out, "interrupted by SIGINT") && strstr(r->out, "saved the current weights"), "stdout: %s",
              r->out);
    e2e_assert_left_nothing(r);
}

#endif
