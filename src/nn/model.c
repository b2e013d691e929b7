// The model: parsing a model file into layers and a flat parameter layout, the parameter
// buffer, initialisation, freezing, the summary.
#include "hw/nn.h"

#include "hw/err.h"
#include "hw/file.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- parsing ----

// Copies line `text[0..len)` into buf without its comment and surrounding blanks.
static void clean_line(const char *text, size_t len, char *buf, size_t cap) {
    const char *hash = memchr(text, '#', len);
    if (hash) len = (size_t)(hash - text);
    while (len > 0 && isspace((unsigned char)text[len - 1])) len--;
    while (len > 0 && isspace((unsigned char)*text)) {
        text++;
        len--;
    }
    if (len >= cap) len = cap - 1;
    memcpy(buf, text, len);
    buf[len] = '\0';
}

static int parse_input(hw_model *model, char *line) {
    char *save = NULL;
    char *word = strtok_r(line, " \t", &save);
    if (strcmp(word, "input") != 0) {
        return hw_fail("expected the input shape first ('input C H W' or 'input FEATURES'), got '%s'", word);
    }
    int64_t dims[HW_MAX_DIMS];
    int n = 0;
    while ((word = strtok_r(NULL, " \t", &save))) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(word, &end, 10);
        if (end == word || *end != '\0' || errno || v < 1 || v > 1000000) {
            return hw_fail("input: bad size '%s': expected a positive integer", word);
        }
        if (n == 3) return hw_fail("input: at most 3 sizes (C H W), got '%s' too", word);
        dims[n++] = v;
    }
    if (n == 0) return hw_fail("input: missing sizes: expected 'input C H W' or 'input FEATURES'");
    if (n == 2) return hw_fail("input: 2 sizes given: expected 'input C H W' (3) or 'input FEATURES' (1)");
    model->input = hw_shape_make(n, dims);
    return HW_OK;
}

// Gives the layer a default name ("conv2": the count among layers sharing its prefix) unless it
// has one, and fails when the name is already taken.
static int name_layer(hw_model *model, hw_layer *layer) {
    if (!layer->name[0]) {
        int count = 1;
        for (int i = 0; i < model->n_layers; i++) {
            count += model->layers[i].type->name_prefix == layer->type->name_prefix;
        }
        snprintf(layer->name, sizeof layer->name, "%s%d", layer->type->name_prefix, count);
    }
    for (int i = 0; i < model->n_layers; i++) {
        if (strcmp(model->layers[i].name, layer->name) == 0) {
            return hw_fail("layer name '%s' is already used by the %s layer on line %d: give one of them another "
                           "name=NAME",
                           layer->name, model->layers[i].type->name, model->layers[i].line);
        }
    }
    return HW_OK;
}

static int add_params(hw_model *model, hw_layer *layer, const hw_shape *shapes) {
    if (layer->n_params == 0) return HW_OK;
    if (model->n_params + layer->n_params > HW_MAX_PARAMS) {
        return hw_fail("too many parameter tensors (at most %d)", HW_MAX_PARAMS);
    }
    layer->first_param = model->n_params;
    for (int i = 0; i < layer->n_params; i++) {
        hw_param *p = &model->params[model->n_params++];
        // built aside (gcc cannot tell layer->name from p->name); names fit: see name_is_valid()
        char name[2 * HW_NAME_CAP];
        snprintf(name, sizeof name, "%s.%s", layer->name, layer->type->param_names[i]);
        size_t len = strnlen(name, sizeof p->name - 1);
        memcpy(p->name, name, len);
        p->name[len] = '\0';
        p->offset = model->n_weights;
        p->shape = shapes[i];
        p->frozen = layer->frozen;
        model->n_weights += (size_t)hw_shape_numel(shapes[i]);
    }
    return HW_OK;
}

static int parse_layer(hw_model *model, char *line, int line_no) {
    if (model->n_layers == HW_MAX_LAYERS) return hw_fail("too many layers (at most %d)", HW_MAX_LAYERS);
    if (model->n_layers > 0) {
        const hw_layer *last = &model->layers[model->n_layers - 1];
        if (last->type->is_loss) {
            return hw_fail("%s (line %d) must be the last layer: the loss is taken on its output", last->type->name,
                           last->line);
        }
    }
    hw_shape in = model->n_layers ? model->layers[model->n_layers - 1].out_shape : model->input;
    hw_layer *layer = &model->layers[model->n_layers];
    hw_shape shapes[HW_LAYER_MAX_PARAMS];
    if (hw_layer_setup(layer, line, in, shapes) != HW_OK) return HW_ERR;
    layer->line = line_no;
    if (name_layer(model, layer) != HW_OK) return HW_ERR;
    if (add_params(model, layer, shapes) != HW_OK) return HW_ERR;
    model->n_layers++;
    return HW_OK;
}

static void loss_type_names(char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; hw_layer_types[i]; i++) {
        if (hw_layer_types[i]->is_loss && used < cap) {
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? " or " : "", hw_layer_types[i]->name);
        }
    }
}

int hw_model_parse(hw_model *model, const char *text, const char *name) {
    memset(model, 0, sizeof *model);
    // A UTF-8 byte order mark (Windows Notepad writes one) is no part of the text.
    if (strncmp(text, "\xef\xbb\xbf", 3) == 0) text += 3;
    snprintf(model->path, sizeof model->path, "%s", name);
    model->device = (hw_device){HW_DEVICE_CPU, 0};
    int line_no = 0, have_input = 0;
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        line_no++;
        char line[1024];
        if (len >= sizeof line) {
            return hw_fail("%s:%d: line too long (over %zu characters)", name, line_no, sizeof line - 1);
        }
        clean_line(p, len, line, sizeof line);
        p += len + (end ? 1 : 0);
        if (!line[0]) continue;
        int rc = have_input ? parse_layer(model, line, line_no) : parse_input(model, line);
        if (rc != HW_OK) return hw_error_prefix("%s:%d", name, line_no);
        have_input = 1;
    }
    int last_line = line_no > 0 ? line_no : 1;
    if (!have_input) {
        return hw_fail("%s:%d: empty model: expected 'input C H W' (or 'input FEATURES') and then one layer per line",
                       name, last_line);
    }
    char loss[64];
    loss_type_names(loss, sizeof loss);
    if (model->n_layers == 0) {
        return hw_fail("%s:%d: no layers after the input line: expected one layer per line, ending with %s", name,
                       last_line, loss);
    }
    const hw_layer *last = &model->layers[model->n_layers - 1];
    if (!last->type->is_loss) {
        return hw_fail("%s:%d: the last layer is %s: expected %s last (the loss is taken on its output)", name,
                       last->line, last->type->name, loss);
    }
    model->n_classes = (int)hw_shape_numel(last->out_shape);
    model->text = strdup(text);
    if (!model->text) return hw_fail_errno(errno, "%s: keeping the model text", name);
    return HW_OK;
}

int hw_model_load(hw_model *model, const char *path) {
    memset(model, 0, sizeof *model);
    FILE *f = hw_fopen_regular(path, "model file", HW_MODEL_FILE_MAX_BYTES, NULL);
    if (!f) return HW_ERR;
    char *text = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *bigger = realloc(text, cap);
            if (!bigger) {
                free(text);
                fclose(f);
                return hw_fail("model file %s: out of memory", path);
            }
            text = bigger;
        }
        size_t got = fread(text + size, 1, cap - size - 1, f);
        size += got;
        if (got == 0) break;
        if (size > HW_MODEL_FILE_MAX_BYTES) {  // it grew since it was opened
            free(text);
            fclose(f);
            return hw_fail("model file %s is larger than the limit of %llu bytes", path, HW_MODEL_FILE_MAX_BYTES);
        }
    }
    int read_error = ferror(f);
    fclose(f);
    if (read_error) {
        free(text);
        return hw_fail("cannot read model file %s", path);
    }
    text[size] = '\0';
    if (strlen(text) != size) {
        free(text);
        return hw_fail("model file %s: not a text file (NUL byte)", path);
    }
    int rc = hw_model_parse(model, text, path);
    free(text);
    return rc;
}

// ---- parameters ----

int hw_model_alloc_weights(hw_model *model) {
    size_t bytes = (model->n_weights * sizeof(float) + 63) / 64 * 64;
    float *w = aligned_alloc(64, bytes ? bytes : 64);
    if (!w) return hw_fail("model %s: out of memory for %zu parameters", model->path, model->n_weights);
    memset(w, 0, bytes);
    if (model->owns_weights) free(model->weights);
    model->weights = w;
    model->owns_weights = 1;
    return HW_OK;
}

void hw_model_bind_weights(hw_model *model, float *weights) {
    if (model->owns_weights) free(model->weights);
    model->weights = weights;
    model->owns_weights = 0;
}

void hw_model_init_weights(hw_model *model, uint64_t seed) {
    if (!model->weights) return;
    hw_rng rng;
    hw_rng_seed(&rng, seed, 0x696e6974 /* "init" */);
    for (int l = 0; l < model->n_layers; l++) {
        const hw_layer *layer = &model->layers[l];
        if (layer->n_params == 0) continue;
        // fan_in of the layer's weight (its first parameter): every dimension but the first.
        hw_shape w = model->params[layer->first_param].shape;
        int64_t fan_in = w.ndim > 1 ? hw_shape_numel(w) / w.dims[0] : 1;
        // kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in);
        // torch draws the bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) too.
        float bound = 1.0f / sqrtf((float)fan_in);
        for (int i = 0; i < layer->n_params; i++) {
            const hw_param *p = &model->params[layer->first_param + i];
            float *data = model->weights + p->offset;
            int64_t n = hw_shape_numel(p->shape);
            for (int64_t j = 0; j < n; j++) data[j] = (2.0f * hw_rng_uniform(&rng) - 1.0f) * bound;
        }
    }
}

static int find_layer(const hw_model *model, const char *name) {
    for (int i = 0; i < model->n_layers; i++) {
        if (strcmp(model->layers[i].name, name) == 0) return i;
    }
    return -1;
}

static int fail_unknown_param(const hw_model *model, const char *name) {
    char known[768];
    size_t used = 0;
    known[0] = '\0';
    for (int i = 0; i < model->n_params && used < sizeof known; i++) {
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", model->params[i].name);
    }
    return hw_fail("cannot freeze '%s': no such parameter or layer in %s (parameters: %s)", name, model->path, known);
}

// Goes through the comma-separated `names` (a parameter, or a layer for all of its parameters),
// failing on the first unknown one; with apply = 1 it also marks them frozen.
static int for_each_named(hw_model *model, const char *names, int apply) {
    const char *p = names;
    while (*p) {
        size_t len = strcspn(p, ",");
        char name[HW_NAME_CAP + 1];
        clean_line(p, len, name, sizeof name);
        // An empty name (",,", a comma at an end, blanks alone) is a slip, not a request to freeze
        // nothing: refused as an unknown name is.
        if (!name[0]) {
            return hw_fail("'%s' has an empty name at character %zu; give names separated by single commas", names,
                           (size_t)(p - names) + 1);
        }
        p += len + (p[len] == ',');
        if (!*p && p[-1] == ',') return hw_fail("'%s' ends with a comma; give names separated by single commas", names);
        int param = hw_model_find_param(model, name);
        int layer = param < 0 ? find_layer(model, name) : -1;
        if (param < 0 && (layer < 0 || model->layers[layer].n_params == 0)) return fail_unknown_param(model, name);
        if (!apply) continue;
        if (param >= 0) {
            model->params[param].frozen = 1;
        } else {
            for (int i = 0; i < model->layers[layer].n_params; i++) {
                model->params[model->layers[layer].first_param + i].frozen = 1;
            }
        }
    }
    return HW_OK;
}

int hw_model_freeze(hw_model *model, const char *names) {
    // Check every name first, so that a typo freezes nothing.
    if (for_each_named(model, names, 0) != HW_OK) return HW_ERR;
    return for_each_named(model, names, 1);
}

void hw_model_free(hw_model *model) {
    if (model->owns_weights) free(model->weights);
    free(model->text);
    memset(model, 0, sizeof *model);
}

// ---- description ----

void hw_model_summary(const hw_model *model, FILE *out) {
    char shape[64];
    hw_shape_format(model->input, shape, sizeof shape);
    fprintf(out, "model %s: input %s\n", model->path, shape);
    fprintf(out, "  %-14s %-12s %-16s %10s\n", "layer", "type", "output", "params");
    size_t frozen = 0;
    for (int l = 0; l < model->n_layers; l++) {
        const hw_layer *layer = &model->layers[l];
        int64_t count = 0, layer_frozen = 0;
        for (int i = 0; i < layer->n_params; i++) {
            const hw_param *p = &model->params[layer->first_param + i];
            count += hw_shape_numel(p->shape);
            if (p->frozen) layer_frozen += hw_shape_numel(p->shape);
        }
        frozen += (size_t)layer_frozen;
        hw_shape_format(layer->out_shape, shape, sizeof shape);
        fprintf(out, "  %-14s %-12s %-16s %10lld%s\n", layer->name, layer->type->name, shape, (long long)count,
                layer_frozen == 0       ? ""
                : layer_frozen == count ? "  frozen"
                                        : "  partly frozen");
    }
    fprintf(out, "total parameters: %zu", model->n_weights);
    if (frozen) fprintf(out, " (%zu frozen, %zu trainable)", frozen, model->n_weights - frozen);
    fprintf(out, "\n");
}

double hw_model_forward_flops(const hw_model *model) {
    double flops = 0.0;
    for (int l = 0; l < model->n_layers; l++) {
        const hw_layer *layer = &model->layers[l];
        if (layer->type->flops) flops += layer->type->flops(layer);
    }
    return flops;
}
