// csv: reads one metrics CSV file (the trainer's --metrics output) into an hw_run_log.
//
// The format is plain: no quoting (no field of ours holds a comma), fields trimmed of spaces,
// CRLF tolerated, blank lines skipped. Columns are looked up by name in the header.
#include "hw/compare.h"
#include "hw/err.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { COL_MODE, COL_WORKERS, COL_DEVICE, COL_WALL, COL_EPOCH, COL_SAMPLES, COL_TRAIN_LOSS, COL_TEST_LOSS,
       COL_TEST_ACC, N_COLS };

static const char *const column_names[N_COLS] = {
    "mode", "workers", "device", "wall_seconds", "epoch", "samples_seen", "train_loss", "test_loss", "test_accuracy",
};

enum { MAX_FIELDS = 64 };

// Splits `line` in place at commas into trimmed fields; returns their count, or MAX_FIELDS + 1
// when there are more than MAX_FIELDS.
static int split_fields(char *line, char **fields) {
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == MAX_FIELDS) return MAX_FIELDS + 1;
        char *end = strchr(p, ',');
        if (end) *end = '\0';
        while (*p == ' ' || *p == '\t') p++;
        size_t len = strlen(p);
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) p[--len] = '\0';
        fields[n++] = p;
        if (!end) return n;
        p = end + 1;
    }
}

static void strip_newline(char *line) {
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
}

static int is_blank(const char *line) {
    for (; *line; line++) {
        if (*line != ' ' && *line != '\t') return 0;
    }
    return 1;
}

// A double, the whole field. "nan" is accepted only where allow_nan.
static int parse_double(const char *text, int allow_nan, double *out) {
    if (*text == '\0') return HW_ERR;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*end != '\0' || errno == ERANGE) return HW_ERR;
    if (isnan(v) ? !allow_nan : isinf(v)) return HW_ERR;
    *out = v;
    return HW_OK;
}

static int parse_int(const char *text, int64_t min, int64_t *out) {
    if (*text == '\0') return HW_ERR;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*end != '\0' || errno == ERANGE || v < min) return HW_ERR;
    *out = v;
    return HW_OK;
}

// Finds each known column in the header; fails naming the first missing one.
static int map_header(char **fields, int n_fields, const char *path, int *col) {
    for (int c = 0; c < N_COLS; c++) {
        col[c] = -1;
        for (int f = 0; f < n_fields; f++) {
            if (strcmp(fields[f], column_names[c]) != 0) continue;
            if (col[c] >= 0) return hw_fail("%s:1: column '%s' appears twice in the header", path, column_names[c]);
            col[c] = f;
        }
    }
    for (int c = 0; c < N_COLS; c++) {
        if (col[c] < 0) {
            return hw_fail("%s:1: the header lacks the column '%s' (expected %s,%s,%s,%s,%s,%s,%s,%s,%s)", path,
                           column_names[c], column_names[0], column_names[1], column_names[2], column_names[3],
                           column_names[4], column_names[5], column_names[6], column_names[7], column_names[8]);
        }
    }
    return HW_OK;
}

// Parses one data row into *pt and checks it against the run so far (log->n_points rows).
static int parse_row(hw_run_log *log, char **fields, const int *col, const char *path, long line_no,
                     hw_run_point *pt) {
    const char *mode = fields[col[COL_MODE]];
    const char *device = fields[col[COL_DEVICE]];
    int64_t workers;
    if (*mode == '\0') return hw_fail("%s:%ld: mode is empty", path, line_no);
    if (*device == '\0') return hw_fail("%s:%ld: device is empty", path, line_no);
    if (parse_int(fields[col[COL_WORKERS]], 1, &workers) != HW_OK || workers > 1000000) {
        return hw_fail("%s:%ld: workers is not a positive integer: '%s'", path, line_no, fields[col[COL_WORKERS]]);
    }
    if (parse_double(fields[col[COL_WALL]], 0, &pt->wall_seconds) != HW_OK || pt->wall_seconds < 0) {
        return hw_fail("%s:%ld: wall_seconds is not a number >= 0: '%s'", path, line_no, fields[col[COL_WALL]]);
    }
    if (parse_int(fields[col[COL_EPOCH]], 0, &pt->epoch) != HW_OK) {
        return hw_fail("%s:%ld: epoch is not an integer >= 0: '%s'", path, line_no, fields[col[COL_EPOCH]]);
    }
    if (parse_int(fields[col[COL_SAMPLES]], 0, &pt->samples_seen) != HW_OK) {
        return hw_fail("%s:%ld: samples_seen is not an integer >= 0: '%s'", path, line_no, fields[col[COL_SAMPLES]]);
    }
    if (parse_double(fields[col[COL_TRAIN_LOSS]], 1, &pt->train_loss) != HW_OK) {
        return hw_fail("%s:%ld: train_loss is not a number: '%s'", path, line_no, fields[col[COL_TRAIN_LOSS]]);
    }
    if (parse_double(fields[col[COL_TEST_LOSS]], 1, &pt->test_loss) != HW_OK) {
        return hw_fail("%s:%ld: test_loss is not a number: '%s'", path, line_no, fields[col[COL_TEST_LOSS]]);
    }
    if (parse_double(fields[col[COL_TEST_ACC]], 0, &pt->test_accuracy) != HW_OK || pt->test_accuracy < 0 ||
        pt->test_accuracy > 100) {
        return hw_fail("%s:%ld: test_accuracy is not a percentage in [0, 100]: '%s'", path, line_no,
                       fields[col[COL_TEST_ACC]]);
    }

    if (log->n_points == 0) {
        if (strlen(mode) >= sizeof log->mode) return hw_fail("%s:%ld: mode is too long: '%s'", path, line_no, mode);
        if (strlen(device) >= sizeof log->device) {
            return hw_fail("%s:%ld: device is too long: '%s'", path, line_no, device);
        }
        strcpy(log->mode, mode);
        strcpy(log->device, device);
        log->workers = (int)workers;
        return HW_OK;
    }
    // One file is one run: a change here means two runs were written into one file.
    if (strcmp(mode, log->mode) != 0 || strcmp(device, log->device) != 0 || workers != log->workers) {
        return hw_fail("%s:%ld: mode, workers or device changed from the rows above (%s,%d,%s to %s,%lld,%s); "
                       "one file must hold one run",
                       path, line_no, log->mode, log->workers, log->device, mode, (long long)workers, device);
    }
    const hw_run_point *prev = &log->points[log->n_points - 1];
    if (pt->wall_seconds < prev->wall_seconds) {
        return hw_fail("%s:%ld: wall_seconds goes backwards (%g after %g); rows must be in time order", path,
                       line_no, pt->wall_seconds, prev->wall_seconds);
    }
    if (pt->samples_seen < prev->samples_seen) {
        return hw_fail("%s:%ld: samples_seen goes backwards (%lld after %lld)", path, line_no,
                       (long long)pt->samples_seen, (long long)prev->samples_seen);
    }
    return HW_OK;
}

static int append_point(hw_run_log *log, int *cap, const hw_run_point *pt) {
    if (log->n_points == *cap) {
        int new_cap = *cap ? 2 * *cap : 64;
        hw_run_point *grown = realloc(log->points, (size_t)new_cap * sizeof *grown);
        if (!grown) return hw_fail("%s: out of memory reading %d rows", log->path, log->n_points);
        log->points = grown;
        *cap = new_cap;
    }
    log->points[log->n_points++] = *pt;
    return HW_OK;
}

// The body of hw_run_log_read once the file is open.
static int read_lines(hw_run_log *log, FILE *f, const char *path) {
    char *line = NULL;
    size_t line_cap = 0;
    char *fields[MAX_FIELDS];
    int col[N_COLS];
    int n_header = 0, cap = 0, rc = HW_OK;
    long line_no = 0;
    while (getline(&line, &line_cap, f) >= 0) {
        line_no++;
        strip_newline(line);
        if (line_no == 1) {
            n_header = split_fields(line, fields);
            if (n_header > MAX_FIELDS) {
                rc = hw_fail("%s:1: more than %d columns in the header", path, MAX_FIELDS);
                break;
            }
            if ((rc = map_header(fields, n_header, path, col)) != HW_OK) break;
            continue;
        }
        if (is_blank(line)) continue;
        int n = split_fields(line, fields);
        if (n != n_header) {
            rc = hw_fail("%s:%ld: %s%d fields, the header has %d", path, line_no, n > MAX_FIELDS ? "more than " : "",
                         n > MAX_FIELDS ? MAX_FIELDS : n, n_header);
            break;
        }
        hw_run_point pt;
        if ((rc = parse_row(log, fields, col, path, line_no, &pt)) != HW_OK) break;
        if ((rc = append_point(log, &cap, &pt)) != HW_OK) break;
    }
    if (rc == HW_OK && ferror(f)) rc = hw_fail_errno(errno, "%s: read error", path);
    if (rc == HW_OK && line_no == 0) {
        rc = hw_fail("%s: the file is empty (expected the header %s,%s,...)", path, column_names[0], column_names[1]);
    }
    if (rc == HW_OK && log->n_points == 0) rc = hw_fail("%s: no data rows after the header", path);
    free(line);
    return rc;
}

int hw_run_log_read(hw_run_log *log, const char *path) {
    memset(log, 0, sizeof *log);
    snprintf(log->path, sizeof log->path, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) return hw_fail_errno(errno, "cannot open %s", path);
    int rc = read_lines(log, f, path);
    fclose(f);
    if (rc != HW_OK) hw_run_log_free(log);
    return rc;
}

void hw_run_log_free(hw_run_log *log) {
    free(log->points);
    log->points = NULL;
    log->n_points = 0;
}
