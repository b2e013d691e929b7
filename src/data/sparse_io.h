// sparse_io: what the sparse readers and writers of src/data/ share, private to that folder: a
// line reader over plain or gzip text (text_stream.c), the decimal number parser
// (text_stream.c), the growing arrays of a set being read and the rule for its labels
// (sparse_set.c), and a set of output files renamed into place together (file_set.c).
#ifndef HW_DATA_SPARSE_IO_H
#define HW_DATA_SPARSE_IO_H

#include "hw/data.h"
#include "hw/sparse_data.h"

#include <stddef.h>
#include <stdint.h>

// ---- lines of a text file, plain or gzip ----
// A gzip file (its first bytes 1f 8b) is inflated here rather than through gzread, for the reason
// src/data/idx.c gives: the data ends only at the end of a gzip member whose CRC and length were
// checked, so a truncated file is an error, never a shorter dataset.
typedef struct text_stream text_stream;
// Opens `path` (a regular file; `what` names it in messages: "libsvm file").
int text_stream_open(text_stream **out, const char *path, const char *what);
// The next line, without its '\n' (nor a '\r' before it): 1 with *line, *len and *line_no (1-based)
// set, 0 at the end of the file, HW_ERR on a read or gzip error, a line of 1 GiB or more, or a
// line holding binary data (a NUL or another control byte but the blanks; the message names its
// line and column and says the file is not a text `what`). The line stays valid until the next call.
int text_stream_line(text_stream *s, const char **line, size_t *len, int64_t *line_no);
void text_stream_close(text_stream *s);

// ---- where a line went wrong ----
// The blanks between a line's tokens: space, tab, and the rarer ones (\r \v \f).
static inline int text_is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
// Where a reader is: the file, the line being parsed and its number (1-based).
typedef struct {
    const char *path;
    const char *line;
    int64_t line_no;
} text_place;
// Fails with "<path>:<line_no>:<column>: <message>", the column that of `at` within the line
// (1-based): the one form of every reader's message about a bad token. Returns HW_ERR.
int text_fail_at(const text_place *place, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// ---- decimal numbers ----
// Parses a decimal number at p (before end): [+-] digits [. digits] [(e|E) [+-] digits], with at
// least one digit before the exponent. Returns the end of what it parsed, or NULL when p does not
// start such a number. The float is correctly rounded (as strtof gives it: a fast path, strtof
// where the fast path could be wrong) and may be infinite when the number overflows a float.
const char *text_parse_float(const char *p, const char *end, float *out);
// Whether p starts "inf" or "nan" (any case, after an optional sign): the message then says
// non-finite rather than malformed.
int text_is_nonfinite_word(const char *p, const char *end);

// ---- a set being read ----
// The arrays grow by half again as rows and nonzeros arrive (realloc, which for large blocks moves
// pages rather than copying them), and sparse_build_finish shrinks them to their exact sizes.
typedef struct {
    hw_sparse_set set;  // set.n rows and set.nnz nonzeros so far; row_start[n] is not yet written
    int64_t row_cap, nnz_cap;
} sparse_build;

void sparse_build_init(sparse_build *b);
// Grows the nonzero arrays to hold `more` beyond set.nnz; HW_ERR (out of memory, naming `path`).
int sparse_build_reserve_nnz(sparse_build *b, int64_t more, const char *path);
// Appends a row whose nonzeros were pushed since the last row (their start is row_start[n]).
int sparse_build_end_row(sparse_build *b, float label, const char *path);
// Appends a nonzero; the caller has reserved room for it.
static inline void sparse_build_push(sparse_build *b, int32_t index, float value) {
    b->set.index[b->set.nnz] = index;
    b->set.value[b->set.nnz] = value;
    b->set.nnz++;
}
// Writes row_start[n], shrinks the arrays, and moves the set to *out (b is then empty).
int sparse_build_finish(sparse_build *b, hw_sparse_set *out, const char *path);
void sparse_build_free(sparse_build *b);

// What the labels of one or more files were, for the rule of hw_libsvm_load.
typedef struct {
    int all_pm1;    // every label -1 or +1
    int all_01;     // every label 0 or 1
    int all_class;  // every label a whole number in [0, HW_SPARSE_MAX_CLASSES)
    float max;
} label_summary;
void label_summary_init(label_summary *s);
static inline void label_summary_add(label_summary *s, float label) {
    s->all_pm1 &= label == 1.0f || label == -1.0f;
    s->all_01 &= label == 0.0f || label == 1.0f;
    s->all_class &= label >= 0.0f && label < HW_SPARSE_MAX_CLASSES && label == (float)(int)label;
    if (label > s->max) s->max = label;
}
// The union of two summaries.
void label_summary_merge(label_summary *into, const label_summary *other);
// Sets the kind of each of the `count` sets from the summary of all their labels and stores the
// labels as that kind stores them (0 becomes -1 for 0/1 binary labels).
void label_summary_apply(const label_summary *s, hw_sparse_set *sets, int count);

// The libsvm reader's core: the set with its labels as read (label_kind not yet set) and their summary.
int libsvm_read(hw_sparse_set *set, label_summary *labels, const char *path, int64_t dim);
// The writer's core: the set as libsvm text at `path` (gzip when gz), which is left behind on a failure.
int libsvm_write(const hw_sparse_set *set, const char *path, int gz);

// ---- output files renamed into place together ----
// Each file is written under "<path>.tmp.<pid>" (noted while it is written, so that a signal
// removes it: hw_shm_temp_note), and all are renamed to their names only once every one is
// complete; on a failure every temporary file is removed and the old files stay as they were.
// Opening the set first removes temporary files of earlier writers that died (hw_shm_temp_sweep).
enum { FILE_SET_MAX = 4 };
typedef struct {
    int count;
    char path[FILE_SET_MAX][4096];
    char temp[FILE_SET_MAX][4200];
} file_set;
// Adds `path` to the set; its temporary name is set->temp[index], which the caller then writes
// between file_set_begin and file_set_end.
int file_set_add(file_set *set, const char *path, int *index);
// Notes temporary file `index` before it is created; file_set_end forgets it once it is written.
int file_set_begin(file_set *set, int index);
void file_set_end(file_set *set, int index);
// Renames every temporary file into place (status HW_OK), or removes them all (any other status,
// or a rename that fails); returns status, or HW_ERR after a failed rename.
int file_set_commit(file_set *set, int status);

// The IDX pair of `ds` (images, labels) written as two files of `set` (src/data/idx.c); the
// caller's file_set_commit puts them in place with the set's other files.
int idx_save_into(file_set *set, const hw_dataset *ds, const char *images_path, const char *labels_path);

#endif
