/*
 * iq2_xxs, iq2_xs and iq2_s quantization with an importance matrix (iq2_s also without), byte for
 * byte as ggml's quantize_iq2_xxs / _xs / _s (ggml-quants.c, quantize_row_iq2_*_impl), and the
 * search tables they and quantize-iq1.c share (iq2xs_init_impl). The same arithmetic as
 * packages/gguf/src/quant/quantize-iq2.ts and iq2-grid-tables.ts, which describe the method.
 *
 * Tables, per grid (256: iq2_xxs, 512: iq2_xs, 1024: iq2_s, 2048: iq1_s and iq1_m), built once on
 * first use (pthread_once): each entry's 8 levels (0..2), a map from every 16-bit level pattern to
 * its grid index or its neighbour list, and the lists (the entries at the 2, 2, 1 or 3 smallest
 * distinct squared distances, in (distance, index) order) for the 3^8 patterns of levels 0..2 that
 * are not entries: about 2.4 MB for the four grids (1.4 MB of lists, 256 KB of map each).
 *
 * Same float rules as quantize.c: one binary32 operation at a time in ggml's order, no FMA
 * contraction, no fast math, sequential sums.
 */
#if defined(__FAST_MATH__)
#error "quantize-iq2.c must be compiled without -ffast-math: its results must match ggml's bit for bit"
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

#define GROUP_MAX_EPS_IQ2_S 1e-8f
#define PATTERNS 65536 /* 8 levels of 2 bits */

enum { GRID_256, GRID_512, GRID_1024, GRID_2048, GRIDS };

static memra_iq_grid_tables grid_tables[GRIDS];
static pthread_once_t grid_once[GRIDS] = { PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT };

/* The level (0..2) of value i of a grid entry. */
static int entry_level(int grid, int entry, int i) {
    if (grid == GRID_2048) return (int)(int8_t)((memra_iq1s_grid[entry] >> (8 * i)) & 0xff) + 1;
    const uint64_t * values = grid == GRID_256 ? memra_iq2xxs_grid : grid == GRID_512 ? memra_iq2xs_grid : memra_iq2s_grid;
    const int value = (int)((values[entry] >> (8 * i)) & 0xff);
    return value == 8 ? 0 : value == 25 ? 1 : 2;
}

/* The neighbour list of level pattern u (its `nearest` smallest distinct distances, in (distance,
 * index) order) to out when not NULL; returns its length. */
static int nearest_entries(const uint8_t * levels, int grid_size, int nearest, int u, uint8_t * distance, uint16_t * out) {
    uint8_t present[33] = { 0 }; /* distances are 4 * d, d = Σ (l - l')² <= 32 */
    for (int j = 0; j < grid_size; j++) {
        int d = 0;
        for (int i = 0; i < 8; i++) {
            const int diff = levels[8 * j + i] - ((u >> (2 * i)) & 3);
            d += diff * diff;
        }
        distance[j] = (uint8_t)d;
        present[d] = 1;
    }
    int n = 0, taken = 0;
    for (int d = 0; d <= 32 && taken < nearest; d++) {
        if (!present[d]) continue;
        taken++;
        for (int j = 0; j < grid_size; j++) {
            if (distance[j] != d) continue;
            if (out) out[n] = (uint16_t)j;
            n++;
        }
    }
    return n;
}

static int pattern_has_level_3(int u) {
    for (int i = 0; i < 8; i++) if (((u >> (2 * i)) & 3) == 3) return 1;
    return 0;
}

static void build_tables(int grid) {
    static const int sizes[GRIDS] = { 256, 512, 1024, 2048 };
    static const int nearest[GRIDS] = { 2, 2, 1, 3 };
    const int grid_size = sizes[grid];
    uint8_t * levels = malloc((size_t)grid_size * 8);
    int32_t * map = malloc(PATTERNS * sizeof(int32_t));
    uint8_t * distance = malloc((size_t)grid_size);
    uint16_t * neighbours = NULL;
    if (levels == NULL || map == NULL || distance == NULL) goto fail;
    for (int j = 0; j < grid_size; j++) for (int i = 0; i < 8; i++) levels[8 * j + i] = (uint8_t)entry_level(grid, j, i);
    for (int u = 0; u < PATTERNS; u++) map[u] = -1;
    for (int j = 0; j < grid_size; j++) {
        int u = 0;
        for (int i = 0; i < 8; i++) u |= levels[8 * j + i] << (2 * i);
        map[u] = j;
    }
    size_t total = 0;
    for (int u = 0; u < PATTERNS; u++) {
        if (map[u] >= 0 || pattern_has_level_3(u)) continue;
        total += 1 + (size_t)nearest_entries(levels, grid_size, nearest[grid], u, distance, NULL);
    }
    neighbours = malloc(total * sizeof(uint16_t));
    if (neighbours == NULL) goto fail;
    size_t offset = 0;
    for (int u = 0; u < PATTERNS; u++) {
        if (map[u] >= 0 || pattern_has_level_3(u)) continue;
        const int n = nearest_entries(levels, grid_size, nearest[grid], u, distance, neighbours + offset + 1);
        neighbours[offset] = (uint16_t)n;
        map[u] = -(int32_t)offset - 1;
        offset += 1 + (size_t)n;
    }
    free(distance);
    grid_tables[grid] = (memra_iq_grid_tables){ grid_size, levels, map, neighbours };
    return;
fail:
    free(levels);
    free(map);
    free(distance);
    free(neighbours);
}

static void build_256(void) { build_tables(GRID_256); }
static void build_512(void) { build_tables(GRID_512); }
static void build_1024(void) { build_tables(GRID_1024); }
static void build_2048(void) { build_tables(GRID_2048); }

const memra_iq_grid_tables * memra_iq2_grid_tables_get(int grid_size) {
    static void (*const build[GRIDS])(void) = { build_256, build_512, build_1024, build_2048 };
    const int grid = grid_size == 256 ? GRID_256 : grid_size == 512 ? GRID_512 : grid_size == 1024 ? GRID_1024 : grid_size == 2048 ? GRID_2048 : -1;
    if (grid < 0) return NULL;
    pthread_once(&grid_once[grid], build[grid]);
    return grid_tables[grid].neighbours != NULL ? &grid_tables[grid] : NULL;
}

int memra_quantize_iq2_ready(int type) {
    switch (type) {
        case MEMRA_TYPE_IQ2_XXS: return memra_iq2_grid_tables_get(256) != NULL;
        case MEMRA_TYPE_IQ2_XS: return memra_iq2_grid_tables_get(512) != NULL;
        case MEMRA_TYPE_IQ2_S: return memra_iq2_grid_tables_get(1024) != NULL;
        case MEMRA_TYPE_IQ1_S: case MEMRA_TYPE_IQ1_M: return memra_iq2_grid_tables_get(2048) != NULL;
        default: return 0;
    }
}

/* The scale search of iq2_xs and iq2_s: (5 + 0.1 is) / max for |is| <= 9, only the groups off the grid refitted. */
static const grid_scale_search search_16 = { .group = 8, .candidates = 9, .base = 5, .step = 0.1f, .refit_all = false };

void memra_quantize_iq2_xxs_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    const memra_iq_grid_tables * t = memra_iq2_grid_tables_get(256);
    for (int64_t ibl = 0; ibl < n_per_row / QK_K; ibl++, y += 66) {
        const float * xbl = x + QK_K * ibl;
        float scales[8], weight[32], waux[32], xval[32];
        int8_t L[32], Laux[32];
        uint8_t block_signs[4];
        uint32_t q2[16] = { 0 };
        memset(y, 0, 66);
        float max_scale = 0;
        const float sigma2 = sum_of_squares(QK_K, xbl) / QK_K;
        for (int ib = 0; ib < 8; ib++) {
            const float * xb = xbl + 32 * ib;
            importance_weights(32, xb, importance + QK_K * ibl + 32 * ib, sigma2, weight);
            square_roots(32, weight, waux);
            even_magnitudes_and_signs(32, xb, weight, xval, block_signs);
            const float max = largest(32, xval);
            if (max < GROUP_MAX_EPS) {
                scales[ib] = 0;
                continue;
            }
            float scale = memra_search_positive_scale(32, 4, xval, (uint8_t *)L, weight);
            const float eff_max = scale * 3;
            if (eff_max <= 0) {
                scales[ib] = 0;
                continue;
            }
            float best = 0, sumqx, sumq2;
            for (int is = -6; is <= 6; is++) {
                const float id = (5 + is * 0.1f) / eff_max;
                const float this_scale = 1 / id;
                for (int k = 0; k < 4; k++) grid_levels(t, 8, id, this_scale, xval + 8 * k, waux + 8 * k, Laux + 8 * k);
                weighted_fit(32, weight, xval, Laux, &sumqx, &sumq2);
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                    scale = sumqx / sumq2;
                    best = scale * sumqx;
                    memcpy(L, Laux, 32);
                }
            }
            if (scale > 0) {
                const float id = 1 / scale;
                for (int k = 0; k < 4; k++) grid_levels(t, 8, id, scale, xval + 8 * k, waux + 8 * k, L + 8 * k);
                weighted_fit(32, weight, xval, L, &sumqx, &sumq2);
                if (sumq2 > 0) scale = sumqx / sumq2;
            }
            scale = positive_scale(scale, 4, 127, block_signs);
            for (int k = 0; k < 4; k++) {
                q2[2 * ib + 0] |= (uint32_t)grid_index(t, 8, L + 8 * k) << (8 * k);
                q2[2 * ib + 1] |= (uint32_t)block_signs[k] << (7 * k);
            }
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 31;
        put_u16(y, memra_f32_to_f16(d));
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) q2[2 * ib + 1] |= (uint32_t)scale_code(id, scales[ib], 15) << 28;
        for (int j = 0; j < 16; j++) put_u32(y + 2 + 4 * j, q2[j]);
    }
}

/* iq2_xs (`iq2_s` false; 512-entry grid; 74 bytes: f16 d | per 8 values a u16 of a 9-bit grid index and 7
 * sign bits | 4-bit scales) and iq2_s (1024 entries; 82 bytes: f16 d | grid index low bytes[32] | sign
 * bytes[32] | 2 high index bits per 8 values[8] | 4-bit scales): the same search per group of 16. */
static void quantize_groups_of_16(bool iq2_s, const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    const memra_iq_grid_tables * t = memra_iq2_grid_tables_get(iq2_s ? 1024 : 512);
    const int bytes = iq2_s ? 82 : 74;
    for (int64_t ibl = 0; ibl < n_per_row / QK_K; ibl++, y += bytes) {
        const float * xbl = x + QK_K * ibl;
        float scales[16], weight[16], waux[16], xval[16];
        int8_t L[16];
        uint8_t block_signs[2];
        memset(y, 0, (size_t)bytes);
        float max_scale = 0;
        const float sigma2 = iq2_s ? super_block_sigma2(xbl) : sum_of_squares(QK_K, xbl) / QK_K;
        for (int ib = 0; ib < 16; ib++) {
            const float * xb = xbl + 16 * ib;
            if (importance) importance_weights(16, xb, importance + QK_K * ibl + 16 * ib, sigma2, weight);
            else for (int i = 0; i < 16; i++) weight[i] = 0.25f * sigma2 + xb[i] * xb[i]; /* iq2_s only */
            square_roots(16, weight, waux);
            if (iq2_s) magnitudes_and_signs(16, xb, xval, block_signs);
            else even_magnitudes_and_signs(16, xb, weight, xval, block_signs);
            const float max = largest(16, xval);
            if (max < (iq2_s ? GROUP_MAX_EPS_IQ2_S : GROUP_MAX_EPS)) {
                scales[ib] = 0;
                continue;
            }
            const float scale = positive_scale(search_grid_scale(t, &search_16, 16, max, weight, waux, xval, L), 2, iq2_s ? 255 : 127, block_signs);
            for (int k = 0; k < 2; k++) {
                const int entry = grid_index(t, 8, L + 8 * k);
                const int i8 = 2 * ib + k;
                if (iq2_s) {
                    y[2 + i8] = (uint8_t)(entry & 255);
                    y[66 + i8 / 4] |= (uint8_t)((entry >> 8) << (2 * (i8 % 4)));
                    y[34 + i8] = block_signs[k];
                } else {
                    put_u16(y + 2 + 2 * i8, (uint16_t)(entry | (block_signs[k] << 9)));
                }
            }
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) {
            if (!iq2_s) memset(y + 2, 0, 64);
            continue;
        }
        const float d = max_scale / 31;
        put_u16(y, memra_f32_to_f16(iq2_s ? d * 0.9875f : d));
        const float id = 1 / d;
        for (int ib = 0; ib < 16; ib += 2) y[bytes - 8 + ib / 2] = (uint8_t)(scale_code(id, scales[ib], 15) | (scale_code(id, scales[ib + 1], 15) << 4));
    }
}

void memra_quantize_iq2_xs_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    quantize_groups_of_16(false, x, y, n_per_row, importance);
}

void memra_quantize_iq2_s_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    quantize_groups_of_16(true, x, y, n_per_row, importance);
}
