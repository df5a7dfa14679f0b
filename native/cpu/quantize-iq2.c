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
#include "../common/iq-grids.h"

#define QK_K 256
#define GROUP_MAX_EPS 1e-15f
#define GROUP_MAX_EPS_IQ2_S 1e-8f
#define PATTERNS 65536 /* 8 levels of 2 bits */

enum { GRID_256, GRID_512, GRID_1024, GRID_2048, GRIDS };

static memra_iq2_grid_tables grid_tables[GRIDS];
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
    grid_tables[grid] = (memra_iq2_grid_tables){ grid_size, levels, map, neighbours };
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

const memra_iq2_grid_tables * memra_iq2_grid_tables_get(int grid_size) {
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

static inline int nearest_int(float value) {
    const float shifted = value + 12582912.f;
    int bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

static inline int clamp_level(int l, int high) { return l < 0 ? 0 : l > high ? high : l; }

static inline void put_u16(uint8_t * p, uint16_t value) {
    p[0] = (uint8_t)(value & 0xff);
    p[1] = (uint8_t)(value >> 8);
}

/* ggml's iq2_find_best_neighbour: of the list, the entry closest to xval at `scale` under waux; its
 * levels to L. ggml asserts one is closer than FLT_MAX (false only for non-finite input): then the first. */
static int best_neighbour(const memra_iq2_grid_tables * t, const uint16_t * list, const float * xval, const float * waux, float scale, int8_t * L) {
    float best_d2 = FLT_MAX;
    int best = -1;
    for (int j = 1; j <= list[0]; j++) {
        const uint8_t * levels = t->levels + 8 * list[j];
        float d2 = 0;
        for (int i = 0; i < 8; i++) {
            const float q = (float)(2 * levels[i] + 1);
            const float diff = scale * q - xval[i];
            d2 += waux[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = list[j];
        }
    }
    if (best < 0) best = list[1];
    for (int i = 0; i < 8; i++) L[i] = (int8_t)t->levels[8 * best + i];
    return best;
}

/* Levels 0..2 of 8 values at inverse scale id to L, moved to the best neighbour (at `scale`) when
 * not a grid entry; returns whether they were one. */
static bool grid_levels(const memra_iq2_grid_tables * t, float id, float scale, const float * xval, const float * waux, int8_t * L) {
    int u = 0;
    for (int i = 0; i < 8; i++) {
        const int l = clamp_level(nearest_int(0.5f * (id * xval[i] - 1)), 2);
        L[i] = (int8_t)l;
        u |= l << (2 * i);
    }
    const int32_t entry = t->map[u];
    if (entry >= 0) return true;
    best_neighbour(t, t->neighbours + (-entry - 1), xval, waux, scale, L);
    return false;
}

/* The grid index of 8 levels (an entry by construction; ggml aborts otherwise, non-finite input only: then 0). */
static int grid_index(const memra_iq2_grid_tables * t, const int8_t * L) {
    uint16_t u = 0;
    for (int i = 0; i < 8; i++) u |= (uint16_t)((unsigned)(int)L[i] << (2 * i));
    const int32_t entry = t->map[u];
    return entry >= 0 ? entry : 0;
}

/* Σ w·x·q and Σ w·q² over n values with levels L (q = 2l + 1), in order. */
static void weighted_fit(int n, const float * weight, const float * xval, const int8_t * L, float * sumqx, float * sumq2) {
    float qx = 0, q2 = 0;
    for (int i = 0; i < n; i++) {
        const float w = weight[i];
        const float q = (float)(2 * L[i] + 1);
        qx += w * xval[i] * q;
        q2 += w * q * q;
    }
    *sumqx = qx;
    *sumq2 = q2;
}

static float sum_of_squares(const float * x) {
    float sum = 0;
    for (int i = 0; i < QK_K; i++) sum += x[i] * x[i];
    return sum;
}

/* weight = importance · √(σ² + x²) for n values, waux = √weight. */
static void importance_weights(int n, const float * xb, const float * qw, float sigma2, float * weight, float * waux) {
    for (int i = 0; i < n; i++) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    for (int i = 0; i < n; i++) waux[i] = sqrtf(weight[i]);
}

/* Magnitudes of xb to xval, each 8 with an even count of negatives (the least weighted value's sign
 * flipped when odd); their 7 sign bits to signs. */
static void even_signs(int n, const float * xb, const float * weight, float * xval, uint8_t * signs) {
    for (int k = 0; k < n / 8; k++) {
        int flips = 0;
        uint8_t s = 0;
        for (int i = 0; i < 8; i++) {
            if (xb[8 * k + i] >= 0) xval[8 * k + i] = xb[8 * k + i];
            else {
                xval[8 * k + i] = -xb[8 * k + i];
                flips++;
                s |= (uint8_t)(1 << i);
            }
        }
        if (flips % 2) {
            int imin = 0;
            float min = weight[8 * k] * xb[8 * k] * xb[8 * k];
            for (int i = 1; i < 8; i++) {
                const float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (ax < min) {
                    min = ax;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s ^= (uint8_t)(1 << imin);
        }
        signs[k] = s & 127;
    }
}

static float largest(int n, const float * xval) {
    float max = xval[0];
    for (int i = 1; i < n; i++) max = max > xval[i] ? max : xval[i];
    return max;
}

/* ggml's make_qp_quants(n, nmax, x, L, weight): levels to L (uint8_t: negative ones wrap, as ggml's). */
static float make_qp_quants(int n, int nmax, const float * x, uint8_t * L, const float * weight) {
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)nearest_int(iscale * x[i]);
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; i++) {
        const float diff = x[i] - scale * L[i];
        best_mse += weight[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * is + nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale_is * x[i]);
            l = nmax < l ? nmax : l;
            const float diff = x[i] - scale_is * l;
            mse += weight[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = nmax < l ? nmax : l;
        L[i] = (uint8_t)l;
        const float w = weight[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = weight[i];
            float slx = sumlx - w * x[i] * L[i];
            float sl2 = suml2 - w * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = nearest_int(x[i] * sl2 / slx);
                new_l = nmax < new_l ? nmax : new_l;
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* The 4-bit code of a group scale under super-block scale 1/id. */
static inline int scale_code(float id, float scale) { return clamp_level(nearest_int(0.5f * (id * scale - 1)), 15); }

void memra_quantize_iq2_xxs_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    const memra_iq2_grid_tables * t = memra_iq2_grid_tables_get(256);
    for (int64_t ibl = 0; ibl < n_per_row / QK_K; ibl++, y += 66) {
        const float * xbl = x + QK_K * ibl;
        float scales[8], weight[32], waux[32], xval[32];
        int8_t L[32], Laux[32];
        uint8_t block_signs[4];
        uint32_t q2[16] = { 0 };
        memset(y, 0, 66);
        float max_scale = 0;
        const float sigma2 = sum_of_squares(xbl) / QK_K;
        for (int ib = 0; ib < 8; ib++) {
            const float * xb = xbl + 32 * ib;
            importance_weights(32, xb, importance + QK_K * ibl + 32 * ib, sigma2, weight, waux);
            even_signs(32, xb, weight, xval, block_signs);
            const float max = largest(32, xval);
            if (max < GROUP_MAX_EPS) {
                scales[ib] = 0;
                memset(L, 0, 32);
                continue;
            }
            float scale = make_qp_quants(32, 4, xval, (uint8_t *)L, weight);
            const float eff_max = scale * 3;
            if (eff_max <= 0) {
                scales[ib] = 0;
                memset(L, 0, 32);
                continue;
            }
            float best = 0;
            for (int is = -6; is <= 6; is++) {
                const float id = (5 + is * 0.1f) / eff_max;
                const float this_scale = 1 / id;
                for (int k = 0; k < 4; k++) grid_levels(t, id, this_scale, xval + 8 * k, waux + 8 * k, Laux + 8 * k);
                float sumqx, sumq2;
                weighted_fit(32, weight, xval, Laux, &sumqx, &sumq2);
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                    scale = sumqx / sumq2;
                    best = scale * sumqx;
                    memcpy(L, Laux, 32);
                }
            }
            if (scale > 0) {
                const float id = 1 / scale;
                for (int k = 0; k < 4; k++) grid_levels(t, id, scale, xval + 8 * k, waux + 8 * k, L + 8 * k);
                float sumqx, sumq2;
                weighted_fit(32, weight, xval, L, &sumqx, &sumq2);
                if (sumq2 > 0) scale = sumqx / sumq2;
            }
            if (scale < 0) {
                scale = -scale;
                for (int k = 0; k < 4; k++) block_signs[k] = (uint8_t)(~block_signs[k] & 127);
            }
            for (int k = 0; k < 4; k++) {
                q2[2 * ib + 0] |= (uint32_t)grid_index(t, L + 8 * k) << (8 * k);
                q2[2 * ib + 1] |= (uint32_t)block_signs[k] << (7 * k);
            }
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 31;
        put_u16(y, memra_f32_to_f16(d));
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) q2[2 * ib + 1] |= (uint32_t)scale_code(id, scales[ib]) << 28;
        for (int j = 0; j < 16; j++) for (int b = 0; b < 4; b++) y[2 + 4 * j + b] = (uint8_t)(q2[j] >> (8 * b));
    }
}

/* The search iq2_xs and iq2_s share for 16 values (weight, waux, xval set): levels to L; the scale,
 * non-negative (signs flipped under sign_mask when it came out negative), or -1 below `eps`. */
static float search_16(const memra_iq2_grid_tables * t, float eps, uint8_t sign_mask, const float * weight, const float * waux, const float * xval,
                       int8_t * L, uint8_t * block_signs) {
    int8_t Laux[16];
    bool on_grid[2], on_grid_aux[2];
    const float max = largest(16, xval);
    memset(L, 0, 16);
    if (max < eps) return -1;
    float best = 0;
    float scale = max / 5;
    on_grid[0] = on_grid[1] = true;
    for (int is = -9; is <= 9; is++) {
        const float id = (5 + is * 0.1f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 2; k++) on_grid_aux[k] = grid_levels(t, id, this_scale, xval + 8 * k, waux + 8 * k, Laux + 8 * k);
        float sumqx, sumq2;
        weighted_fit(16, weight, xval, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 16);
            on_grid[0] = on_grid_aux[0];
            on_grid[1] = on_grid_aux[1];
        }
    }
    if ((!on_grid[0] || !on_grid[1]) && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 2; k++) if (!on_grid[k]) grid_levels(t, id, scale, xval + 8 * k, waux + 8 * k, L + 8 * k);
        float sumqx, sumq2;
        weighted_fit(16, weight, xval, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 2; k++) block_signs[k] = (uint8_t)(~block_signs[k] & sign_mask);
    }
    return scale;
}

void memra_quantize_iq2_xs_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    const memra_iq2_grid_tables * t = memra_iq2_grid_tables_get(512);
    for (int64_t ibl = 0; ibl < n_per_row / QK_K; ibl++, y += 74) {
        const float * xbl = x + QK_K * ibl;
        float scales[16], weight[16], waux[16], xval[16];
        int8_t L[16];
        uint8_t block_signs[2];
        memset(y, 0, 74);
        float max_scale = 0;
        const float sigma2 = sum_of_squares(xbl) / QK_K;
        for (int ib = 0; ib < 16; ib++) {
            const float * xb = xbl + 16 * ib;
            importance_weights(16, xb, importance + QK_K * ibl + 16 * ib, sigma2, weight, waux);
            even_signs(16, xb, weight, xval, block_signs);
            const float scale = search_16(t, GROUP_MAX_EPS, 127, weight, waux, xval, L, block_signs);
            if (scale < 0) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 2; k++) put_u16(y + 2 + 2 * (2 * ib + k), (uint16_t)(grid_index(t, L + 8 * k) | (block_signs[k] << 9)));
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) {
            memset(y + 2, 0, 64);
            continue;
        }
        const float d = max_scale / 31;
        put_u16(y, memra_f32_to_f16(d));
        const float id = 1 / d;
        for (int ib = 0; ib < 16; ib += 2) y[66 + ib / 2] = (uint8_t)(scale_code(id, scales[ib]) | (scale_code(id, scales[ib + 1]) << 4));
    }
}

void memra_quantize_iq2_s_row(const float * x, uint8_t * y, int64_t n_per_row, const float * importance) {
    const memra_iq2_grid_tables * t = memra_iq2_grid_tables_get(1024);
    for (int64_t ibl = 0; ibl < n_per_row / QK_K; ibl++, y += 82) {
        const float * xbl = x + QK_K * ibl;
        float scales[16], weight[16], waux[16], xval[16];
        int8_t L[16];
        uint8_t block_signs[2];
        memset(y, 0, 82);
        float max_scale = 0;
        const float sigma2 = 2 * sum_of_squares(xbl) / QK_K;
        for (int ib = 0; ib < 16; ib++) {
            const float * xb = xbl + 16 * ib;
            if (importance) importance_weights(16, xb, importance + QK_K * ibl + 16 * ib, sigma2, weight, waux);
            else {
                for (int i = 0; i < 16; i++) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
                for (int i = 0; i < 16; i++) waux[i] = sqrtf(weight[i]);
            }
            for (int k = 0; k < 2; k++) {
                uint8_t s = 0;
                for (int i = 0; i < 8; i++) {
                    if (xb[8 * k + i] >= 0) xval[8 * k + i] = xb[8 * k + i];
                    else {
                        xval[8 * k + i] = -xb[8 * k + i];
                        s |= (uint8_t)(1 << i);
                    }
                }
                block_signs[k] = s;
            }
            const float scale = search_16(t, GROUP_MAX_EPS_IQ2_S, 255, weight, waux, xval, L, block_signs);
            if (scale < 0) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 2; k++) {
                const int entry = grid_index(t, L + 8 * k);
                const int i8 = 2 * ib + k;
                y[2 + i8] = (uint8_t)(entry & 255);
                y[66 + i8 / 4] |= (uint8_t)((entry >> 8) << (2 * (i8 % 4)));
                y[2 + 32 + i8] = block_signs[k];
            }
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 31;
        put_u16(y, memra_f32_to_f16(d * 0.9875f));
        const float id = 1 / d;
        for (int ib = 0; ib < 16; ib += 2) y[74 + ib / 2] = (uint8_t)(scale_code(id, scales[ib]) | (scale_code(id, scales[ib + 1]) << 4));
    }
}
