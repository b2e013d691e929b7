// Tests of the metrics CSV writer (src/train/metrics.c): the columns `hogwild compare` reads, and
// the replicas (not the Hogwild workers) in the workers column of a DataParallel run.
#include "hw/compare.h"
#include "hw/err.h"
#include "hw/train.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_and_read(const hw_train_config *config, hw_metrics_table *table) {
    char path[] = "/tmp/hw-metrics-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    hw_metrics m;
    cr_assert_eq(hw_metrics_open(&m, path, config), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_metrics_row(&m, 0.5, 0, 0, NAN, 2.3, 10.0), HW_OK);
    cr_assert_eq(hw_metrics_row(&m, 1.5, 1, 600, 0.75, 0.5, 90.25), HW_OK);
    cr_assert_eq(hw_metrics_close(&m), HW_OK);
    cr_assert_eq(hw_metrics_table_read(table, path), HW_OK, "%s", hw_error());
    unlink(path);
}

Test(metrics, dataparallel_on_gpus_names_replicas_and_devices) {
    hw_train_config config;
    hw_train_config_default(&config);
    config.mode = HW_MODE_DATAPARALLEL;
    config.workers = 7;  // Hogwild's, not used by DataParallel
    config.replicas = 3;
    config.device = (hw_device){HW_DEVICE_CUDA, 1};
    config.n_gpus = 3;
    config.gpus[0] = 1, config.gpus[1] = 1, config.gpus[2] = 0;
    hw_metrics_table t;
    write_and_read(&config, &t);
    cr_expect_str_eq(t.mode, "dataparallel");
    cr_expect_eq(t.workers, 3, "the replicas");
    cr_expect_str_eq(t.device, "cuda:1+cuda:1+cuda:0");
    cr_assert_eq(t.n_points, 2);
    cr_expect(isnan(t.points[0].train_loss), "the first row has no train loss");
    cr_expect_eq(t.points[1].samples_seen, 600);
    cr_expect_float_eq(t.points[1].test_accuracy, 90.25, 1e-9);
    hw_metrics_table_free(&t);
}

Test(metrics, hogwild_names_workers_and_device) {
    hw_train_config config;
    hw_train_config_default(&config);
    config.workers = 4;
    hw_metrics_table t;
    write_and_read(&config, &t);
    cr_expect_str_eq(t.mode, "hogwild");
    cr_expect_eq(t.workers, 4);
    cr_expect_str_eq(t.device, "cpu");
    hw_metrics_table_free(&t);
}
