// Tests of the blas module: hw_sgemm against a direct triple loop in double, every transpose
// combination, leading dimensions wider than the matrices, alpha and beta; the kernels chosen for
// this CPU; and the library called from several threads and processes at once, under every kernel
// set this CPU can run, giving exactly the serial results.
#include "hw/blas.h"
#include "hw/err.h"
#include "hw/rng.h"
#include "skip_report.h"

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

ReportHook(POST_ALL)(struct criterion_global_stats *stats) { skip_report(stats, "blas", NULL); }

// Where element (row, col) of a matrix with leading dimension ld lives: row-major (hw_sgemm) or
// column-major (hw_sgemm_col_major, as cuBLAS and the simulated cuBLAS of the tests take it).
static int at(int col_major, int row, int col, int ld) { return col_major ? col * ld + row : row * ld + col; }

// 64 random products of every transposition, with strides wider than the matrices, against the
// sums written out in double.
static void check_direct_products(int col_major) {
    hw_rng rng;
    hw_rng_seed(&rng, 4, (uint64_t)col_major);
    for (int trial = 0; trial < 64; trial++) {
        hw_blas_trans ta = trial & 1 ? HW_TRANS : HW_NO_TRANS, tb = trial & 2 ? HW_TRANS : HW_NO_TRANS;
        int m = 1 + (int)hw_rng_below(&rng, 40), n = 1 + (int)hw_rng_below(&rng, 40);
        int k = 1 + (int)hw_rng_below(&rng, 300);
        int pad = (int)hw_rng_below(&rng, 3);  // strides wider than the matrices
        int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
        // the leading dimension runs along a row (row-major) or a column (column-major)
        int lda = (col_major ? a_rows : a_cols) + pad, ldb = (col_major ? b_rows : b_cols) + pad;
        int ldc = (col_major ? m : n) + pad;
        size_t a_n = (size_t)(col_major ? a_cols : a_rows) * lda, b_n = (size_t)(col_major ? b_cols : b_rows) * ldb;
        size_t c_n = (size_t)(col_major ? n : m) * ldc;
        float alpha = trial % 8 < 4 ? 1.0f : -0.5f, beta = (trial / 4) % 3 == 0 ? 0.0f : 0.75f;
        float *a = malloc(sizeof(float) * a_n), *b = malloc(sizeof(float) * b_n);
        float *c = malloc(sizeof(float) * c_n), *c0 = malloc(sizeof(float) * c_n);
        for (size_t i = 0; i < a_n; i++) a[i] = hw_rng_normal(&rng);
        for (size_t i = 0; i < b_n; i++) b[i] = hw_rng_normal(&rng);
        for (size_t i = 0; i < c_n; i++) c0[i] = c[i] = beta == 0.0f ? NAN : hw_rng_normal(&rng);
        if (col_major) {
            hw_sgemm_col_major(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        } else {
            hw_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        }
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
                double sum = 0, mag = 0;
                for (int p = 0; p < k; p++) {
                    double av = ta ? a[at(col_major, p, i, lda)] : a[at(col_major, i, p, lda)];
                    double bv = tb ? b[at(col_major, j, p, ldb)] : b[at(col_major, p, j, ldb)];
                    sum += av * bv;
                    mag += fabs(av * bv);
                }
                int ij = at(col_major, i, j, ldc);
                double want = alpha * sum + (beta == 0.0f ? 0.0 : beta * c0[ij]);
                cr_assert(fabs(c[ij] - want) <= 1e-5 * (mag + 1),
                          "%s trial %d (ta %d tb %d, %dx%dx%d): c[%d][%d] = %g, want %g",
                          col_major ? "column-major" : "row-major", trial, ta, tb, m, n, k, i, j, c[ij], want);
            }
        }
        // the padding of C (past the last column of each row, or the last row of each column) is not touched
        for (int outer = 0; outer < (col_major ? n : m); outer++) {
            for (int inner = col_major ? m : n; inner < ldc; inner++) {
                float got = c[outer * ldc + inner], was = c0[outer * ldc + inner];
                cr_assert(got == was || (isnan(got) && isnan(was)), "c[%d][%d] outside the matrix written", outer,
                          inner);
            }
        }
        free(a), free(b), free(c), free(c0);
    }
}

Test(blas, sgemm_matches_direct_products) { check_direct_products(0); }

Test(blas, sgemm_col_major_matches_direct_products) { check_direct_products(1); }

Test(blas, empty_inner_dimension_scales_c) {
    float c[4] = {NAN, NAN, NAN, NAN}, d[4] = {1, 2, 3, 4};
    hw_sgemm(HW_NO_TRANS, HW_NO_TRANS, 2, 2, 0, 1.0f, NULL, 1, NULL, 2, 0.0f, c, 2);
    for (int i = 0; i < 4; i++) cr_expect_eq(c[i], 0.0f, "beta = 0 clears C");
    hw_sgemm(HW_NO_TRANS, HW_NO_TRANS, 2, 2, 0, 1.0f, NULL, 1, NULL, 2, 2.0f, d, 2);
    for (int i = 0; i < 4; i++) cr_expect_eq(d[i], 2.0f * (float)(i + 1));
}

Test(blas, info_names_the_library_its_threads_and_kernels) {
    const char *info = hw_blas_info();
    cr_expect(strstr(info, "OpenBLAS") != NULL, "%s", info);
    cr_expect(strstr(info, "pthread build, 1 thread per caller") != NULL, "%s", info);
    cr_expect(strstr(info, hw_blas_kernels()) != NULL, "%s", info);
}

// ---- the kernels follow the CPU ----

// Whether /proc/cpuinfo lists every one of the flags (the kernel's view of CPUID and of what the
// OS enables: a second source beside hw_blas_pick_kernels' own CPUID reading).
static int cpu_has_flags(const char *const *flags, int n) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    cr_assert_not_null(f, "cannot read /proc/cpuinfo");
    char line[8192];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        found = 1;
        for (int i = 0; i < n; i++) {
            char word[64];
            snprintf(word, sizeof word, " %s", flags[i]);
            char *at = strstr(line, word);
            if (!at || (at[strlen(word)] != ' ' && at[strlen(word)] != '\n')) found = 0;
        }
        break;
    }
    fclose(f);
    return found;
}

static const char *const avx512[] = {"avx512f", "avx512cd", "avx512dq", "avx512bw", "avx512vl"};

Test(blas, avx512_cpus_get_the_avx512_kernels_and_others_keep_openblas_choice) {
    const char *why;
    const char *picked = hw_blas_pick_kernels(&why);
    if (cpu_has_flags(avx512, 5)) {
        const char *bf16[] = {"avx512_bf16"};
        const char *want = cpu_has_flags(bf16, 1) ? "Cooperlake" : "SkylakeX";
        cr_assert(picked && strcmp(picked, want) == 0, "AVX-512 CPU: picked %s, want %s", picked ? picked : "none",
                  want);
        cr_expect(strstr(why, "AVX-512") != NULL, "%s", why);
        if (!getenv("OPENBLAS_CORETYPE")) {
            cr_expect(strcasecmp(hw_blas_kernels(), want) == 0, "OpenBLAS runs %s, not %s", hw_blas_kernels(), want);
        }
    } else {
        cr_assert_null(picked, "no AVX-512 here, yet %s was picked", picked);
        cr_expect(strstr(why, "OpenBLAS's choice") != NULL, "%s", why);
    }
}

// Issue 21: OPENBLAS_CORETYPE=Foo was reported as "kernels Cooperlake (set by OPENBLAS_CORETYPE)"
// (here Haswell): OpenBLAS ignores a name it does not know, and the report now says so. And AVX-512
// kernels asked for on a CPU without AVX-512 are refused at the load, not met as a worker's SIGILL.
static int child_open_with(const char *kernels, char *info, size_t cap) {
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        setenv("OPENBLAS_CORETYPE", kernels, 1);
        int ok = hw_blas_open() == HW_OK;
        const char *text = ok ? hw_blas_info() : hw_error();
        if (write(fds[1], text, strlen(text)) < 0) _exit(3);
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], info, cap - 1);
    info[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    cr_assert(WIFEXITED(status), "the child died (status %#x)", status);
    return WEXITSTATUS(status);
}

Test(blas, a_kernel_set_openblas_does_not_take_is_not_reported_as_chosen) {
    char info[512];
    cr_assert_eq(child_open_with("Foo", info, sizeof info), 0, "%s", info);
    cr_expect(strstr(info, "OPENBLAS_CORETYPE=Foo was not taken") != NULL, "%s", info);
    cr_expect(strstr(info, "set by OPENBLAS_CORETYPE") == NULL, "%s", info);
    if (cpu_has_flags(avx512, 5)) cr_skip_test("the AVX-512 refusal needs a CPU without AVX-512");
    cr_assert_eq(child_open_with("SkylakeX", info, sizeof info), 1, "SkylakeX was loaded on a CPU without AVX-512");
    cr_expect(strstr(info, "OPENBLAS_CORETYPE=SkylakeX asks for AVX-512") != NULL, "%s", info);
}

// ---- several threads and processes at once (issue 11) ----

// LeNet's GEMMs, per sample and per layer (conv2 forward, its weight and input gradients, conv1,
// fc1), the shapes that raced in the serial OpenBLAS.
static const int shapes[][3] = {{20, 64, 250}, {20, 250, 64}, {250, 64, 20}, {10, 576, 25}, {64, 50, 320}};
enum { N_SHAPES = 5, CALLS = 20000, THREADS = 4 };

typedef struct {
    float *a[N_SHAPES], *b[N_SHAPES], *want[N_SHAPES];
    long wrong;  // results that differ from the serial ones, bit for bit
} gemm_job;

static void gemm_shape(const gemm_job *job, int s, float *c) {
    int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    hw_sgemm(HW_NO_TRANS, HW_NO_TRANS, m, n, k, 1.0f, job->a[s], k, job->b[s], n, 0.0f, c, n);
}

static void *gemm_many(void *arg) {
    gemm_job *job = arg;
    float *c = malloc(sizeof(float) * 250 * 576);
    for (int call = 0; call < CALLS; call++) {
        int s = call % N_SHAPES;
        gemm_shape(job, s, c);
        int size = shapes[s][0] * shapes[s][1];
        if (memcmp(c, job->want[s], sizeof(float) * (size_t)size) != 0) job->wrong++;
    }
    free(c);
    return NULL;
}

// Runs in a child, so that OPENBLAS_CORETYPE is read by a library not yet loaded: the serial
// results first, then THREADS threads at once, then two forked processes at once. Exits with the
// number of wrong results (at most 100), or 101 when the kernels are not the ones asked for.
static void child_check_kernels(const char *kernels) {
    if (kernels) setenv("OPENBLAS_CORETYPE", kernels, 1);
    if (hw_blas_open() != HW_OK) _exit(102);
    if (kernels && strcasecmp(hw_blas_kernels(), kernels) != 0) _exit(101);
    hw_rng rng;
    hw_rng_seed(&rng, 11, 0);
    gemm_job job = {0};
    for (int s = 0; s < N_SHAPES; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        job.a[s] = malloc(sizeof(float) * m * k);
        job.b[s] = malloc(sizeof(float) * k * n);
        job.want[s] = malloc(sizeof(float) * m * n);
        for (int i = 0; i < m * k; i++) job.a[s][i] = hw_rng_normal(&rng);
        for (int i = 0; i < k * n; i++) job.b[s][i] = hw_rng_normal(&rng);
        gemm_shape(&job, s, job.want[s]);
    }
    gemm_job jobs[THREADS];
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = job;
        pthread_create(&threads[t], NULL, gemm_many, &jobs[t]);
    }
    long wrong = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        wrong += jobs[t].wrong;
    }
    // Hogwild's workers: processes forked after the library was loaded, calling it at once.
    pid_t kids[2];
    for (int p = 0; p < 2; p++) {
        kids[p] = fork();
        if (kids[p] == 0) {
            gemm_many(&job);
            _exit(job.wrong > 100 ? 100 : (int)job.wrong);
        }
    }
    for (int p = 0; p < 2; p++) {
        int status = 0;
        waitpid(kids[p], &status, 0);
        wrong += WIFEXITED(status) ? WEXITSTATUS(status) : 100;
    }
    _exit(wrong > 100 ? 100 : (int)wrong);
}

static void check_kernels(const char *kernels) {
    fflush(NULL);
    pid_t child = fork();
    cr_assert_geq(child, 0, "fork");
    if (child == 0) child_check_kernels(kernels);
    int status = 0;
    waitpid(child, &status, 0);
    const char *name = kernels ? kernels : "the library's own choice";
    cr_assert(WIFEXITED(status), "kernels %s: the child died (status %#x)", name, status);
    int code = WEXITSTATUS(status);
    cr_assert_neq(code, 102, "kernels %s: OpenBLAS did not load", name);
    cr_assert_neq(code, 101, "kernels %s: OPENBLAS_CORETYPE was not honoured", name);
    cr_assert_eq(code, 0, "kernels %s: %d GEMM results from concurrent calls differ from the serial ones", name, code);
}

Test(blas, concurrent_calls_match_serial_calls_with_the_default_kernels) { check_kernels(NULL); }

// Each kernel set this CPU can run, forced; the others skip, saying what the CPU lacks.
static void check_kernel_set(const char *name, const char *const *flags, int n_flags, const char *needs) {
    if (!cpu_has_flags(flags, n_flags)) cr_skip_test("kernels %s not checked: this CPU lacks %s", name, needs);
    check_kernels(name);
}

static const char *const avx2_fma[] = {"avx2", "fma"};
static const char *const avx512_bf16[] = {"avx512f", "avx512cd", "avx512dq", "avx512bw", "avx512vl", "avx512_bf16"};

Test(blas, concurrent_calls_match_serial_calls_with_sandybridge_kernels) {
    check_kernel_set("Sandybridge", (const char *const[]){"avx"}, 1, "AVX");
}
Test(blas, concurrent_calls_match_serial_calls_with_haswell_kernels) {
    check_kernel_set("Haswell", avx2_fma, 2, "AVX2 and FMA");
}
Test(blas, concurrent_calls_match_serial_calls_with_zen_kernels) {
    check_kernel_set("Zen", avx2_fma, 2, "AVX2 and FMA");
}
Test(blas, concurrent_calls_match_serial_calls_with_skylakex_kernels) {
    check_kernel_set("SkylakeX", avx512, 5, "AVX-512");
}
Test(blas, concurrent_calls_match_serial_calls_with_cooperlake_kernels) {
    check_kernel_set("Cooperlake", avx512_bf16, 6, "AVX-512 with BF16");
}
