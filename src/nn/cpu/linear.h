// The linear layer's kernels (kernels.h: linear_forward, linear_backward_weight), written once,
// part of every copy (copy.h): compiled into it with its vectors (vp, VP lanes) and its tiles
// LIN_B, LIN_O (forward) and LDW_O, LDW_V (weight gradient).
//
//   forward          y[b][o]  = bias[o] + sum over k of x[b][k] * w[o][k]
//   weight gradient  dw[o][k] = sum over b of dy[b][o] * x[b][k]
//
// Why not the BLAS: OpenBLAS copies ("packs") both operands of every GEMM into its own
// layout first, and for beta = 0 zeroes the output before adding into it. For the MLP's first layer
// (x [64 x 784], w [128 x 784]) that is 400 KB of weights copied, and 400 KB of gradient zeroed,
// each step: its forward ran at 175 GFLOP/s and its weight gradient at 204 against the sgemm peak
// of 239 (Zen 5; bench/nn_step.md, "Linear layers on the kernels"). Where they run: kernels.h,
// nn_linear_direct. Both operands are already in the layout these sums
// want: the forward is dot products of rows of x with rows of w, both contiguous in k; the weight
// gradient is rows of x scaled by dy and added up, contiguous in k too. So the kernels read them
// where they lie, and write each output once.
//
// The forward keeps a tile of LIN_B samples x LIN_O outputs in registers, each output as VP partial
// sums (one a lane) over k, added together at the end (vp_sum), then the k left over (n_in % VP),
// then the bias. The weight gradient keeps LDW_O outputs x LDW_V vectors of k, summed over the
// samples in order. Neither order depends on the tiles, nor on where a sample sits in the batch:
// only on the copy's VP and whether it has FMA.

// Samples taken per pass over the weights: their rows of x stay in the L2 cache while every tile
// of outputs reads them (64 rows of 1000 floats, kernels.h's NN_LINEAR_MAX_IN, are 256 KB).
enum { LIN_BATCH_BLOCK = 64 };

static inline int lin_min(int a, int b) { return a < b ? a : b; }

static void linear_forward(float *out, const float *in, const float *weight, const float *bias, int n_in, int n_out,
                           int batch) {
    const int kv = n_in / VP * VP;  // the k in whole vectors
    for (int block = 0; block < batch; block += LIN_BATCH_BLOCK) {
        const int block_end = lin_min(batch, block + LIN_BATCH_BLOCK);
        for (int o0 = 0; o0 < n_out; o0 += LIN_O) {
            // A last tile of fewer outputs or samples repeats the last row: computed, not stored.
            const float *w[LIN_O];
            for (int j = 0; j < LIN_O; j++) w[j] = weight + (size_t)lin_min(o0 + j, n_out - 1) * n_in;
            for (int b0 = block; b0 < block_end; b0 += LIN_B) {
                const float *x[LIN_B];
                for (int i = 0; i < LIN_B; i++) x[i] = in + (size_t)lin_min(b0 + i, block_end - 1) * n_in;
                vp acc[LIN_B][LIN_O];
                for (int i = 0; i < LIN_B; i++) {
                    for (int j = 0; j < LIN_O; j++) acc[i][j] = vp_zero();
                }
                for (int k = 0; k < kv; k += VP) {
                    vp xv[LIN_B];
                    for (int i = 0; i < LIN_B; i++) xv[i] = vp_load(x[i] + k);
                    for (int j = 0; j < LIN_O; j++) {
                        const vp wv = vp_load(w[j] + k);
                        for (int i = 0; i < LIN_B; i++) acc[i][j] = vp_fma(xv[i], wv, acc[i][j]);
                    }
                }
                // Constant bounds and a test, not a loop to `rows`: an array indexed by a variable
                // lives in memory, and GCC then wrote every sum back to it in the loop above.
                for (int i = 0; i < LIN_B; i++) {
                    for (int j = 0; j < LIN_O; j++) {
                        if (b0 + i >= block_end || o0 + j >= n_out) continue;
                        float sum = vp_sum(acc[i][j]);
                        for (int k = kv; k < n_in; k++) sum += x[i][k] * w[j][k];
                        out[(size_t)(b0 + i) * n_out + o0 + j] = sum + bias[o0 + j];
                    }
                }
            }
        }
    }
}

// dw for outputs o0 .. o0 + LDW_O - 1 (those below n_out) and the nv vectors of k from k0 (nv at
// most LDW_V): a function the compiler copies into each call, so that nv is a constant there.
static inline __attribute__((always_inline)) void weight_gradient_tile(float *dweight, const float *dout,
                                                                       const float *in, int n_in, int n_out, int batch,
                                                                       int o0, int k0, int nv) {
    int o[LDW_O];
    for (int i = 0; i < LDW_O; i++) o[i] = lin_min(o0 + i, n_out - 1);
    vp acc[LDW_O][LDW_V];
    for (int i = 0; i < LDW_O; i++) {
        for (int v = 0; v < nv; v++) acc[i][v] = vp_zero();
    }
    for (int b = 0; b < batch; b++) {
        const float *x = in + (size_t)b * n_in + k0, *dy = dout + (size_t)b * n_out;
        vp xv[LDW_V];
        for (int v = 0; v < nv; v++) {
            xv[v] = vp_load(x + v * VP);
            vp_in_register(&xv[v]);  // one load, not one in each multiply-add (avx.h)
        }
        for (int i = 0; i < LDW_O; i++) {
            const vp d = vp_bcast(dy + o[i]);
            for (int v = 0; v < nv; v++) acc[i][v] = vp_fma(d, xv[v], acc[i][v]);
        }
    }
    for (int i = 0; i < LDW_O; i++) {  // constant bounds, as in linear_forward
        for (int v = 0; v < nv; v++) {
            if (o0 + i < n_out) vp_store(dweight + (size_t)(o0 + i) * n_in + k0 + v * VP, acc[i][v]);
        }
    }
}

static void linear_backward_weight(float *dweight, const float *dout, const float *in, int n_in, int n_out, int batch) {
    const int kv = n_in / VP * VP, step = LDW_V * VP, kb = kv / step * step;
    for (int k0 = 0; k0 < kb; k0 += step) {
        for (int o0 = 0; o0 < n_out; o0 += LDW_O)
            weight_gradient_tile(dweight, dout, in, n_in, n_out, batch, o0, k0, LDW_V);
    }
    for (int k0 = kb; k0 < kv; k0 += VP) {  // fewer than LDW_V vectors left: one at a time
        for (int o0 = 0; o0 < n_out; o0 += LDW_O)
            weight_gradient_tile(dweight, dout, in, n_in, n_out, batch, o0, k0, 1);
    }
    for (int o = 0; o < n_out; o++) {  // the k left over (n_in % VP), in the same order: over b
        for (int k = kv; k < n_in; k++) {
            float sum = 0;
            for (int b = 0; b < batch; b++) sum += dout[(size_t)b * n_out + o] * in[(size_t)b * n_in + k];
            dweight[(size_t)o * n_in + k] = sum;
        }
    }
}
