// Tests of the metrics CSV writer (src/report/metrics_write.c): the columns `hogwild compare` reads,
// and the replicas (not the Hogwild workers) in the workers column of a DataParallel run.
#include "cli/run_identity.h"
#include "cli/train_options.h"
#include "hw/compare.h"
#include "hw/err.h"
#include "hw/train.h"
#include "hw/run_outputs.h"
#include "data_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_and_read(const hw_train_config *config, hw_metrics_table *table) {
    char path[] = "/tmp/hw-metrics-XXXXXX";
    write_temp_file(path, "");
    hw_metrics m;
    char device[64];
    hw_metrics_run run;
    hw_run_outputs_metrics_run(config, device, sizeof device, &run);
    cr_assert_eq(hw_metrics_open(&m, path, &run), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_metrics_row(&m, 0.5, 0, 0, NAN, 2.3, 10.0), HW_OK);
    hw_metrics_commit(&m);
    cr_assert_eq(hw_metrics_row(&m, 1.5, 1, 600, 0.75, 0.5, 90.25), HW_OK);
    cr_assert_eq(hw_metrics_close(&m), HW_OK);
    cr_assert_eq(hw_metrics_table_read(table, path), HW_OK, "%s", hw_error());
    unlink(path);
}

Test(metrics, dataparallel_on_gpus_names_replicas_and_devices) {
    hw_train_config config;
    cli_train_defaults(&config);
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
    cli_train_defaults(&config);
    config.workers = 4;
    hw_metrics_table t;
    write_and_read(&config, &t);
    cr_expect_str_eq(t.mode, "hogwild");
    cr_expect_eq(t.workers, 4);
    cr_expect_str_eq(t.device, "cpu");
    hw_metrics_table_free(&t);
}

// An existing file is replaced only once training has started (hw_metrics_commit): a run that
// fails in its set-up (issue 21, case 12: --device cuda without a GPU) leaves it as it was, and a
// file the run created is removed.
Test(metrics, a_file_is_replaced_only_at_the_commit) {
    hw_metrics_run config = {.mode = "hogwild", .workers = 2, .device = "cpu"};
    char path[] = "/tmp/hw-metrics-XXXXXX";
    static const char before[] = "the rows of an earlier run\n";
    write_temp_file(path, before);
    hw_metrics m;
    cr_assert_eq(hw_metrics_open(&m, path, &config), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_metrics_row(&m, 0, 0, 0, NAN, 2.3, 10.0), HW_OK);
    cr_assert_eq(hw_metrics_close(&m), HW_OK);
    char text[256] = "";
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    cr_expect_str_eq(text, before, "the file was changed by a run that never started training");

    cr_assert_eq(hw_metrics_open(&m, path, &config), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_metrics_row(&m, 0, 0, 0, NAN, 2.3, 10.0), HW_OK);
    hw_metrics_commit(&m);
    cr_assert_eq(hw_metrics_row(&m, 1.0, 1, 100, 0.5, 0.4, 90.0), HW_OK);
    cr_assert_eq(hw_metrics_close(&m), HW_OK);
    hw_metrics_table t;
    cr_assert_eq(hw_metrics_table_read(&t, path), HW_OK, "%s", hw_error());
    cr_expect_eq(t.n_points, 2, "both rows, the one kept before the commit and the one after");
    hw_metrics_table_free(&t);

    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(hw_metrics_open(&m, path, &config), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_metrics_close(&m), HW_OK);
    cr_expect_neq(access(path, F_OK), 0, "a file made by a run that never started is removed");
}

// The settings column: the command line's settings that are not at their defaults, each value in
// its shortest spelling, escaped where a CSV field could not hold it, read back as written.
Test(metrics, the_settings_column_names_what_the_command_line_changed) {
    hw_train_config config;
    cli_train_defaults(&config);
    char *argv[] = {"hogwild", "--lr", "0.02", "--lr-schedule", "cosine", "--data", "my data,v2", "--epochs", "1"};
    cli_parsed given;
    cr_assert_eq(cli_parse(&cli_train_command, 9, argv, &config, &given), HW_EXIT_OK, "%s", given.error);
    char settings[HW_METRICS_SETTINGS_CAP];
    config.setup_hash = cli_run_setup(&cli_train_command, &given, settings, sizeof settings);
    config.settings = settings;
    cli_parsed_free(&given);
    hw_metrics_table t;
    write_and_read(&config, &t);
    cr_expect(t.has_settings);
    cr_expect(strstr(t.settings, "lr=0.02"), "%s", t.settings);
    cr_expect(strstr(t.settings, "lr-schedule=cosine"), "%s", t.settings);
    cr_expect(strstr(t.settings, "data=my%20data%2Cv2"), "%s", t.settings);
    cr_expect(!strstr(t.settings, "epochs"), "epochs 1 is the default, so no setting: %s", t.settings);
    hw_metrics_table_free(&t);
}

// One file is one run: settings that change between rows are refused, naming the column.
Test(metrics, settings_that_change_between_rows_are_refused) {
    char path[] = "/tmp/hw-metrics-XXXXXX";
    write_temp_file(path, "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy,"
                          "model,seed,setup,settings\n"
                          "hogwild,1,cpu,0.000,0,0,nan,2.3,10.00,mlp,1,0000000000000001,lr=0.02\n"
                          "hogwild,1,cpu,1.000,1,600,0.5,0.4,90.00,mlp,1,0000000000000001,lr=0.03\n");
    hw_metrics_table t;
    cr_expect_eq(hw_metrics_table_read(&t, path), HW_ERR);
    cr_expect(strstr(hw_error(), "settings changed"), "%s", hw_error());
    unlink(path);
}
