// sweep_run: a sweep's runs, one after another, and compare over its folder (src/cli/sweep_run.h).
//
// A run writes its metrics to DIR/.NAME.csv.part and its output to DIR/NAME.log; only a run that
// ends (exit 0, or a divergence, which is a result too) has its file renamed to DIR/NAME.csv, so a
// NAME.csv that reads is a complete run, and a sweep started again skips it. A stop signal (Ctrl-C)
// reaches the run as it reaches a run started alone: the terminal sends it to the whole process
// group; one sent to the sweep alone (kill PID) is passed on to the run. The run stops as a run
// stops (its --save checkpoint written), and the sweep exits 128 + the signal after it.
#include "cli/sweep_run.h"

#include "cli/compare_command.h"
#include "cli/options.h"
#include "cli/train_options.h"
#include "hw/clock.h"
#include "hw/err.h"
#include "hw/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t passed_on;  // the handler sent the stop to the current run
static volatile pid_t running_child;

// Records the stop and passes it on to the run, unless the kernel sent it (a terminal's Ctrl-C,
// which reached the run's process group already: a second one would end the run at once, unsaved).
static void on_stop(int sig, siginfo_t *info, void *context) {
    (void)context;
    if (!stop_signal) stop_signal = sig;
    pid_t child = running_child;
    if (child > 0 && info->si_code != SI_KERNEL && !passed_on) {
        passed_on = 1;
        kill(child, sig);
    }
}

// Catches SIGINT, SIGTERM and SIGHUP for the sweep's life, but one the shell set to be ignored (a
// background job, nohup), which the runs then ignore too (exec keeps an ignored signal ignored).
static void stop_signals_catch(void) {
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_stop;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

// The name of the training option `id` in the table ("seed"), for the runs' command lines.
static const char *train_flag(hw_option id) {
    const cli_option *o = cli_option_of(&cli_train_command, id);
    if (!o) abort();  // an id the table lacks is a mistake in the code
    return o->name;
}

void sweep_run_words(const sweep_plan *plan, const sweep_point *pt, const char *program, const char *metrics,
                     char **words, int *n, char (*texts)[64]) {
    int k = 0, t = 0;
    words[k++] = (char *)program;
    for (int i = 0; i < plan->n_flags; i++) words[k++] = plan->flags[i];
    const struct {
        hw_option id;
        const char *value;
    } own[] = {{HW_OPTION_MODE, pt->mode == HW_MODE_HOGWILD ? "hogwild" : "dataparallel"},
               {pt->mode == HW_MODE_HOGWILD ? HW_OPTION_WORKERS : HW_OPTION_REPLICAS, NULL},
               {HW_OPTION_SEED, NULL},
               {HW_OPTION_LR, pt->lr},
               {HW_OPTION_METRICS, metrics},
               {HW_OPTION_QUIET, NULL}};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        if (own[i].id == HW_OPTION_LR && !pt->lr) continue;
        snprintf(texts[t], 64, "--%s", train_flag(own[i].id));
        words[k++] = texts[t++];
        if (own[i].id == HW_OPTION_QUIET) continue;
        if (own[i].value) {
            words[k++] = (char *)own[i].value;
        } else {
            if (own[i].id == HW_OPTION_SEED) snprintf(texts[t], 64, "%llu", (unsigned long long)pt->seed);
            else snprintf(texts[t], 64, "%d", pt->workers);
            words[k++] = texts[t++];
        }
    }
    words[k] = NULL;
    *n = k;
}

typedef struct {
    char final_path[1200];  // DIR/NAME.csv
    char part_path[1200];   // DIR/.NAME.csv.part
    char log_path[1200];    // DIR/NAME.log
} run_files;

static void run_files_of(const sweep_plan *plan, const sweep_point *pt, run_files *f) {
    snprintf(f->final_path, sizeof f->final_path, "%s/%s.csv", plan->dir, pt->name);
    snprintf(f->part_path, sizeof f->part_path, "%s/.%s.csv.part", plan->dir, pt->name);
    snprintf(f->log_path, sizeof f->log_path, "%s/%s.log", plan->dir, pt->name);
}

// Starts the run and waits for it: its wait status, or -1 (the message printed) when it could not start.
static int run_child(const sweep_plan *plan, const sweep_point *pt, const run_files *f) {
    char **words = calloc((size_t)plan->n_flags + 16, sizeof *words);
    char texts[8][64];
    int n;
    if (!words) return fprintf(stderr, "hogwild sweep: out of memory\n"), -1;
    sweep_run_words(plan, pt, "hogwild", f->part_path, words, &n, texts);
    fflush(NULL);
    pid_t sweep = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        // A sweep that dies (SIGKILL) stops its run as a SIGTERM does, saved, rather than leave it
        // running unseen; the setting survives the exec. If the sweep died before this line, the
        // signal will never come: stop now.
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != sweep) _exit(128 + SIGTERM);
        int log = open(f->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (log >= 0) dup2(log, STDOUT_FILENO);
        execv("/proc/self/exe", words);
        fprintf(stderr, "hogwild sweep: cannot start /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
    }
    free(words);
    if (pid < 0) return fprintf(stderr, "hogwild sweep: cannot start a run: %s\n", strerror(errno)), -1;
    passed_on = 0;
    running_child = pid;
    // A signal that came between the check before the run and the fork is passed on now (once: a
    // second one would end the run at once, unsaved).
    if (stop_signal && !passed_on) {
        passed_on = 1;
        kill(pid, stop_signal);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    running_child = 0;
    return status;
}

// What a run that ended left: 1 when its metrics are a result (read, and the run exited 0 or
// diverged), the file renamed to its final name; 0 when not, with the reason in why[0..cap).
static int run_keep(const run_files *f, int status, hw_metrics_table *log, char *why, size_t cap) {
    int exited = WIFEXITED(status), code = exited ? WEXITSTATUS(status) : -1;
    if (!exited || (code != 0 && code != HW_EXIT_FAILURE)) {
        if (exited) snprintf(why, cap, "stopped (exit %d)", code);
        else snprintf(why, cap, "killed by %s", strsignal(WTERMSIG(status)));
        return 0;
    }
    if (hw_metrics_table_read(log, f->part_path) != HW_OK) {
        snprintf(why, cap, "failed (exit %d) without a metrics file that reads: %.900s", code, hw_error());
        return 0;
    }
    if (code != 0 && !log->diverged) {
        hw_metrics_table_free(log);
        snprintf(why, cap, "failed (exit %d; its message above, its output in %.600s)", code, f->log_path);
        return 0;
    }
    if (rename(f->part_path, f->final_path) != 0) {
        hw_metrics_table_free(log);
        snprintf(why, cap, "ended, but %.400s cannot be renamed to %.400s: %s", f->part_path, f->final_path,
                 strerror(errno));
        return 0;
    }
    return 1;
}

// "1h02m", "3m05s", "12s".
static void format_duration(double s, char *buf, size_t cap) {
    long t = s > 0 ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, cap, "%lds", t);
}

typedef struct {
    int total, ran, skipped, to_run;  // to_run: runs not done when the sweep started
    double run_seconds;               // of the runs this sweep ran
} sweep_tally;

// The progress line of a run that ended and was kept.
static void print_done(const sweep_tally *t, int i, const sweep_point *pt, const hw_metrics_table *log, double took) {
    const hw_metrics_point *last = log->diverged ? &log->diverged_at : &log->points[log->n_points - 1];
    char eta[32], took_text[32];
    format_duration(t->run_seconds / t->ran * (t->to_run - t->ran), eta, sizeof eta);
    format_duration(took, took_text, sizeof took_text);
    printf("sweep [%d/%d] %s: %s", i + 1, t->total, pt->name, took_text);
    if (log->diverged) printf(", diverged after %lld samples", (long long)log->diverged_at.samples_seen);
    else printf(", final accuracy %.2f%%", last->test_accuracy);
    if (last->wall_seconds > 0) printf(", %.0f samples/s", hw_metrics_samples_per_second(log));
    printf("; %d left, ETA %s\n", t->to_run - t->ran, eta);
    fflush(stdout);
}

// Whether the run's CSV is there and reads: done before, skipped.
static int run_done_before(const run_files *f) {
    if (access(f->final_path, F_OK) != 0) return 0;
    hw_metrics_table log;
    if (hw_metrics_table_read(&log, f->final_path) != HW_OK) {
        printf("sweep: %s is there but does not read (%s): run again\n", f->final_path, hw_error());
        return 0;
    }
    hw_metrics_table_free(&log);
    return 1;
}

// Runs point i: 0 when done (run or skipped), else the sweep's exit status.
static int sweep_point_run(const sweep_plan *plan, sweep_tally *t, int i) {
    sweep_point pt = sweep_grid_point(plan->grid, i);
    run_files f;
    run_files_of(plan, &pt, &f);
    if (run_done_before(&f)) {
        printf("sweep [%d/%d] %s: done before (%s), skipped\n", i + 1, t->total, pt.name, f.final_path);
        return 0;
    }
    if (stop_signal) return 128 + stop_signal;
    double start = hw_now();
    int status = run_child(plan, &pt, &f);
    if (status < 0) return HW_EXIT_FAILURE;
    hw_metrics_table log;
    char why[1400];
    if (!run_keep(&f, status, &log, why, sizeof why)) {
        printf("sweep [%d/%d] %s: %s\n", i + 1, t->total, pt.name, why);
        if (stop_signal) return 128 + stop_signal;
        if (WIFEXITED(status) && WEXITSTATUS(status) > 128) return WEXITSTATUS(status);
        printf("sweep: stopped; the runs done are kept: the same command again goes on from here\n");
        return HW_EXIT_FAILURE;
    }
    t->ran++;
    t->run_seconds += hw_now() - start;
    print_done(t, i, &pt, &log, hw_now() - start);
    hw_metrics_table_free(&log);
    return 0;
}

int sweep_execute(const sweep_plan *plan) {
    stop_signals_catch();
    sweep_tally t = {.total = sweep_grid_size(plan->grid)};
    for (int i = 0; i < t.total; i++) {
        sweep_point pt = sweep_grid_point(plan->grid, i);
        run_files f;
        run_files_of(plan, &pt, &f);
        t.to_run += access(f.final_path, F_OK) != 0;
    }
    printf("sweep: %d runs into %s, %d to run\n", t.total, plan->dir, t.to_run);
    fflush(stdout);
    for (int i = 0; i < t.total; i++) {
        int status = sweep_point_run(plan, &t, i);
        if (status == 0) continue;
        if (status > 128) {
            printf("sweep: interrupted by %s; the runs done are kept: the same command again goes on from here\n",
                   strsignal(status - 128));
        }
        return status;
    }
    printf("sweep: done, %d run(s) this time; compare over %s:\n\n", t.ran, plan->dir);
    fflush(stdout);
    char summary[1200];
    snprintf(summary, sizeof summary, "%s/summary.csv", plan->dir);
    return cli_compare_folder(plan->dir, summary, plan->target, stdout, stderr);
}
