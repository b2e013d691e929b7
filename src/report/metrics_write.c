// metrics_write: one CSV row per evaluation, the input of `hogwild compare`; the columns are
// hw_metrics_columns (metrics_format.c).
//
// Each row is formatted in memory and written with one write(), so the file only ever holds whole
// rows. A write that fails or is short (a full disk, a file size limit) is undone with ftruncate to
// the last whole row, and the run goes on WITHOUT metrics: training and checkpoints matter more
// than the curve. The failure is printed when it happens and again in the run's summary.
//
// The file is opened (or created) when the run is set up, so that a path that cannot be written
// fails then and the descriptor is held from the start; but an existing file is replaced only once
// training has started (hw_metrics_commit): until then the header and rows wait in memory. A run
// that fails in its set-up (no GPU, MPI, a worker that cannot start) leaves the previous file as
// it was, and removes the file it created.
#include "hw/metrics.h"

#include "hw/err.h"
#include "hw/option.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Writes all of text or nothing: on failure the file is cut back to where it was. Returns the
// errno of the failure (EIO for a short write that makes no progress), 0 when it was all written.
static int write_whole(hw_metrics *m, const char *text, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t put = write(m->fd, text + done, len - done);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) {
            int err = put < 0 ? errno : EIO;
            if (ftruncate(m->fd, (off_t)m->bytes) == 0) lseek(m->fd, (off_t)m->bytes, SEEK_SET);
            return err;
        }
        done += (size_t)put;
    }
    m->bytes += (long long)len;
    return 0;
}

// Keeps `text` for the commit (before it, nothing is written); an errno when out of memory.
static int keep_pending(hw_metrics *m, const char *text, size_t len) {
    char *bigger = realloc(m->pending, m->pending_len + len);
    if (!bigger) return ENOMEM;
    memcpy(bigger + m->pending_len, text, len);
    m->pending = bigger;
    m->pending_len += len;
    return 0;
}

// Writes text, or keeps it until the commit.
static int put(hw_metrics *m, const char *text, size_t len) {
    return m->committed ? write_whole(m, text, len) : keep_pending(m, text, len);
}

// The header: every column's name, --measure's only `with_measure`.
static int format_header(char *line, size_t cap, int with_measure) {
    int n = with_measure ? HW_METRICS_N_COLUMNS : HW_METRICS_FIRST_MEASURE;
    size_t used = 0;
    for (int c = 0; c < n && used < cap; c++) {
        used += (size_t)snprintf(line + used, cap - used, "%s%s", c ? "," : "", hw_metrics_columns[c].name);
    }
    if (used < cap) used += (size_t)snprintf(line + used, cap - used, "\n");
    return used < cap ? (int)used : -1;
}

int hw_metrics_open(hw_metrics *m, const char *path, const hw_metrics_run *run) {
    memset(m, 0, sizeof *m);
    m->path = path;
    // Not O_TRUNC: the file keeps its contents until the commit.
    m->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    m->created = m->fd >= 0;
    if (m->fd < 0 && errno == EEXIST) m->fd = open(path, O_WRONLY | O_CLOEXEC);
    if (m->fd < 0) {
        return hw_fail_errno(errno, "cannot write the metrics file '%s'%s", path, hw_option_hint(HW_OPTION_METRICS));
    }
    snprintf(m->mode, sizeof m->mode, "%s", run->mode);
    m->workers = run->workers;
    snprintf(m->device, sizeof m->device, "%s", run->device);
    // A comma or a blank would split or be trimmed from the field: the name is written without them.
    snprintf(m->model, sizeof m->model, "%s", run->model && run->model[0] ? run->model : "unknown");
    for (char *c = m->model; *c; c++) {
        if (*c == ',' || *c == ' ' || *c == '\t' || *c == '\r' || *c == '\n') *c = '_';
    }
    m->seed = run->seed;
    m->setup = run->setup;
    // The command line escaped what a field cannot hold; a comma or line end that came another way
    // would still split the row, and is written as '_'.
    snprintf(m->settings, sizeof m->settings, "%s", run->settings ? run->settings : "");
    for (char *c = m->settings; *c; c++) {
        if (*c == ',' || *c == '\r' || *c == '\n') *c = '_';
    }
    m->with_measure = run->with_measure;
    hw_metrics_measure_none(&m->measure);
    char line[1024];
    int len = format_header(line, sizeof line, m->with_measure);
    int err = len > 0 ? keep_pending(m, line, (size_t)len) : EOVERFLOW;
    if (err) {
        close(m->fd);
        if (m->created) unlink(path);
        m->fd = -1;
        return hw_fail_errno(err, "cannot write the metrics file '%s'%s", path, hw_option_hint(HW_OPTION_METRICS));
    }
    m->open = 1;
    return HW_OK;
}

// A write that failed: no more rows, said now and in the summary, with what the file holds: a
// failure at the commit (the first write) leaves it empty, a later one the header and the rows
// before it.
static void stop_writing(hw_metrics *m, int err) {
    m->failed = 1;
    const char *file = m->path, *hint = hw_option_hint(HW_OPTION_METRICS), *why = strerror(err);
    if (m->committed && m->bytes > 0) {
        snprintf(m->failure, sizeof m->failure,
                 "the metrics file %s%s: writing stopped after %d row(s): %s; the file holds its header and those "
                 "rows, whole; training goes on without metrics",
                 file, hint, m->rows, why);
    } else {
        snprintf(
            m->failure, sizeof m->failure,
            "the metrics file %s%s: writing it failed: %s; %s; training goes on without metrics", file, hint, why,
            m->committed ? "the file is empty (not even its header could be written)" : "nothing was written to it");
    }
    fprintf(stderr, "hogwild: warning: %s\n", m->failure);
}

void hw_metrics_commit(hw_metrics *m) {
    if (!m->open || m->committed) return;
    m->committed = 1;
    m->bytes = 0;
    int err = ftruncate(m->fd, 0) == 0 && lseek(m->fd, 0, SEEK_SET) == 0 ? 0 : errno;
    if (err == 0) err = write_whole(m, m->pending, m->pending_len);
    free(m->pending);
    m->pending = NULL;
    m->pending_len = 0;
    if (err) m->rows = 0;
    if (err) stop_writing(m, err);
}

// A number of the CSV: "nan", "inf" and "-inf" spelled the same on every libc (glibc writes "-nan").
static void format_value(char *buf, size_t cap, const char *format, double value) {
    if (isnan(value)) snprintf(buf, cap, "nan");
    else if (isinf(value)) snprintf(buf, cap, "%s", value > 0 ? "inf" : "-inf");
    else snprintf(buf, cap, format, value);
}

// Column c of a row into buf. The losses and the accuracy spell their non-finite values alike
// everywhere (format_value); --measure's numbers are written as printf writes them.
static void format_column(const hw_metrics *m, const hw_metrics_point *pt, int c, char *buf, size_t cap) {
    const char *f = hw_metrics_columns[c].format;
    const hw_metrics_measure *v = &m->measure;
    switch ((hw_metrics_column)c) {
    case HW_COL_MODE: snprintf(buf, cap, f, m->mode); return;
    case HW_COL_WORKERS: snprintf(buf, cap, f, m->workers); return;
    case HW_COL_DEVICE: snprintf(buf, cap, f, m->device); return;
    case HW_COL_WALL_SECONDS: snprintf(buf, cap, f, pt->wall_seconds); return;
    case HW_COL_EPOCH: snprintf(buf, cap, f, (int)pt->epoch); return;
    case HW_COL_SAMPLES_SEEN: snprintf(buf, cap, f, (long long)pt->samples_seen); return;
    case HW_COL_TRAIN_LOSS: format_value(buf, cap, f, pt->train_loss); return;
    case HW_COL_TEST_LOSS: format_value(buf, cap, f, pt->test_loss); return;
    case HW_COL_TEST_ACCURACY: format_value(buf, cap, f, pt->test_accuracy); return;
    case HW_COL_SKIPPED_EVAL_POINTS: snprintf(buf, cap, f, (long long)m->skipped_eval_points); return;
    case HW_COL_LR: format_value(buf, cap, f, m->lr); return;
    case HW_COL_MODEL: snprintf(buf, cap, f, m->model); return;
    case HW_COL_SEED: snprintf(buf, cap, f, (unsigned long long)m->seed); return;
    case HW_COL_SETUP: snprintf(buf, cap, f, (unsigned long long)m->setup); return;
    case HW_COL_SETTINGS: snprintf(buf, cap, f, m->settings); return;
    case HW_COL_UPDATES: snprintf(buf, cap, f, (long long)v->updates); return;
    case HW_COL_STALENESS_MEAN: snprintf(buf, cap, f, v->staleness_mean); return;
    case HW_COL_STALENESS_MEDIAN: snprintf(buf, cap, f, (long long)v->staleness_median); return;
    case HW_COL_STALENESS_P99: snprintf(buf, cap, f, (long long)v->staleness_p99); return;
    case HW_COL_STALENESS_MAX: snprintf(buf, cap, f, (long long)v->staleness_max); return;
    case HW_COL_STALENESS_US_MEAN: snprintf(buf, cap, f, v->staleness_us_mean); return;
    case HW_COL_STALENESS_US_MAX: snprintf(buf, cap, f, v->staleness_us_max); return;
    case HW_COL_OVERLAP_FRACTION: snprintf(buf, cap, f, v->overlap_fraction); return;
    case HW_COL_COMPUTE_US_PER_STEP: snprintf(buf, cap, f, v->compute_us_per_step); return;
    case HW_COL_UPDATE_US_PER_STEP: snprintf(buf, cap, f, v->update_us_per_step); return;
    case HW_COL_LOST_FRACTION: snprintf(buf, cap, f, v->lost_fraction); return;
    case HW_COL_STALENESS_HISTOGRAM: {
        size_t used = 0;
        for (int b = 0; b < HW_METRICS_STALE_BINS && used < cap; b++) {
            if (b) used += (size_t)snprintf(buf + used, cap - used, ";");
            if (used < cap) used += (size_t)snprintf(buf + used, cap - used, f, (long long)v->staleness_hist[b]);
        }
        return;
    }
    case HW_METRICS_N_COLUMNS: break;
    }
    buf[0] = '\0';
}

int hw_metrics_row(hw_metrics *m, double wall_seconds, int epoch, int64_t samples_seen, double train_loss,
                   double test_loss, double test_accuracy) {
    if (!m->open || m->failed) return HW_OK;
    hw_metrics_point pt = {wall_seconds, epoch, samples_seen, train_loss, test_loss, test_accuracy};
    char row[2048], field[320];
    size_t len = 0;
    int n = m->with_measure ? HW_METRICS_N_COLUMNS : HW_METRICS_FIRST_MEASURE;
    for (int c = 0; c < n && len < sizeof row; c++) {
        format_column(m, &pt, c, field, sizeof field);
        len += (size_t)snprintf(row + len, sizeof row - len, "%s%s", c ? "," : "", field);
    }
    int err = EOVERFLOW;
    if (len + 1 < sizeof row) {
        row[len++] = '\n';
        err = put(m, row, len);
    }
    if (err == 0) {
        m->rows++;
        return HW_OK;
    }
    stop_writing(m, err);
    return HW_OK;
}

int hw_metrics_close(hw_metrics *m) {
    if (!m->open) return HW_OK;
    m->open = 0;
    // Never committed: the run did not start training. A file it created goes; one that was there
    // stays as it was.
    if (!m->committed && m->created) unlink(m->path);
    free(m->pending);
    m->pending = NULL;
    int closed = close(m->fd);
    m->fd = -1;
    if (closed != 0 && m->committed && !m->failed) {
        return hw_fail_errno(errno, "cannot write the metrics file '%s'%s", m->path, hw_option_hint(HW_OPTION_METRICS));
    }
    return HW_OK;
}
