// blas: the one door to the CPU BLAS. OpenBLAS is loaded here, at run time, after its kernels and
// its threading are chosen (why: include/hw/blas.h).
#include "hw/blas.h"

#include "hw/err.h"
#include "hw/plugin.h"

#include <cblas.h>  // the CBLAS enum values; the functions come from dlsym
#include <cpuid.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// Debian's pthread build (package libopenblas0-pthread); the Makefile may name another. When it
// is missing, the system's default libopenblas.so.0 is tried, and refused if it is not thread-safe.
#ifndef HW_BLAS_LIBRARY
#define HW_BLAS_LIBRARY "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"
#endif

typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                         const float *, blasint, const float *, blasint, float, float *, blasint);

static struct {
    int status;  // of the one load
    sgemm_fn sgemm;
    char kernels[32];
    char info[384];
    char error[1024];  // the load's message, for every thread that asks later
} blas;

// ---- the kernels ----

// AVX-512 F, CD, DQ, BW and VL, with the OS saving their state; *bf16 for AVX512_BF16.
static int cpu_has_avx512(int *bf16) {
    unsigned a, b, c, d;
    *bf16 = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return 0;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    // XCR0: SSE and AVX state (bits 1, 2), the opmask registers and both halves of ZMM (5, 6, 7).
    if ((xcr0_lo & 0xE6) != 0xE6 || __get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned need = bit_AVX512F | bit_AVX512CD | bit_AVX512DQ | bit_AVX512BW | bit_AVX512VL;
    if ((b & need) != need) return 0;
    if (a >= 1) {  // leaf 7 has sub-leaf 1
        __cpuid_count(7, 1, a, b, c, d);
        *bf16 = (a >> 5) & 1;
    }
    return 1;
}

const char *hw_blas_pick_kernels(const char **why) {
    int bf16;
    if (!cpu_has_avx512(&bf16)) {
        *why = "OpenBLAS's choice for this CPU";
        return NULL;
    }
    *why = bf16 ? "hogwild's choice: the CPU has AVX-512 with BF16" : "hogwild's choice: the CPU has AVX-512";
    return bf16 ? "Cooperlake" : "SkylakeX";
}

// ---- loading ----

// What hogwild calls of OpenBLAS, in the order hw_plugin_load resolves them.
enum { GET_CONFIG, GET_CORENAME, GET_PARALLEL, GET_THREADS, SGEMM, N_SYMBOLS };
static const char *const blas_symbols[N_SYMBOLS + 1] = {"openblas_get_config",   "openblas_get_corename",
                                                        "openblas_get_parallel", "openblas_get_num_threads",
                                                        "cblas_sgemm",           NULL};

// OpenBLAS 0.3.21 takes OPENBLAS_CORETYPE=SkylakeX (or Cooperlake) on a CPU without AVX-512, and
// the first GEMM dies of SIGILL: a worker "killed by signal SIGILL", after the start. Refused here.
static int check_user_kernels(const char *kernels) {
    static const char *const avx512_sets[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    int bf16;
    for (size_t i = 0; i < sizeof avx512_sets / sizeof avx512_sets[0]; i++) {
        if (strcasecmp(kernels, avx512_sets[i]) == 0 && !cpu_has_avx512(&bf16)) {
            return hw_fail("OPENBLAS_CORETYPE=%s asks for AVX-512 kernels, which this CPU cannot run (it has no "
                           "AVX-512); unset it, or name a kernel set it runs (Haswell, Zen)",
                           kernels);
        }
    }
    return HW_OK;
}

static int load(void) {
    const char *chooser;
    const char *user_kernels = getenv("OPENBLAS_CORETYPE");
    if (user_kernels && *user_kernels) {
        if (check_user_kernels(user_kernels) != HW_OK) return HW_ERR;
        chooser = "set by OPENBLAS_CORETYPE";
    } else {
        const char *kernels = hw_blas_pick_kernels(&chooser);
        if (kernels) setenv("OPENBLAS_CORETYPE", kernels, 1);
    }
    // One thread per caller: a Hogwild worker is one thread, a DataParallel replica is one thread,
    // and a pool started now would be running in the parent when it forks.
    setenv("OPENBLAS_NUM_THREADS", "1", 1);

    // The pthread build the Makefile names, else the system's default libopenblas.so.0.
    void *fn[N_SYMBOLS];
    hw_plugin_failure failure;
    hw_plugin_spec spec = {.file = HW_BLAS_LIBRARY, .flags = RTLD_NOW | RTLD_LOCAL, .symbols = blas_symbols};
    int loaded = hw_plugin_load(&spec, fn, &failure);
    if (loaded != HW_OK && !failure.missing) {
        spec.file = "libopenblas.so.0";
        loaded = hw_plugin_load(&spec, fn, &failure);
    }
    if (loaded != HW_OK && failure.missing) {
        return hw_fail("%s has no %s: it is not OpenBLAS", failure.path, failure.missing);
    }
    if (loaded != HW_OK) {
        return hw_fail("cannot load OpenBLAS from %s or the system's libopenblas.so.0: %s; install Debian's "
                       "libopenblas0-pthread (./run.sh does)",
                       HW_BLAS_LIBRARY, failure.why);
    }
    const char *path = failure.path;
    char *(*get_config)(void) = (char *(*)(void))fn[GET_CONFIG];
    char *(*get_corename)(void) = (char *(*)(void))fn[GET_CORENAME];
    int (*get_parallel)(void) = (int (*)(void))fn[GET_PARALLEL];
    int (*get_threads)(void) = (int (*)(void))fn[GET_THREADS];
    sgemm_fn sgemm = (sgemm_fn)fn[SGEMM];
    // 0 is the serial build, whose buffer allocator races when two threads call it at once; 2 is
    // OpenMP, whose runtime keeps a pool. Only the pthread build (1) with one thread is safe for
    // both the replica threads and fork.
    if (get_parallel() != 1) {
        return hw_fail("%s is OpenBLAS's %s build, which is not safe to call from several threads; install "
                       "Debian's libopenblas0-pthread (./run.sh does)",
                       path, get_parallel() == 0 ? "serial" : "OpenMP");
    }
    if (get_threads() != 1) return hw_fail("%s runs %d threads per call, not 1", path, get_threads());

    snprintf(blas.kernels, sizeof blas.kernels, "%s", get_corename());
    // OpenBLAS takes OPENBLAS_CORETYPE only when it names a kernel set it has and the CPU runs;
    // otherwise it quietly keeps its own choice (Foo gave Haswell here, reported as "set by
    // OPENBLAS_CORETYPE"). Say what happened.
    char not_taken[160];
    if (user_kernels && *user_kernels && strcasecmp(user_kernels, blas.kernels) != 0) {
        snprintf(not_taken, sizeof not_taken,
                 "OPENBLAS_CORETYPE=%.40s was not taken: not a kernel set this OpenBLAS has, or one this CPU cannot "
                 "run; OpenBLAS's choice",
                 user_kernels);
        chooser = not_taken;
    }
    // get_config() is e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64".
    char name[16] = "", version[32] = "";
    sscanf(get_config(), "%15s %31s", name, version);
    snprintf(blas.info, sizeof blas.info, "%s %s (pthread build, 1 thread per caller), kernels %s (%s)", name, version,
             blas.kernels, chooser);
    blas.sgemm = sgemm;
    return HW_OK;
}

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load_and_keep_message(void) {
    blas.status = load();
    if (blas.status != HW_OK) snprintf(blas.error, sizeof blas.error, "%s", hw_error());
}

int hw_blas_open(void) {
    pthread_once(&load_once, load_and_keep_message);
    if (blas.status != HW_OK) return hw_fail("%s", blas.error);
    return HW_OK;
}

static sgemm_fn sgemm_or_exit(void) {
    if (hw_blas_open() != HW_OK) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        exit(1);
    }
    return blas.sgemm;
}

const char *hw_blas_info(void) { return hw_blas_open() == HW_OK ? blas.info : blas.error; }

const char *hw_blas_kernels(void) { return hw_blas_open() == HW_OK ? blas.kernels : "none"; }

// ---- the GEMM ----

static void gemm(enum CBLAS_ORDER order, hw_blas_trans trans_a, hw_blas_trans trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        // CBLAS scales C by beta here; with beta = 0 make sure no old NaN survives.
        int rows = order == CblasRowMajor ? m : n, cols = order == CblasRowMajor ? n : m;
        for (int i = 0; i < rows; i++) {
            for (int j = 0; j < cols; j++) c[(long)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(long)i * ldc + j];
        }
        return;
    }
    sgemm_or_exit()(order, trans_a == HW_TRANS ? CblasTrans : CblasNoTrans,
                    trans_b == HW_TRANS ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void hw_sgemm(hw_blas_trans trans_a, hw_blas_trans trans_b, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc) {
    gemm(CblasRowMajor, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void hw_sgemm_col_major(hw_blas_trans trans_a, hw_blas_trans trans_b, int m, int n, int k, float alpha, const float *a,
                        int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    gemm(CblasColMajor, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
