// metrics_read: reads one metrics CSV file (the trainer's --metrics output) into an
// hw_metrics_table, finding the columns of hw_metrics_columns (metrics_format.c) by name.
//
// The format is plain: no quoting (no field of ours holds a comma), fields trimmed of spaces,
// CRLF tolerated, blank lines skipped. Columns are looked up by name in the header.
#include "hw/metrics.h"
#include "hw/err.h"
#include "hw/file.h"
#include "hw/option.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

// A decimal double, the whole field (strtod also reads "0x10" as 16: the writer never writes one).
// "nan", "inf" and "-inf" are accepted only where allow_nonfinite.
static int parse_double(const char *text, int allow_nonfinite, double *out) {
    if (*text == '\0' || strpbrk(text, "xX")) return HW_ERR;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*end != '\0' || (errno == ERANGE && isfinite(v))) return HW_ERR;
    if (!isfinite(v) && !allow_nonfinite) return HW_ERR;
    *out = v;
    return HW_OK;
}

// The rule of a diverged run (README, "Metrics"): a row whose test_loss is not finite. (A nan
// train_loss alone is not: the first row has one, no training came before it.)
static int row_diverged(const hw_metrics_point *pt) { return !isfinite(pt->test_loss); }

static int parse_int(const char *text, int64_t min, int64_t *out) {
    if (*text == '\0') return HW_ERR;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*end != '\0' || errno == ERANGE || v < min) return HW_ERR;
    *out = v;
    return HW_OK;
}

static const char *name_of(int c) { return hw_metrics_columns[c].name; }

// Finds each column of hw_metrics_columns in the header (-1: absent); fails naming the first
// required one missing, or a column given twice. *measured: the header has --measure's columns,
// which come all together or not at all.
static int map_header(char **fields, int n_fields, const char *path, int *col, int *measured) {
    int found_measure = 0;
    for (int c = 0; c < HW_METRICS_N_COLUMNS; c++) {
        col[c] = -1;
        for (int f = 0; f < n_fields; f++) {
            if (strcmp(fields[f], name_of(c)) != 0) continue;
            if (col[c] >= 0) return hw_fail("%s:1: column '%s' appears twice in the header", path, name_of(c));
            col[c] = f;
            found_measure += c >= HW_METRICS_FIRST_MEASURE;
        }
    }
    for (int c = 0; c < HW_METRICS_FIRST_MEASURE; c++) {
        if (col[c] >= 0 || !hw_metrics_columns[c].required) continue;
        char expected[256] = "";
        size_t used = 0;
        for (int k = 0; k < HW_METRICS_FIRST_MEASURE && used < sizeof expected; k++) {
            if (!hw_metrics_columns[k].required) continue;
            used += (size_t)snprintf(expected + used, sizeof expected - used, "%s%s", used ? "," : "", name_of(k));
        }
        return hw_fail("%s:1: the header lacks the column '%s' (expected %s)", path, name_of(c), expected);
    }
    int identity = (col[HW_COL_MODEL] >= 0) + (col[HW_COL_SEED] >= 0) + (col[HW_COL_SETUP] >= 0);
    for (int c = HW_COL_MODEL; c <= HW_COL_SETUP && identity > 0; c++) {
        if (col[c] < 0) {
            return hw_fail("%s:1: the header has some of the run's identity columns (%s,%s,%s) but not '%s'", path,
                           name_of(HW_COL_MODEL), name_of(HW_COL_SEED), name_of(HW_COL_SETUP), name_of(c));
        }
    }
    *measured = found_measure > 0;
    for (int c = HW_METRICS_FIRST_MEASURE; c < HW_METRICS_N_COLUMNS && found_measure > 0; c++) {
        if (col[c] < 0) {
            return hw_fail("%s:1: the header has some of the measurement's columns%s but not '%s'", path,
                           hw_option_hint(HW_OPTION_MEASURE), name_of(c));
        }
    }
    return HW_OK;
}

// Parses one data row into *pt and checks it against the run so far (log->n_points rows).
static int parse_row(hw_metrics_table *log, char **fields, const int *col, const char *path, long line_no,
                     hw_metrics_point *pt) {
    const char *mode = fields[col[HW_COL_MODE]];
    const char *device = fields[col[HW_COL_DEVICE]];
    int64_t workers;
    if (*mode == '\0') return hw_fail("%s:%ld: %s is empty", path, line_no, name_of(HW_COL_MODE));
    if (strcmp(mode, "hogwild") != 0 && strcmp(mode, "dataparallel") != 0) {
        return hw_fail("%s:%ld: %s is '%s', expected hogwild or dataparallel", path, line_no, name_of(HW_COL_MODE),
                       mode);
    }
    if (*device == '\0') return hw_fail("%s:%ld: %s is empty", path, line_no, name_of(HW_COL_DEVICE));
    if (parse_int(fields[col[HW_COL_WORKERS]], 1, &workers) != HW_OK || workers > 1000000) {
        return hw_fail("%s:%ld: %s is not a positive integer: '%s'", path, line_no, name_of(HW_COL_WORKERS),
                       fields[col[HW_COL_WORKERS]]);
    }
    // A run of more than HW_CSV_MAX_WALL_SECONDS (about 32 years) is a corrupt row, not a result.
    if (parse_double(fields[col[HW_COL_WALL_SECONDS]], 0, &pt->wall_seconds) != HW_OK || pt->wall_seconds < 0 ||
        pt->wall_seconds > HW_CSV_MAX_WALL_SECONDS) {
        return hw_fail("%s:%ld: %s is not a number from 0 to %.0e: '%s'", path, line_no, name_of(HW_COL_WALL_SECONDS),
                       HW_CSV_MAX_WALL_SECONDS, fields[col[HW_COL_WALL_SECONDS]]);
    }
    if (parse_int(fields[col[HW_COL_EPOCH]], 0, &pt->epoch) != HW_OK) {
        return hw_fail("%s:%ld: %s is not an integer >= 0: '%s'", path, line_no, name_of(HW_COL_EPOCH),
                       fields[col[HW_COL_EPOCH]]);
    }
    if (parse_int(fields[col[HW_COL_SAMPLES_SEEN]], 0, &pt->samples_seen) != HW_OK) {
        return hw_fail("%s:%ld: %s is not an integer >= 0: '%s'", path, line_no, name_of(HW_COL_SAMPLES_SEEN),
                       fields[col[HW_COL_SAMPLES_SEEN]]);
    }
    if (parse_double(fields[col[HW_COL_TRAIN_LOSS]], 1, &pt->train_loss) != HW_OK) {
        return hw_fail("%s:%ld: %s is not a number: '%s'", path, line_no, name_of(HW_COL_TRAIN_LOSS),
                       fields[col[HW_COL_TRAIN_LOSS]]);
    }
    if (parse_double(fields[col[HW_COL_TEST_LOSS]], 1, &pt->test_loss) != HW_OK) {
        return hw_fail("%s:%ld: %s is not a number: '%s'", path, line_no, name_of(HW_COL_TEST_LOSS),
                       fields[col[HW_COL_TEST_LOSS]]);
    }
    // A diverged run's last row has no accuracy (nan): nothing was evaluated.
    if (parse_double(fields[col[HW_COL_TEST_ACCURACY]], 1, &pt->test_accuracy) != HW_OK || pt->test_accuracy < 0 ||
        pt->test_accuracy > 100 || isinf(pt->test_accuracy) || (isnan(pt->test_accuracy) && !row_diverged(pt))) {
        return hw_fail("%s:%ld: %s is not a percentage in [0, 100]: '%s'", path, line_no, name_of(HW_COL_TEST_ACCURACY),
                       fields[col[HW_COL_TEST_ACCURACY]]);
    }

    if (log->n_points == 0) {
        if (strlen(mode) >= sizeof log->mode)
            return hw_fail("%s:%ld: %s is too long: '%s'", path, line_no, name_of(HW_COL_MODE), mode);
        if (strlen(device) >= sizeof log->device) {
            return hw_fail("%s:%ld: %s is too long: '%s'", path, line_no, name_of(HW_COL_DEVICE), device);
        }
        strcpy(log->mode, mode);
        strcpy(log->device, device);
        log->workers = (int)workers;
        return HW_OK;
    }
    // One file is one run: a change here means two runs were written into one file.
    if (strcmp(mode, log->mode) != 0 || strcmp(device, log->device) != 0 || workers != log->workers) {
        return hw_fail("%s:%ld: %s, %s or %s changed from the rows above (%s,%d,%s to %s,%lld,%s); "
                       "one file must hold one run",
                       path, line_no, name_of(HW_COL_MODE), name_of(HW_COL_WORKERS), name_of(HW_COL_DEVICE), log->mode,
                       log->workers, log->device, mode, (long long)workers, device);
    }
    const hw_metrics_point *prev = log->diverged ? &log->diverged_at : &log->points[log->n_points - 1];
    if (pt->wall_seconds < prev->wall_seconds) {
        return hw_fail("%s:%ld: %s goes backwards (%g after %g); rows must be in time order", path, line_no,
                       name_of(HW_COL_WALL_SECONDS), pt->wall_seconds, prev->wall_seconds);
    }
    if (pt->epoch < prev->epoch) {
        return hw_fail("%s:%ld: %s goes backwards (%lld after %lld)", path, line_no, name_of(HW_COL_EPOCH),
                       (long long)pt->epoch, (long long)prev->epoch);
    }
    if (pt->samples_seen < prev->samples_seen) {
        return hw_fail("%s:%ld: %s goes backwards (%lld after %lld)", path, line_no, name_of(HW_COL_SAMPLES_SEEN),
                       (long long)pt->samples_seen, (long long)prev->samples_seen);
    }
    return HW_OK;
}

// ---- the run's identity, when the header has it ----

// The identity columns of one row: the first row's into log, and every later one must say the same
// (one file is one run). Nothing to do in a file without them.
static int parse_identity_columns(hw_metrics_table *log, char **fields, const int *col, const char *path,
                                  long line_no) {
    if (col[HW_COL_MODEL] < 0) return HW_OK;
    const char *model = fields[col[HW_COL_MODEL]], *seed_text = fields[col[HW_COL_SEED]];
    const char *setup_text = fields[col[HW_COL_SETUP]];
    if (*model == '\0' || strlen(model) >= sizeof log->model) {
        return hw_fail("%s:%ld: %s is empty or longer than %d characters: '%s'", path, line_no, name_of(HW_COL_MODEL),
                       (int)sizeof log->model - 1, model);
    }
    int64_t seed;
    if (parse_int(seed_text, 0, &seed) != HW_OK) {
        return hw_fail("%s:%ld: %s is not an integer >= 0: '%s'", path, line_no, name_of(HW_COL_SEED), seed_text);
    }
    char *end;
    unsigned long long setup = strtoull(setup_text, &end, 16);
    if (strlen(setup_text) != 16 || *end != '\0' || strspn(setup_text, "0123456789abcdefABCDEF") != 16) {
        return hw_fail("%s:%ld: %s is not 16 hexadecimal digits: '%s'", path, line_no, name_of(HW_COL_SETUP),
                       setup_text);
    }
    if (!log->identified) {
        log->identified = 1;
        strcpy(log->model, model);
        log->seed = (uint64_t)seed;
        log->setup = setup;
        return HW_OK;
    }
    if (strcmp(model, log->model) != 0 || (uint64_t)seed != log->seed || setup != log->setup) {
        return hw_fail("%s:%ld: %s, %s or %s changed from the rows above (%s,%llu,%016llx to %s,%s,%s); one file "
                       "must hold one run",
                       path, line_no, name_of(HW_COL_MODEL), name_of(HW_COL_SEED), name_of(HW_COL_SETUP), log->model,
                       (unsigned long long)log->seed, (unsigned long long)log->setup, model, seed_text, setup_text);
    }
    return HW_OK;
}

// The settings column of one row, when the header has it: the first row's into log, and every
// later one must say the same.
static int parse_settings(hw_metrics_table *log, char **fields, const int *col, const char *path, long line_no) {
    if (col[HW_COL_SETTINGS] < 0) return HW_OK;
    const char *text = fields[col[HW_COL_SETTINGS]];
    if (strlen(text) >= sizeof log->settings) {
        return hw_fail("%s:%ld: %s is longer than %d characters", path, line_no, name_of(HW_COL_SETTINGS),
                       (int)sizeof log->settings - 1);
    }
    if (!log->has_settings) {
        log->has_settings = 1;
        strcpy(log->settings, text);
        return HW_OK;
    }
    if (strcmp(text, log->settings) != 0) {
        return hw_fail("%s:%ld: %s changed from the rows above ('%s' to '%s'); one file must hold one run", path,
                       line_no, name_of(HW_COL_SETTINGS), log->settings, text);
    }
    return HW_OK;
}

static int parse_identity(hw_metrics_table *log, char **fields, const int *col, const char *path, long line_no) {
    if (parse_identity_columns(log, fields, col, path, line_no) != HW_OK) return HW_ERR;
    return parse_settings(log, fields, col, path, line_no);
}

// ---- the columns of --measure, when the header has them ----

// A number >= 0, or nan.
static int parse_measure_double(const char *text, double *out) {
    return parse_double(text, 1, out) == HW_OK && !(*out < 0) ? HW_OK : HW_ERR;
}

// "c0;c1;...": HW_METRICS_STALE_BINS counts >= 0.
static int parse_histogram(const char *text, int64_t *hist) {
    char buf[512];
    if (strlen(text) >= sizeof buf) return HW_ERR;
    strcpy(buf, text);
    char *p = buf;
    for (int b = 0; b < HW_METRICS_STALE_BINS; b++) {
        char *end = strchr(p, ';');
        if ((end == NULL) != (b == HW_METRICS_STALE_BINS - 1)) return HW_ERR;
        if (end) *end = '\0';
        if (parse_int(p, 0, &hist[b]) != HW_OK) return HW_ERR;
        p = end ? end + 1 : p;
    }
    return HW_OK;
}

// The --measure fields of one row into log->measure (the last row wins; the lost fraction is the
// last one that is a number: mid-epoch rows have none).
static int parse_measure_row(hw_metrics_table *log, char **fields, const int *col, const char *path, long line_no) {
    hw_metrics_measure m = log->measure;
    const char *bad = NULL;
    if (parse_int(fields[col[HW_COL_UPDATES]], 0, &m.updates) != HW_OK) bad = name_of(HW_COL_UPDATES);
    else if (parse_measure_double(fields[col[HW_COL_STALENESS_MEAN]], &m.staleness_mean) != HW_OK) {
        bad = name_of(HW_COL_STALENESS_MEAN);
    } else if (parse_int(fields[col[HW_COL_STALENESS_MEDIAN]], 0, &m.staleness_median) != HW_OK) {
        bad = name_of(HW_COL_STALENESS_MEDIAN);
    } else if (parse_int(fields[col[HW_COL_STALENESS_P99]], 0, &m.staleness_p99) != HW_OK) {
        bad = name_of(HW_COL_STALENESS_P99);
    } else if (parse_int(fields[col[HW_COL_STALENESS_MAX]], 0, &m.staleness_max) != HW_OK) {
        bad = name_of(HW_COL_STALENESS_MAX);
    } else if (parse_measure_double(fields[col[HW_COL_STALENESS_US_MEAN]], &m.staleness_us_mean) != HW_OK) {
        bad = name_of(HW_COL_STALENESS_US_MEAN);
    } else if (parse_measure_double(fields[col[HW_COL_STALENESS_US_MAX]], &m.staleness_us_max) != HW_OK) {
        bad = name_of(HW_COL_STALENESS_US_MAX);
    } else if (parse_measure_double(fields[col[HW_COL_OVERLAP_FRACTION]], &m.overlap_fraction) != HW_OK ||
               m.overlap_fraction > 1) {
        bad = name_of(HW_COL_OVERLAP_FRACTION);
    } else if (parse_measure_double(fields[col[HW_COL_COMPUTE_US_PER_STEP]], &m.compute_us_per_step) != HW_OK) {
        bad = name_of(HW_COL_COMPUTE_US_PER_STEP);
    } else if (parse_measure_double(fields[col[HW_COL_UPDATE_US_PER_STEP]], &m.update_us_per_step) != HW_OK) {
        bad = name_of(HW_COL_UPDATE_US_PER_STEP);
    } else if (parse_histogram(fields[col[HW_COL_STALENESS_HISTOGRAM]], m.staleness_hist) != HW_OK) {
        return hw_fail("%s:%ld: %s is not %d counts >= 0 separated by ';': '%s'", path, line_no,
                       name_of(HW_COL_STALENESS_HISTOGRAM), HW_METRICS_STALE_BINS,
                       fields[col[HW_COL_STALENESS_HISTOGRAM]]);
    }
    if (bad) return hw_fail("%s:%ld: %s is not a number >= 0 (or nan)", path, line_no, bad);
    double lost;
    if (parse_measure_double(fields[col[HW_COL_LOST_FRACTION]], &lost) != HW_OK) {
        return hw_fail("%s:%ld: %s is not a number >= 0 (or nan): '%s'", path, line_no, name_of(HW_COL_LOST_FRACTION),
                       fields[col[HW_COL_LOST_FRACTION]]);
    }
    if (!isnan(lost)) m.lost_fraction = lost;
    m.present = 1;
    log->measure = m;
    return HW_OK;
}

static int append_point(hw_metrics_table *log, int *cap, const hw_metrics_point *pt) {
    if (log->n_points == *cap) {
        int new_cap = *cap ? 2 * *cap : 64;
        hw_metrics_point *grown = realloc(log->points, (size_t)new_cap * sizeof *grown);
        if (!grown) return hw_fail("%s: out of memory reading %d rows", log->path, log->n_points);
        log->points = grown;
        *cap = new_cap;
    }
    log->points[log->n_points++] = *pt;
    return HW_OK;
}

// The body of hw_metrics_table_read once the file is open.
static int read_lines(hw_metrics_table *log, FILE *f, const char *path) {
    char *line = NULL;
    size_t line_cap = 0;
    char *fields[MAX_FIELDS];
    int col[HW_METRICS_N_COLUMNS];
    int n_header = 0, cap = 0, rc = HW_OK, measured = 0;
    long line_no = 0;
    ssize_t length;
    while ((length = getline(&line, &line_cap, f)) >= 0) {
        line_no++;
        // A last line without its newline is a row cut short (a run killed while writing, an old
        // hogwild on a full disk): the rows before it are still a run. Skipped, with a warning.
        int cut_short = length > 0 && line[length - 1] != '\n' && line_no > 1;
        strip_newline(line);
        // A spreadsheet that saves as "CSV UTF-8" starts the file with a byte order mark: the
        // header's first column then read as "\xEF\xBB\xBFmode", "lacking" the column mode.
        if (line_no == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0) memmove(line, line + 3, strlen(line + 3) + 1);
        if (line_no == 1) {
            n_header = split_fields(line, fields);
            if (n_header > MAX_FIELDS) {
                rc = hw_fail("%s:1: more than %d columns in the header", path, MAX_FIELDS);
                break;
            }
            if ((rc = map_header(fields, n_header, path, col, &measured)) != HW_OK) break;
            log->measure.lost_fraction = NAN;
            continue;
        }
        if (is_blank(line)) continue;
        int n = split_fields(line, fields);
        hw_metrics_point pt;
        if (cut_short && (n != n_header || parse_row(log, fields, col, path, line_no, &pt) != HW_OK ||
                          parse_identity(log, fields, col, path, line_no) != HW_OK)) {
            log->ignored_line = line_no;
            break;
        }
        if (n != n_header) {
            rc = hw_fail("%s:%ld: %s%d fields, the header has %d", path, line_no, n > MAX_FIELDS ? "more than " : "",
                         n > MAX_FIELDS ? MAX_FIELDS : n, n_header);
            break;
        }
        if ((rc = parse_row(log, fields, col, path, line_no, &pt)) != HW_OK) break;
        if ((rc = parse_identity(log, fields, col, path, line_no)) != HW_OK) break;
        int first_row = log->n_points == 0 && !log->diverged;
        if (!log->diverged && row_diverged(&pt)) {
            // Where the run diverged; it and any row after it are no results (not points).
            if (first_row) {
                rc = hw_fail("%s:%ld: the run's first row is already diverged (%s '%s'): nothing to compare", path,
                             line_no, name_of(HW_COL_TEST_LOSS), fields[col[HW_COL_TEST_LOSS]]);
                break;
            }
            log->diverged = 1;
            log->diverged_at = pt;
        }
        if (log->diverged) continue;
        if (measured && (rc = parse_measure_row(log, fields, col, path, line_no)) != HW_OK) break;
        if ((rc = append_point(log, &cap, &pt)) != HW_OK) break;
    }
    if (rc == HW_OK && ferror(f)) rc = hw_fail_errno(errno, "%s: read error", path);
    if (rc == HW_OK && line_no == 0) {
        rc = hw_fail("%s: the file is empty (expected the header %s,%s,...)", path, name_of(HW_COL_MODE),
                     name_of(HW_COL_WORKERS));
    }
    if (rc == HW_OK && log->n_points == 0) rc = hw_fail("%s: no data rows after the header", path);
    free(line);
    return rc;
}

int hw_metrics_table_read(hw_metrics_table *log, const char *path) {
    memset(log, 0, sizeof *log);
    snprintf(log->path, sizeof log->path, "%s", path);
    FILE *f = hw_fopen_regular(path, "metrics file", HW_CSV_MAX_BYTES, NULL);
    if (!f) return HW_ERR;
    int rc = read_lines(log, f, path);
    fclose(f);
    if (rc != HW_OK) hw_metrics_table_free(log);
    return rc;
}

void hw_metrics_table_free(hw_metrics_table *log) {
    free(log->points);
    log->points = NULL;
    log->n_points = 0;
}

void hw_metrics_label(const hw_metrics_table *log, char *buf, size_t cap) {
    const char *unit = strcmp(log->mode, "dataparallel") == 0 ? "replica" : "worker";
    snprintf(buf, cap, "%s, %d %s%s, %s", log->mode, log->workers, unit, log->workers == 1 ? "" : "s", log->device);
}

double hw_metrics_samples_per_second(const hw_metrics_table *run) {
    const hw_metrics_point *last = run->diverged ? &run->diverged_at : &run->points[run->n_points - 1];
    int64_t trained = last->samples_seen - run->points[0].samples_seen;
    return last->wall_seconds >= HW_METRICS_MIN_TIMED_SECONDS ? (double)trained / last->wall_seconds : NAN;
}
