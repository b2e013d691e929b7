// sparse_model: the model file of a sparse model (include/hw/sparse_train.h).
#include "hw/err.h"
#include "hw/file.h"
#include "hw/sparse_train.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The next line of text into line[0 .. cap) without its comment and newline; the rest after it.
static const char *line_next(const char *text, char *line, size_t cap) {
    size_t n = strcspn(text, "\n");
    size_t keep = n < cap - 1 ? n : cap - 1;
    memcpy(line, text, keep);
    line[keep] = '\0';
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    return text[n] ? text + n + 1 : text + n;
}

int hw_sparse_model_text_is(const char *text) {
    char line[512], word[32], kind[32];
    while (*text) {
        text = line_next(text, line, sizeof line);
        int got = sscanf(line, "%31s %31s", word, kind);
        if (got <= 0) continue;
        return got == 2 && strcmp(word, "input") == 0 && strcmp(kind, "sparse") == 0;
    }
    return 0;
}

static int loss_parse(hw_sparse_loss *loss, const char *name) {
    static const struct {
        const char *name;
        hw_sparse_loss loss;
    } losses[] = {{"logistic", HW_LOSS_LOGISTIC}, {"hinge", HW_LOSS_HINGE}, {"squared", HW_LOSS_SQUARED}};
    for (size_t i = 0; i < sizeof losses / sizeof losses[0]; i++) {
        if (strcmp(name, losses[i].name) == 0) {
            *loss = losses[i].loss;
            return HW_OK;
        }
    }
    return HW_ERR;
}

// A line's first 4 words into words (each cut at 63 characters), their whole lengths into lens;
// returns how many words the line has, which may be more than 4.
static int words_split(const char *line, char words[4][64], size_t lens[4]) {
    static const char blanks[] = " \t\r\v\f";
    int n = 0;
    for (const char *p = line + strspn(line, blanks); *p; p += strspn(p, blanks), n++) {
        size_t len = strcspn(p, blanks);
        if (n < 4) {
            snprintf(words[n], 64, "%.*s", (int)(len < 63 ? len : 63), p);
            lens[n] = len;
        }
        p += len;
    }
    return n;
}

// A `default NAME VALUE` line, after the loss; its name and value are the command line's to read.
// A name longer than any setting's is no setting, said so, not taken for some other line.
static int default_parse(hw_sparse_model *m, char words[4][64], const size_t lens[4], int n, int line_no) {
    if (n == 3 && strcmp(words[0], "default") == 0 && lens[1] >= sizeof m->defaults[0].name) {
        return hw_fail("`default %.24s...` names no setting: the name is %zu characters, a setting's at most %zu",
                       words[1], lens[1], sizeof m->defaults[0].name - 1);
    }
    if (n != 3 || strcmp(words[0], "default") != 0) {
        return hw_fail("after the loss only `default NAME VALUE` lines may follow (a training setting, e.g. "
                       "`default lr 0.5`)");
    }
    if (m->n_defaults == HW_SPARSE_MAX_DEFAULTS) return hw_fail("at most %d `default` lines", HW_SPARSE_MAX_DEFAULTS);
    for (int i = 0; i < m->n_defaults; i++) {
        if (strcmp(m->defaults[i].name, words[1]) == 0) {
            return hw_fail("`default %s` is given twice (also on line %d)", words[1], m->defaults[i].line);
        }
    }
    if (lens[2] >= sizeof m->defaults[0].value) {
        return hw_fail("`default %s %.24s...`: the value is %zu characters, at most %zu", words[1], words[2], lens[2],
                       sizeof m->defaults[0].value - 1);
    }
    hw_sparse_default *d = &m->defaults[m->n_defaults++];
    snprintf(d->name, sizeof d->name, "%s", words[1]);
    snprintf(d->value, sizeof d->value, "%s", words[2]);
    d->line = line_no;
    return HW_OK;
}

// One line's words: `input sparse [DIM]`, `fm RANK`, `loss NAME`, then `default NAME VALUE`
// lines. *seen counts the first three in order.
static int line_parse(hw_sparse_model *m, char words[4][64], const size_t lens[4], int n, int *seen, int line_no) {
    char *end;
    if (*seen == 0) {
        if (n < 2 || n > 3 || strcmp(words[0], "input") != 0 || strcmp(words[1], "sparse") != 0) {
            return hw_fail("expected `input sparse [DIM]` first");
        }
        m->input_dim = n == 3 ? strtoll(words[2], &end, 10) : 0;
        if (n == 3 && (*end || m->input_dim < 1 || m->input_dim > INT32_MAX)) {
            return hw_fail("the dimension must be a whole number from 1 to %d, got '%s'", INT32_MAX, words[2]);
        }
    } else if (*seen == 1) {
        long rank = n == 2 && strcmp(words[0], "fm") == 0 ? strtol(words[1], &end, 10) : -1;
        if (rank < 0 || *end || rank > 1000) return hw_fail("expected `fm RANK` (RANK 0 to 1000; 0: a linear model)");
        m->dims.rank = (int)rank;
    } else if (*seen == 2) {
        if (n != 2 || strcmp(words[0], "loss") != 0 || loss_parse(&m->loss, words[1]) != HW_OK) {
            return hw_fail("expected `loss logistic`, `loss hinge` or `loss squared`");
        }
    } else {
        return default_parse(m, words, lens, n, line_no);
    }
    (*seen)++;
    return HW_OK;
}

int hw_sparse_model_parse(hw_sparse_model *m, const char *text, const char *name) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", name);
    m->text = text;
    char line[512], words[4][64];
    int seen = 0, line_no = 0;
    while (*text) {
        text = line_next(text, line, sizeof line);
        line_no++;
        size_t lens[4];
        int n = words_split(line, words, lens);
        if (n <= 0) continue;
        if (line_parse(m, words, lens, n, &seen, line_no) != HW_OK) return hw_error_prefix("%s:%d", name, line_no);
    }
    if (seen < 3) return hw_fail("%s: a sparse model needs `input sparse`, `fm RANK` and `loss NAME`", name);
    return HW_OK;
}

int hw_sparse_model_fit(hw_sparse_model *m, const hw_sparse_set *train) {
    if (m->input_dim && m->input_dim < train->dim) {
        return hw_fail("%s: the input's dimension %lld is below the data's %lld (%s)", m->path, (long long)m->input_dim,
                       (long long)train->dim, train->source);
    }
    m->dims.dim = m->input_dim ? m->input_dim : train->dim;
    int binary = train->label_kind == HW_LABEL_BINARY;
    if (m->loss != HW_LOSS_SQUARED && !binary) {
        return hw_fail("%s: a %s loss needs binary labels (-1/+1 or 0/1), and %s has %s", m->path,
                       m->loss == HW_LOSS_LOGISTIC ? "logistic" : "hinge", train->source,
                       train->label_kind == HW_LABEL_CLASSES ? "classes" : "real labels");
    }
    return HW_OK;
}

void hw_sparse_model_summary(const hw_sparse_model *m, FILE *out) {
    static const char *const names[] = {"", "logistic", "hinge", "squared"};
    char dim[64];
    if (m->dims.dim) {
        snprintf(dim, sizeof dim, "%lld", (long long)m->dims.dim);
    } else {
        snprintf(dim, sizeof dim, "%s", "from the data");
    }
    fprintf(out, "%s\n", m->path);
    fprintf(out, "  input   sparse, dimension %s%s\n", dim,
            m->input_dim  ? " (the model file's)"
            : m->dims.dim ? " (the data's)"
                          : "");
    if (m->dims.rank) {
        fprintf(out, "  fm      rank %d: a weight and %d factors per feature, and a bias\n", m->dims.rank,
                m->dims.rank);
    } else {
        fprintf(out, "  fm      rank 0: a weight per feature and a bias (a linear model)\n");
    }
    fprintf(out, "  loss    %s\n", names[m->loss]);
    for (int i = 0; i < m->n_defaults; i++) {
        fprintf(out, "  default %s %s (where the command line gives none)\n", m->defaults[i].name,
                m->defaults[i].value);
    }
    if (m->dims.dim) fprintf(out, "parameters: %zu\n", hw_fm_n_weights(&m->dims));
}

int hw_sparse_model_read(const char *path, char *text, size_t cap) {
    FILE *f = hw_fopen_regular(path, "model file", HW_MODEL_FILE_MAX_BYTES, NULL);
    if (!f) return HW_ERR;
    size_t got = fread(text, 1, cap - 1, f);
    int failed = ferror(f);
    fclose(f);
    text[got] = '\0';
    if (failed) return hw_fail("model file %s: cannot read it", path);
    return HW_OK;
}

void hw_sparse_model_ckpt_view(const hw_sparse_model *m, hw_model *view) {
    memset(view, 0, sizeof *view);
    snprintf(view->path, sizeof view->path, "%s", m->path);
    view->text = (char *)m->text;
    view->n_params = 2;
    int64_t rows[2] = {m->dims.dim, 1 + m->dims.rank}, one[1] = {1};
    snprintf(view->params[0].name, sizeof view->params[0].name, "%s", "fm.rows");
    view->params[0].shape = hw_shape_make(2, rows);
    snprintf(view->params[1].name, sizeof view->params[1].name, "%s", "fm.bias");
    view->params[1].shape = hw_shape_make(1, one);
    view->params[1].offset = (size_t)m->dims.dim * (size_t)(1 + m->dims.rank);
    view->n_weights = hw_fm_n_weights(&m->dims);
}
