// compare_inputs: compare's operands, files and folders, read into runs (src/cli/compare_inputs.h).
#include "cli/compare_inputs.h"

#include "hw/err.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int is_folder(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Whether the name is a run's CSV in a folder: *.csv, not hidden (a sweep's run in progress is
// ".NAME.csv.part").
static int run_file_name(const char *name) {
    size_t len = strlen(name);
    return name[0] != '.' && len > 4 && strcmp(name + len - 4, ".csv") == 0;
}

// Appends `path` (copied) to in->files, growing it; 0, or 1 out of memory.
static int add_file(compare_inputs *in, int *cap, const char *path) {
    if (in->n_files == *cap) {
        int bigger = *cap ? 2 * *cap : 16;
        char **grown = realloc(in->files, (size_t)bigger * sizeof *grown);
        if (!grown) return 1;
        in->files = grown;
        *cap = bigger;
    }
    in->files[in->n_files] = strdup(path);
    return in->files[in->n_files++] == NULL;
}

// Whether the file starts as compare's --summary-csv writes its table of groups (a sweep leaves one
// in its folder, DIR/summary.csv).
static int is_group_summary(const char *path) {
    FILE *f = fopen(path, "r");
    char line[64] = "";
    if (!f) return 0;
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    return got && strncmp(line, "mode,workers,model,runs,", 24) == 0;
}

// Whether paths a and b name one file that exists.
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// The *.csv files of `folder`, sorted, appended; their count in *found. A group table is left out,
// named on `err` unless it is `own_summary` (the table this compare writes again, a sweep's
// DIR/summary.csv). 0, or 1 with the message.
static int add_folder(compare_inputs *in, int *cap, const char *folder, const char *own_summary, int *found,
                      FILE *err) {
    DIR *dir = opendir(folder);
    if (!dir) {
        fprintf(err, "hogwild compare: cannot read the folder %s\n", folder);
        return 1;
    }
    int first = in->n_files;
    struct dirent *e;
    size_t len = strlen(folder);
    const char *sep = len && folder[len - 1] == '/' ? "" : "/";
    while ((e = readdir(dir)) != NULL) {
        if (!run_file_name(e->d_name)) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s%s%s", folder, sep, e->d_name);
        // Named, but not among the files: compare may write it again (--summary-csv).
        if (is_group_summary(path)) {
            if (!own_summary || !same_file(path, own_summary)) {
                fprintf(err, "hogwild compare: skipped: %s: a table of groups (--summary-csv), not a run\n", path);
            }
            continue;
        }
        if (add_file(in, cap, path) != 0) {
            closedir(dir);
            fprintf(err, "hogwild compare: out of memory listing %s\n", folder);
            return 1;
        }
    }
    closedir(dir);
    qsort(in->files + first, (size_t)(in->n_files - first), sizeof *in->files, by_name);
    *found = in->n_files - first;
    return 0;
}

// Reads file f of in->files into the next run; a file of a folder (`in_folder`) that fails is
// skipped, naming it. 0, or 1 when a named file fails.
static int read_one(compare_inputs *in, int f, int in_folder, FILE *err) {
    hw_metrics_table *run = &in->runs[in->n_runs];
    if (hw_metrics_table_read(run, in->files[f]) != HW_OK) {
        if (!in_folder) {
            fprintf(err, "hogwild compare: %s\n", hw_error());
            return 1;
        }
        fprintf(err, "hogwild compare: skipped: %s\n", hw_error());
        in->n_skipped++;
        return 0;
    }
    if (run->ignored_line) {
        fprintf(err, "hogwild compare: %s:%ld: ignoring the last line, cut short (no newline)\n", run->path,
                run->ignored_line);
    }
    in->n_runs++;
    return 0;
}

int compare_inputs_read(compare_inputs *in, char *const *operands, int n_operands, const char *own_summary, FILE *err) {
    memset(in, 0, sizeof *in);
    int cap = 0;
    // Per file: whether a folder listed it (its failures are skipped, not fatal).
    int *from_folder = calloc((size_t)n_operands + 1, sizeof *from_folder);
    int *origin = NULL;
    if (!from_folder) return fprintf(err, "hogwild compare: out of memory\n"), 1;
    for (int o = 0; o < n_operands; o++) {
        int before = in->n_files, found = 1;
        int status = is_folder(operands[o]) ? add_folder(in, &cap, operands[o], own_summary, &found, err)
                                            : add_file(in, &cap, operands[o]);
        if (status != 0) {
            free(from_folder);
            return 1;
        }
        if (is_folder(operands[o]) && found == 0) {
            fprintf(err, "hogwild compare: no *.csv file in the folder %s\n", operands[o]);
            free(from_folder);
            return 1;
        }
        from_folder[o] = is_folder(operands[o]);
        int *grown = realloc(origin, (size_t)(in->n_files > 0 ? in->n_files : 1) * sizeof *grown);
        if (!grown) {
            free(origin), free(from_folder);
            return fprintf(err, "hogwild compare: out of memory\n"), 1;
        }
        origin = grown;
        for (int f = before; f < in->n_files; f++) origin[f] = o;
    }
    in->runs = calloc((size_t)(in->n_files > 0 ? in->n_files : 1), sizeof *in->runs);
    int status = in->runs ? 0 : (fprintf(err, "hogwild compare: out of memory\n"), 1);
    for (int f = 0; f < in->n_files && status == 0; f++) status = read_one(in, f, from_folder[origin[f]], err);
    if (status == 0 && in->n_runs == 0) {
        fprintf(err, "hogwild compare: no run to compare: every file was skipped\n");
        status = 1;
    }
    free(origin);
    free(from_folder);
    return status;
}

void compare_inputs_free(compare_inputs *in) {
    for (int r = 0; r < in->n_runs; r++) hw_metrics_table_free(&in->runs[r]);
    for (int f = 0; f < in->n_files; f++) free(in->files[f]);
    free(in->runs);
    free(in->files);
    memset(in, 0, sizeof *in);
}
