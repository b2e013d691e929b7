// metrics: one CSV row per evaluation, the input of `hogwild compare`.
#include "hw/train.h"

#include "hw/err.h"

#include <errno.h>
#include <math.h>
#include <string.h>

int hw_metrics_open(hw_metrics *m, const char *path, const hw_train_config *config) {
    memset(m, 0, sizeof *m);
    m->path = path;
    m->file = fopen(path, "w");
    if (!m->file) return hw_fail_errno(errno, "--metrics: cannot write '%s'", path);
    snprintf(m->mode, sizeof m->mode, "%s", config->mode == HW_MODE_HOGWILD ? "hogwild" : "dataparallel");
    m->workers = config->workers;
    if (config->mode == HW_MODE_DATAPARALLEL && config->device.type == HW_DEVICE_CUDA && config->n_gpus > 0) {
        size_t used = 0;
        for (int i = 0; i < config->n_gpus && used < sizeof m->device; i++) {
            used += (size_t)snprintf(m->device + used, sizeof m->device - used, "%scuda:%d", i ? "+" : "",
                                     config->gpus[i]);
        }
    } else {
        hw_device_format(config->device, m->device, sizeof m->device);
    }
    fprintf(m->file, "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy\n");
    fflush(m->file);
    return HW_OK;
}

int hw_metrics_row(hw_metrics *m, double wall_seconds, int epoch, int64_t samples_seen, double train_loss,
                   double test_loss, double test_accuracy) {
    if (!m->file) return HW_OK;
    char train_text[32];
    if (isnan(train_loss)) {
        snprintf(train_text, sizeof train_text, "nan");
    } else {
        snprintf(train_text, sizeof train_text, "%.6f", train_loss);
    }
    fprintf(m->file, "%s,%d,%s,%.3f,%d,%lld,%s,%.6f,%.2f\n", m->mode, m->workers, m->device, wall_seconds, epoch,
            (long long)samples_seen, train_text, test_loss, test_accuracy);
    // Flushed row by row: a run stopped by Ctrl-C keeps every row written so far.
    if (fflush(m->file) != 0) return hw_fail_errno(errno, "--metrics: cannot write '%s'", m->path);
    return HW_OK;
}

int hw_metrics_close(hw_metrics *m) {
    if (!m->file) return HW_OK;
    int failed = fclose(m->file) != 0;
    m->file = NULL;
    if (failed) return hw_fail_errno(errno, "--metrics: cannot write '%s'", m->path);
    return HW_OK;
}
