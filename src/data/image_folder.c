// image_folder: torchvision's ImageFolder layout, decoded by stb_image (Debian's libstb).
//
//   root/<class>/<image>.png|jpg|jpeg|bmp
//
// Classes are the sub-folders in byte order of their names (label 0 is the first), images in
// byte order within a class, so a folder always loads in the same order. Files at the root
// itself are not samples and are ignored; names starting with '.' are skipped everywhere.
// Inside a class folder anything else that is not a decodable image is an error: a silently
// skipped file is a silently wrong dataset.
#include "hw/data.h"
#include "hw/err.h"
#include "hw/option.h"
#include "hw/file.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stb_image.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

enum { MAX_CLASSES = 256 };  // labels are one byte

typedef struct {
    char **items;
    size_t n, cap;
} name_list;

static void list_free(name_list *list) {
    for (size_t i = 0; i < list->n; i++) free(list->items[i]);
    free(list->items);
    memset(list, 0, sizeof *list);
}

static int list_push(name_list *list, const char *name) {
    if (list->n == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 64;
        char **bigger = realloc(list->items, cap * sizeof *bigger);
        if (!bigger) return hw_fail("out of memory listing files");
        list->items = bigger;
        list->cap = cap;
    }
    list->items[list->n] = strdup(name);
    if (!list->items[list->n]) return hw_fail("out of memory listing files");
    list->n++;
    return HW_OK;
}

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// The entries of dir that do not start with '.', sorted.
static int list_dir(const char *dir, name_list *out) {
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d) return hw_fail_errno(errno, "cannot open image folder %s", dir);
    int rc = HW_OK;
    for (struct dirent *e; rc == HW_OK && (e = readdir(d));) {
        if (e->d_name[0] != '.') rc = list_push(out, e->d_name);
    }
    closedir(d);
    if (rc != HW_OK) {
        list_free(out);
        return rc;
    }
    if (out->n) qsort(out->items, out->n, sizeof *out->items, compare_names);
    return HW_OK;
}

// dir/name into out; a path longer than out is an error, never a silently shortened name.
static int join_path(char *out, size_t cap, const char *dir, const char *name) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) return hw_fail("path too long: %s/%s", dir, name);
    return HW_OK;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int has_image_extension(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    return strcasecmp(dot, ".png") == 0 || strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 ||
           strcasecmp(dot, ".bmp") == 0;
}

// ---- resizing: one table of (first source index, weights) per output index and axis ----
// Shrinking averages the source pixels under each output pixel, weighted by how much of them it
// covers (area); enlarging interpolates linearly between the two nearest pixel centres.
typedef struct {
    int *first;
    int *count;
    float *weight;  // max_taps per output index
    int max_taps;
} resample_axis;

static void axis_free(resample_axis *a) {
    free(a->first);
    free(a->count);
    free(a->weight);
}

static int axis_init(resample_axis *a, int in, int out) {
    double scale = (double)in / out;
    a->max_taps = scale > 1 ? (int)ceil(scale) + 1 : 2;
    a->first = malloc((size_t)out * sizeof *a->first);
    a->count = malloc((size_t)out * sizeof *a->count);
    a->weight = calloc((size_t)out * (size_t)a->max_taps, sizeof *a->weight);
    if (!a->first || !a->count || !a->weight) {
        axis_free(a);
        return hw_fail("out of memory resizing images");
    }
    for (int o = 0; o < out; o++) {
        float *w = a->weight + (size_t)o * (size_t)a->max_taps;
        if (scale > 1) {
            double lo = o * scale, hi = lo + scale;
            int i0 = (int)floor(lo), i1 = (int)ceil(hi);
            if (i1 > in) i1 = in;
            a->first[o] = i0;
            a->count[o] = i1 - i0;
            for (int i = i0; i < i1; i++) {
                double overlap = fmin(hi, i + 1.0) - fmax(lo, (double)i);
                w[i - i0] = (float)(overlap / scale);
            }
        } else {
            double c = (o + 0.5) * scale - 0.5;
            if (c < 0) c = 0;
            int i0 = (int)floor(c);
            double t = c - i0;
            if (i0 >= in - 1) {
                i0 = in - 1;
                t = 0;
            }
            a->first[o] = i0;
            a->count[o] = t > 0 ? 2 : 1;
            w[0] = (float)(1 - t);
            w[1] = (float)t;
        }
    }
    return HW_OK;
}

static int resize(const uint8_t *src, int in_h, int in_w, uint8_t *dst, int out_h, int out_w) {
    resample_axis ax = {0}, ay = {0};
    float *rows = malloc((size_t)in_h * (size_t)out_w * sizeof *rows);
    if (!rows || axis_init(&ax, in_w, out_w) != HW_OK || axis_init(&ay, in_h, out_h) != HW_OK) {
        free(rows);
        axis_free(&ax);
        axis_free(&ay);
        return hw_fail("out of memory resizing images");
    }
    for (int y = 0; y < in_h; y++) {
        for (int x = 0; x < out_w; x++) {
            const float *w = ax.weight + (size_t)x * (size_t)ax.max_taps;
            const uint8_t *s = src + (size_t)y * (size_t)in_w + ax.first[x];
            float sum = 0;
            for (int k = 0; k < ax.count[x]; k++) sum += w[k] * s[k];
            rows[(size_t)y * (size_t)out_w + (size_t)x] = sum;
        }
    }
    for (int y = 0; y < out_h; y++) {
        const float *w = ay.weight + (size_t)y * (size_t)ay.max_taps;
        for (int x = 0; x < out_w; x++) {
            float sum = 0;
            for (int k = 0; k < ay.count[y]; k++) {
                sum += w[k] * rows[(size_t)(ay.first[y] + k) * (size_t)out_w + (size_t)x];
            }
            sum += 0.5f;
            dst[(size_t)y * (size_t)out_w + (size_t)x] = (uint8_t)(sum < 0 ? 0 : sum > 255 ? 255 : sum);
        }
    }
    free(rows);
    axis_free(&ax);
    axis_free(&ay);
    return HW_OK;
}

// The image files of every class folder, in load order, and their labels.
static int list_samples(const char *root, name_list *paths, uint8_t **labels_out, int *n_classes) {
    name_list entries, files;
    memset(paths, 0, sizeof *paths);
    *labels_out = NULL;
    if (list_dir(root, &entries) != HW_OK) return HW_ERR;
    char path[4096];
    int classes = 0;
    uint8_t *labels = NULL;
    size_t labels_cap = 0;
    int rc = HW_OK;
    for (size_t c = 0; rc == HW_OK && c < entries.n; c++) {
        if ((rc = join_path(path, sizeof path, root, entries.items[c])) != HW_OK) break;
        if (!is_dir(path)) continue;  // a file beside the class folders is not a sample
        if (classes == MAX_CLASSES) {
            rc = hw_fail("%s: more than %d class folders; labels are one byte, so at most %d classes", root,
                         MAX_CLASSES, MAX_CLASSES);
            break;
        }
        char class_dir[4096];
        memcpy(class_dir, path, sizeof class_dir);
        if (list_dir(class_dir, &files) != HW_OK) {
            rc = HW_ERR;
            break;
        }
        size_t before = paths->n;
        for (size_t f = 0; rc == HW_OK && f < files.n; f++) {
            if (join_path(path, sizeof path, class_dir, files.items[f]) != HW_OK) {
                rc = HW_ERR;
            } else if (is_dir(path)) {
                rc = hw_fail("%s: a folder inside a class folder; expected only images in %s", path, class_dir);
            } else if (!has_image_extension(files.items[f])) {
                rc = hw_fail("%s: not an image (expected .png, .jpg, .jpeg or .bmp)", path);
            } else if ((rc = list_push(paths, path)) == HW_OK) {
                if (paths->n > labels_cap) {
                    labels_cap = paths->cap;
                    uint8_t *bigger = realloc(labels, labels_cap);
                    if (!bigger) {
                        rc = hw_fail("out of memory listing files");
                        break;
                    }
                    labels = bigger;
                }
                labels[paths->n - 1] = (uint8_t)classes;
            }
        }
        list_free(&files);
        if (rc == HW_OK && paths->n == before) rc = hw_fail("%s: class folder holds no images", class_dir);
        classes++;
    }
    list_free(&entries);
    if (rc == HW_OK && classes == 0) {
        rc = hw_fail("%s: no class folders; expected %s/<class>/<image>.png (torchvision ImageFolder layout)", root,
                     root);
    }
    if (rc != HW_OK) {
        list_free(paths);
        free(labels);
        return HW_ERR;
    }
    *labels_out = labels;
    *n_classes = classes;
    return HW_OK;
}

// Big-endian and little-endian 32-bit and 16-bit fields of a header.
static uint32_t be32(const uint8_t *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}
static uint32_t le32(const uint8_t *b) {
    return (uint32_t)b[3] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[1] << 8 | b[0];
}
static unsigned be16(const uint8_t *b) { return (unsigned)b[0] << 8 | b[1]; }

// The size a PNG, JPEG or BMP header claims, read from its bytes (`n` of them): 1 with *kind set,
// or 0 for another format or a header too short to say. stb_image's own check refuses a size
// beyond its limits and then says "unknown image type", which names neither the size nor ours.
static int claimed_size(const uint8_t *b, size_t n, uint64_t *w, uint64_t *h, const char **kind) {
    if (n >= 24 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0 && memcmp(b + 12, "IHDR", 4) == 0) {
        *kind = "PNG", *w = be32(b + 16), *h = be32(b + 20);
        return 1;
    }
    if (n >= 26 && b[0] == 'B' && b[1] == 'M') {
        int32_t height = (int32_t)le32(b + 22);  // negative: rows stored top-down
        *kind = "BMP", *w = (int32_t)le32(b + 18) < 0 ? UINT32_MAX : le32(b + 18);
        *h = height < 0 ? (uint64_t)(-(int64_t)height) : (uint64_t)height;
        return 1;
    }
    // JPEG: the markers after SOI up to the first start of frame (SOF0-SOF15 but DHT, JPG, DAC).
    for (size_t at = 2; n >= 4 && b[0] == 0xFF && b[1] == 0xD8 && at + 9 <= n && b[at] == 0xFF;) {
        unsigned marker = b[at + 1];
        if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
            *kind = "JPEG", *h = be16(b + at + 5), *w = be16(b + at + 7);
            return 1;
        }
        at += 2 + be16(b + at + 2);
    }
    return 0;
}

// Decodes one image to grayscale, after checking that it is a regular file of at most
// HW_IMAGE_FILE_MAX_BYTES and, from its header alone, that its size is within HW_IMAGE_MAX_SIDE
// and HW_IMAGE_MAX_PIXELS and not empty: a small file can claim a huge image (a decompression
// bomb), refused before a byte of it is decoded. NULL after hw_fail.
static uint8_t *load_image(const char *path, int *w, int *h, int *channels) {
    FILE *f = hw_fopen_regular(path, "image", HW_IMAGE_FILE_MAX_BYTES, NULL);
    if (!f) return NULL;
    uint8_t head[65536];
    size_t n = fread(head, 1, sizeof head, f);
    rewind(f);
    uint64_t cw = 0, ch = 0;
    const char *kind = "";
    int claimed = claimed_size(head, n, &cw, &ch, &kind);
    uint8_t *pixels = NULL;
    if (claimed && (cw == 0 || ch == 0)) {
        hw_fail("%s: the %s header claims an image of %llu x %llu (width x height): an image needs at least one pixel",
                path, kind, (unsigned long long)cw, (unsigned long long)ch);
    } else if (claimed && (cw > HW_IMAGE_MAX_SIDE || ch > HW_IMAGE_MAX_SIDE || cw * ch > HW_IMAGE_MAX_PIXELS)) {
        hw_fail("%s: the %s header claims an image of %llu x %llu (width x height), beyond the limit of %d x %d "
                "pixels; not decoded",
                path, kind, (unsigned long long)cw, (unsigned long long)ch, HW_IMAGE_MAX_SIDE, HW_IMAGE_MAX_SIDE);
    } else if (!stbi_info_from_file(f, w, h, channels)) {
        hw_fail("%s: cannot decode image (stb_image: %s)", path, stbi_failure_reason());
    } else if (*w > HW_IMAGE_MAX_SIDE || *h > HW_IMAGE_MAX_SIDE || (uint64_t)*w * (uint64_t)*h > HW_IMAGE_MAX_PIXELS) {
        hw_fail("%s: the image is %d x %d (width x height), beyond the limit of %d x %d pixels; not decoded", path, *w,
                *h, HW_IMAGE_MAX_SIDE, HW_IMAGE_MAX_SIDE);
    } else {
        pixels = stbi_load_from_file(f, w, h, channels, 1);
        if (!pixels) {
            hw_fail("%s: cannot decode the %s%simage of %d x %d: its data is damaged or cut short (stb_image: %s)",
                    path, kind, claimed ? " " : "", *w, *h, stbi_failure_reason());
        }
    }
    fclose(f);
    return pixels;
}

int hw_image_folder_load(hw_dataset *ds, const char *root, int height, int width) {
    memset(ds, 0, sizeof *ds);
    if (height < 0 || width < 0 || (height == 0) != (width == 0)) {
        return hw_fail("%s: bad image size %d x %d (both 0 to keep the images' own size)", root, height, width);
    }
    name_list paths;
    uint8_t *labels = NULL, *images = NULL;
    int n_classes = 0;
    if (list_samples(root, &paths, &labels, &n_classes) != HW_OK) return HW_ERR;
    int rc = HW_ERR;
    int keep_size = height == 0;
    const char *first_path = paths.items[0];
    for (size_t i = 0; i < paths.n; i++) {
        int w, h, channels;
        uint8_t *pixels = load_image(paths.items[i], &w, &h, &channels);
        if (!pixels) goto done;
        if (i == 0) {
            if (keep_size) {
                height = h;
                width = w;
            }
            images = malloc(paths.n * (size_t)height * (size_t)width);
            if (!images) {
                stbi_image_free(pixels);
                hw_fail("%s: out of memory for %zu images of %d x %d", root, paths.n, height, width);
                goto done;
            }
        }
        uint8_t *dst = images + i * (size_t)height * (size_t)width;
        int ok = HW_OK;
        if (h == height && w == width) {
            memcpy(dst, pixels, (size_t)height * (size_t)width);
        } else if (keep_size) {
            ok = hw_fail("%s: image is %d x %d but the first image (%s) is %d x %d; resize every image to one "
                         "size%s",
                         paths.items[i], h, w, first_path, height, width, hw_option_hint(HW_OPTION_RESIZE));
        } else {
            ok = resize(pixels, h, w, dst, height, width);
        }
        stbi_image_free(pixels);
        if (ok != HW_OK) goto done;
    }
    ds->n = (int64_t)paths.n;
    ds->channels = 1;
    ds->height = height;
    ds->width = width;
    ds->n_classes = n_classes;
    ds->images = images;
    ds->labels = labels;
    snprintf(ds->source, sizeof ds->source, "%s", root);
    images = labels = NULL;
    rc = HW_OK;
done:
    list_free(&paths);
    free(images);
    free(labels);
    return rc;
}
