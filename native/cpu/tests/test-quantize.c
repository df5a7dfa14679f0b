/*
 * Tests for native/cpu/quantize.c and quantize-iq3.c: memra_quantize_row with and without an
 * importance matrix. The bytes themselves are checked against ggml's goldens through @memra/gguf's
 * TypeScript quantizers (packages/gguf/src/quant/quantize-importance.test.ts,
 * packages/cpu-ffi/src/native-quantizer.test.ts); this checks what those cannot:
 *   - that every path of the code runs clean under AddressSanitizer and UBSan (./run.sh asan), the
 *     lane searches' padding of a row's last blocks among them (rows of 25 blocks of 32);
 *   - structure: the same input gives the same bytes whatever the order of the rows, without importance
 *     rows of any length give the same bytes, the importance changes them (but for q8_0, which ignores it);
 *   - a digest of all the bytes, one line per type: ./run.sh compares those of the AVX2 lane searches
 *     (the default here) and of the portable ones (MEMRA_CPU_ISA=scalar), which must agree bit for bit.
 *
 *   test-quantize          run the checks, print the digests; exit 1 on any failure
 */
#define _POSIX_C_SOURCE 200809L
#include "../cpu-internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define FAIL(...) do { failures++; if (failures <= 40) { fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); } } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double rng_unit(void) { return (double)(rng_u64() >> 11) * 0x1p-53; }
static float rng_normal(void) {
    const double u = rng_unit() + 1e-300, v = rng_unit();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static uint64_t fnv1a(const uint8_t * p, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static const struct { int type; const char * name; } TYPES[] = {
    {MEMRA_TYPE_Q4_0, "q4_0"}, {MEMRA_TYPE_Q4_1, "q4_1"}, {MEMRA_TYPE_Q5_0, "q5_0"}, {MEMRA_TYPE_Q5_1, "q5_1"}, {MEMRA_TYPE_Q8_0, "q8_0"},
    {MEMRA_TYPE_Q2_K, "q2_K"}, {MEMRA_TYPE_Q3_K, "q3_K"}, {MEMRA_TYPE_Q4_K, "q4_K"}, {MEMRA_TYPE_Q5_K, "q5_K"}, {MEMRA_TYPE_Q6_K, "q6_K"},
    {MEMRA_TYPE_IQ4_NL, "iq4_nl"}, {MEMRA_TYPE_IQ4_XS, "iq4_xs"}, {MEMRA_TYPE_IQ3_S, "iq3_s"}, {MEMRA_TYPE_IQ3_XXS, "iq3_xxs"},
};
#define N_TYPES ((int)(sizeof(TYPES) / sizeof(TYPES[0])))
#define ROWS 3

/* Rows of bell-shaped values, a scale per 32 from 2^-8 to 2^7, an all-zero block, a tiny and a large one;
 * importance from 2^-10 to 2^10 with zeros (every 53rd and a whole block). */
static void make_input(int64_t row_length, float * x, float * importance) {
    for (int64_t i = 0; i < ROWS * row_length; i += 32) {
        const float scale = ldexpf(1.0f, (int)(rng_u64() % 16) - 8);
        for (int j = 0; j < 32; j++) x[i + j] = scale * rng_normal();
    }
    memset(x + 32, 0, 32 * sizeof(float));
    for (int j = 0; j < 32; j++) x[row_length + 64 + j] *= 0x1p-40f;
    for (int j = 0; j < 32; j++) x[2 * row_length + 96 + j] *= 0x1p12f;
    for (int64_t i = 0; i < row_length; i++) {
        const float r = rng_normal();
        importance[i] = (i % 53 == 0 || (i >= 128 && i < 160)) ? 0 : r * r * ldexpf(1.0f, (int)(rng_u64() % 21) - 10);
    }
}

static uint64_t check_type(int t) {
    const int type = TYPES[t].type;
    const char * name = TYPES[t].name;
    const int64_t block = memra_quantize_block_values(type);
    const size_t block_bytes = memra_quantize_block_bytes(type);
    if (block == 0 || block_bytes == 0) {
        FAIL("%s: not quantizable", name);
        return 0;
    }
    const int64_t row_length = block == 32 ? 25 * 32 : 3 * 256;
    const size_t row_bytes = (size_t)(row_length / block) * block_bytes;
    float * x = malloc(ROWS * (size_t)row_length * sizeof(float));
    float * importance = malloc((size_t)row_length * sizeof(float));
    uint8_t * weighted = malloc(ROWS * row_bytes);
    uint8_t * plain = malloc(ROWS * row_bytes);
    uint8_t * again = malloc(ROWS * row_bytes);
    make_input(row_length, x, importance);
    for (int r = 0; r < ROWS; r++) {
        memra_quantize_row(type, x + r * row_length, weighted + r * row_bytes, row_length, importance);
        memra_quantize_row(type, x + r * row_length, plain + r * row_bytes, row_length, NULL);
    }
    /* the same again, the first row written after the others */
    for (int r = ROWS - 1; r >= 0; r--) memra_quantize_row(type, x + r * row_length, again + r * row_bytes, row_length, importance);
    if (memcmp(weighted, again, ROWS * row_bytes) != 0) FAIL("%s: weighted rows differ when quantized again", name);
    /* without importance the row length does not matter: all rows as one */
    memra_quantize_row(type, x, again, ROWS * row_length, NULL);
    if (memcmp(plain, again, ROWS * row_bytes) != 0) FAIL("%s: rows without importance differ from one long row", name);
    const int differs = memcmp(weighted, plain, ROWS * row_bytes) != 0;
    if (type == MEMRA_TYPE_Q8_0 ? differs : !differs) FAIL("%s: the importance %s the bytes", name, differs ? "changes" : "does not change");
    const uint64_t digest = fnv1a(plain, ROWS * row_bytes, fnv1a(weighted, ROWS * row_bytes, 0xcbf29ce484222325ULL));
    free(x);
    free(importance);
    free(weighted);
    free(plain);
    free(again);
    return digest;
}

int main(void) {
    for (int t = 0; t < N_TYPES; t++) {
        const int before = failures;
        const uint64_t digest = check_type(t);
        printf("%-8s %016llx %s\n", TYPES[t].name, (unsigned long long)digest, failures == before ? "ok" : "FAILED");
    }
    return failures ? 1 : 0;
}
