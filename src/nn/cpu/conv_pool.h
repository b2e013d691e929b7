// The convolution and 2x2 max-pooling kernels of the CPU (kernels.h), written once over the
// vector primitives and register tiles of one copy (copy.h lists them; copy.h includes this file).
//
// The convolution, for stride 1, no padding and output rows of whole vectors (out_w % NN_KERNEL_VECTOR == 0:
// LeNet's 24 and 8), without im2col: a tap (c, ki, kj) of the column matrix at output position
// (y, x) is the input x[c][y + ki][x + kj], and VW positions of one output row are VW consecutive
// input floats. So the product "weights x column matrix" loads its right-hand operand straight
// from the input, with an offset per vector of positions, and nothing is copied. (The forward and
// the weight gradient over positions take vectors of VP positions, two runs of VP / 2 each within a
// row: the AVX-512 copy's 16, twice its other vectors, measured 1.3x faster on LeNet's step on Zen 5:
// bench/RESULTS.md, issue 28.) As a GEMM:
//   forward          y[o][p]     = b[o] + sum over taps t of w[o][t] * col[t][p]     (M = out_c, K = taps)
//   weight gradient  dw[o][t]    = sum over samples and p of dy[o][p] * col[t][p]    (K = positions)
//   input gradient   dcol[t][p]  = sum over o of w[o][t] * dy[o][p], added into dx where col[t][p] was read
// Each keeps a tile of outputs in registers across the whole sum. In forward and the weight and bias
// gradients the float additions of one output happen in the same order whatever the tile sizes:
// there the tiles change the speed, not the bits. (The weight and bias gradients over positions
// keep VP partial sums, one a lane, added at the end: their order follows VP, so the AVX-512 copy's
// last bits differ there from the AVX2 copy's.) The input gradient adds each tile's taps into
// dx as the tile goes (and, for rows stacked one under the other, adds the taps that land on one
// input row together first): its order, so its last bits, follow CONV_MR and CONV_NV, and the
// AVX-512 and AVX2 copies differ there by rounding (tests/unit/test_nn.c checks both).
#include "kernels.h"

#include <stdint.h>
#include <string.h>

// The offsets in the input plane where each vector of output positions (VW of them, from p = q * VW:
// row p / out_w, column p % out_w) reads tap (0, 0), at the start of the scratch: a table, since a
// division per vector cost more than the vector's multiply-adds. Returns the scratch after it.
static float *position_offsets(float *scratch, const hw_conv2d_dims *d) {
    int *off = (int *)scratch, vectors = d->out_h * d->out_w / VW;
    for (int q = 0; q < vectors; q++) off[q] = q * VW / d->out_w * d->in_w + q * VW % d->out_w;
    return scratch + (vectors + 15) / 16 * 16;
}

// The same for vectors of VP positions (vp). Wider than a row's run, a vector is two runs of VP / 2
// positions, each within one output row (rows are multiples of NN_KERNEL_VECTOR floats, VP / 2 at
// most): LeNet's conv1 at 16 positions, rows of 24, has a vector in every three that ends one row
// and starts the next. Vector q's runs read tap (0, 0) at rows[2q] and rows[2q + 1]. When the plane
// is not whole vectors, the last one is a single run (its second repeats the first; the kernels
// drop its lanes). Returns the scratch after the table.
static int position_vectors(const hw_conv2d_dims *d) { return (d->out_h * d->out_w + VP - 1) / VP; }

static float *position_rows(float *scratch, const hw_conv2d_dims *d) {
    int *rows = (int *)scratch;
    const int n = d->out_h * d->out_w, vectors = position_vectors(d);
    for (int q = 0; q < vectors; q++) {
        for (int h = 0; h < 2; h++) {
            const int p = q * VP + (h && q * VP + VP / 2 < n ? VP / 2 : 0);
            rows[2 * q + h] = p / d->out_w * d->in_w + p % d->out_w;
        }
    }
    return scratch + (2 * vectors + 15) / 16 * 16;
}

// VP / 2 zeros: the second run of a plane's last vector when it has only one (its lanes then add 0).
static const float zero_run[VP / 2];

// ---- forward ----

// CONV_MR channels x nv vectors of positions from n0, over every tap; w[i]: channel i's weights
// (a row of the layer's [out_c][taps]), b[i] its bias, y[i] its output plane. Stores only the
// first `rows` channels (the others repeat the last one), and of a `half` vector (the plane's last,
// a single run: position_rows) only its first VP / 2 positions. (Every loop over a tile runs to a
// constant bound with the test inside: the compiler then keeps the tile in registers.)
static inline __attribute__((always_inline)) void forward_tile(float *const y[CONV_MR], const float *restrict x,
                                                               const float *const w[CONV_MR], const float b[CONV_MR],
                                                               const int *restrict position, const hw_conv2d_dims *d,
                                                               int k, int n0, int nv, int rows, int half) {
    const int in_c = d->in_c, in_w = d->in_w, plane = d->in_h * d->in_w;
    int lo[CONV_NV], hi[CONV_NV];
    for (int v = 0; v < CONV_NV; v++) {
        lo[v] = v < nv ? position[2 * (n0 / VP + v)] : 0;
        hi[v] = v < nv ? position[2 * (n0 / VP + v) + 1] : 0;
    }
    vp acc[CONV_MR][CONV_NV];
    for (int i = 0; i < CONV_MR; i++) {
        for (int v = 0; v < CONV_NV; v++) acc[i][v] = vp_zero();
    }
    const float *wr[CONV_MR];  // the tile's weights of one kernel row (c, ki)
    for (int i = 0; i < CONV_MR; i++) wr[i] = w[i];
    for (int c = 0; c < in_c; c++) {
        for (int ki = 0; ki < k; ki++) {
            const float *row = x + (size_t)c * plane + (size_t)ki * in_w;
            for (int kj = 0; kj < k; kj++) {
                vp xv[CONV_NV];
                for (int v = 0; v < CONV_NV; v++) {
                    if (v < nv) xv[v] = vp_rows(row + kj + lo[v], row + kj + hi[v]);
                }
                for (int i = 0; i < CONV_MR; i++) {
                    vp a = vp_bcast(wr[i] + kj);
                    for (int v = 0; v < CONV_NV; v++) {
                        if (v < nv) acc[i][v] = vp_fma(a, xv[v], acc[i][v]);
                    }
                }
            }
            for (int i = 0; i < CONV_MR; i++) wr[i] += k;
        }
    }
    for (int i = 0; i < CONV_MR; i++) {
        for (int v = 0; v < CONV_NV; v++) {
            if (i >= rows || v >= nv) continue;
            if (half) {
                float out[VP];
                vp_store(out, acc[i][v] + b[i]);
                memcpy(y[i] + n0, out, sizeof(float) * (VP / 2));
            } else {
                vp_store(y[i] + n0 + v * VP, acc[i][v] + b[i]);
            }
        }
    }
}

// A row of tiles over the positions; k as a constant for LeNet's 5x5 kernels (the kernel rows'
// loops then unroll).
static inline __attribute__((always_inline)) void forward_tiles(float *const y[CONV_MR], const float *restrict x,
                                                                const float *const w[CONV_MR], const float b[CONV_MR],
                                                                const int *restrict position, const hw_conv2d_dims *d,
                                                                int k, int rows) {
    const int n = d->out_h * d->out_w;
    int n0 = 0;
    for (; n0 + CONV_NV * VP <= n; n0 += CONV_NV * VP) forward_tile(y, x, w, b, position, d, k, n0, CONV_NV, rows, 0);
    for (; n0 + VP <= n; n0 += VP) forward_tile(y, x, w, b, position, d, k, n0, 1, rows, 0);
    if (n0 < n) forward_tile(y, x, w, b, position, d, k, n0, 1, rows, 1);
}

// keep: NULL, or a byte per (sample, output channel), 0 where the channel is not needed (the
// dropout2d after the layer drops it: forward_pair, src/nn/exec.c). Those planes are set to zero
// and not computed (a cheaper algorithm: the FLOPs counted stay the dense ones); the others get
// the same sums, in the same order, as without a mask.
static void conv_forward(float *out, float *scratch, const float *in, const float *weight, const float *bias,
                         const uint8_t *keep, const hw_conv2d_dims *d, int batch) {
    const int taps = d->in_c * d->k * d->k, n = d->out_h * d->out_w, out_c = d->out_c;
    const int *position = (const int *)scratch;
    int *live = (int *)position_rows(scratch, d);  // the channels computed, of one sample
    for (int s = 0; s < batch; s++) {
        const float *x = in + (size_t)s * d->in_c * d->in_h * d->in_w;
        float *ys = out + (size_t)s * out_c * n;
        int n_live = 0;
        for (int o = 0; o < out_c; o++) {
            if (!keep || keep[(size_t)s * out_c + o]) {
                live[n_live++] = o;
            } else {
                memset(ys + (size_t)o * n, 0, sizeof(float) * n);
            }
        }
        for (int j0 = 0; j0 < n_live; j0 += CONV_MR) {
            const int rows = n_live - j0 < CONV_MR ? n_live - j0 : CONV_MR;
            float *y[CONV_MR];
            const float *w[CONV_MR];
            float b[CONV_MR];
            for (int i = 0; i < CONV_MR; i++) {
                const int o = live[j0 + (i < rows ? i : rows - 1)];
                y[i] = ys + (size_t)o * n, w[i] = weight + (size_t)o * taps, b[i] = bias[o];
            }
            if (d->k == 5) {
                forward_tiles(y, x, w, b, position, d, 5, rows);
            } else {
                forward_tiles(y, x, w, b, position, d, d->k, rows);
            }
        }
    }
}

// ---- the weight and bias gradients ----

// The sum over positions is kept unreduced: acc[o][t] holds VP partial sums, one per lane, across
// the whole batch, and the lanes are added once at the end. A tile is DW_MR channels x DW_NR
// neighbouring taps of one kernel row (c, ki, kj0...), so that its input loads are one pointer
// plus constants; it runs over the positions of `samples` samples at a time, so that it is loaded
// and stored once per DW_STEPS vectors or so rather than once per sample (conv2's samples have 8).
enum { DW_STEPS = 64 };

// One vector of positions of a tile (weight_tile): g[i], channel i's dy there; xlo, xhi: where its
// two runs read the tile's first tap.
static inline __attribute__((always_inline)) void weight_step(vp s[DW_MR][DW_NR], vp sb[DW_MR], const vp g[DW_MR],
                                                              const float *xlo, const float *xhi, int last, int full,
                                                              int bias) {
    if (bias) {
        for (int i = 0; i < DW_MR; i++) sb[i] += g[i];
    }
    for (int j = 0; j < DW_NR; j++) {
        const int tap = full || j <= last ? j : last;
        vp xv = vp_rows(xlo + tap, xhi + tap);
        vp_in_register(&xv);
        for (int i = 0; i < DW_MR; i++) s[i][j] = vp_fma(g[i], xv, s[i][j]);
    }
}

// `full`: all DW_NR taps lie in the kernel row (a constant, so that each use compiles to its own
// loop); otherwise the taps past the row's end repeat its last one and are not stored.
// `bias`: also sums the tile's channels of dy into bacc[o][VP] (one tile per channel does: the
// bias gradient then costs no pass of its own over dy).
static inline __attribute__((always_inline)) void weight_tile(float *restrict acc, float *restrict bacc,
                                                              const float *restrict in, const float *restrict dout,
                                                              const int *restrict position, const hw_conv2d_dims *d,
                                                              int o0, int row, int kj0, int samples, int full,
                                                              int bias) {
    const int k = d->k, taps = d->in_c * k * k, n = d->out_h * d->out_w, out_c = d->out_c;
    const size_t in_size = (size_t)d->in_c * d->in_h * d->in_w, out_size = (size_t)out_c * n;
    const int t0 = row * k + kj0, last = k - 1 - kj0;  // the tile's first tap; its last valid j
    const float *x0 = in + (size_t)(row / k) * d->in_h * d->in_w + (size_t)(row % k) * d->in_w + kj0;
    // A tile past the last channel repeats it and does not store it.
    const float *g0[DW_MR];
    for (int i = 0; i < DW_MR; i++) g0[i] = dout + (size_t)(o0 + i < out_c ? o0 + i : out_c - 1) * n;
    vp s[DW_MR][DW_NR];
    for (int i = 0; i < DW_MR; i++) {
        for (int j = 0; j < DW_NR; j++) {
            int o = o0 + i < out_c ? o0 + i : out_c - 1, t = full || j <= last ? t0 + j : t0 + last;
            s[i][j] = vp_load(acc + ((size_t)o * taps + t) * VP);
        }
    }
    vp sb[DW_MR];
    for (int i = 0; i < DW_MR; i++) {
        sb[i] = bias ? vp_load(bacc + (size_t)(o0 + i < out_c ? o0 + i : out_c - 1) * VP) : vp_zero();
    }
    for (int b = 0; b < samples; b++) {
        const float *x = x0 + b * in_size;
        const size_t dyb = b * out_size;
        int q = 0;
        for (; q < n / VP; q++) {
            vp g[DW_MR];
            for (int i = 0; i < DW_MR; i++) g[i] = vp_load(g0[i] + dyb + (size_t)q * VP);
            weight_step(s, sb, g, x + position[2 * q], x + position[2 * q + 1], last, full, bias);
        }
        if (q * VP < n) {  // a last vector of one run: dy's second run is zeros
            vp g[DW_MR];
            for (int i = 0; i < DW_MR; i++) g[i] = vp_rows(g0[i] + dyb + (size_t)q * VP, zero_run);
            weight_step(s, sb, g, x + position[2 * q], x + position[2 * q + 1], last, full, bias);
        }
    }
    for (int i = 0; i < DW_MR; i++) {
        for (int j = 0; j < DW_NR; j++) {
            if (o0 + i < out_c && (full || j <= last)) vp_store(acc + ((size_t)(o0 + i) * taps + t0 + j) * VP, s[i][j]);
        }
        if (bias && o0 + i < out_c) vp_store(bacc + (size_t)(o0 + i) * VP, sb[i]);
    }
}

// The other way round, for layers with many output channels (conv2's 20: 24 lanes, 83% used):
// dw^T[t][o] = sum over p of col[t][p] * dy^T[p][o], with the channels in the vectors. Each
// sample's dy is transposed first (dyt, channels padded with zeros to whole vectors); a tile is
// DWT_MR taps (tap[i]: where each reads the input) x nv vectors of channels, over the sample's
// positions, and adds into dwt[t][o]. Its multiply-adds take one tap value in every lane (a
// broadcast, which never straddles two cache lines, as the vector loads of the other way do).
static inline __attribute__((always_inline)) void weight_tile_t(float *restrict dwt, const float *restrict x,
                                                                const float *restrict dyt, const int *restrict tap,
                                                                const hw_conv2d_dims *d, int t0, int o0, int nv) {
    const int lanes = (d->out_c + VW - 1) / VW * VW, out_w = d->out_w, out_h = d->out_h, in_w = d->in_w;
    const int taps = d->in_c * d->k * d->k;
    // A tile past the last tap repeats it and does not store it.
    const float *xt[DWT_MR];
    for (int i = 0; i < DWT_MR; i++) xt[i] = x + tap[t0 + i < taps ? t0 + i : taps - 1];
    vf acc[DWT_MR][DWT_NV];
    for (int i = 0; i < DWT_MR; i++) {
        for (int v = 0; v < DWT_NV; v++) {
            int t = t0 + i < taps ? t0 + i : taps - 1;
            if (v < nv) acc[i][v] = vf_load(dwt + (size_t)t * lanes + o0 + v * VW);
        }
    }
    const float *g = dyt + o0;
    for (int y = 0; y < out_h; y++) {
        const int row = y * in_w;
        for (int x0 = 0; x0 < out_w; x0++, g += lanes) {
            vf b[DWT_NV];
            for (int v = 0; v < DWT_NV; v++) {
                if (v < nv) b[v] = vf_load(g + v * VW);
            }
            for (int i = 0; i < DWT_MR; i++) {
                vf a = vf_bcast(xt[i] + row + x0);
                for (int v = 0; v < DWT_NV; v++) {
                    if (v < nv) acc[i][v] = vf_fma(a, b[v], acc[i][v]);
                }
            }
        }
    }
    for (int i = 0; i < DWT_MR; i++) {
        for (int v = 0; v < DWT_NV; v++) {
            if (v < nv && t0 + i < taps) vf_store(dwt + (size_t)(t0 + i) * lanes + o0 + v * VW, acc[i][v]);
        }
    }
}

// True when the weight gradient keeps the output channels in the vectors (weight_tile_t): when at
// least 3/4 of the lanes hold a channel.
static int weight_by_channels(const hw_conv2d_dims *d) {
    int lanes = (d->out_c + VW - 1) / VW * VW;
    return 4 * d->out_c >= 3 * lanes;
}

static void weight_gradient_by_channels(float *dweight, float *dbias, float *scratch, const float *in,
                                        const float *dout, const hw_conv2d_dims *d, int batch) {
    const int k = d->k, taps = d->in_c * k * k, n = d->out_h * d->out_w, out_c = d->out_c;
    const int lanes = (out_c + VW - 1) / VW * VW;
    const size_t in_size = (size_t)d->in_c * d->in_h * d->in_w, out_size = (size_t)out_c * n;
    float *dyt = scratch, *dwt = dyt + (size_t)n * lanes, *db = dwt + (size_t)taps * lanes;
    memset(scratch, 0, sizeof(float) * ((size_t)n * lanes + (size_t)taps * lanes + lanes));
    int *tap = (int *)(db + lanes);  // where each tap (c, ki, kj) reads the input, from position (0, 0)
    for (int t = 0; t < taps; t++) tap[t] = t / (k * k) * d->in_h * d->in_w + t / k % k * d->in_w + t % k;
    for (int b = 0; b < batch; b++) {
        const float *dy = dout + b * out_size, *x = in + b * in_size;
        for (int o0 = 0; o0 < lanes; o0 += VW) {  // dy^T in blocks of VW x VW; channels past out_c stay 0
            for (int p0 = 0; p0 < n; p0 += VW) {
                vf r[VW];
                for (int l = 0; l < VW; l++) {
                    r[l] = o0 + l < out_c ? vf_load(dy + (size_t)(o0 + l) * n + p0) : vf_zero();
                }
                vf_transpose(r);
                for (int l = 0; l < VW; l++) vf_store(dyt + (size_t)(p0 + l) * lanes + o0, r[l]);
            }
        }
        if (dbias) {
            for (int p = 0; p < n; p++) {
                for (int o0 = 0; o0 < lanes; o0 += VW) {
                    vf_store(db + o0, vf_load(db + o0) + vf_load(dyt + (size_t)p * lanes + o0));
                }
            }
        }
        if (!dweight) continue;
        for (int t0 = 0; t0 < taps; t0 += DWT_MR) {
            int o0 = 0;
            for (; o0 + DWT_NV * VW <= lanes; o0 += DWT_NV * VW) weight_tile_t(dwt, x, dyt, tap, d, t0, o0, DWT_NV);
            for (; o0 < lanes; o0 += VW) weight_tile_t(dwt, x, dyt, tap, d, t0, o0, 1);
        }
    }
    if (dweight) {
        for (int o = 0; o < out_c; o++) {
            for (int t = 0; t < taps; t++) dweight[(size_t)o * taps + t] = dwt[(size_t)t * lanes + o];
        }
    }
    if (dbias) memcpy(dbias, db, sizeof(float) * (size_t)out_c);
}

// ---- the weight and bias gradients from the nonzeros of dy ----
//
// In training a convolution's dy is mostly zeros: 2x2 max-pooling passes the gradient to one input
// of each window (3/4 zeros), dropout2d zeroes whole channels, ReLU some more (LeNet's conv2 gets
// about 1 value in 9 nonzero). When that pays (sparse_pays), the weight and bias gradients are
// summed over the nonzeros only: a cheaper algorithm than the dense sums (the FLOPs counted stay
// the dense ones). Each nonzero dy[o][y][x] = g is a list entry (where its
// window starts in the input, g), and for every kernel row (c, ki) of channel o
//   dw[o][c][ki][0..k) += g * x[c][y + ki][x .. x + k)
// as one multiply-add of DWS_KV vectors (a kernel row of k <= 8 taps; the lanes past k read on
// past the row and are dropped). Each weight adds its nonzero terms in the order of the samples and
// positions, as weight_tile_t does all of them.
enum { DWS_KV = NN_KERNEL_VECTOR / VW, DWS_POSITIONS = 512 };

// The samples whose lists are made at once: about DWS_POSITIONS positions of dy.
static int sparse_samples(const hw_conv2d_dims *d) {
    int n = d->out_h * d->out_w;
    return n >= DWS_POSITIONS ? 1 : DWS_POSITIONS / n;
}

// The lanes whose bit is set in `bits`, in order, one a byte from the lowest (the bytes past them
// hold lanes too, whichever): from a table for 4 lanes, twice for 8.
static inline unsigned long long set_lanes(int bits) {
    static const unsigned set_lanes4[16] = {0, 0,     1,     0x100,   2,     0x200,   0x201,   0x20100,
                                            3, 0x300, 0x301, 0x30100, 0x302, 0x30200, 0x30201, 0x3020100};
    unsigned long long low = set_lanes4[bits & 15];
    if (VW == 4) return low;
    return low | (unsigned long long)(set_lanes4[bits >> 4 & 15] + 0x04040404u) << (8 * __builtin_popcount(bits & 15));
}

static int sparse_fits(const hw_conv2d_dims *d) { return d->k <= NN_KERNEL_VECTOR; }

// The nonzero floats (NaN included) of p[0..n), n a multiple of VW.
static size_t count_nonzeros(const float *p, size_t n) {
    size_t nonzero = 0;
    for (size_t j = 0; j < n; j += VW) nonzero += (size_t)__builtin_popcount(vf_nonzero_bits(vf_load(p + j)));
    return nonzero;
}

// The nonzeros of one output plane dy[0..n) appended to a list from entry m: their values to val,
// and to at where each one's window starts, (offsets[q] + lane) * scale + add. Returns the new
// count. A vector's nonzeros are moved to its first lanes and stored whole, the count moved past
// them: no branch on the data (writing lane by lane cost 90 us of the 285 of LeNet's conv2's weight
// gradient, this about half of that). Stores VW floats and ints past the last entry.
static inline int append_nonzeros(float *restrict val, int *restrict at, int m, const float *restrict dy,
                                  const int *restrict offsets, int n, int scale, int add) {
    for (int q = 0; q < n / VW; q++) {
        const vf v = vf_load(dy + q * VW);
        const int bits = vf_nonzero_bits(v);
        const vi lanes = vi_from_bytes(set_lanes(bits)), where = (lanes + offsets[q]) * scale + add;
        vf_store(val + m, vf_permute(v, lanes));
        memcpy(at + m, &where, sizeof where);
        m += __builtin_popcount((unsigned)bits);
    }
    return m;
}

// True when the sums over dy's nonzeros cost less than the dense ones. Each nonzero costs its
// kernel rows' multiply-adds and a few more operations (its load, its broadcast, its list entry),
// at about half the dense tiles' rate (measured, the kernel alone: LeNet's conv2, 1 value of dy in
// 9 nonzero and 50 kernel rows, 545 -> 247 us a batch of 64; conv1, 1 in 4 and 5 rows, 262 -> 389).
// The nonzeros are counted in 4 samples spread over the batch: counting all of conv1's dy (1.5 MB)
// cost it 30-70 us a batch.
static int sparse_pays(const float *dout, const hw_conv2d_dims *d, int batch) {
    const size_t per_sample = (size_t)d->out_c * d->out_h * d->out_w;  // a multiple of VW
    const size_t taps = (size_t)d->in_c * d->k * d->k, rows = (size_t)d->in_c * d->k;
    const int counted = batch < 4 ? batch : 4;
    size_t nonzero = 0;
    for (int i = 0; i < counted; i++)
        nonzero += count_nonzeros(dout + (size_t)(i * batch / counted) * per_sample, per_sample);
    return 2 * nonzero * (rows * DWS_KV + 8) <= counted * per_sample / VW * taps;
}

// Kernel rows (c0 + a, ki0 + r) for a < chans, r < krows, of one output channel, over `entries`
// nonzeros (at: where their windows start in x, g: their values), added into dwp[c][ki][DWS_KV * VW]
// (dwp: the channel's sums). The rows are read at x + c * plane + ki * in_w from a window's start:
// a few pointers and multiples of in_w, which stay in registers (a table of each row's offset
// did not, and cost a load per multiply-add).
static inline __attribute__((always_inline)) void sparse_weight_tile(float *restrict dwp, const float *restrict x,
                                                                     const int *restrict at, const float *restrict g,
                                                                     int entries, const hw_conv2d_dims *d, int c0,
                                                                     int ki0, int chans, int krows) {
    enum { TILE = DWS_C * DWS_K * DWS_KV };  // acc[(a * DWS_K + r) * DWS_KV + j]: channel a, row r, vector j
    const int k = d->k, plane = d->in_h * d->in_w, in_w = d->in_w, row_floats = DWS_KV * VW;
    float *const dw0 = dwp + ((size_t)c0 * k + ki0) * row_floats;
    vf acc[TILE];
#pragma GCC unroll 64
    for (int t = 0; t < TILE; t++) {
        const int a = t / (DWS_K * DWS_KV), r = t / DWS_KV % DWS_K, j = t % DWS_KV;
        acc[t] = a < chans && r < krows ? vf_load(dw0 + ((size_t)a * k + r) * row_floats + j * VW) : vf_zero();
    }
    const float *x0 = x + (size_t)c0 * plane + (size_t)ki0 * in_w;
    for (int e = 0; e < entries; e++) {
        const float *xe = x0 + at[e];
        const vf ge = vf_bcast(g + e);
#pragma GCC unroll 64
        for (int t = 0; t < TILE; t++) {
            const int a = t / (DWS_K * DWS_KV), r = t / DWS_KV % DWS_K, j = t % DWS_KV;
            if (a < chans && r < krows) acc[t] = vf_fma(ge, vf_load(xe + a * plane + r * in_w + j * VW), acc[t]);
        }
    }
#pragma GCC unroll 64
    for (int t = 0; t < TILE; t++) {
        const int a = t / (DWS_K * DWS_KV), r = t / DWS_KV % DWS_K, j = t % DWS_KV;
        if (a < chans && r < krows) vf_store(dw0 + ((size_t)a * k + r) * row_floats + j * VW, acc[t]);
    }
}

static size_t sparse_scratch_floats(const hw_conv2d_dims *d) {
    const size_t rows = (size_t)d->in_c * d->k, out_c = (size_t)d->out_c, samples = (size_t)sparse_samples(d);
    const size_t per = samples * d->out_h * d->out_w, in_size = (size_t)d->in_c * d->in_h * d->in_w;
    // dwp, bias sums, values, the last samples' copy; entries' starts, counts
    return out_c * rows * DWS_KV * VW + out_c + out_c * per + samples * in_size + NN_KERNEL_VECTOR + out_c * per +
           out_c;
}

// dweight: not NULL; dbias: may be.
static void weight_gradient_sparse(float *dweight, float *dbias, float *scratch, const float *in, const float *dout,
                                   const hw_conv2d_dims *d, int batch) {
    const int k = d->k, rows = d->in_c * k, n = d->out_h * d->out_w, out_c = d->out_c;
    const int samples = sparse_samples(d), per = samples * n, row_floats = DWS_KV * VW;
    const size_t in_size = (size_t)d->in_c * d->in_h * d->in_w, out_size = (size_t)out_c * n;
    const int *offsets = (const int *)scratch;
    float *dwp = position_offsets(scratch, d), *bsum = dwp + (size_t)out_c * rows * row_floats;
    float *val = bsum + out_c, *copy = val + (size_t)out_c * per;
    int *at = (int *)(copy + (size_t)samples * in_size + NN_KERNEL_VECTOR), *count = at + (size_t)out_c * per;
    memset(dwp, 0, sizeof(float) * ((size_t)out_c * rows * row_floats + out_c));
    for (int b0 = 0; b0 < batch; b0 += samples) {
        const int chunk = batch - b0 < samples ? batch - b0 : samples;
        const float *x = in + (size_t)b0 * in_size;
        if (b0 + chunk == batch) {  // the batch's last rows are read past their end: from a copy
            memcpy(copy, x, sizeof(float) * chunk * in_size);
            memset(copy + chunk * in_size, 0, sizeof(float) * NN_KERNEL_VECTOR);
            x = copy;
        }
        for (int o = 0; o < out_c; o++) count[o] = 0;
        for (int s = 0; s < chunk; s++) {
            for (int o = 0; o < out_c; o++) {
                const float *dy = dout + (size_t)(b0 + s) * out_size + (size_t)o * n;
                count[o] = append_nonzeros(val + (size_t)o * per, at + (size_t)o * per, count[o], dy, offsets, n, 1,
                                           s * (int)in_size);
            }
        }
        for (int o = 0; o < out_c; o++) {
            const int *ato = at + (size_t)o * per;
            const float *valo = val + (size_t)o * per;
            for (int e = 0; e < count[o]; e++) bsum[o] += valo[e];
            if (!count[o]) continue;
            // Tiles of DWS_C channels x DWS_K kernel rows, of one channel or row where fewer are
            // left (a constant each: the tile then stays in registers).
            float *dwo = dwp + (size_t)o * rows * row_floats;
            const int n_e = count[o];
            for (int c0 = 0; c0 < d->in_c;) {
                const int chans = d->in_c - c0 >= DWS_C ? DWS_C : 1;
                for (int ki0 = 0; ki0 < k;) {
                    const int krows = k - ki0 >= DWS_K ? DWS_K : 1;
                    if (chans == DWS_C && krows == DWS_K) {
                        sparse_weight_tile(dwo, x, ato, valo, n_e, d, c0, ki0, DWS_C, DWS_K);
                    } else if (chans == DWS_C) {
                        sparse_weight_tile(dwo, x, ato, valo, n_e, d, c0, ki0, DWS_C, 1);
                    } else if (krows == DWS_K) {
                        sparse_weight_tile(dwo, x, ato, valo, n_e, d, c0, ki0, 1, DWS_K);
                    } else {
                        sparse_weight_tile(dwo, x, ato, valo, n_e, d, c0, ki0, 1, 1);
                    }
                    ki0 += krows;
                }
                c0 += chans;
            }
        }
    }
    for (int o = 0; o < out_c; o++) {
        for (int r = 0; r < rows; r++) {
            const float *src = dwp + ((size_t)o * rows + r) * row_floats;
            memcpy(dweight + ((size_t)o * rows + r) * k, src, sizeof(float) * k);
        }
    }
    if (dbias) memcpy(dbias, bsum, sizeof(float) * out_c);
}

static void conv_backward_weight(float *dweight, float *dbias, float *scratch, const float *in, const float *dout,
                                 const hw_conv2d_dims *d, int batch) {
    if (dweight && sparse_fits(d) && sparse_pays(dout, d, batch)) {
        weight_gradient_sparse(dweight, dbias, scratch, in, dout, d, batch);
        return;
    }
    if (weight_by_channels(d)) {
        weight_gradient_by_channels(dweight, dbias, scratch, in, dout, d, batch);
        return;
    }
    const int taps = d->in_c * d->k * d->k, n = d->out_h * d->out_w;
    const size_t in_size = (size_t)d->in_c * d->in_h * d->in_w, out_size = (size_t)d->out_c * n;
    const int *position = (const int *)scratch;
    float *acc = position_rows(scratch, d), *bacc = acc + (size_t)d->out_c * taps * VP;
    memset(acc, 0, sizeof(float) * ((size_t)d->out_c * taps * VP + (size_t)d->out_c * VP));
    if (dweight) {
        int vectors = position_vectors(d), samples = vectors >= DW_STEPS ? 1 : DW_STEPS / vectors;
        for (int b0 = 0; b0 < batch; b0 += samples) {
            int chunk = batch - b0 < samples ? batch - b0 : samples;
            const float *x = in + b0 * in_size, *dy = dout + b0 * out_size;
            for (int o0 = 0; o0 < d->out_c; o0 += DW_MR) {
                for (int row = 0; row < d->in_c * d->k; row++) {
                    int kj0 = 0;
                    for (; kj0 + DW_NR <= d->k; kj0 += DW_NR) {
                        if (dbias && row == 0 && kj0 == 0) {
                            weight_tile(acc, bacc, x, dy, position, d, o0, row, kj0, chunk, 1, 1);
                        } else {
                            weight_tile(acc, bacc, x, dy, position, d, o0, row, kj0, chunk, 1, 0);
                        }
                    }
                    if (kj0 < d->k) {
                        weight_tile(acc, bacc, x, dy, position, d, o0, row, kj0, chunk, 0,
                                    dbias && row == 0 && kj0 == 0);
                    }
                }
            }
        }
        for (size_t e = 0; e < (size_t)d->out_c * taps; e++) dweight[e] = vp_sum(vp_load(acc + e * VP));
        if (dbias) {
            for (int o = 0; o < d->out_c; o++) dbias[o] = vp_sum(vp_load(bacc + (size_t)o * VP));
        }
    } else if (dbias) {  // the bias alone: its own pass over dy, four sums at a time
        for (int o = 0; o < d->out_c; o++) {
            vf sum[4] = {vf_zero(), vf_zero(), vf_zero(), vf_zero()};
            for (int b = 0; b < batch; b++) {
                const float *dy = dout + b * out_size + (size_t)o * n;
                for (int p = 0; p < n; p += VW) sum[p / VW % 4] += vf_load(dy + p);
            }
            dbias[o] = vf_sum((sum[0] + sum[1]) + (sum[2] + sum[3]));
        }
    }
}

// ---- the input gradient ----

// From the nonzeros of dy.
//
// The same idea for dx, when it pays (sparse_input_pays): each nonzero dy[o][y][x] = g adds
//   dx[c][y + ki][x + kj] += g * w[o][c][ki][kj]     for every tap (c, ki, kj)
// Written into dx as it is laid out, a nonzero's kernel row would be a vector of 5 useful lanes
// whose neighbours' additions overlap it shifted by a float (each waits for the one before). So dx
// is summed transposed, the input channels in the vectors (dxt[position][lanes], lanes: in_c
// rounded up to whole vectors, 16 for LeNet's 10), and so are the weights (wt[o][ki][kj][lanes]):
// a tap of a nonzero is DXS_CV multiply-adds of whole vectors at one position, and two nonzeros'
// additions meet at the same address or not at all. A tile keeps DXS_K taps of one kernel row x
// DXS_CV vectors of channels of wt in registers, and runs over the channel's nonzeros; dxt is
// transposed back into dx per sample. Each dx value adds its terms in the order of the output
// channels, the kernel rows, the tiles and then the nonzeros' positions: fixed by the sizes and
// the tiles, not by the data.

// Taps kj0 + j (j < ntaps) of kernel row ki of channel o's weights (wo: wt[o]), vectors cv0 + v (v <
// ncv) of channels, over `entries` nonzeros (at: where each starts in dxt, (y * in_w + x) * lanes;
// g: their values).
static inline __attribute__((always_inline)) void sparse_input_tile(float *restrict dxt, const float *restrict wo,
                                                                    const int *restrict at, const float *restrict g,
                                                                    int entries, const hw_conv2d_dims *d, int lanes,
                                                                    int ki, int kj0, int cv0, int ntaps, int ncv) {
    const int k = d->k, in_w = d->in_w;
    vf w[DXS_K][DXS_CV];
    for (int j = 0; j < DXS_K; j++) {
        for (int v = 0; v < DXS_CV; v++) {
            if (j < ntaps && v < ncv) w[j][v] = vf_load(wo + ((size_t)ki * k + kj0 + j) * lanes + (cv0 + v) * VW);
        }
    }
    float *const dx0 = dxt + ((size_t)ki * in_w + kj0) * lanes + cv0 * VW;
    for (int e = 0; e < entries; e++) {
        float *p = dx0 + at[e];
        const vf ge = vf_bcast(g + e);
        for (int j = 0; j < DXS_K; j++) {
            for (int v = 0; v < DXS_CV; v++) {
                if (j < ntaps && v < ncv) {
                    float *q = p + (size_t)j * lanes + v * VW;
                    vf_store(q, vf_fma(ge, w[j][v], vf_load(q)));
                }
            }
        }
    }
}

static size_t sparse_input_scratch_floats(const hw_conv2d_dims *d) {
    const size_t lanes = (size_t)(d->in_c + VW - 1) / VW * VW, n = (size_t)d->out_h * d->out_w;
    // wt, dxt, the values, their positions, the counts
    return (size_t)d->out_c * d->k * d->k * lanes + (size_t)d->in_h * d->in_w * lanes +
           2 * ((size_t)d->out_c * n + VW) + (size_t)d->out_c;
}

// True when the sums over dy's nonzeros cost less than the dense ones, which skip the channels of
// a sample whose dy is all zero. A nonzero costs its taps' lanes / VW additions into dxt (a load, a
// multiply-add and a store each), a dense live channel its positions / VW x in_c x taps
// multiply-adds kept in registers, which run about twice as fast. Measured, the kernel alone
// (LeNet's conv2, batch 64, half of the channels dropped, avx2 on Zen 3): dense 365-375 us
// whatever the density; over the nonzeros 315 at 1 in 4 of a live channel's values (LeNet's:
// one of each 2x2 window), 415 at 0.35, 602 at 0.5. Break-even at about 0.3, where this says
// in_c / (2 lanes) = 10 / 32. Counted in 4 samples spread over the batch, as sparse_pays does.
static int sparse_input_pays(const float *dout, const hw_conv2d_dims *d, int batch) {
    const int n = d->out_h * d->out_w;
    const size_t lanes = (size_t)(d->in_c + VW - 1) / VW * VW;
    const int counted = batch < 4 ? batch : 4;
    size_t nonzero = 0, live = 0;
    for (int i = 0; i < counted; i++) {
        const float *dy = dout + (size_t)(i * batch / counted) * d->out_c * n;
        for (int o = 0; o < d->out_c; o++) {
            const size_t m = count_nonzeros(dy + (size_t)o * n, (size_t)n);
            nonzero += m;
            live += m > 0;
        }
    }
    return 2 * nonzero * lanes <= live * (size_t)n * d->in_c;
}

static void input_gradient_sparse(float *din, float *scratch, const float *dout, const float *weight,
                                  const hw_conv2d_dims *d, int batch) {
    const int k = d->k, kk = k * k, n = d->out_h * d->out_w, out_c = d->out_c, in_c = d->in_c;
    const int plane = d->in_h * d->in_w, lanes = (in_c + VW - 1) / VW * VW, cvs = lanes / VW;
    const size_t in_size = (size_t)in_c * plane, out_size = (size_t)out_c * n;
    const int *offsets = (const int *)scratch;
    float *wt = position_offsets(scratch, d), *dxt = wt + (size_t)out_c * kk * lanes;
    float *val = dxt + (size_t)plane * lanes;
    int *at = (int *)(val + (size_t)out_c * n + VW), *count = at + (size_t)out_c * n + VW;
    memset(wt, 0, sizeof(float) * (size_t)out_c * kk * lanes);
    for (int o = 0; o < out_c; o++) {
        for (int c = 0; c < in_c; c++) {
            for (int t = 0; t < kk; t++) wt[((size_t)o * kk + t) * lanes + c] = weight[((size_t)o * in_c + c) * kk + t];
        }
    }
    for (int b = 0; b < batch; b++) {
        const float *dy = dout + (size_t)b * out_size;
        memset(dxt, 0, sizeof(float) * (size_t)plane * lanes);
        for (int o = 0; o < out_c; o++) {
            count[o] =
                append_nonzeros(val + (size_t)o * n, at + (size_t)o * n, 0, dy + (size_t)o * n, offsets, n, lanes, 0);
        }
        for (int o = 0; o < out_c; o++) {
            if (!count[o]) continue;
            const int *ato = at + (size_t)o * n, n_e = count[o];
            const float *valo = val + (size_t)o * n, *wo = wt + (size_t)o * kk * lanes;
            for (int ki = 0; ki < k; ki++) {
                for (int kj0 = 0; kj0 < k;) {
                    const int ntaps = k - kj0 >= DXS_K ? DXS_K : 1;
                    for (int cv0 = 0; cv0 < cvs;) {
                        const int ncv = cvs - cv0 >= DXS_CV ? DXS_CV : 1;
                        if (ntaps == DXS_K && ncv == DXS_CV) {
                            sparse_input_tile(dxt, wo, ato, valo, n_e, d, lanes, ki, kj0, cv0, DXS_K, DXS_CV);
                        } else if (ntaps == DXS_K) {
                            sparse_input_tile(dxt, wo, ato, valo, n_e, d, lanes, ki, kj0, cv0, DXS_K, 1);
                        } else if (ncv == DXS_CV) {
                            sparse_input_tile(dxt, wo, ato, valo, n_e, d, lanes, ki, kj0, cv0, 1, DXS_CV);
                        } else {
                            sparse_input_tile(dxt, wo, ato, valo, n_e, d, lanes, ki, kj0, cv0, 1, 1);
                        }
                        cv0 += ncv;
                    }
                    kj0 += ntaps;
                }
            }
        }
        // dxt back into dx: blocks of VW positions x VW channels, transposed; a last part of a
        // vector of positions one at a time
        float *dx = din + (size_t)b * in_size;
        int p0 = 0;
        for (; p0 + VW <= plane; p0 += VW) {
            for (int c0 = 0; c0 < lanes; c0 += VW) {
                vf r[VW];
                for (int l = 0; l < VW; l++) r[l] = vf_load(dxt + (size_t)(p0 + l) * lanes + c0);
                vf_transpose(r);
                for (int l = 0; l < VW && c0 + l < in_c; l++) vf_store(dx + (size_t)(c0 + l) * plane + p0, r[l]);
            }
        }
        for (; p0 < plane; p0++) {
            for (int c = 0; c < in_c; c++) dx[(size_t)c * plane + p0] = dxt[(size_t)p0 * lanes + c];
        }
    }
}

// Taps (c, ki, kj) with ki from k0 (CONV_MR of them, fewer at the end) x nv vectors of positions
// from n0, summed over the output channels, then added into dx where forward read them. wq: the
// weights of those taps packed [o][CONV_MR]. A tile's taps differ in ki, so its additions land on
// different input rows (an addition that overlaps one just stored, shifted by a float, waits for it).
static inline __attribute__((always_inline)) void input_tile(float *restrict dx, const float *restrict dy,
                                                             const float *restrict wq, const int *restrict offsets,
                                                             int out_c, const hw_conv2d_dims *d, int k0, int kj, int n0,
                                                             int nv) {
    const int n = d->out_h * d->out_w, in_w = d->in_w, k = d->k;
    vf acc[CONV_MR][CONV_NV];
    for (int i = 0; i < CONV_MR; i++) {
        for (int v = 0; v < CONV_NV; v++) acc[i][v] = vf_zero();
    }
    const float *g0 = dy + n0;
    for (int o = 0; o < out_c; o++, wq += CONV_MR, g0 += n) {
        vf g[CONV_NV];
        for (int v = 0; v < CONV_NV; v++) {
            if (v < nv) g[v] = vf_load(g0 + v * VW);
        }
        for (int i = 0; i < CONV_MR; i++) {
            vf a = vf_bcast(wq + i);
            for (int v = 0; v < CONV_NV; v++) {
                if (v < nv) acc[i][v] = vf_fma(a, g[v], acc[i][v]);
            }
        }
    }
    const int *off = offsets + n0 / VW;
    int stacked = 1;  // the tile's vectors are whole rows one under the other (conv2's rows of 8)
    for (int v = 1; v < CONV_NV; v++) stacked &= v >= nv || off[v] == off[0] + v * in_w;
    if (stacked) {
        // Tap ki of vector v and tap ki + 1 of vector v - 1 land on the same input row: added
        // together first (row j = i + v, in the order of i), each row is read and written once.
        // (Two loops of constant bounds: GCC unrolls them and keeps acc in registers. One loop over
        // the rows with the taps inside is too long to unroll, and GCC then keeps acc in memory,
        // storing all of it after every output channel.)
        vf row[CONV_MR + CONV_NV - 1];
        for (int j = 0; j < CONV_MR + CONV_NV - 1; j++) row[j] = vf_zero();
        for (int i = 0; i < CONV_MR; i++) {
            for (int v = 0; v < CONV_NV; v++) {
                if (v < nv && k0 + i < k) row[i + v] += acc[i][v];
            }
        }
        const int rows = (nv - 1) + (k - k0 < CONV_MR ? k - k0 : CONV_MR);
        for (int j = 0; j < CONV_MR + CONV_NV - 1; j++) {
            if (j >= rows) continue;
            float *p = dx + (size_t)(k0 + j) * in_w + kj + off[0];
            vf_store(p, vf_load(p) + row[j]);
        }
        return;
    }
    for (int i = 0; i < CONV_MR; i++) {
        for (int v = 0; v < CONV_NV; v++) {
            if (k0 + i >= k || v >= nv) continue;
            float *p = dx + (size_t)(k0 + i) * in_w + kj + off[v];
            vf_store(p, vf_load(p) + acc[i][v]);
        }
    }
}

static void conv_backward_input(float *din, float *scratch, const float *dout, const float *weight,
                                const hw_conv2d_dims *d, int batch) {
    if (sparse_fits(d) && sparse_input_pays(dout, d, batch)) {
        input_gradient_sparse(din, scratch, dout, weight, d, batch);
        return;
    }
    const int k = d->k, taps = d->in_c * k * k, n = d->out_h * d->out_w, blocks = (k + CONV_MR - 1) / CONV_MR;
    const size_t in_size = (size_t)d->in_c * d->in_h * d->in_w, out_size = (size_t)d->out_c * n;
    // wq[c][kj][block][o][i] = w[o][c][block * CONV_MR + i][kj] (0 past the kernel's last row)
    const int *offsets = (const int *)scratch;
    float *const packed = position_offsets(scratch, d), *wq = packed;
    for (int c = 0; c < d->in_c; c++) {
        for (int kj = 0; kj < k; kj++) {
            for (int kb = 0; kb < blocks; kb++) {
                for (int o = 0; o < d->out_c; o++) {
                    for (int i = 0; i < CONV_MR; i++) {
                        int ki = kb * CONV_MR + i;
                        *wq++ = ki < k ? weight[(size_t)o * taps + ((size_t)c * k + ki) * k + kj] : 0.0f;
                    }
                }
            }
        }
    }
    // Per sample, the output channels whose gradient is not all zero: the sums skip the others,
    // which would add exact zeros (LeNet's dropout2d zeroes half of conv2's). Their dy planes and
    // packed weights are copied together (dyc, wc) when some are skipped, so that the tiles run
    // the same loop either way.
    const int out_c = d->out_c, per_channel = d->in_c * k * blocks * CONV_MR;  // wq floats per channel
    float *wc = wq, *dyc = wc + (size_t)per_channel * out_c;
    int *live = (int *)(dyc + (size_t)out_c * n);
    for (int b = 0; b < batch; b++) {
        float *dx = din + b * in_size;
        const float *dy = dout + b * out_size;
        memset(dx, 0, sizeof(float) * in_size);
        int n_live = 0;
        for (int o = 0; o < out_c; o++) {
            if (count_nonzeros(dy + (size_t)o * n, (size_t)n)) live[n_live++] = o;
        }
        if (n_live == 0) continue;
        const float *w = packed, *g = dy;
        if (n_live < out_c) {
            for (int j = 0; j < n_live; j++) memcpy(dyc + (size_t)j * n, dy + (size_t)live[j] * n, sizeof(float) * n);
            for (size_t block = 0; block < (size_t)d->in_c * k * blocks; block++) {
                for (int j = 0; j < n_live; j++) {
                    memcpy(wc + (block * n_live + j) * CONV_MR, packed + (block * out_c + live[j]) * CONV_MR,
                           sizeof(float) * CONV_MR);
                }
            }
            w = wc, g = dyc;
        }
        for (int c = 0; c < d->in_c; c++) {
            float *dxc = dx + (size_t)c * d->in_h * d->in_w;
            for (int kj = 0; kj < k; kj++) {
                for (int kb = 0; kb < blocks; kb++, w += (size_t)n_live * CONV_MR) {
                    int n0 = 0;
                    for (; n0 + CONV_NV * VW <= n; n0 += CONV_NV * VW) {
                        input_tile(dxc, g, w, offsets, n_live, d, kb * CONV_MR, kj, n0, CONV_NV);
                    }
                    for (; n0 < n; n0 += VW) input_tile(dxc, g, w, offsets, n_live, d, kb * CONV_MR, kj, n0, 1);
                }
            }
        }
    }
}

// ---- 2x2 max-pooling, stride 2 ----
//
// VW outputs at a time, from two input rows of 2 * VW floats split into the windows' four corners
// by even and odd lanes. The rule is maxpool2d's (src/nn/maxpool2d.c): corners in the order
// (0, 0), (0, 1), (1, 0), (1, 1), a later one taking over when it is larger or NaN; argmax holds
// where the winner is in the input plane. The first and the second half of a vector's lanes read
// their windows at `at` and `at2`: neighbours in one row (out_w >= VW; a row's last vector
// overlaps the one before when out_w is not a multiple of VW: LeNet's 12, the same values written
// twice), or the same columns of two output rows when a row is half a vector (LeNet's pool2 on
// 8-float vectors: out_w 4; out_h must be even).

static inline vf select_f(vi mask, vf yes, vf no) { return (vf)(((vi)yes & mask) | ((vi)no & ~mask)); }
static inline vi select_i(vi mask, vi yes, vi no) { return (yes & mask) | (no & ~mask); }

// Of two corners in maxpool2d's order, the later one wins where it is larger or NaN. Four corners
// go as a tree, (a, b) and (c, d), then the two winners: the same winner as taking them one after
// the other (the first of equal maxima, or the last NaN), with a shorter chain of dependent steps.
static inline void pool_pair(vf first, vi at_first, vf later, vi at_later, vf *best, vi *where) {
    vi take = (later > first) | (later != later);
    *best = select_f(take, later, first);
    *where = select_i(take, at_later, at_first);
}

// Where each lane's window starts in the plane: at + 2 l in the first half of the lanes, at2 +
// 2 (l - VW/2) in the second. `lane2` is 0, 2, 4, ...; `upper` is all ones in the second half.
static inline vi window_starts(vi lane2, vi upper, int at, int at2) {
    return lane2 + at + (upper & ((vi){0} + (at2 - at - VW)));
}

static inline void lane_constants(vi *lane2, vi *upper) {
    for (int l = 0; l < VW; l++) {
        (*lane2)[l] = 2 * l;
        (*upper)[l] = l < VW / 2 ? 0 : -1;
    }
}

static void pool2x2_forward(float *out, int32_t *argmax, const float *in, int planes, int in_h, int in_w, int out_h,
                            int out_w) {
    const int two_rows = out_w < VW;
    vi lane2, upper;
    lane_constants(&lane2, &upper);
    const vi zero = (vi){0}, one = zero + 1, below = zero + in_w, diagonal = zero + in_w + 1;
    for (int p = 0; p < planes; p++) {
        const float *x = in + (size_t)p * in_h * in_w;
        float *y = out + (size_t)p * out_h * out_w;
        int32_t *arg = argmax + (size_t)p * out_h * out_w;
        for (int oh = 0; oh < out_h; oh += two_rows ? 2 : 1) {
            for (int ow = 0; ow < out_w; ow += VW) {
                if (!two_rows && ow + VW > out_w) ow = out_w - VW;
                const int at = 2 * oh * in_w + 2 * ow, at2 = two_rows ? at + 2 * in_w : at + VW;
                vf r0a = vf_load(x + at), r0b = vf_load(x + at2), r1a = vf_load(x + at + in_w),
                   r1b = vf_load(x + at2 + in_w);
                vf top, bottom, best;
                vi top_at, bottom_at, where;
                pool_pair(vf_even(r0a, r0b), zero, vf_odd(r0a, r0b), one, &top, &top_at);
                pool_pair(vf_even(r1a, r1b), below, vf_odd(r1a, r1b), diagonal, &bottom, &bottom_at);
                pool_pair(top, top_at, bottom, bottom_at, &best, &where);
                vf_store(y + oh * out_w + ow, best);
                vi index = window_starts(lane2, upper, at, at2) + where;
                memcpy(arg + oh * out_w + ow, &index, sizeof index);
            }
        }
    }
}

// The gradient of every input of the windows, written whole (no zeroing first, no scatter): dy at
// the window's argmax, 0 at its other three corners. Inputs outside every window (an odd last row
// or column) are left to the caller.
static void pool2x2_backward(float *din, const float *dout, const int32_t *argmax, int planes, int in_h, int in_w,
                             int out_h, int out_w) {
    const int two_rows = out_w < VW;
    vi lane2, upper;
    lane_constants(&lane2, &upper);
    for (int p = 0; p < planes; p++) {
        float *dx = din + (size_t)p * in_h * in_w;
        const float *dy = dout + (size_t)p * out_h * out_w;
        const int32_t *arg = argmax + (size_t)p * out_h * out_w;
        for (int oh = 0; oh < out_h; oh += two_rows ? 2 : 1) {
            for (int ow = 0; ow < out_w; ow += VW) {
                if (!two_rows && ow + VW > out_w) ow = out_w - VW;
                const int at = 2 * oh * in_w + 2 * ow, at2 = two_rows ? at + 2 * in_w : at + VW;
                vi g = (vi)vf_load(dy + oh * out_w + ow), where;
                memcpy(&where, arg + oh * out_w + ow, sizeof where);
                vi corner = where - window_starts(lane2, upper, at, at2);  // 0, 1, in_w or in_w + 1
                vf a = (vf)(g & (corner == 0)), b = (vf)(g & (corner == 1));
                vf c = (vf)(g & (corner == in_w)), d = (vf)(g & (corner == in_w + 1));
                vf_store(dx + at, vf_pairs_low(a, b));
                vf_store(dx + at2, vf_pairs_high(a, b));
                vf_store(dx + at + in_w, vf_pairs_low(c, d));
                vf_store(dx + at2 + in_w, vf_pairs_high(c, d));
            }
        }
    }
}

// ---- scratch ----

static size_t conv_scratch_floats(const hw_conv2d_dims *d) {
    const size_t taps = (size_t)d->in_c * d->k * d->k;
    const size_t blocks = (size_t)(d->k + CONV_MR - 1) / CONV_MR;
    size_t forward = (size_t)d->out_c;                   // the list of channels computed
    size_t weight = (size_t)d->out_c * (taps + 1) * VP;  // unreduced sums
    // packed weights twice (all and the live channels'), the live channels' dy, their list (an
    // int per channel: out_c of them, which can be more than the floats of one plane)
    size_t input = 2 * (size_t)d->in_c * d->k * blocks * d->out_c * CONV_MR + (size_t)d->out_c * d->out_h * d->out_w +
                   (size_t)d->out_c;
    const size_t lanes = (size_t)(d->out_c + VW - 1) / VW * VW;
    if (weight_by_channels(d)) weight = ((size_t)d->out_h * d->out_w + taps + 1) * lanes + taps;  // dyt, dwt, db, tap
    if (sparse_fits(d) && sparse_scratch_floats(d) > weight) weight = sparse_scratch_floats(d);
    if (sparse_fits(d) && sparse_input_scratch_floats(d) > input) input = sparse_input_scratch_floats(d);
    size_t most = forward > weight ? forward : weight;
    most = most > input ? most : input;
    // and the table before it: position_offsets' or position_rows'
    const size_t offsets = (size_t)(d->out_h * d->out_w / VW + 15) / 16 * 16;
    const size_t rows = (size_t)(2 * position_vectors(d) + 15) / 16 * 16;
    return most + (offsets > rows ? offsets : rows);
}
