/*
 * Tests of the GEMM kernels (gemm.c) against the dot-product kernels (quant-dot.c):
 *   - every tile shape (1..4 weight rows x 1..4 activation rows), several row lengths, row strides
 *     larger than a row, for every type that has a GEMM kernel on this CPU;
 *   - |gemm - dot| <= 1e-5 * sum over blocks of |block term| (integer sums are exact on both paths,
 *     only the order of float additions differs);
 *   - packing quantizes exactly as memra_quantize_activation_row (checked through the results).
 *   - two trials at the extremes of the integer ranges (every weight byte 0xff or 0x80, all activations
 *     +1 or -1, so that they quantize to +-127): the AVX2 kernels add up to eight vpmaddubsw results
 *     in 16 bits, which only such inputs bring near the int16 limit.
 * Prints "no kernel" per type when the CPU has no GEMM kernel (memra_gemm_isa() = none).
 * The family chosen for the ISA quant-dot uses is checked. When MEMRA_CPU_ISA is not set, the test then
 * runs itself again with MEMRA_CPU_ISA=avx2 when the AVX-512 kernels ran (so the AVX2 kernels are
 * checked on such a CPU too, and `bench` reports both families), and with MEMRA_CPU_ISA=scalar (no
 * GEMM kernels then).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../gemm.h"
#include "../quant-dot.h"

static int failures = 0;
#define FAIL(...)                                                                                                      \
    do {                                                                                                               \
        fprintf(stderr, "FAIL: " __VA_ARGS__);                                                                         \
        fprintf(stderr, "\n");                                                                                         \
        failures++;                                                                                                    \
    } while (0)

static uint64_t state = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)(state >> 16);
}
static float uniform(void) { return (float)(next_u32() & 0xffffff) / 16777216.0f; }
static float normal(void) {
    const float u = uniform() + 1e-7f, v = uniform();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* f16 bits of a small positive value (exponent 2^-10 .. 2^-7) */
static uint16_t small_f16(void) { return (uint16_t)(((5 + next_u32() % 3) << 10) | (next_u32() & 0x3ff)); }

typedef struct {
    const char * name;
    int type, block_values, block_bytes;
    int f16_fields[2]; /* byte offsets of f16 scales in a block (-1: none) */
} type_info;

static const type_info TYPES[] = {
    { "q8_0", MEMRA_TYPE_Q8_0, 32, 34, { 0, -1 } },
    { "q4_0", MEMRA_TYPE_Q4_0, 32, 18, { 0, -1 } },
    { "q4_K", MEMRA_TYPE_Q4_K, 256, 144, { 0, 2 } },
    { "q5_K", MEMRA_TYPE_Q5_K, 256, 176, { 0, 2 } },
    { "q6_K", MEMRA_TYPE_Q6_K, 256, 210, { 208, -1 } },
    { "f16", MEMRA_TYPE_F16, 1, 2, { -1, -1 } },
    { "bf16", MEMRA_TYPE_BF16, 1, 2, { -1, -1 } },
};

static int is_float_type(const type_info * t) { return t->type == MEMRA_TYPE_F16 || t->type == MEMRA_TYPE_BF16; }

/* Weight rows: random bytes (fill < 0) or every byte = fill, with small finite f16 scales. */
static void fill_rows(const type_info * t, uint8_t * w, int rows, size_t stride, int64_t n, int fill) {
    for (int r = 0; r < rows; r++) {
        uint8_t * row = w + r * stride;
        if (is_float_type(t)) {
            /* f16 / bf16: normal values (fill 0xff would be NaNs), largest with fill >= 0 */
            float * values = malloc((size_t)n * sizeof(float));
            for (int64_t i = 0; i < n; i++) values[i] = normal() * (fill >= 0 ? 1000.0f : 1.0f);
            memra_quantize_activation_row(t->type, values, row, n); /* the f16/bf16 rounding */
            free(values);
            continue;
        }
        for (size_t i = 0; i < stride; i++) row[i] = fill < 0 ? (uint8_t)next_u32() : (uint8_t)fill;
        for (int64_t b = 0; b < n / t->block_values; b++) {
            for (int f = 0; f < 2; f++) {
                if (t->f16_fields[f] < 0) continue;
                const uint16_t h = small_f16();
                memcpy(row + b * t->block_bytes + t->f16_fields[f], &h, 2);
            }
        }
    }
}

static void random_rows(const type_info * t, uint8_t * w, int rows, size_t stride, int64_t n) { fill_rows(t, w, rows, stride, n, -1); }

static void check_type(const type_info * t) {
    static const int64_t LENGTHS[] = { 256, 512, 1280, 3072 };
    int checked = 0;
    double worst = 0.0;
    for (size_t li = 0; li < sizeof LENGTHS / sizeof LENGTHS[0]; li++) {
        const int64_t n = LENGTHS[li];
        const size_t packed = memra_gemm_packed_row_bytes(t->type, n);
        if (packed == 0) continue;
        const size_t row_bytes = memra_row_bytes(t->type, n);
        const size_t w_stride = row_bytes + 64, a_stride = packed + 128;
        const int act_type = memra_dot_activation_type(t->type);
        const size_t act_bytes = memra_row_bytes(act_type, n);
        uint8_t * w = malloc(4 * w_stride);
        uint8_t * a = malloc(4 * a_stride);
        uint8_t * converted = malloc(4 * act_bytes);
        float * x = malloc(4 * n * sizeof(float));
        uint8_t * unpacked = malloc(memra_gemm_unpacked_bytes(t->type, n) + 1);
        for (int trial = 0; trial < 5; trial++) {
            /* trials 3, 4: the extremes (largest codes / -128 weights and scales, activations +-127) */
            fill_rows(t, w, 4, w_stride, n, trial == 3 ? 0xff : trial == 4 ? 0x80 : -1);
            for (int64_t i = 0; i < 4 * n; i++) x[i] = trial == 3 ? 1.0f : trial == 4 ? -1.0f : normal() * (trial == 2 ? 50.0f : 1.0f);
            for (int c = 0; c < 4; c++) {
                memra_gemm_pack_row(t->type, x + c * n, a + c * a_stride, n);
                memra_quantize_activation_row(t->type, x + c * n, converted + c * act_bytes, n);
            }
            float expected[4][4];
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) expected[c][r] = memra_dot_row(t->type, n, w + r * w_stride, converted + c * act_bytes);
            /* magnitude scale of each output: the dot of |w| and |a| is not available generically, so the
             * bound uses the largest |expected| of the tile plus the row length */
            for (int wr = 1; wr <= MEMRA_GEMM_TILE_W; wr++) {
                for (int ar = 1; ar <= MEMRA_GEMM_TILE_A; ar++) {
                    float out[4 * 8], unpacked_out[4 * 8];
                    for (int i = 0; i < 32; i++) out[i] = unpacked_out[i] = NAN;
                    memra_gemm_tile(t->type, n, w, w_stride, wr, a, a_stride, ar, out, 8);
                    /* the unpacked route gives the same bits */
                    if (memra_gemm_unpacked_bytes(t->type, n) != 0) {
                        memra_gemm_unpack(t->type, n, w, w_stride, wr, unpacked);
                        memra_gemm_tile_unpacked(t->type, n, unpacked, wr, a, a_stride, ar, unpacked_out, 8);
                        if (memcmp(out, unpacked_out, sizeof out) != 0) FAIL("%s n=%lld tile %dx%d: unpacked tile differs from the tile", t->name, (long long)n, wr, ar);
                    }
                    for (int c = 0; c < 4; c++) {
                        for (int r = 0; r < 8; r++) {
                            const float got = out[c * 8 + r];
                            const int inside = c < ar && r < wr;
                            if (!inside) {
                                if (!isnan(got)) FAIL("%s n=%lld tile %dx%d wrote outside the tile at [%d][%d]", t->name, (long long)n, wr, ar, c, r);
                                continue;
                            }
                            double scale = 0.0;
                            for (int k = 0; k < 4; k++)
                                for (int j = 0; j < 4; j++) scale = fmax(scale, fabs(expected[k][j]));
                            const double error = fabs((double)got - (double)expected[c][r]);
                            const double bound = 1e-5 * (scale + 1e-30) * sqrt((double)n / 32.0);
                            if (!(error <= bound)) {
                                FAIL("%s n=%lld tile %dx%d [%d][%d]: gemm %.9g, dot %.9g (error %.3g > %.3g)", t->name, (long long)n, wr, ar, c, r, got,
                                     expected[c][r], error, bound);
                            }
                            if (scale > 0) worst = fmax(worst, error / scale);
                            checked++;
                        }
                    }
                }
            }
        }
        free(w);
        free(a);
        free(converted);
        free(x);
        free(unpacked);
    }
    if (checked == 0) {
        printf("gemm %-5s: no kernel on this CPU\n", t->name);
    } else {
        printf("gemm %-5s: %s (%d outputs, worst |err| / tile max %.1e)\n", t->name, failures ? "FAILED" : "ok", checked, worst);
    }
}

/* Single-thread throughput on an L2-resident problem (CPU time of this thread, so that other load on
 * the machine does not skew it): 256 weight rows x 64 activation rows x n, GEMM tiles vs four-row dot
 * products. */
static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int bench(void) {
    enum { W = 256, A = 64 };
    const int64_t n = 1024;
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++) {
        const type_info * t = &TYPES[i];
        const size_t packed = memra_gemm_packed_row_bytes(t->type, n);
        const size_t row_bytes = memra_row_bytes(t->type, n), act_bytes = memra_row_bytes(memra_dot_activation_type(t->type), n);
        uint8_t * w = malloc(W * row_bytes);
        uint8_t * a = malloc(A * (packed ? packed : 1));
        uint8_t * converted = malloc(A * act_bytes);
        float * x = malloc(A * n * sizeof(float));
        float * out = malloc(W * A * sizeof(float));
        random_rows(t, w, W, row_bytes, n);
        for (int64_t k = 0; k < A * n; k++) x[k] = normal();
        for (int c = 0; c < A; c++) {
            if (packed) memra_gemm_pack_row(t->type, x + c * n, a + c * packed, n);
            memra_quantize_activation_row(t->type, x + c * n, converted + c * act_bytes, n);
        }
        double best_gemm = 1e9, best_dot = 1e9, best_unpacked = 1e9;
        uint8_t * unpacked = memra_gemm_unpacked_bytes(t->type, n) ? malloc(memra_gemm_unpacked_bytes(t->type, n)) : NULL;
        for (int rep = 0; rep < 5; rep++) {
            double start = thread_seconds();
            if (packed) {
                for (int r = 0; r < W; r += 4)
                    for (int c = 0; c < A; c += 4) memra_gemm_tile(t->type, n, w + r * row_bytes, row_bytes, 4, a + c * packed, packed, 4, out + c * W + r, W);
                best_gemm = fmin(best_gemm, thread_seconds() - start);
            }
            if (unpacked) {
                double start = thread_seconds();
                for (int r = 0; r < W; r += 4) {
                    memra_gemm_unpack(t->type, n, w + r * row_bytes, row_bytes, 4, unpacked);
                    for (int c = 0; c < A; c += 4) memra_gemm_tile_unpacked(t->type, n, unpacked, 4, a + c * packed, packed, 4, out + c * W + r, W);
                }
                best_unpacked = fmin(best_unpacked, thread_seconds() - start);
            }
            start = thread_seconds();
            for (int r = 0; r < W; r += 4)
                for (int c = 0; c < A; c++) memra_dot_rows4(t->type, n, w + r * row_bytes, row_bytes, converted + c * act_bytes, out + c * W + r);
            best_dot = fmin(best_dot, thread_seconds() - start);
        }
        const double macs = (double)W * A * n;
        printf("%-5s dot rows4 %6.1f GMAC/s", t->name, macs / best_dot * 1e-9);
        if (packed) printf("   gemm %6.1f GMAC/s (%.2fx)", macs / best_gemm * 1e-9, best_dot / best_gemm);
        if (unpacked) printf("   unpacked once per 64 rows %6.1f GMAC/s (%.2fx)", macs / best_unpacked * 1e-9, best_dot / best_unpacked);
        printf("\n");
        free(w); free(a); free(converted); free(x); free(out); free(unpacked);
    }
    return 0;
}

/* This program again with MEMRA_CPU_ISA=isa; its exit status. */
static int run_again(char ** argv, const char * isa) {
    printf("\n== again with MEMRA_CPU_ISA=%s\n", isa);
    fflush(stdout);
    const pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        setenv("MEMRA_CPU_ISA", isa, 1);
        execv(argv[0], argv);
        perror("execv");
        _exit(127);
    }
    int status = 0;
    if (waitpid(child, &status, 0) < 0) {
        perror("waitpid");
        return 1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* When no ISA was forced: when the AVX-512 kernels ran, again with the AVX2 kernels (which such a CPU
 * runs too); unless only benchmarking, again with the scalar dot products (no GEMM then). 0 when all
 * of those passed. */
static int run_other_families(char ** argv, int bench_only) {
    if (getenv("MEMRA_CPU_ISA") != NULL) return 0;
    int status = 0;
    if (strcmp(memra_gemm_isa(), "avx512vbmi") == 0) status |= run_again(argv, "avx2");
    if (!bench_only) status |= run_again(argv, "scalar");
    return status;
}

/* The family memra_gemm_isa() must report for the ISA quant-dot chose (x86). */
static void check_family(void) {
    const char * dot = memra_dot_isa(), * gemm = memra_gemm_isa();
    if (strcmp(dot, "scalar") == 0 && strcmp(gemm, "none") != 0) FAIL("memra_dot_isa() = scalar but memra_gemm_isa() = %s", gemm);
    if (strcmp(dot, "avx2") == 0 && strcmp(gemm, "avx2") != 0 && getenv("MEMRA_GEMM") == NULL)
        FAIL("memra_dot_isa() = avx2 but memra_gemm_isa() = %s", gemm);
}

int main(int argc, char ** argv) {
    if (argc > 1 && strcmp(argv[1], "bench") == 0) {
        printf("gemm kernels: %s\n", memra_gemm_isa());
        bench();
        return run_other_families(argv, 1);
    }
    printf("gemm kernels: %s (dot products: %s)\n", memra_gemm_isa(), memra_dot_isa());
    check_family();
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++) check_type(&TYPES[i]);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("gemm checks passed\n");
    return run_other_families(argv, 0);
}
