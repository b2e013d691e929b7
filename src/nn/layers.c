// The layer table and the parsing of one layer line. A new layer type is one source file defining
// a `const hw_layer_type` and its CPU forward and backward, one row in the table below, and one
// case in each switch of every backend (src/nn/exec.c, src/cuda/backend.c).
#include "hw/nn.h"

#include "hw/err.h"

#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const hw_layer_type hw_layer_linear, hw_layer_conv2d, hw_layer_maxpool2d, hw_layer_relu, hw_layer_dropout,
    hw_layer_dropout2d, hw_layer_flatten, hw_layer_log_softmax;

static_assert(HW_LAYER_KINDS == 8, "a new hw_layer_kind needs its row in the table below and its cases in "
                                   "every backend's switches (compile errors name them); then update this count");

const hw_layer_type *const hw_layer_types[HW_LAYER_KINDS + 1] = {
    [HW_LINEAR] = &hw_layer_linear,   [HW_CONV2D] = &hw_layer_conv2d,           [HW_MAXPOOL2D] = &hw_layer_maxpool2d,
    [HW_RELU] = &hw_layer_relu,       [HW_DROPOUT] = &hw_layer_dropout,         [HW_DROPOUT2D] = &hw_layer_dropout2d,
    [HW_FLATTEN] = &hw_layer_flatten, [HW_LOG_SOFTMAX] = &hw_layer_log_softmax, [HW_LAYER_KINDS] = NULL,
};

const hw_layer_type *hw_layer_type_find(const char *name) {
    for (int i = 0; hw_layer_types[i]; i++) {
        if (strcmp(hw_layer_types[i]->name, name) == 0) return hw_layer_types[i];
    }
    return NULL;
}

static int fail_unknown_type(const char *word) {
    char known[512];
    size_t used = 0;
    known[0] = '\0';
    for (int i = 0; hw_layer_types[i] && used < sizeof known; i++) {
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", hw_layer_types[i]->name);
    }
    return hw_fail("unknown layer '%s': expected one of %s", word, known);
}

static int name_is_valid(const char *name) {
    if (!*name || strlen(name) > HW_NAME_CAP - 16) return 0;  // room for ".weight" and the like
    for (const char *c = name; *c; c++) {
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '.' && *c != '-') return 0;
    }
    return 1;
}

// A plain decimal number: [+-] digits [. digits] [e [+-] digits], at least one digit before the
// exponent. strtod alone took "0x10" (16), "inf" and "nan".
static int is_decimal(const char *p) {
    if (*p == '+' || *p == '-') p++;
    int digits = 0;
    for (; isdigit((unsigned char)*p); p++) digits++;
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++) digits++;
    }
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p)) p++;
    }
    return *p == '\0';
}

static int parse_number(const hw_layer *layer, const char *word, const char *what, double *out) {
    char *end = NULL;
    double v = strtod(word, &end);
    if (!is_decimal(word) || end == word || *end != '\0' || !isfinite(v)) {
        return hw_fail("%s: bad number '%s' for %s: expected %s %s", layer->type->name, word, what, layer->type->name,
                       layer->type->usage);
    }
    *out = v;
    return HW_OK;
}

// Positional argument i's name in the usage text ("KERNEL"), for messages.
static void positional_name(const hw_layer_type *type, int index, char *buf, size_t cap) {
    snprintf(buf, cap, "argument %d", index + 1);
    const char *p = type->usage;
    for (int i = 0; *p; i++) {
        while (*p == ' ' || *p == '[') p++;
        size_t n = strcspn(p, " ]");
        if (i == index && n > 0 && n < cap && !memchr(p, '=', n)) {
            memcpy(buf, p, n);
            buf[n] = '\0';
            return;
        }
        p += n;
        while (*p == ']') p++;
    }
}

static int parse_option(hw_layer *layer, const char *word) {
    const hw_layer_type *type = layer->type;
    const char *eq = strchr(word, '=');
    size_t key_len = (size_t)(eq - word);
    const char *value = eq + 1;
    if (key_len == 4 && strncmp(word, "name", 4) == 0) {
        if (layer->name[0]) return hw_fail("%s: name= given twice", type->name);
        if (!name_is_valid(value)) {
            return hw_fail("bad layer name '%s': expected 1 to %d letters, digits, '_', '.' or '-'", value,
                           HW_NAME_CAP - 16);
        }
        snprintf(layer->name, sizeof layer->name, "%s", value);
        return HW_OK;
    }
    for (int i = 0; type->max_args + i < HW_LAYER_MAX_ARGS && type->keys[i]; i++) {
        if (strlen(type->keys[i]) == key_len && strncmp(word, type->keys[i], key_len) == 0) {
            if (!isnan(layer->args[type->max_args + i])) {
                return hw_fail("%s: %s= given twice", type->name, type->keys[i]);
            }
            return parse_number(layer, value, type->keys[i], &layer->args[type->max_args + i]);
        }
    }
    char known[256] = "";
    size_t used = 0;
    for (int i = 0; i < HW_LAYER_MAX_ARGS && type->keys[i]; i++) {
        used += (size_t)snprintf(known + used, sizeof known - used, "%s=, ", type->keys[i]);
    }
    return hw_fail("%s: unknown option '%s': expected %sname=NAME or frozen", type->name, word, known);
}

int hw_layer_setup(hw_layer *layer, const char *line, hw_shape in_shape, hw_shape *param_shapes) {
    memset(layer, 0, sizeof *layer);
    layer->first_param = -1;
    for (int i = 0; i < HW_LAYER_MAX_ARGS; i++) layer->args[i] = NAN;
    char buf[1024];
    if (strlen(line) >= sizeof buf) return hw_fail("line too long (over %zu characters)", sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", line);

    char *save = NULL;
    char *word = strtok_r(buf, " \t", &save);
    if (!word) return hw_fail("empty layer line");
    layer->type = hw_layer_type_find(word);
    if (!layer->type) return fail_unknown_type(word);
    const hw_layer_type *type = layer->type;
    layer->kind = type->kind;
    while ((word = strtok_r(NULL, " \t", &save))) {
        if (strcmp(word, "frozen") == 0) {
            if (layer->frozen) return hw_fail("%s: frozen given twice", type->name);
            layer->frozen = 1;
        } else if (strchr(word, '=')) {
            if (parse_option(layer, word) != HW_OK) return HW_ERR;
        } else {
            char what[32];
            positional_name(type, layer->n_args, what, sizeof what);
            if (layer->n_args == type->max_args) {
                if (type->max_args == 0) return hw_fail("%s takes no numbers, got '%s'", type->name, word);
                return hw_fail("%s takes at most %d number%s (%s %s), got '%s' too", type->name, type->max_args,
                               type->max_args == 1 ? "" : "s", type->name, type->usage, word);
            }
            if (parse_number(layer, word, what, &layer->args[layer->n_args]) != HW_OK) return HW_ERR;
            layer->n_args++;
        }
    }
    if (layer->n_args < type->min_args) {
        return hw_fail("%s needs %d number%s, got %d: expected %s %s", type->name, type->min_args,
                       type->min_args == 1 ? "" : "s", layer->n_args, type->name, type->usage);
    }
    layer->in_shape = in_shape;
    if (type->configure(layer, param_shapes) != HW_OK) return HW_ERR;
    layer->n_params = 0;
    while (layer->n_params < HW_LAYER_MAX_PARAMS && type->param_names[layer->n_params]) layer->n_params++;
    // Sizes are ints inside the layers (GEMM dimensions): keep every tensor of one sample in range.
    int64_t numel = hw_shape_numel(layer->out_shape);
    for (int i = 0; i < layer->n_params; i++) {
        if (hw_shape_numel(param_shapes[i]) > numel) numel = hw_shape_numel(param_shapes[i]);
    }
    if (hw_shape_numel(layer->out_shape) < 1 || numel > HW_LAYER_MAX_NUMEL) {
        char shape[64];
        hw_shape_format(layer->out_shape, shape, sizeof shape);
        return hw_fail("%s: output shape %s (or a parameter) is empty or over %d elements", type->name, shape,
                       HW_LAYER_MAX_NUMEL);
    }
    return HW_OK;
}
