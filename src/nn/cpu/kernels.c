// kernels: which copy of the CPU kernels (src/nn/cpu/kernels.h) runs: the one needing the most that the
// CPU reports it can run, or the one HOGWILD_CPU_PATH names, as OPENBLAS_CORETYPE names OpenBLAS's.
#include "kernels.h"

#include "hw/err.h"

#include <assert.h>
#include <cpuid.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// By the instruction sets they need, the most first: the automatic choice is the first the CPU runs.
// That is a measured choice, not a rule (bench/cpu_copies.sh measures it; bench/RESULTS.md, issue
// 28): the avx512 copy (AVX-512's 32 registers and larger tiles; 16-position vectors in the
// convolution's forward and weight gradient) ran LeNet's step 1.27x faster than the avx2 copy on a
// Zen 5 (its 2-worker epoch 1.21x), and 1.08-1.11x faster on an Intel Xeon without the 16-position
// vectors. Not measured on Zen 4.
enum { COPY_AVX512, COPY_AVX2, COPY_BASELINE, COPIES };
static const nn_kernels *(*const copies[])(void) = {nn_kernels_avx512, nn_kernels_avx2, nn_kernels_baseline};
static_assert(sizeof copies / sizeof copies[0] == COPIES, "a name for every copy");

static const nn_kernels *in_use;
static const char *chooser = "";
static char info[256];

// What the CPU and the OS together let run: 2 AVX-512 (F, VL, BW, DQ), 1 AVX2 and FMA, 0 neither.
// An instruction set counts only when the OS saves its registers (XCR0), or using it would crash.
static int cpu_level(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int avx = (c & bit_AVX) && (c & bit_FMA) && (c & bit_OSXSAVE);
    if (!avx || __get_cpuid_max(0, NULL) < 7) return 0;
    unsigned xcr0, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    if ((xcr0 & 0x6) != 0x6) return 0;  // SSE and AVX state
    __cpuid_count(7, 0, a, b, c, d);
    if (!(b & bit_AVX2)) return 0;
    const unsigned avx512 = bit_AVX512F | bit_AVX512VL | bit_AVX512BW | bit_AVX512DQ;
    // and the opmask registers and both halves of the upper ZMM registers
    return (b & avx512) == avx512 && (xcr0 & 0xE0) == 0xE0 ? 2 : 1;
}

// The level of cpu_level a copy needs: its place from the end of `copies`.
static int level_of(int copy) { return COPIES - 1 - copy; }

int hw_nn_kernels_runnable(const char *name) {
    for (int i = 0; i < COPIES; i++) {
        if (strcmp(copies[i]()->name, name) == 0) return level_of(i) <= cpu_level();
    }
    return 0;
}

// "avx2, baseline": the copies this CPU runs.
static void runnable_list(char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < COPIES; i++) {
        if (level_of(i) > cpu_level()) continue;
        used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%s", used ? ", " : "", copies[i]()->name);
    }
}

int hw_nn_kernels_select(const char *name) {
    char runnable[64];
    runnable_list(runnable, sizeof runnable);
    int chosen = -1;
    if (!name || !*name || strcmp(name, "auto") == 0) {
        for (int i = 0; i < COPIES && chosen < 0; i++) {
            if (level_of(i) <= cpu_level()) chosen = i;
        }
        chooser = "the CPU's best";
    } else {
        for (int i = 0; i < COPIES && chosen < 0; i++) {
            if (strcmp(copies[i]()->name, name) == 0) chosen = i;
        }
        if (chosen < 0) {
            // At most 40 characters of the value: the message's point is what it expected, and
            // hw_fail's buffer cut a long value's message before it.
            int shown = strlen(name) > 40 ? 37 : 40;
            return hw_fail("HOGWILD_CPU_PATH=%.*s%s: no such CPU path; expected avx512, avx2, baseline or auto "
                           "(this CPU runs %s)",
                           shown, name, strlen(name) > 40 ? "..." : "", runnable);
        }
        if (level_of(chosen) > cpu_level()) {
            return hw_fail("HOGWILD_CPU_PATH=%s: this CPU cannot run it (%s); it runs %s", name,
                           level_of(chosen) == 2 ? "no AVX-512 F, VL, BW and DQ with the OS saving their registers"
                                                 : "no AVX2 and FMA with the OS saving their registers",
                           runnable);
        }
        chooser = "forced by HOGWILD_CPU_PATH";
    }
    in_use = copies[chosen]();
    snprintf(info, sizeof info, "%s (%s; this CPU runs %s; HOGWILD_CPU_PATH forces one)", in_use->name, chooser,
             runnable);
    return HW_OK;
}

static pthread_once_t first_use = PTHREAD_ONCE_INIT;

static void select_from_environment(void) {
    if (in_use) return;  // chosen before (./hogwild at start, or a test)
    if (hw_nn_kernels_select(getenv("HOGWILD_CPU_PATH")) != HW_OK) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        exit(1);
    }
}

const nn_kernels *nn_kernels_in_use(void) {
    pthread_once(&first_use, select_from_environment);
    return in_use;
}

const char *hw_nn_kernels_info(void) {
    nn_kernels_in_use();
    return info;
}

int nn_conv2d_direct(const hw_conv2d_dims *d) {
    return d->stride == 1 && d->pad == 0 && d->out_w % NN_KERNEL_VECTOR == 0;
}

int nn_linear_direct(const hw_linear_dims *d) {
    return nn_kernels_in_use()->linear_on_kernels && d->in % NN_LINEAR_IN_VECTOR == 0 && d->in >= NN_LINEAR_MIN_IN &&
           d->in <= NN_LINEAR_MAX_IN && (int64_t)d->in * d->out >= NN_LINEAR_MIN_WEIGHTS;
}

int nn_pool2x2_kernel(const hw_maxpool2d_dims *d) {
    if (d->k != 2 || d->stride != 2) return 0;
    return d->out_w >= NN_KERNEL_VECTOR || (2 * d->out_w == NN_KERNEL_VECTOR && d->out_h % 2 == 0);
}
