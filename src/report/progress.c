// progress: the live line of a run (epoch, samples, samples/s, running loss, ETA).
#include "hw/progress.h"

#include "hw/std_streams.h"

#include <stdio.h>

#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

void hw_progress_start(hw_progress *p, int quiet, int64_t total_samples) {
    p->quiet = quiet;
    p->live = isatty(STDERR_FILENO);
    p->started = hw_now();
    p->last_print = p->started;
    p->total_samples = total_samples;
    p->line_open = 0;
    p->stdout_closed = 0;
    p->silent = 0;
}

static void format_duration(double seconds, char *buf, size_t cap) {
    if (seconds < 0 || seconds > 1e7) {
        snprintf(buf, cap, "--:--");
        return;
    }
    int s = (int)(seconds + 0.5);
    if (s >= 3600) {
        snprintf(buf, cap, "%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
    } else {
        snprintf(buf, cap, "%d:%02d", s / 60, s % 60);
    }
}

void hw_progress_update(hw_progress *p, int epoch, int epochs, int64_t samples_done, double running_loss) {
    if (p->quiet || p->silent) return;
    double now = hw_now();
    double interval = p->live ? 0.25 : 5.0;
    if (now - p->last_print < interval) return;
    p->last_print = now;

    double elapsed = now - p->started;
    double rate = elapsed > 0 ? (double)samples_done / elapsed : 0;
    double eta = rate > 0 ? (double)(p->total_samples - samples_done) / rate : -1;
    char eta_text[32];
    format_duration(eta, eta_text, sizeof eta_text);
    double percent = p->total_samples > 0 ? 100.0 * (double)samples_done / (double)p->total_samples : 0;

    fprintf(stderr, "%sepoch %d/%d  %lld/%lld samples (%.0f%%)  %.0f samples/s  loss %.4f  ETA %s%s",
            p->live ? "\r\033[K" : "", epoch, epochs, (long long)samples_done, (long long)p->total_samples, percent,
            rate, running_loss, eta_text, p->live ? "" : "\n");
    p->line_open = p->live;
    fflush(stderr);
}

void hw_progress_message(hw_progress *p, const char *fmt, ...) {
    if (p->silent) return;
    if (p->line_open) {
        fprintf(stderr, "\r\033[K");
        p->line_open = 0;
    }
    if (p->stdout_closed) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    if (hw_stdout_flush() != 0 && hw_stdout_reader_gone(errno)) {
        // Whoever read stdout is gone (`| head -1`, or stdout closed: `>&-`); SIGPIPE is ignored
        // (main.c), so the run goes on: it trains, saves its checkpoint and writes its metrics,
        // and prints nothing more.
        p->stdout_closed = 1;
        clearerr(stdout);
        if (!p->quiet) fprintf(stderr, "hogwild: stdout was closed; training goes on without printing results\n");
    }
}
