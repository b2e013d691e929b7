// synth: synthetic handwritten-looking digits, the offline fallback for MNIST and a test fixture.
//
// Each class is a few stroke skeletons in a unit box (x right, y down), drawn as a handwriting
// model would: the control points jitter, smooth strokes go through them as Catmull-Rom curves,
// the whole digit gets a small smooth warp and a random affine map (rotation, scale, aspect,
// shear, translation), strokes get a random width and ink, and are rasterised anti-aliased by
// their distance to each pixel centre. A tenth of the samples are drawn carelessly (larger jitter
// and rotation, sometimes a stroke broken off), which makes some of them honestly ambiguous, so a
// model learns the set well but not perfectly. Sample i depends only on (seed, stream, i).
#include "sparse_io.h"

#include "hw/data.h"
#include "hw/err.h"
#include "hw/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    SIDE = 28,
    MAX_STROKES = 4,
    MAX_CONTROL = 16,
    SUBDIV = 6,                                   // curve pieces between two control points
    MAX_POINTS = (MAX_CONTROL + 1) * SUBDIV + 1,  // of one stroke's polyline
};

// Digit boxes are mapped to 20 x 20 pixels centred in the 28 x 28 image, as in MNIST.
#define BOX_PIXELS     20.0f
#define BOX_OFFSET     4.0f
#define PI_F           3.14159265358979f
#define HEAVY_FRACTION 0.1f

typedef struct {
    float x[MAX_CONTROL], y[MAX_CONTROL];
    int n;
    int smooth;  // Catmull-Rom through the points; else straight segments (corners)
    int closed;  // the last point joins the first
} stroke;

typedef struct {
    stroke s[MAX_STROKES];
    int n;
} skeleton;

static stroke *add_stroke(skeleton *k, int smooth, int closed) {
    stroke *s = &k->s[k->n++];
    s->n = 0;
    s->smooth = smooth;
    s->closed = closed;
    return s;
}

static void add_point(stroke *s, float x, float y) {
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
}

// n points on an elliptic arc from angle a0 to a1 (degrees; 0 = right, 90 = down).
static void add_arc(stroke *s, float cx, float cy, float rx, float ry, float a0, float a1, int n) {
    for (int i = 0; i < n; i++) {
        float a = (a0 + (a1 - a0) * (float)i / (float)(s->closed ? n : n - 1)) * PI_F / 180.0f;
        add_point(s, cx + rx * cosf(a), cy + ry * sinf(a));
    }
}

// The skeleton of `digit`, in one of its written variants.
static void build_skeleton(skeleton *k, int digit, int variant) {
    k->n = 0;
    stroke *s;
    switch (digit) {
    case 0:
        if (variant == 0) {
            add_arc(add_stroke(k, 1, 1), 0.5f, 0.5f, 0.27f, 0.43f, -90, 270, 8);
        } else {  // started at the top and not quite closed
            add_arc(add_stroke(k, 1, 0), 0.5f, 0.5f, 0.26f, 0.43f, -80, 250, 9);
        }
        break;
    case 1:
        s = add_stroke(k, 0, 0);
        if (variant > 0) add_point(s, 0.33f, 0.24f);
        add_point(s, 0.52f, 0.05f);
        add_point(s, 0.5f, 0.95f);
        if (variant == 2) {
            s = add_stroke(k, 0, 0);
            add_point(s, 0.34f, 0.95f);
            add_point(s, 0.68f, 0.95f);
        }
        break;
    case 2:
        s = add_stroke(k, 1, 0);
        add_point(s, 0.25f, 0.27f);
        add_point(s, 0.36f, 0.09f);
        add_point(s, 0.56f, 0.05f);
        add_point(s, 0.72f, 0.18f);
        add_point(s, 0.69f, 0.38f);
        add_point(s, 0.48f, 0.62f);
        add_point(s, 0.24f, 0.92f);
        s = add_stroke(k, 0, 0);
        add_point(s, 0.24f, 0.92f);
        add_point(s, 0.8f, 0.9f);
        break;
    case 3:
        s = add_stroke(k, 1, 0);
        add_point(s, 0.26f, 0.15f);
        add_point(s, 0.45f, 0.05f);
        add_point(s, 0.68f, 0.12f);
        add_point(s, 0.69f, 0.3f);
        add_point(s, 0.44f, 0.47f);
        s = add_stroke(k, 1, 0);
        add_point(s, 0.44f, 0.47f);
        add_point(s, 0.71f, 0.6f);
        add_point(s, 0.72f, 0.82f);
        add_point(s, 0.5f, 0.95f);
        add_point(s, 0.25f, 0.86f);
        break;
    case 4:
        s = add_stroke(k, 0, 0);
        if (variant == 0) {  // closed top: a diagonal into the bar
            add_point(s, 0.58f, 0.05f);
            add_point(s, 0.2f, 0.64f);
            add_point(s, 0.8f, 0.64f);
            s = add_stroke(k, 0, 0);
            add_point(s, 0.64f, 0.3f);
            add_point(s, 0.64f, 0.95f);
        } else {  // open top: down, across, and a long stem
            add_point(s, 0.26f, 0.05f);
            add_point(s, 0.24f, 0.56f);
            add_point(s, 0.78f, 0.56f);
            s = add_stroke(k, 0, 0);
            add_point(s, 0.68f, 0.05f);
            add_point(s, 0.68f, 0.95f);
        }
        break;
    case 5:
        s = add_stroke(k, 0, 0);
        add_point(s, 0.74f, 0.07f);
        add_point(s, 0.34f, 0.07f);
        add_point(s, 0.3f, 0.45f);
        s = add_stroke(k, 1, 0);
        add_point(s, 0.3f, 0.45f);
        add_point(s, 0.5f, 0.38f);
        add_point(s, 0.71f, 0.5f);
        add_point(s, 0.73f, 0.75f);
        add_point(s, 0.55f, 0.93f);
        add_point(s, 0.27f, 0.87f);
        break;
    case 6:
        s = add_stroke(k, 1, 0);
        add_point(s, 0.68f, 0.06f);
        add_point(s, 0.47f, 0.2f);
        add_point(s, 0.32f, 0.45f);
        add_point(s, 0.3f, 0.72f);
        add_point(s, 0.45f, 0.93f);
        add_point(s, 0.66f, 0.86f);
        add_point(s, 0.7f, 0.67f);
        add_point(s, 0.52f, 0.55f);
        add_point(s, 0.32f, 0.65f);
        break;
    case 7:
        s = add_stroke(k, 0, 0);
        add_point(s, 0.22f, 0.08f);
        add_point(s, 0.78f, 0.08f);
        if (variant == 2) {  // a curved downstroke
            s = add_stroke(k, 1, 0);
            add_point(s, 0.78f, 0.08f);
            add_point(s, 0.6f, 0.45f);
            add_point(s, 0.47f, 0.95f);
        } else {
            add_point(s, 0.42f, 0.95f);
        }
        if (variant == 1) {  // the continental crossbar
            s = add_stroke(k, 0, 0);
            add_point(s, 0.38f, 0.52f);
            add_point(s, 0.74f, 0.52f);
        }
        break;
    case 8:
        if (variant == 0) {  // one stroke crossing itself in the middle
            s = add_stroke(k, 1, 0);
            add_point(s, 0.62f, 0.14f);
            add_point(s, 0.5f, 0.05f);
            add_point(s, 0.33f, 0.12f);
            add_point(s, 0.34f, 0.32f);
            add_point(s, 0.5f, 0.47f);
            add_point(s, 0.7f, 0.64f);
            add_point(s, 0.7f, 0.86f);
            add_point(s, 0.5f, 0.95f);
            add_point(s, 0.29f, 0.86f);
            add_point(s, 0.3f, 0.64f);
            add_point(s, 0.5f, 0.47f);
            add_point(s, 0.66f, 0.31f);
            add_point(s, 0.64f, 0.12f);
        } else {  // two loops
            add_arc(add_stroke(k, 1, 1), 0.5f, 0.27f, 0.17f, 0.21f, -90, 270, 7);
            add_arc(add_stroke(k, 1, 1), 0.5f, 0.71f, 0.22f, 0.24f, -90, 270, 8);
        }
        break;
    default:  // 9
        add_arc(add_stroke(k, 1, 1), 0.47f, 0.3f, 0.21f, 0.23f, 0, 360, 7);
        if (variant == 0) {
            s = add_stroke(k, 0, 0);
            add_point(s, 0.68f, 0.3f);
            add_point(s, 0.63f, 0.95f);
        } else {
            s = add_stroke(k, 1, 0);
            add_point(s, 0.68f, 0.3f);
            add_point(s, 0.67f, 0.62f);
            add_point(s, 0.54f, 0.95f);
        }
        break;
    }
}

static const int n_variants[10] = {2, 3, 1, 1, 2, 1, 1, 3, 2, 2};

static float uniform(hw_rng *rng, float lo, float hi) { return lo + (hi - lo) * hw_rng_uniform(rng); }

// Catmull-Rom through the control points (or straight segments), into a polyline.
static int stroke_polyline(const stroke *s, float *px, float *py) {
    int n = s->n, segments = s->closed ? n : n - 1, out = 0;
    if (!s->smooth) {
        for (int i = 0; i < n; i++, out++) {
            px[out] = s->x[i];
            py[out] = s->y[i];
        }
        if (s->closed) {
            px[out] = s->x[0];
            py[out++] = s->y[0];
        }
        return out;
    }
    for (int i = 0; i < segments; i++) {
        // Neighbours wrap on a closed stroke and repeat the end point on an open one.
        int i0 = s->closed ? (i - 1 + n) % n : (i > 0 ? i - 1 : 0);
        int i1 = i, i2 = (i + 1) % n;
        int i3 = s->closed ? (i + 2) % n : (i + 2 < n ? i + 2 : n - 1);
        for (int k = 0; k < SUBDIV; k++) {
            float t = (float)k / SUBDIV, t2 = t * t, t3 = t2 * t;
            float b0 = -0.5f * t3 + t2 - 0.5f * t, b1 = 1.5f * t3 - 2.5f * t2 + 1.0f;
            float b2 = -1.5f * t3 + 2.0f * t2 + 0.5f * t, b3 = 0.5f * t3 - 0.5f * t2;
            px[out] = b0 * s->x[i0] + b1 * s->x[i1] + b2 * s->x[i2] + b3 * s->x[i3];
            py[out] = b0 * s->y[i0] + b1 * s->y[i1] + b2 * s->y[i2] + b3 * s->y[i3];
            out++;
        }
    }
    px[out] = s->x[s->closed ? 0 : n - 1];
    py[out] = s->y[s->closed ? 0 : n - 1];
    return out + 1;
}

// Keeps the first `fraction` of a polyline's length (a stroke the writer broke off); returns
// the new number of points.
static int cut_polyline(float *px, float *py, int n, float fraction) {
    float total = 0;
    for (int j = 0; j + 1 < n; j++) total += hypotf(px[j + 1] - px[j], py[j + 1] - py[j]);
    float left = fraction * total;
    for (int j = 0; j + 1 < n; j++) {
        float len = hypotf(px[j + 1] - px[j], py[j + 1] - py[j]);
        if (len >= left && len > 0) {
            px[j + 1] = px[j] + (px[j + 1] - px[j]) * left / len;
            py[j + 1] = py[j] + (py[j + 1] - py[j]) * left / len;
            return j + 2;
        }
        left -= len;
    }
    return n;
}

// Draws the segment (ax, ay)-(bx, by) in pixel coordinates with half-width `radius`: a pixel's
// coverage falls linearly from 1 to 0 over one pixel around the stroke's edge.
static void draw_segment(float *canvas, float ax, float ay, float bx, float by, float radius) {
    float reach = radius + 1.0f;
    int x0 = (int)floorf(fminf(ax, bx) - reach), x1 = (int)ceilf(fmaxf(ax, bx) + reach);
    int y0 = (int)floorf(fminf(ay, by) - reach), y1 = (int)ceilf(fmaxf(ay, by) + reach);
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > SIDE - 1) x1 = SIDE - 1;
    if (y1 > SIDE - 1) y1 = SIDE - 1;
    float dx = bx - ax, dy = by - ay, len2 = dx * dx + dy * dy;
    for (int y = y0; y <= y1; y++) {
        for (int x = x0; x <= x1; x++) {
            float cx = (float)x + 0.5f - ax, cy = (float)y + 0.5f - ay;
            float t = len2 > 0 ? (cx * dx + cy * dy) / len2 : 0.0f;
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            float ex = cx - t * dx, ey = cy - t * dy;
            float coverage = radius + 0.5f - sqrtf(ex * ex + ey * ey);
            if (coverage > 1) coverage = 1;
            float *p = &canvas[y * SIDE + x];
            if (coverage > *p) *p = coverage;
        }
    }
}

static void draw_digit(uint8_t *image, int digit, hw_rng *rng) {
    int heavy = hw_rng_uniform(rng) < HEAVY_FRACTION;
    skeleton k;
    build_skeleton(&k, digit, (int)hw_rng_below(rng, (uint32_t)n_variants[digit]));

    // A stroke that starts on a point of an earlier stroke (a corner, a join) stays on it.
    int join_stroke[MAX_STROKES], join_point[MAX_STROKES];
    for (int i = 0; i < k.n; i++) {
        join_stroke[i] = -1;
        for (int j = 0; j < i && join_stroke[i] < 0; j++) {
            for (int p = 0; p < k.s[j].n; p++) {
                if (k.s[j].x[p] == k.s[i].x[0] && k.s[j].y[p] == k.s[i].y[0]) {
                    join_stroke[i] = j;
                    join_point[i] = p;
                    break;
                }
            }
        }
    }
    float jitter = heavy ? 0.055f : 0.025f;
    for (int i = 0; i < k.n; i++) {
        for (int p = 0; p < k.s[i].n; p++) {
            k.s[i].x[p] += jitter * hw_rng_normal(rng);
            k.s[i].y[p] += jitter * hw_rng_normal(rng);
        }
        if (join_stroke[i] >= 0) {
            k.s[i].x[0] = k.s[join_stroke[i]].x[join_point[i]];
            k.s[i].y[0] = k.s[join_stroke[i]].y[join_point[i]];
        }
    }

    // The affine map around the box centre, then a low-frequency warp, into pixel coordinates.
    float max_angle = heavy ? 35.0f : 15.0f;
    float angle = uniform(rng, -max_angle, max_angle) * PI_F / 180.0f;
    float scale = uniform(rng, 0.78f, 1.08f), aspect = uniform(rng, 0.8f, 1.15f);
    float shear = uniform(rng, -0.28f, 0.28f);
    float tx = uniform(rng, -0.08f, 0.08f), ty = uniform(rng, -0.07f, 0.07f);
    float ca = cosf(angle), sa = sinf(angle);
    float sx = scale * aspect, sy = scale;
    float a11 = ca * sx, a12 = (ca * shear - sa) * sy, a21 = sa * sx, a22 = (sa * shear + ca) * sy;
    float warp = heavy ? 0.05f : 0.02f;
    float wax = warp * hw_rng_normal(rng), way = warp * hw_rng_normal(rng);
    float wfx = uniform(rng, 1.0f, 3.0f), wfy = uniform(rng, 1.0f, 3.0f);
    float wpx = uniform(rng, 0, 2 * PI_F), wpy = uniform(rng, 0, 2 * PI_F);

    float radius = uniform(rng, 1.0f, 2.0f);
    float ink = uniform(rng, 0.8f, 1.0f);
    int broken = heavy && hw_rng_uniform(rng) < 0.4f ? (int)hw_rng_below(rng, (uint32_t)k.n) : -1;

    // Map every stroke first, then fit the digit into the frame as MNIST's preprocessing does
    // (its digits are scaled into a 20 x 20 box and centred): shrink it if it grew too big, and
    // shift it back if it wandered off.
    float px[MAX_STROKES][MAX_POINTS], py[MAX_STROKES][MAX_POINTS];
    int counts[MAX_STROKES];
    float lo_x = SIDE, hi_x = 0, lo_y = SIDE, hi_y = 0;
    for (int i = 0; i < k.n; i++) {
        int n = stroke_polyline(&k.s[i], px[i], py[i]);
        if (i == broken) n = cut_polyline(px[i], py[i], n, uniform(rng, 0.5f, 0.8f));
        counts[i] = n;
        for (int j = 0; j < n; j++) {
            float ux = px[i][j] - 0.5f, uy = py[i][j] - 0.5f;
            float wx = ux + wax * sinf(2 * PI_F * wfy * py[i][j] + wpx);
            float wy = uy + way * sinf(2 * PI_F * wfx * px[i][j] + wpy);
            px[i][j] = BOX_OFFSET + BOX_PIXELS * (0.5f + tx + a11 * wx + a12 * wy);
            py[i][j] = BOX_OFFSET + BOX_PIXELS * (0.5f + ty + a21 * wx + a22 * wy);
            lo_x = fminf(lo_x, px[i][j]);
            hi_x = fmaxf(hi_x, px[i][j]);
            lo_y = fminf(lo_y, py[i][j]);
            hi_y = fmaxf(hi_y, py[i][j]);
        }
    }
    float margin = radius + 1.5f, room = SIDE - 2 * margin;
    float fit = fminf(1.0f, room / fmaxf(hi_x - lo_x, hi_y - lo_y));
    float cx = 0.5f * (lo_x + hi_x), cy = 0.5f * (lo_y + hi_y);
    float half_w = 0.5f * fit * (hi_x - lo_x), half_h = 0.5f * fit * (hi_y - lo_y);
    float new_cx = fminf(fmaxf(cx, margin + half_w), SIDE - margin - half_w);
    float new_cy = fminf(fmaxf(cy, margin + half_h), SIDE - margin - half_h);

    float canvas[SIDE * SIDE] = {0};
    for (int i = 0; i < k.n; i++) {
        for (int j = 0; j < counts[i]; j++) {
            px[i][j] = new_cx + fit * (px[i][j] - cx);
            py[i][j] = new_cy + fit * (py[i][j] - cy);
        }
        for (int j = 0; j + 1 < counts[i]; j++) {
            draw_segment(canvas, px[i][j], py[i][j], px[i][j + 1], py[i][j + 1], radius);
        }
    }

    // Ink with a little grain, and a few specks of dust on the background.
    for (int p = 0; p < SIDE * SIDE; p++) {
        float v = canvas[p];
        if (v > 0) v = v * ink + uniform(rng, -0.08f, 0.08f);
        v = v < 0 ? 0 : v > 1 ? 1 : v;
        image[p] = (uint8_t)(v * 255.0f + 0.5f);
    }
    int specks = (int)hw_rng_below(rng, 4);
    for (int i = 0; i < specks; i++) {
        int p = (int)hw_rng_below(rng, SIDE * SIDE);
        uint8_t v = (uint8_t)(uniform(rng, 0.1f, 0.5f) * 255.0f);
        if (image[p] < v) image[p] = v;
    }
}

// Sample i of a set is drawn from its own generator (seed, stream_base + i), so a set's first
// samples do not depend on its size, and the train and test sets use separate streams.
static int generate(hw_dataset *ds, int64_t n, uint64_t seed, uint64_t stream_base) {
    memset(ds, 0, sizeof *ds);
    if (n <= 0) return hw_fail("synthetic digits: the number of samples must be positive, got %lld", (long long)n);
    ds->images = malloc((size_t)n * SIDE * SIDE);
    ds->labels = malloc((size_t)n);
    if (!ds->images || !ds->labels) {
        hw_dataset_free(ds);
        return hw_fail("synthetic digits: out of memory for %lld images", (long long)n);
    }
    for (int64_t i = 0; i < n; i++) {
        hw_rng rng;
        hw_rng_seed(&rng, seed, stream_base + (uint64_t)i);
        int digit = (int)hw_rng_below(&rng, 10);
        ds->labels[i] = (uint8_t)digit;
        draw_digit(ds->images + i * SIDE * SIDE, digit, &rng);
    }
    ds->n = n;
    ds->channels = 1;
    ds->height = SIDE;
    ds->width = SIDE;
    ds->n_classes = 10;
    snprintf(ds->source, sizeof ds->source, "synthetic digits (seed %llu)", (unsigned long long)seed);
    return HW_OK;
}

int hw_synth_generate(hw_dataset *ds, int64_t n, uint64_t seed) { return generate(ds, n, seed, 0); }

// The test set's streams start far beyond any training set's.
#define TEST_STREAM_BASE (1ULL << 40)

int hw_synth_write(const char *dir, int64_t n_train, int64_t n_test, uint64_t seed) {
    if (hw_mkdir_p(dir) != HW_OK) return HW_ERR;
    const char *names[2][2] = {
        {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"},
        {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"},
    };
    int64_t counts[2] = {n_train, n_test};
    // The four files are one dataset: all written under temporary names, then renamed together, so
    // that a full disk leaves the old dataset whole rather than new train files beside old test ones.
    file_set files = {0};
    int status = HW_OK;
    for (int set = 0; set < 2 && status == HW_OK; set++) {
        hw_dataset ds;
        if (generate(&ds, counts[set], seed, set ? TEST_STREAM_BASE : 0) != HW_OK) {
            status = HW_ERR;
            break;
        }
        char images[1024], labels[1024];
        snprintf(images, sizeof images, "%s/%s", dir, names[set][0]);
        snprintf(labels, sizeof labels, "%s/%s", dir, names[set][1]);
        status = idx_save_into(&files, &ds, images, labels);
        hw_dataset_free(&ds);
    }
    return file_set_commit(&files, status);
}
