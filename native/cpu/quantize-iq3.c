/*
 * iq3_xxs and iq3_s quantization, byte for byte as ggml's quantize_iq3_xxs and quantize_iq3_s (the
 * quantizers llama-quantize runs for IQ3_XXS, IQ3_S and IQ3_M files; ggml-quants.c,
 * quantize_row_iq3_xxs_impl with the 256-entry grid, quantize_row_iq3_s_impl with the 512-entry one,
 * and iq3xs_init_impl of both), and as @memra/gguf's quantize-iq3.ts.
 *
 * Each 32-value sub-block: its magnitudes are searched over candidate scales (31 for iq3_xxs, 19 for
 * iq3_s); every group of 4 levels (0..7 each, value 2l+1) that is not a grid point is replaced by the
 * best of its nearest grid points (the grid points at the two (256) or three (512) smallest squared
 * distances, ties in grid order), the scale with the best weighted fit is kept and refitted once; then
 * the super-block's f16 scale and 4-bit sub-block scales. Weights are x², or with an importance matrix
 * importance * sqrt(sigma2 + x²), sigma2 = 2 * mean x² over the super-block. iq3_xxs keeps 7 sign bits
 * per 8 values: an odd count of negatives flips the sign of the value of least w x².
 *
 * Same float rules as quantize.c: one binary32 operation at a time in ggml's order, no FMA
 * contraction, no fast math, sequential sums.
 */
#if defined(__FAST_MATH__)
#error "quantize-iq3.c must be compiled without -ffast-math: its results must match ggml's bit for bit"
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-internal.h"
#include "quantize-common.h"
#include "../common/iq-grids.h"

#define IQ3_MAP 4096 /* 4 levels of 3 bits */
#define IQ3_MAX_GRID 512
#define IQ3XXS_GROUP_MAX_EPS 1e-8f /* ggml's GROUP_MAX_EPS_IQ3_XXS */

/* One grid's tables (iq3xs_init_impl). map[u] >= 0: the grid index of level pattern u; < 0:
 * -(offset + 1) of u's neighbour list in `neighbours` (a count, then that many grid indices in
 * (distance, index) order). */
typedef struct {
    int size;      /* grid entries: 256 (iq3_xxs) or 512 (iq3_s) */
    int distances; /* the nearest distinct distances whose grid points are neighbours: 2 or 3 */
    uint8_t levels[IQ3_MAX_GRID * 4]; /* level (0..7) of value i of entry j at 4 j + i */
    int32_t map[IQ3_MAP];
    memra_iq_grid_tables tables; /* the above as the searches read them, once built (neighbours NULL until then) */
    pthread_once_t once;
} iq3_grid;

static iq3_grid iq3xxs_grid = { .size = 256, .distances = 2, .once = PTHREAD_ONCE_INIT };
static iq3_grid iq3s_grid = { .size = 512, .distances = 3, .once = PTHREAD_ONCE_INIT };

/* Pattern u's squared distances to every grid entry; the entries at the grid's `distances` smallest
 * distinct distances, in (distance, index) order, to out (when not NULL). Returns their count. */
static int nearest_entries(const iq3_grid * g, int u, uint16_t * out) {
    int distance[IQ3_MAX_GRID];
    int smallest[3];
    int found = 0;
    for (int j = 0; j < g->size; j++) {
        int d2 = 0;
        for (int k = 0; k < 4; k++) {
            const int diff = 2 * (g->levels[4 * j + k] - ((u >> (3 * k)) & 7));
            d2 += diff * diff;
        }
        distance[j] = d2;
        /* keep the g->distances smallest distinct distances, ascending */
        int at = 0;
        while (at < found && smallest[at] < d2) at++;
        if (at < found && smallest[at] == d2) continue;
        if (at >= g->distances) continue;
        for (int m = (found < g->distances ? found : g->distances - 1); m > at; m--) smallest[m] = smallest[m - 1];
        smallest[at] = d2;
        if (found < g->distances) found++;
    }
    int n = 0;
    for (int level = 0; level < found; level++) {
        for (int j = 0; j < g->size; j++) {
            if (distance[j] != smallest[level]) continue;
            if (out) out[n] = (uint16_t)j;
            n++;
        }
    }
    return n;
}

/* The grid's levels from the dequantization grids: iq3s values are 2l + 1; iq3xxs values are
 * 8l + 4 (62 for l = 7), so l = value >> 3. */
static void iq3_init(iq3_grid * g) {
    for (int j = 0; j < g->size; j++) {
        for (int i = 0; i < 4; i++) {
            const int value = g->size == 512 ? (int)((memra_iq3s_grid[j] >> (8 * i)) & 0xff) : (int)((memra_iq3xxs_grid[j] >> (8 * i)) & 0xff);
            g->levels[4 * j + i] = (uint8_t)(g->size == 512 ? (value - 1) / 2 : value >> 3);
        }
    }
    for (int u = 0; u < IQ3_MAP; u++) g->map[u] = -1;
    for (int j = 0; j < g->size; j++) {
        int u = 0;
        for (int k = 0; k < 4; k++) u |= g->levels[4 * j + k] << (3 * k);
        g->map[u] = j;
    }
    size_t total = 0;
    for (int u = 0; u < IQ3_MAP; u++) if (g->map[u] < 0) total += 1 + (size_t)nearest_entries(g, u, NULL);
    uint16_t * neighbours = (uint16_t *)malloc(total * sizeof(uint16_t));
    if (neighbours == NULL) return;
    size_t offset = 0;
    for (int u = 0; u < IQ3_MAP; u++) {
        if (g->map[u] >= 0) continue;
        const int n = nearest_entries(g, u, neighbours + offset + 1);
        neighbours[offset] = (uint16_t)n;
        g->map[u] = -(int)offset - 1;
        offset += 1 + (size_t)n;
    }
    g->tables = (memra_iq_grid_tables){ g->size, g->levels, g->map, neighbours };
}

static void iq3xxs_init(void) { iq3_init(&iq3xxs_grid); }
static void iq3s_init(void) { iq3_init(&iq3s_grid); }

int memra_quantize_iq3_ready(int type) {
    if (type == MEMRA_TYPE_IQ3_XXS) {
        pthread_once(&iq3xxs_grid.once, iq3xxs_init);
        return iq3xxs_grid.tables.neighbours != NULL;
    }
    pthread_once(&iq3s_grid.once, iq3s_init);
    return iq3s_grid.tables.neighbours != NULL;
}

/* The scale searches: (15 + 0.2 is) / max for |is| <= 15 (iq3_xxs) or 9 (iq3_s); iq3_xxs refits only the
 * groups that were off the grid, iq3_s all of them. */
static const grid_scale_search iq3xxs_search = { .group = 4, .candidates = 15, .base = 15, .step = 0.2f, .refit_all = false };
static const grid_scale_search iq3s_search = { .group = 4, .candidates = 9, .base = 15, .step = 0.2f, .refit_all = true };

/* The sub-block at xb: its weights (x², or importance * sqrt(sigma2 + x²)) and their roots, its magnitudes
 * and signs (iq3_xxs: `even`, 7 bits per 8). Returns the largest magnitude. */
static float prepare_sub_block(const float * xb, const float * importance, float sigma2, bool even, float * weight, float * waux, float * xval,
                               uint8_t * block_signs) {
    group_weights(32, xb, importance, sigma2, weight);
    square_roots(32, weight, waux);
    if (even) even_magnitudes_and_signs(32, xb, weight, xval, block_signs);
    else magnitudes_and_signs(32, xb, xval, block_signs);
    return largest(32, xval);
}

/* One block of 256 values → 98 bytes of iq3_xxs: d, grid indices[64], per 32 values a u32 of 4 × 7
 * sign bits and a 4-bit scale. importance: the block's 256 weights, or NULL. */
void memra_quantize_iq3_xxs(const float * x, uint8_t * y, const float * importance) {
    const memra_iq_grid_tables * t = &iq3xxs_grid.tables;
    memset(y, 0, 98);
    uint32_t signs_and_scales[8] = {0};
    float scales[8], weight[32], waux[32], xval[32];
    int8_t L[32];
    float max_scale = 0;
    const float sigma2 = importance ? super_block_sigma2(x) : 0;
    for (int ib = 0; ib < 8; ib++) {
        uint8_t block_signs[4];
        const float max = prepare_sub_block(x + 32 * ib, importance ? importance + 32 * ib : NULL, sigma2, true, weight, waux, xval, block_signs);
        if (max < IQ3XXS_GROUP_MAX_EPS) {
            scales[ib] = 0; /* its grid indices and signs stay 0 */
            continue;
        }
        const float scale = positive_scale(search_grid_scale(t, &iq3xxs_search, 32, max, weight, waux, xval, L), 4, 127, block_signs);
        for (int k = 0; k < 8; k++) y[2 + 8 * ib + k] = (uint8_t)grid_index(t, 4, L + 4 * k);
        signs_and_scales[ib] = (uint32_t)block_signs[0] | ((uint32_t)block_signs[1] << 7) | ((uint32_t)block_signs[2] << 14) | ((uint32_t)block_signs[3] << 21);
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    if (!(max_scale != 0)) {
        memset(y, 0, 98);
        return;
    }
    const float d = max_scale / 31;
    put_u16(y, memra_f32_to_f16(d * 1.0125f));
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ib++) put_u32(y + 66 + 4 * ib, signs_and_scales[ib] | ((uint32_t)scale_code(id, scales[ib], 15) << 28));
}

/* One block of 256 values → 110 bytes of iq3_s. importance: the block's 256 weights, or NULL. */
void memra_quantize_iq3_s(const float * x, uint8_t * y, const float * importance) {
    const memra_iq_grid_tables * t = &iq3s_grid.tables;
    memset(y, 0, 110);
    uint8_t * qs = y + 2;
    uint8_t * qh = y + 66;
    uint8_t * signs = y + 74;
    float scales[8], weight[32], waux[32], xval[32];
    int8_t L[32];
    float max_scale = 0;
    const float sigma2 = importance ? super_block_sigma2(x) : 0;
    for (int ib = 0; ib < 8; ib++) {
        uint8_t block_signs[4];
        const float max = prepare_sub_block(x + 32 * ib, importance ? importance + 32 * ib : NULL, sigma2, false, weight, waux, xval, block_signs);
        if (!(max != 0)) {
            scales[ib] = 0;
            /* As ggml: an all-zero sub-block writes nothing and does not advance qs and signs, so
             * the next sub-block's indices and signs land in its place (qh is indexed by ib). */
            continue;
        }
        const float scale = positive_scale(search_grid_scale(t, &iq3s_search, 32, max, weight, waux, xval, L), 4, 0xff, block_signs);
        for (int k = 0; k < 8; k++) {
            const int entry = grid_index(t, 4, L + 4 * k);
            qs[k] = (uint8_t)(entry & 255);
            qh[(ib * 8 + k) / 8] |= (uint8_t)((entry >> 8) << ((ib * 8 + k) % 8));
        }
        qs += 8;
        memcpy(signs, block_signs, 4);
        signs += 4;
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    if (!(max_scale != 0)) return; /* d = +0 (memset) */
    const float d = max_scale / 31;
    put_u16(y, memra_f32_to_f16(d * 1.033f));
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ib += 2) y[106 + ib / 2] = (uint8_t)(scale_code(id, scales[ib], 15) | (scale_code(id, scales[ib + 1], 15) << 4));
}
