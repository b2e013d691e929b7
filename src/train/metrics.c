// metrics: one CSV row per evaluation, the input of `hogwild compare`.
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
#include "hw/train.h"

#include "hw/err.h"
#include "measure.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char header[] =
    "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy,skipped_eval_points";

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

int hw_metrics_open(hw_metrics *m, const char *path, const hw_train_config *config) {
    memset(m, 0, sizeof *m);
    m->path = path;
    // Not O_TRUNC: the file keeps its contents until the commit.
    m->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    m->created = m->fd >= 0;
    if (m->fd < 0 && errno == EEXIST) m->fd = open(path, O_WRONLY | O_CLOEXEC);
    if (m->fd < 0) return hw_fail_errno(errno, "--metrics: cannot write '%s'", path);
    snprintf(m->mode, sizeof m->mode, "%s", config->mode == HW_MODE_HOGWILD ? "hogwild" : "dataparallel");
    // Across ranks, the world's: every rank's workers (or replicas) together.
    m->workers = (config->mode == HW_MODE_HOGWILD ? config->workers : config->replicas) * config->world.size;
    if (config->mode == HW_MODE_DATAPARALLEL && config->device.type == HW_DEVICE_CUDA && config->n_gpus > 0) {
        size_t used = 0;
        for (int i = 0; i < config->n_gpus && used < sizeof m->device; i++) {
            used += (size_t)snprintf(m->device + used, sizeof m->device - used, "%scuda:%d", i ? "+" : "",
                                     config->gpus[i]);
        }
    } else {
        hw_device_format(config->device, m->device, sizeof m->device);
    }
    m->with_measure = config->measure;
    char line[1024];
    int len = snprintf(line, sizeof line, "%s%s\n", header, m->with_measure ? measure_csv_header() : "");
    int err = len > 0 && (size_t)len < sizeof line ? keep_pending(m, line, (size_t)len) : EOVERFLOW;
    if (err) {
        close(m->fd);
        if (m->created) unlink(path);
        m->fd = -1;
        return hw_fail_errno(err, "--metrics: cannot write '%s'", path);
    }
    m->open = 1;
    return HW_OK;
}

// A write that failed: no more rows, said now and in the summary.
static void stop_writing(hw_metrics *m, int err) {
    m->failed = 1;
    snprintf(m->failure, sizeof m->failure, "--metrics %s: writing stopped after %d row(s): %s; the file holds "
             "those rows, whole; training goes on without metrics", m->path, m->rows, strerror(err));
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
    if (err) stop_writing(m, err);
}

// A number of the CSV: "nan", "inf" and "-inf" spelled the same on every libc (glibc writes "-nan").
static void format_value(char *buf, size_t cap, const char *format, double value) {
    if (isnan(value)) snprintf(buf, cap, "nan");
    else if (isinf(value)) snprintf(buf, cap, "%s", value > 0 ? "inf" : "-inf");
    else snprintf(buf, cap, format, value);
}

int hw_metrics_row(hw_metrics *m, double wall_seconds, int epoch, int64_t samples_seen, double train_loss,
                   double test_loss, double test_accuracy) {
    if (!m->open || m->failed) return HW_OK;
    char train_text[48], test_text[48], accuracy_text[48], row[1024];
    format_value(train_text, sizeof train_text, "%.6f", train_loss);
    format_value(test_text, sizeof test_text, "%.6f", test_loss);
    format_value(accuracy_text, sizeof accuracy_text, "%.2f", test_accuracy);
    int len = snprintf(row, sizeof row, "%s,%d,%s,%.3f,%d,%lld,%s,%s,%s,%lld", m->mode, m->workers, m->device,
                       wall_seconds, epoch, (long long)samples_seen, train_text, test_text, accuracy_text,
                       (long long)m->skipped_eval_points);
    if (m->with_measure && len > 0 && (size_t)len < sizeof row) {
        len += measure_csv_fields(m->measure, row + len, sizeof row - (size_t)len);
    }
    int err = EOVERFLOW;
    if (len > 0 && (size_t)len + 1 < sizeof row) {
        row[len++] = '\n';
        err = put(m, row, (size_t)len);
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
    if (closed != 0 && m->committed && !m->failed) return hw_fail_errno(errno, "--metrics: cannot write '%s'", m->path);
    return HW_OK;
}
