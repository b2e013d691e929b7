// Tests of the progress line (src/report/progress.c): what a run shows on a terminal and in a log.
#include "hw/progress.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Runs fn with stderr going to a temporary file; returns what it wrote (malloc'ed).
static char *captured_stderr(void (*fn)(hw_progress *), hw_progress *p) {
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    cr_assert(saved >= 0);
    dup2(fileno(tmp), STDERR_FILENO);
    fn(p);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    long n = ftell(tmp);
    char *text = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    cr_assert_not_null(text);
    rewind(tmp);
    if (n > 0) cr_assert_eq(fread(text, 1, (size_t)n, tmp), (size_t)n);
    fclose(tmp);
    return text;
}

// Started 10 s ago, 1000 of 4000 samples done: 100 samples/s, 30 s to go.
static void update_a_quarter_done(hw_progress *p) {
    p->started = hw_now() - 10.0;
    p->last_print = p->started;
    hw_progress_update(p, 1, 2, 1000, 0.25);
}

// 10 of 1,000,000 samples in 10 s: over an hour to go.
static void update_barely_started(hw_progress *p) {
    p->started = hw_now() - 10.0;
    p->last_print = p->started;
    hw_progress_update(p, 1, 1, 10, 2.5);
}

// Nothing done yet: no rate, so no ETA.
static void update_nothing_done(hw_progress *p) {
    p->started = hw_now() - 10.0;
    p->last_print = p->started;
    hw_progress_update(p, 1, 1, 0, 0.0);
}

static void update_twice_at_once(hw_progress *p) {
    update_a_quarter_done(p);
    hw_progress_update(p, 1, 2, 1100, 0.25);  // within the interval: nothing
}

Test(progress, live_line_on_a_terminal) {
    hw_progress p;
    hw_progress_start(&p, 0, 4000);
    p.live = 1;  // as when stderr is a terminal
    char *out = captured_stderr(update_a_quarter_done, &p);
    cr_expect_str_eq(out, "\r\033[Kepoch 1/2  1000/4000 samples (25%)  100 samples/s  loss 0.2500  ETA 0:30");
    cr_expect(p.line_open, "the live line stays open");
    free(out);
    out = captured_stderr(update_twice_at_once, &p);
    cr_expect_eq(strstr(out, "1100"), NULL, "printed twice within a quarter second: %s", out);
    free(out);
}

Test(progress, plain_lines_in_a_log_and_long_etas) {
    hw_progress p;
    hw_progress_start(&p, 0, 1000000);
    p.live = 0;
    char *out = captured_stderr(update_barely_started, &p);
    cr_expect(strstr(out, "ETA 277:46:") != NULL && out[strlen(out) - 1] == '\n', "hours:minutes:seconds: %s", out);
    cr_expect_not(p.line_open, "a plain line is ended");
    free(out);
    out = captured_stderr(update_nothing_done, &p);
    cr_expect(strstr(out, "ETA --:--\n") != NULL, "%s", out);
    free(out);
}

Test(progress, quiet_prints_no_progress) {
    hw_progress p;
    hw_progress_start(&p, 1, 4000);
    p.live = 1;
    char *out = captured_stderr(update_a_quarter_done, &p);
    cr_expect_str_empty(out);
    free(out);
}

static void message_after_live_line(hw_progress *p) {
    update_a_quarter_done(p);
    hw_progress_message(p, "epoch %d done\n", 1);
}

// A result line clears the live line first, so that the two never share a line.
Test(progress, message_clears_the_live_line) {
    hw_progress p;
    hw_progress_start(&p, 0, 4000);
    p.live = 1;
    fflush(stdout);
    char *err = captured_stderr(message_after_live_line, &p);
    const char *line = strstr(err, "ETA 0:30");
    cr_assert_not_null(line, "%s", err);
    cr_expect_str_eq(line, "ETA 0:30\r\033[K", "the live line, then its erasure");
    cr_expect_not(p.line_open);
    free(err);
}
