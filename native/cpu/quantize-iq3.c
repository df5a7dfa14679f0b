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
    int map[IQ3_MAP];
    uint16_t * neighbours;
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
    g->neighbours = neighbours;
}

static void iq3xxs_init(void) { iq3_init(&iq3xxs_grid); }
static void iq3s_init(void) { iq3_init(&iq3s_grid); }

int memra_quantize_iq3_ready(int type) {
    if (type == MEMRA_TYPE_IQ3_XXS) {
        pthread_once(&iq3xxs_grid.once, iq3xxs_init);
        return iq3xxs_grid.neighbours != NULL;
    }
    pthread_once(&iq3s_grid.once, iq3s_init);
    return iq3s_grid.neighbours != NULL;
}

static inline int nearest_int(float value) {
    const float shifted = value + 12582912.f;
    int bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

static inline int clamp_level(int l, int high) { return l < 0 ? 0 : l > high ? high : l; }

/* One sub-block's state (ggml's weight, waux, xval, L, Laux, is_on_grid arrays). */
typedef struct {
    float weight[32], waux[32], xval[32];
    int8_t L[32], Laux[32];
    bool on_grid[8], on_grid_aux[8];
} sub_block;

/* ggml's iq3_find_best_neighbour: the listed grid entry closest to xval/scale under the weights;
 * writes its levels to L and returns it. */
static int best_neighbour(const iq3_grid * g, const uint16_t * list, const float * xval, const float * weight, float scale, int8_t * L) {
    float best_d2 = FLT_MAX;
    int best = list[1];
    for (int j = 1; j <= list[0]; j++) {
        float d2 = 0;
        for (int i = 0; i < 4; i++) {
            const float q = (float)(2 * g->levels[4 * list[j] + i] + 1);
            const float diff = scale * q - xval[i];
            d2 += weight[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = list[j];
        }
    }
    for (int i = 0; i < 4; i++) L[i] = (int8_t)g->levels[4 * best + i];
    return best;
}

/* The levels of 4 values at scale 1/id (their nearest levels if a grid point, else the best
 * neighbour at `scale`) to L; returns whether the nearest levels were on the grid. */
static bool grid_entry(const iq3_grid * g, float id, float scale, const float * xval, const float * waux, int8_t * L) {
    int u = 0;
    for (int i = 0; i < 4; i++) {
        const int l = clamp_level(nearest_int(0.5f * (id * xval[i] - 1)), 7);
        L[i] = (int8_t)l;
        u |= l << (3 * i);
    }
    const int entry = g->map[u];
    if (entry >= 0) return true;
    best_neighbour(g, g->neighbours + (-entry - 1), xval, waux, scale, L);
    return false;
}

/* Σ w·x·q and Σ w·q² over the sub-block with levels L (q = 2l + 1), summed in order. */
static void weighted_fit(const sub_block * s, const int8_t * L, float * sumqx, float * sumq2) {
    float qx = 0, q2 = 0;
    for (int i = 0; i < 32; i++) {
        const float w = s->weight[i];
        const float q = (float)(2 * L[i] + 1);
        qx += w * s->xval[i] * q;
        q2 += w * q * q;
    }
    *sumqx = qx;
    *sumq2 = q2;
}

/* sigma2 of the weighted i-quants: 2 * the mean of x² over the super-block. */
static float super_block_sigma2(const float * x) {
    float sum = 0;
    for (int i = 0; i < 256; i++) sum += x[i] * x[i];
    return 2 * sum / 256;
}

/* The sub-block's weights (x², or importance * sqrt(sigma2 + x²)) and their square roots. */
static void sub_block_weights(sub_block * s, const float * xb, const float * importance, float sigma2) {
    if (importance) {
        for (int i = 0; i < 32; i++) s->weight[i] = importance[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    } else {
        for (int i = 0; i < 32; i++) s->weight[i] = xb[i] * xb[i];
    }
    for (int i = 0; i < 32; i++) s->waux[i] = sqrtf(s->weight[i]);
}

static float largest_magnitude(const sub_block * s) {
    float max = s->xval[0];
    for (int i = 1; i < 32; i++) max = max > s->xval[i] ? max : s->xval[i];
    return max;
}

/* The scale search of a prepared sub-block (max > 0): inverse scales (15 + 0.2 is) / max for |is| <=
 * candidates, the best weighted fit's levels to s->L, then if some group was off the grid one refit
 * with the off-grid groups (iq3_xxs) or all groups (iq3_s) moved to their grid entries at the best scale. */
static float search_sub_block(const iq3_grid * g, sub_block * s, float max, int candidates, bool refit_all_groups) {
    float best = 0;
    float scale = max / 15;
    for (int k = 0; k < 8; k++) s->on_grid[k] = !refit_all_groups; /* iq3_xxs starts on the grid, iq3_s off it */
    for (int is = -candidates; is <= candidates; is++) {
        const float id = (15 + (float)is * 0.2f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 8; k++) s->on_grid_aux[k] = grid_entry(g, id, this_scale, s->xval + 4 * k, s->waux + 4 * k, s->Laux + 4 * k);
        float sumqx, sumq2;
        weighted_fit(s, s->Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(s->L, s->Laux, sizeof s->L);
            memcpy(s->on_grid, s->on_grid_aux, sizeof s->on_grid);
        }
    }
    int off_grid = 0;
    for (int k = 0; k < 8; k++) off_grid += !s->on_grid[k];
    if (off_grid > 0 && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 8; k++) {
            if (refit_all_groups || !s->on_grid[k]) grid_entry(g, id, scale, s->xval + 4 * k, s->waux + 4 * k, s->L + 4 * k);
        }
        float sumqx, sumq2;
        weighted_fit(s, s->L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    return scale;
}

/* The grid index of group k of s->L (on the grid by construction). */
static int group_entry(const iq3_grid * g, const sub_block * s, int k) {
    int u = 0;
    for (int i = 0; i < 4; i++) u |= s->L[4 * k + i] << (3 * i);
    return g->map[u];
}

/* One block of 256 values → 98 bytes of iq3_xxs: d, grid indices[64], per 32 values a u32 of 4 × 7
 * sign bits and a 4-bit scale. importance: the block's 256 weights, or NULL. */
void memra_quantize_iq3_xxs(const float * x, uint8_t * y, const float * importance) {
    const iq3_grid * g = &iq3xxs_grid;
    memset(y, 0, 98);
    uint32_t signs_and_scales[8] = {0};
    float scales[8];
    float max_scale = 0;
    const float sigma2 = importance ? super_block_sigma2(x) : 0;
    for (int ib = 0; ib < 8; ib++) {
        const float * xb = x + 32 * ib;
        sub_block s;
        uint8_t block_signs[4];
        sub_block_weights(&s, xb, importance ? importance + 32 * ib : NULL, sigma2);
        for (int k = 0; k < 4; k++) {
            int flips = 0;
            uint8_t signs = 0;
            for (int i = 0; i < 8; i++) {
                if (xb[8 * k + i] >= 0) s.xval[8 * k + i] = xb[8 * k + i];
                else {
                    s.xval[8 * k + i] = -xb[8 * k + i];
                    flips++;
                    signs |= (uint8_t)(1 << i);
                }
            }
            if (flips % 2) {
                int least = 0;
                float min = s.weight[8 * k] * xb[8 * k] * xb[8 * k];
                for (int i = 1; i < 8; i++) {
                    const float ax = s.weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                    if (ax < min) {
                        min = ax;
                        least = i;
                    }
                }
                s.xval[8 * k + least] = -s.xval[8 * k + least];
                signs ^= (uint8_t)(1 << least);
            }
            block_signs[k] = signs & 127;
        }
        const float max = largest_magnitude(&s);
        memset(s.L, 0, sizeof s.L);
        if (max < IQ3XXS_GROUP_MAX_EPS) {
            scales[ib] = 0; /* its grid indices and signs stay 0 */
            continue;
        }
        float scale = search_sub_block(g, &s, max, 15, false);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 4; k++) block_signs[k] = (uint8_t)(~block_signs[k] & 127);
        }
        for (int k = 0; k < 8; k++) y[2 + 8 * ib + k] = (uint8_t)group_entry(g, &s, k);
        signs_and_scales[ib] = (uint32_t)block_signs[0] | ((uint32_t)block_signs[1] << 7) | ((uint32_t)block_signs[2] << 14) | ((uint32_t)block_signs[3] << 21);
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    if (!(max_scale != 0)) {
        memset(y, 0, 98);
        return;
    }
    const float d = max_scale / 31;
    const uint16_t bits = memra_f32_to_f16(d * 1.0125f);
    y[0] = (uint8_t)(bits & 0xff);
    y[1] = (uint8_t)(bits >> 8);
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t word = signs_and_scales[ib] | ((uint32_t)clamp_level(nearest_int(0.5f * (id * scales[ib] - 1)), 15) << 28);
        uint8_t * p = y + 66 + 4 * ib;
        p[0] = (uint8_t)word;
        p[1] = (uint8_t)(word >> 8);
        p[2] = (uint8_t)(word >> 16);
        p[3] = (uint8_t)(word >> 24);
    }
}

/* One block of 256 values → 110 bytes of iq3_s. importance: the block's 256 weights, or NULL. */
void memra_quantize_iq3_s(const float * x, uint8_t * y, const float * importance) {
    const iq3_grid * g = &iq3s_grid;
    memset(y, 0, 110);
    uint8_t * qs = y + 2;
    uint8_t * qh = y + 66;
    uint8_t * signs = y + 74;
    float scales[8];
    float max_scale = 0;
    const float sigma2 = importance ? super_block_sigma2(x) : 0;
    for (int ib = 0; ib < 8; ib++) {
        const float * xb = x + 32 * ib;
        sub_block s;
        uint8_t block_signs[4];
        sub_block_weights(&s, xb, importance ? importance + 32 * ib : NULL, sigma2);
        for (int k = 0; k < 4; k++) {
            uint8_t sign_bits = 0;
            for (int i = 0; i < 8; i++) {
                if (xb[8 * k + i] >= 0) s.xval[8 * k + i] = xb[8 * k + i];
                else {
                    s.xval[8 * k + i] = -xb[8 * k + i];
                    sign_bits |= (uint8_t)(1 << i);
                }
            }
            block_signs[k] = sign_bits;
        }
        const float max = largest_magnitude(&s);
        memset(s.L, 0, sizeof s.L);
        if (!(max != 0)) {
            scales[ib] = 0;
            /* As ggml: an all-zero sub-block writes nothing and does not advance qs and signs, so
             * the next sub-block's indices and signs land in its place (qh is indexed by ib). */
            continue;
        }
        float scale = search_sub_block(g, &s, max, 9, true);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 4; k++) block_signs[k] = (uint8_t)~block_signs[k];
        }
        for (int k = 0; k < 8; k++) {
            const int entry = group_entry(g, &s, k);
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
    const uint16_t bits = memra_f32_to_f16(d * 1.033f);
    y[0] = (uint8_t)(bits & 0xff);
    y[1] = (uint8_t)(bits >> 8);
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ib += 2) {
        const int l1 = clamp_level(nearest_int(0.5f * (id * scales[ib] - 1)), 15);
        const int l2 = clamp_level(nearest_int(0.5f * (id * scales[ib + 1] - 1)), 15);
        y[106 + ib / 2] = (uint8_t)(l1 | (l2 << 4));
    }
}
