// metrics_format: the columns of a metrics CSV (include/hw/metrics.h), the one definition that the
// writer and the reader both go by.
#include "hw/metrics.h"

#include <math.h>
#include <string.h>

const hw_metrics_column_info hw_metrics_columns[HW_METRICS_N_COLUMNS] = {
    [HW_COL_MODE] = {"mode", "%s", 1},
    [HW_COL_WORKERS] = {"workers", "%d", 1},
    [HW_COL_DEVICE] = {"device", "%s", 1},
    [HW_COL_WALL_SECONDS] = {"wall_seconds", "%.3f", 1},
    [HW_COL_EPOCH] = {"epoch", "%d", 1},
    [HW_COL_SAMPLES_SEEN] = {"samples_seen", "%lld", 1},
    [HW_COL_TRAIN_LOSS] = {"train_loss", "%.6f", 1},
    [HW_COL_TEST_LOSS] = {"test_loss", "%.6f", 1},
    [HW_COL_TEST_ACCURACY] = {"test_accuracy", "%.2f", 1},
    [HW_COL_SKIPPED_EVAL_POINTS] = {"skipped_eval_points", "%lld", 0},
    [HW_COL_LR] = {"lr", "%.9g", 0},  // every bit of the float rate the steps use
    [HW_COL_MODEL] = {"model", "%s", 0},
    [HW_COL_SEED] = {"seed", "%llu", 0},
    [HW_COL_SETUP] = {"setup", "%016llx", 0},
    [HW_COL_SETTINGS] = {"settings", "%s", 0},
    [HW_COL_UPDATES] = {"updates", "%lld", 0},
    [HW_COL_STALENESS_MEAN] = {"staleness_mean", "%.4f", 0},
    [HW_COL_STALENESS_MEDIAN] = {"staleness_median", "%lld", 0},
    [HW_COL_STALENESS_P99] = {"staleness_p99", "%lld", 0},
    [HW_COL_STALENESS_MAX] = {"staleness_max", "%lld", 0},
    [HW_COL_STALENESS_US_MEAN] = {"staleness_us_mean", "%.1f", 0},
    [HW_COL_STALENESS_US_MAX] = {"staleness_us_max", "%.1f", 0},
    [HW_COL_OVERLAP_FRACTION] = {"overlap_fraction", "%.6f", 0},
    [HW_COL_COMPUTE_US_PER_STEP] = {"compute_us_per_step", "%.2f", 0},
    [HW_COL_UPDATE_US_PER_STEP] = {"update_us_per_step", "%.2f", 0},
    [HW_COL_LOST_FRACTION] = {"lost_fraction", "%.6g", 0},
    [HW_COL_STALENESS_HISTOGRAM] = {"staleness_histogram", "%lld", 0},
};

void hw_metrics_measure_none(hw_metrics_measure *measure) {
    memset(measure, 0, sizeof *measure);
    measure->staleness_mean = NAN;
    measure->staleness_us_mean = NAN;
    measure->staleness_us_max = NAN;
    measure->overlap_fraction = NAN;
    measure->compute_us_per_step = NAN;
    measure->update_us_per_step = NAN;
    measure->lost_fraction = NAN;
}
