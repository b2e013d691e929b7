// Tests of the compare module: the metrics CSV reader.
#include "hw/compare.h"
#include "hw/err.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEADER "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy\n"

static char tmp_dir[64];

static void make_tmp_dir(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/hw_compare_XXXXXX");
    cr_assert_not_null(mkdtemp(tmp_dir));
}

static void remove_tmp_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    cr_expect_eq(system(cmd), 0);
}

// Writes `text` to tmp_dir/name; the returned path is static storage, one of four in turn.
static const char *write_file(const char *name, const char *text) {
    static char paths[4][256];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, 256, "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return path;
}

static const char *good_hogwild = HEADER
    "hogwild,4,cpu,0.000,0,0,nan,2.3051,9.82\n"
    "hogwild,4,cpu,3.412,0,20000,0.8123,0.4012,88.40\n"
    "hogwild,4,cpu,9.876,1,60000,0.3110,0.1021,96.93\n"
    "hogwild,4,cpu,15.000,2,120000,0.1500,0.0700,98.50\n";

TestSuite(compare, .init = make_tmp_dir, .fini = remove_tmp_dir);

Test(compare, reads_a_well_formed_file) {
    hw_run_log log;
    const char *path = write_file("hw4.csv", good_hogwild);
    cr_assert_eq(hw_run_log_read(&log, path), HW_OK, "%s", hw_error());
    cr_expect_str_eq(log.mode, "hogwild");
    cr_expect_eq(log.workers, 4);
    cr_expect_str_eq(log.device, "cpu");
    cr_assert_eq(log.n_points, 4);
    cr_expect(isnan(log.points[0].train_loss));
    cr_expect_float_eq(log.points[0].test_loss, 2.3051, 1e-12);
    cr_expect_float_eq(log.points[2].wall_seconds, 9.876, 1e-12);
    cr_expect_eq(log.points[2].epoch, 1);
    cr_expect_eq(log.points[2].samples_seen, 60000);
    cr_expect_float_eq(log.points[2].train_loss, 0.3110, 1e-12);
    cr_expect_float_eq(log.points[3].test_accuracy, 98.50, 1e-12);
    hw_run_log_free(&log);
}

Test(compare, columns_by_name_crlf_and_blank_lines) {
    hw_run_log log;
    const char *path = write_file("dp.csv",
                                  "test_accuracy,extra,device,mode,workers,epoch,samples_seen,wall_seconds,"
                                  "test_loss,train_loss\r\n"
                                  "91.5,x,cuda:0+cuda:1,dataparallel,2,0,20000,1.5,0.3,0.4\r\n"
                                  "\r\n"
                                  "97.25 , y, cuda:0+cuda:1 ,dataparallel,2,1,60000,4.0,0.1,nan\r\n");
    cr_assert_eq(hw_run_log_read(&log, path), HW_OK, "%s", hw_error());
    cr_assert_eq(log.n_points, 2);
    cr_expect_str_eq(log.device, "cuda:0+cuda:1");
    cr_expect_float_eq(log.points[1].test_accuracy, 97.25, 1e-12);
    cr_expect_float_eq(log.points[1].wall_seconds, 4.0, 1e-12);
    cr_expect(isnan(log.points[1].train_loss));
    hw_run_log_free(&log);
}

// ---- bad input: each message names the file, and the line where there is one ----

static void expect_read_error(const char *name, const char *text, const char *where, const char *what) {
    hw_run_log log;
    const char *path = text ? write_file(name, text) : name;
    cr_assert_eq(hw_run_log_read(&log, path), HW_ERR, "%s was accepted", name);
    cr_expect_null(log.points);
    char expect[512];
    snprintf(expect, sizeof expect, "%s%s", path, where);
    cr_expect(strstr(hw_error(), expect) != NULL, "'%s' does not name '%s'", hw_error(), expect);
    cr_expect(strstr(hw_error(), what) != NULL, "'%s' does not say '%s'", hw_error(), what);
}

Test(compare, bad_files) {
    expect_read_error("/nonexistent/dir/run.csv", NULL, "", "No such file");
    expect_read_error("empty.csv", "", ":", "empty");
    expect_read_error("header.csv",
                      "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_acc\n"
                      "hogwild,4,cpu,0.0,0,0,nan,2.3,9.8\n",
                      ":1:", "'test_accuracy'");
    expect_read_error("twice.csv", "mode,workers,mode,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,"
                                   "test_accuracy\n",
                      ":1:", "'mode' appears twice");
    expect_read_error("fields.csv", HEADER "hogwild,4,cpu,0.0,0,0,nan,2.3,9.8\nhogwild,4,cpu,1.0,0,100,0.5,0.4\n", ":3:",
                      "8 fields, the header has 9");
    expect_read_error("number.csv", HEADER "hogwild,4,cpu,0.0,0,0,nan,2.3,9.8\n\nhogwild,4,cpu,1.0,0,100,0.5,0.4,9x\n",
                      ":4:", "test_accuracy is not");
    expect_read_error("samples.csv", HEADER "hogwild,4,cpu,1.0,0,1.5e3,0.5,0.4,50\n", ":2:", "samples_seen");
    expect_read_error("workers.csv", HEADER "hogwild,0,cpu,1.0,0,100,0.5,0.4,50\n", ":2:", "workers");
    expect_read_error("nanwall.csv", HEADER "hogwild,4,cpu,nan,0,100,0.5,0.4,50\n", ":2:", "wall_seconds");
    expect_read_error("percent.csv", HEADER "hogwild,4,cpu,1.0,0,100,0.5,0.4,0.97\nhogwild,4,cpu,2.0,0,200,0.5,0.4,101\n",
                      ":3:", "[0, 100]");
    expect_read_error("backwards.csv", HEADER "hogwild,4,cpu,2.0,0,100,0.5,0.4,50\nhogwild,4,cpu,1.0,0,200,0.5,0.4,60\n",
                      ":3:", "backwards");
    expect_read_error("tworuns.csv", HEADER "hogwild,4,cpu,2.0,0,100,0.5,0.4,50\nhogwild,2,cpu,3.0,0,200,0.5,0.4,60\n",
                      ":3:", "one run");
    expect_read_error("norows.csv", HEADER, ":", "no data rows");
    expect_read_error("blankrows.csv", HEADER "\n  \n", ":", "no data rows");
}

