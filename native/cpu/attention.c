/*
 * Causal scaled-dot-product attention over f32 K/V rows with grouped KV heads. One thread-pool
 * chunk per (query row, KV head): each runs the query heads that
 * share the KV head together, so every K and V row is read once per group. Scores q·k in f32,
 * softmax with a double sum, then the probability-weighted sum of V rows in f32. The loops are
 * written for the compiler to vectorize (clones per SIMD level, see MEMRA_VECTORIZED).
 */
#include <math.h>
#include <string.h>

#include "cpu-internal.h"

#if defined(__GNUC__) && !defined(__clang__)
/* The 64-byte vector helpers below are always inlined, so no call ever passes one by value. */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef struct {
    float * out;
    const float * q;
    const float * keys;
    const float * values;
    int64_t rows, heads, kv_heads, head_dim, first_row;
    float scale;
    float * scratch; /* per thread: scratch_per_thread floats */
    size_t scratch_per_thread;
    int64_t score_stride; /* floats per head's score row (>= the longest visible span) */
} attention_job;

/* 16 floats as one vector value (GCC/Clang vector extensions): one 512-bit register in the avx512
 * clone, two 256-bit or four 128-bit ones in the others; local vectors stay in registers. */
typedef float f32x16 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) f32x16 load16(const float * p) {
    f32x16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) float sum16(const f32x16 * v) {
    f32x8 low, high;
    memcpy(&low, v, sizeof low);
    memcpy(&high, (const char *)v + sizeof low, sizeof high);
    low += high;
    f32x4 quarter, upper;
    memcpy(&quarter, &low, sizeof quarter);
    memcpy(&upper, (const char *)&low + sizeof quarter, sizeof upper);
    quarter += upper;
    return (quarter[0] + quarter[2]) + (quarter[1] + quarter[3]);
}

/* q·k over n values: two 16-wide partial sums, then a tree reduction. */
static inline __attribute__((always_inline)) float dot(const float * a, const float * b, int64_t n) {
    f32x16 sum0 = { 0 }, sum1 = { 0 };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        sum0 += load16(a + i) * load16(b + i);
        sum1 += load16(a + i + 16) * load16(b + i + 16);
    }
    for (; i + 16 <= n; i += 16) sum0 += load16(a + i) * load16(b + i);
    float tail = 0.0f;
    for (; i < n; i++) tail += a[i] * b[i];
    sum0 += sum1;
    return sum16(&sum0) + tail;
}

/* out[0..64) += sum_t p[t] * v[t * v_stride + 0..64), four 16-wide accumulators in registers. */
static inline __attribute__((always_inline)) void accumulate64(float * out, const float * p, const float * v, int64_t v_stride, int64_t count) {
    f32x16 a0 = load16(out), a1 = load16(out + 16), a2 = load16(out + 32), a3 = load16(out + 48);
    for (int64_t t = 0; t < count; t++, v += v_stride) {
        const float weight = p[t];
        a0 += weight * load16(v);
        a1 += weight * load16(v + 16);
        a2 += weight * load16(v + 32);
        a3 += weight * load16(v + 48);
    }
    memcpy(out, &a0, sizeof a0);
    memcpy(out + 16, &a1, sizeof a1);
    memcpy(out + 32, &a2, sizeof a2);
    memcpy(out + 48, &a3, sizeof a3);
}


/* In place: s[0, visible) <- softmax, the sum accumulated in double. */
static inline __attribute__((always_inline)) void softmax_row(float * s, int64_t visible) {
    float max = -INFINITY;
    for (int64_t t = 0; t < visible; t++) max = s[t] > max ? s[t] : max;
    double sum = 0.0;
    for (int64_t t = 0; t < visible; t++) {
        s[t] = memra_exp(s[t] - max);
        sum += s[t];
    }
    const float inverse = (float)(1.0 / sum);
    for (int64_t t = 0; t < visible; t++) s[t] *= inverse;
}

static inline __attribute__((always_inline)) void attend_group(const attention_job * job, int64_t task, float * scratch) {
    const int64_t group = job->heads / job->kv_heads;
    const int64_t r = task / job->kv_heads;
    const int64_t kv_head = task % job->kv_heads;
    const int64_t head_dim = job->head_dim;
    const int64_t kv_width = job->kv_heads * head_dim;
    const int64_t visible = job->first_row + r + 1;
    const int64_t stride = job->score_stride;
    const float * q = job->q + (r * job->heads + kv_head * group) * head_dim; /* the group's heads are adjacent */
    float * out = job->out + (r * job->heads + kv_head * group) * head_dim;
    float * scores = scratch; /* [group, stride] */

    for (int64_t t = 0; t < visible; t++) {
        const float * k = job->keys + t * kv_width + kv_head * head_dim;
        for (int64_t g = 0; g < group; g++) scores[g * stride + t] = dot(q + g * head_dim, k, head_dim) * job->scale;
    }
    for (int64_t g = 0; g < group; g++) {
        float * s = scores + g * stride;
        softmax_row(s, visible);
    }
    /* out[g, d] = sum_t p[g, t] * V[t, d], 64 output values at a time. */
    const float * values = job->values + kv_head * head_dim;
    for (int64_t g = 0; g < group; g++) {
        const float * p = scores + g * stride;
        int64_t d = 0;
        for (; d + 64 <= head_dim; d += 64) {
            memset(out + g * head_dim + d, 0, 64 * sizeof(float));
            accumulate64(out + g * head_dim + d, p, values + d, kv_width, visible);
        }
        for (; d < head_dim; d++) {
            float accumulator = 0.0f;
            for (int64_t t = 0; t < visible; t++) accumulator += p[t] * values[t * kv_width + d];
            out[g * head_dim + d] = accumulator;
        }
    }
}

MEMRA_VECTORIZED static void attend_task(void * argument, int64_t task, int thread_index) {
    const attention_job * job = argument;
    attend_group(job, task, job->scratch + (size_t)thread_index * job->scratch_per_thread);
}

size_t memra_attention_scratch(int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t visible) {
    (void)head_dim;
    const int64_t group = heads / kv_heads;
    const int64_t stride = (visible + 15) / 16 * 16;
    return (size_t)(group * stride);
}

void memra_attention(memra_cpu * cpu, float * out, const float * q, const float * keys, const float * values, int64_t rows, int64_t heads,
                     int64_t kv_heads, int64_t head_dim, int64_t first_row, float scale) {
    /* The caller reserved memra_attention_scratch(...) floats per thread (exports.c). */
    attention_job job = {
        .out = out, .q = q, .keys = keys, .values = values,
        .rows = rows, .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .first_row = first_row,
        .scale = scale, .scratch = cpu->scores, .scratch_per_thread = cpu->scores_per_thread,
        .score_stride = (first_row + rows + 15) / 16 * 16,
    };
    memra_run_chunks(cpu->pool, cpu->threads > 1, attend_task, &job, rows * kv_heads);
}

/* ---- paged attention: K/V through per-sequence block tables, f32 / f16 / q8_0 storage ---- */

/* Query rows of one sequence that one task runs together, so a converted K/V block serves them all. */
#define PAGED_TILE_ROWS 16
/* Up to this many query lanes (rows x heads of a group), the AVX-512 tile scores keys by direct dot
 * products instead of transposing them, and converts f16 values in registers for two lanes at a
 * time instead of into the block buffer once for all. */
#define DIRECT_LANES 4

typedef struct {
    float * out;
    const float * q;
    int type;
    const uint8_t * keys;
    const uint8_t * values;
    size_t row_bytes;
    int64_t block_tokens, heads, kv_heads, head_dim;
    float scale;
    const int32_t * block_tables;
    const memra_attention_sequence * sequences;
    const int64_t * tiles; /* [tiles, 2]: (sequence, first row of the sequence) */
    float * scratch;
    size_t scratch_per_thread;
    int64_t score_stride;
    /* memra_cpu_set_batch_invariant: every tile scores keys as a decode step's does */
    int batch_invariant;
} paged_attention_job;

/* The head segment of `count` block rows as f32: straight from f32 storage, else converted into `buffer`. */
/* Head kv_head's bytes in the first row of a block (its rows follow job->row_bytes apart). */
static inline __attribute__((always_inline)) const uint8_t * head_segment(const paged_attention_job * job, const uint8_t * storage, int64_t block,
                                                                          int64_t kv_head) {
    return storage + (size_t)(block * job->block_tokens) * job->row_bytes + memra_kv_row_bytes(job->type, job->head_dim) * (size_t)kv_head;
}

static inline __attribute__((always_inline)) const float * block_rows(const paged_attention_job * job, const uint8_t * storage, int64_t block,
                                                                      int64_t kv_head, int64_t count, float * buffer, int64_t * stride) {
    const uint8_t * first = head_segment(job, storage, block, kv_head);
    if (job->type == MEMRA_KV_F32) {
        *stride = job->kv_heads * job->head_dim;
        return (const float *)first;
    }
    for (int64_t t = 0; t < count; t++) memra_kv_read(job->type, first + (size_t)t * job->row_bytes, buffer + t * job->head_dim, job->head_dim);
    *stride = job->head_dim;
    return buffer;
}

/* Prefetches head kv_head's rows of the block holding token `token`, up to token visible_end. */
static inline __attribute__((always_inline)) void block_prefetch(const paged_attention_job * job, const uint8_t * storage, const int32_t * table,
                                                                   int64_t token, int64_t visible_end, int64_t kv_head) {
    const int64_t bt = job->block_tokens;
    const int64_t count = visible_end - token < bt ? visible_end - token : bt;
    const size_t bytes = memra_kv_row_bytes(job->type, job->head_dim);
    const uint8_t * first = head_segment(job, storage, table[token / bt], kv_head);
    for (int64_t t = 0; t < count; t++) {
        for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(first + (size_t)t * job->row_bytes + b, 0, 3);
    }
}

static inline __attribute__((always_inline)) void attend_tile(const paged_attention_job * job, int64_t task, float * scratch) {
    const int64_t group = job->heads / job->kv_heads;
    const int64_t head_dim = job->head_dim;
    const int64_t kv_head = task % job->kv_heads;
    const int64_t * tile = job->tiles + (task / job->kv_heads) * 2;
    const memra_attention_sequence * sequence = job->sequences + tile[0];
    const int64_t first = tile[1];
    const int64_t tile_rows = sequence->rows - first < PAGED_TILE_ROWS ? sequence->rows - first : PAGED_TILE_ROWS;
    const int64_t start = sequence->position + first; /* cache position of the tile's first row */
    const int64_t visible_end = start + tile_rows;    /* tokens [0, visible_end) are seen by some row */
    const int32_t * table = job->block_tables + sequence->table_offset;
    const int64_t bt = job->block_tokens;
    const int64_t stride = job->score_stride;
    const int64_t lanes = tile_rows * group;
    float * scores = scratch;                        /* [lanes, stride] */
    float * buffer = scores + PAGED_TILE_ROWS * group * stride; /* [block_tokens, head_dim] */
    float * accumulators = buffer + bt * head_dim;  /* [lanes, head_dim] */
    const int64_t row0 = sequence->query_row + first;

    for (int64_t t0 = 0; t0 < visible_end; t0 += bt) {
        const int64_t count = visible_end - t0 < bt ? visible_end - t0 : bt;
        int64_t k_stride;
        const float * k = block_rows(job, job->keys, table[t0 / bt], kv_head, count, buffer, &k_stride);
        for (int64_t i = 0; i < tile_rows; i++) {
            const int64_t visible = start + i + 1;
            const int64_t end = visible - t0 < count ? visible - t0 : count;
            const float * q = job->q + ((row0 + i) * job->heads + kv_head * group) * head_dim;
            for (int64_t t = 0; t < end; t++) {
                for (int64_t g = 0; g < group; g++) scores[(i * group + g) * stride + t0 + t] = dot(q + g * head_dim, k + t * k_stride, head_dim) * job->scale;
            }
        }
    }
    for (int64_t lane = 0; lane < lanes; lane++) {
        const int64_t visible = start + lane / group + 1;
        float * s = scores + lane * stride;
        softmax_row(s, visible);
    }
    memset(accumulators, 0, (size_t)(lanes * head_dim) * sizeof(float));
    for (int64_t t0 = 0; t0 < visible_end; t0 += bt) {
        const int64_t count = visible_end - t0 < bt ? visible_end - t0 : bt;
        int64_t v_stride;
        const float * v = block_rows(job, job->values, table[t0 / bt], kv_head, count, buffer, &v_stride);
        for (int64_t lane = 0; lane < lanes; lane++) {
            const int64_t visible = start + lane / group + 1;
            const int64_t end = visible - t0 < count ? visible - t0 : count;
            if (end <= 0) continue;
            const float * p = scores + lane * stride + t0;
            float * accumulator = accumulators + lane * head_dim;
            int64_t d = 0;
            for (; d + 64 <= head_dim; d += 64) accumulate64(accumulator + d, p, v + d, v_stride, end);
            for (; d < head_dim; d++) {
                float sum = accumulator[d];
                for (int64_t t = 0; t < end; t++) sum += p[t] * v[t * v_stride + d];
                accumulator[d] = sum;
            }
        }
    }
    for (int64_t i = 0; i < tile_rows; i++) {
        float * out = job->out + ((row0 + i) * job->heads + kv_head * group) * head_dim;
        memcpy(out, accumulators + i * group * head_dim, (size_t)(group * head_dim) * sizeof(float));
    }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(MEMRA_NO_SIMD)
#include <immintrin.h>
#define MEMRA_ATTENTION_AVX512 1
#define AVX512_ATTENTION __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))

/* e^x on 16 lanes: memra_exp's range reduction and polynomial. */
static inline AVX512_ATTENTION __attribute__((always_inline)) __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    const __m512 shifter = _mm512_set1_ps(12582912.0f);
    const __m512 shifted = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), shifter);
    const __m512 n = _mm512_sub_ps(shifted, shifter);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i exponent = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(exponent));
}

/*
 * attend_tile with AVX-512 and FMA, for head_dim a multiple of 16 (at most 256). Scores: one dot
 * product per key and query lane in decode (and in every tile with batch invariance), else runs of
 * 16 keys transposed into kt[head_dim][16], so a query's 16 scores are head_dim broadcast FMAs with
 * no horizontal sums, four query lanes at a time sharing every kt load. Softmax on 16 lanes.
 * Values: every lane's accumulators stay in registers over a block's keys (the same sums for any
 * tile's rows).
 */
static AVX512_ATTENTION void attend_tile_avx512(const paged_attention_job * job, int64_t task, float * scratch) {
    const int64_t group = job->heads / job->kv_heads;
    const int64_t head_dim = job->head_dim;
    const int64_t kv_head = task % job->kv_heads;
    const int64_t * tile = job->tiles + (task / job->kv_heads) * 2;
    const memra_attention_sequence * sequence = job->sequences + tile[0];
    const int64_t first = tile[1];
    const int64_t tile_rows = sequence->rows - first < PAGED_TILE_ROWS ? sequence->rows - first : PAGED_TILE_ROWS;
    const int64_t start = sequence->position + first;
    const int64_t visible_end = start + tile_rows;
    const int32_t * table = job->block_tables + sequence->table_offset;
    const int64_t bt = job->block_tokens;
    const int64_t stride = job->score_stride;
    const int64_t lanes = tile_rows * group;
    const int64_t vectors = head_dim / 16;
    float * scores = scratch;                                     /* [lanes, stride] */
    float * buffer = scores + PAGED_TILE_ROWS * group * stride;   /* [block_tokens, head_dim] */
    float * accumulators = buffer + bt * head_dim;                /* [lanes, head_dim] */
    float * kt = accumulators + PAGED_TILE_ROWS * group * head_dim; /* [head_dim, 16] */
    const int64_t row0 = sequence->query_row + first;
    const __m512 scale = _mm512_set1_ps(job->scale);
    /* lane -> its query vector; query lane = (row i, head g of the group) */
    const float * queries[PAGED_TILE_ROWS * 16];
    const int direct = lanes <= DIRECT_LANES;
    for (int64_t lane = 0; lane < lanes; lane++) {
        const int64_t i = lane / group, g = lane % group;
        queries[lane] = job->q + ((row0 + i) * job->heads + kv_head * group + g) * head_dim;
    }

    /* Scores. Decode (a query row or two per head group), and every tile with batch invariance:
     * one dot product per key and lane (16 products per vector lane, then _mm512_reduce_add_ps),
     * each key loaded into registers once for the tile's lanes, so that a row's scores are the
     * same bits in a decode step of one row as among a prefill's or a speculative step's rows.
     * Other tiles of many rows transpose runs of 16 keys and sum each score in one chain over
     * head_dim: fewer operations (pp512 of the 0.6B shape ~5% faster), other bits. */
    const int direct_scores = direct || job->batch_invariant;
    for (int64_t t0 = 0; t0 < visible_end; t0 += bt) {
        const int64_t count = visible_end - t0 < bt ? visible_end - t0 : bt;
        /* A head's rows of a block are a few hundred bytes each, a block apart from the next
         * block's: fetch the next block while this one is worked on (f16 KV, batched decode). */
        if (t0 + bt < visible_end) block_prefetch(job, job->keys, table, t0 + bt, visible_end, kv_head);
        /* direct scores on f16 keys convert them in registers as they are read (exact, as the
         * buffer conversion is) */
        const uint8_t * f16_rows = direct_scores && job->type == MEMRA_KV_F16 ? head_segment(job, job->keys, table[t0 / bt], kv_head) : NULL;
        int64_t k_stride = 0;
        const float * k = f16_rows ? NULL : block_rows(job, job->keys, table[t0 / bt], kv_head, count, buffer, &k_stride);
        if (direct_scores) {
            for (int64_t t = 0; t < count; t++) {
                const int64_t key = t0 + t;
                /* lanes whose row sees this key: rows i with start + i >= key */
                int64_t lane = key > start ? (key - start) * group : 0;
                if (lane >= lanes) break;
                __m512 kr[16];
                if (f16_rows) {
                    const uint16_t * key_row = (const uint16_t *)(f16_rows + (size_t)t * job->row_bytes);
                    for (int64_t j = 0; j < vectors; j++) kr[j] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(key_row + 16 * j)));
                } else {
                    const float * key_row = k + t * k_stride;
                    for (int64_t j = 0; j < vectors; j++) kr[j] = _mm512_loadu_ps(key_row + 16 * j);
                }
                for (; lane < lanes; lane++) {
                    const float * q = queries[lane];
                    __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(q), kr[0]);
                    for (int64_t j = 1; j < vectors; j++) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * j), kr[j], acc);
                    scores[lane * stride + key] = _mm512_reduce_add_ps(acc) * job->scale;
                }
            }
            continue;
        }
        for (int64_t sub = 0; sub < count; sub += 16) {
            const int64_t n = count - sub < 16 ? count - sub : 16;
            for (int64_t d = 0; d < head_dim; d++) {
                float * column = kt + d * 16;
                for (int64_t t = 0; t < n; t++) column[t] = k[(sub + t) * k_stride + d];
                for (int64_t t = n; t < 16; t++) column[t] = 0.0f;
            }
            const int64_t key0 = t0 + sub;
            /* lanes whose row sees key0: rows i with start + i >= key0 */
            int64_t lane = 0;
            while (lane < lanes && start + lane / group < key0) lane++;
            for (; lane < lanes; lane += 4) {
                const int64_t width = lanes - lane < 4 ? lanes - lane : 4;
                __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
                const float * q0 = queries[lane];
                const float * q1 = queries[lane + (width > 1 ? 1 : 0)];
                const float * q2 = queries[lane + (width > 2 ? 2 : 0)];
                const float * q3 = queries[lane + (width > 3 ? 3 : 0)];
                for (int64_t d = 0; d < head_dim; d++) {
                    const __m512 kv = _mm512_loadu_ps(kt + d * 16);
                    acc0 = _mm512_fmadd_ps(_mm512_set1_ps(q0[d]), kv, acc0);
                    acc1 = _mm512_fmadd_ps(_mm512_set1_ps(q1[d]), kv, acc1);
                    acc2 = _mm512_fmadd_ps(_mm512_set1_ps(q2[d]), kv, acc2);
                    acc3 = _mm512_fmadd_ps(_mm512_set1_ps(q3[d]), kv, acc3);
                }
                _mm512_storeu_ps(scores + lane * stride + key0, _mm512_mul_ps(acc0, scale));
                if (width > 1) _mm512_storeu_ps(scores + (lane + 1) * stride + key0, _mm512_mul_ps(acc1, scale));
                if (width > 2) _mm512_storeu_ps(scores + (lane + 2) * stride + key0, _mm512_mul_ps(acc2, scale));
                if (width > 3) _mm512_storeu_ps(scores + (lane + 3) * stride + key0, _mm512_mul_ps(acc3, scale));
            }
        }
    }
    block_prefetch(job, job->values, table, 0, visible_end, kv_head); /* during the softmax */
    for (int64_t lane = 0; lane < lanes; lane++) {
        const int64_t visible = start + lane / group + 1;
        float * s = scores + lane * stride;
        __m512 max16 = _mm512_set1_ps(-INFINITY);
        int64_t t = 0;
        for (; t + 16 <= visible; t += 16) max16 = _mm512_max_ps(max16, _mm512_loadu_ps(s + t));
        const __mmask16 tail = (__mmask16)((1u << (visible - t)) - 1u);
        if (visible > t) max16 = _mm512_mask_max_ps(max16, tail, max16, _mm512_maskz_loadu_ps(tail, s + t));
        const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(max16));
        __m512d sum_lo = _mm512_setzero_pd(), sum_hi = sum_lo;
        for (t = 0; t + 16 <= visible; t += 16) {
            const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + t), max));
            _mm512_storeu_ps(s + t, e);
            sum_lo = _mm512_add_pd(sum_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
            sum_hi = _mm512_add_pd(sum_hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
        }
        if (visible > t) {
            const __m512 e = _mm512_maskz_mov_ps(tail, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, s + t), max)));
            _mm512_mask_storeu_ps(s + t, tail, e);
            sum_lo = _mm512_add_pd(sum_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
            sum_hi = _mm512_add_pd(sum_hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
        }
        const __m512 inverse = _mm512_set1_ps((float)(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(sum_lo, sum_hi))));
        for (t = 0; t + 16 <= visible; t += 16) _mm512_storeu_ps(s + t, _mm512_mul_ps(_mm512_loadu_ps(s + t), inverse));
        if (visible > t) _mm512_mask_storeu_ps(s + t, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, s + t), inverse));
    }
    memset(accumulators, 0, (size_t)(lanes * head_dim) * sizeof(float));
    for (int64_t t0 = 0; t0 < visible_end; t0 += bt) {
        const int64_t count = visible_end - t0 < bt ? visible_end - t0 : bt;
        int64_t v_stride;
        if (t0 + bt < visible_end) block_prefetch(job, job->values, table, t0 + bt, visible_end, kv_head);
        if (direct && job->type == MEMRA_KV_F16) {
            const uint8_t * rows = head_segment(job, job->values, table[t0 / bt], kv_head);
            /* two lanes at a time, each value row converted once for both */
            for (int64_t lane = 0; lane < lanes; lane += 2) {
                const int64_t pair = lanes - lane < 2 ? 1 : 2;
                int64_t end[2] = { 0, 0 };
                for (int64_t k = 0; k < pair; k++) {
                    const int64_t visible = start + (lane + k) / group + 1;
                    end[k] = visible - t0 < count ? visible - t0 : count;
                    if (end[k] < 0) end[k] = 0;
                }
                if (end[0] == 0 && end[1] == 0) continue;
                const float * p0 = scores + lane * stride + t0;
                const float * p1 = scores + (lane + pair - 1) * stride + t0;
                float * a0 = accumulators + lane * head_dim;
                float * a1 = accumulators + (lane + pair - 1) * head_dim;
                __m512 acc0[16], acc1[16];
                for (int64_t j = 0; j < vectors; j++) {
                    acc0[j] = _mm512_loadu_ps(a0 + 16 * j);
                    acc1[j] = _mm512_loadu_ps(a1 + 16 * j);
                }
                /* keys both lanes see, then the rest of the one that sees more (lanes of one row see the same keys) */
                const int64_t both = pair == 2 ? (end[0] < end[1] ? end[0] : end[1]) : 0;
                for (int64_t t = 0; t < both; t++) {
                    const uint16_t * row = (const uint16_t *)(rows + (size_t)t * job->row_bytes);
                    const __m512 w0 = _mm512_set1_ps(p0[t]), w1 = _mm512_set1_ps(p1[t]);
                    for (int64_t j = 0; j < vectors; j++) {
                        const __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 16 * j)));
                        acc0[j] = _mm512_fmadd_ps(w0, v, acc0[j]);
                        acc1[j] = _mm512_fmadd_ps(w1, v, acc1[j]);
                    }
                }
                for (int64_t t = both; t < end[0]; t++) {
                    const uint16_t * row = (const uint16_t *)(rows + (size_t)t * job->row_bytes);
                    const __m512 w0 = _mm512_set1_ps(p0[t]);
                    for (int64_t j = 0; j < vectors; j++) acc0[j] = _mm512_fmadd_ps(w0, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 16 * j))), acc0[j]);
                }
                for (int64_t t = both; pair == 2 && t < end[1]; t++) {
                    const uint16_t * row = (const uint16_t *)(rows + (size_t)t * job->row_bytes);
                    const __m512 w1 = _mm512_set1_ps(p1[t]);
                    for (int64_t j = 0; j < vectors; j++) acc1[j] = _mm512_fmadd_ps(w1, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 16 * j))), acc1[j]);
                }
                for (int64_t j = 0; j < vectors; j++) _mm512_storeu_ps(a0 + 16 * j, acc0[j]);
                if (pair == 2) for (int64_t j = 0; j < vectors; j++) _mm512_storeu_ps(a1 + 16 * j, acc1[j]);
            }
            continue;
        }
        const float * v = block_rows(job, job->values, table[t0 / bt], kv_head, count, buffer, &v_stride);
        for (int64_t lane = 0; lane < lanes; lane++) {
            const int64_t visible = start + lane / group + 1;
            const int64_t end = visible - t0 < count ? visible - t0 : count;
            if (end <= 0) continue;
            const float * p = scores + lane * stride + t0;
            float * accumulator = accumulators + lane * head_dim;
            __m512 acc[16];
            for (int64_t j = 0; j < vectors; j++) acc[j] = _mm512_loadu_ps(accumulator + 16 * j);
            for (int64_t t = 0; t < end; t++) {
                const __m512 weight = _mm512_set1_ps(p[t]);
                const float * row = v + t * v_stride;
                for (int64_t j = 0; j < vectors; j++) acc[j] = _mm512_fmadd_ps(weight, _mm512_loadu_ps(row + 16 * j), acc[j]);
            }
            for (int64_t j = 0; j < vectors; j++) _mm512_storeu_ps(accumulator + 16 * j, acc[j]);
        }
    }
    for (int64_t i = 0; i < tile_rows; i++) {
        float * out = job->out + ((row0 + i) * job->heads + kv_head * group) * head_dim;
        memcpy(out, accumulators + i * group * head_dim, (size_t)(group * head_dim) * sizeof(float));
    }
}

static AVX512_ATTENTION void attend_tile_task_avx512(void * argument, int64_t task, int thread_index) {
    const paged_attention_job * job = argument;
    attend_tile_avx512(job, task, job->scratch + (size_t)thread_index * job->scratch_per_thread);
}
#endif

MEMRA_VECTORIZED static void attend_tile_task(void * argument, int64_t task, int thread_index) {
    const paged_attention_job * job = argument;
    attend_tile(job, task, job->scratch + (size_t)thread_index * job->scratch_per_thread);
}

/* The AVX-512 tile when this CPU has it and head_dim suits it (MEMRA_CPU_ISA=avx2|scalar turns it off). */
static memra_task paged_attention_task(int64_t head_dim, int64_t group, int64_t block_tokens) {
#ifdef MEMRA_ATTENTION_AVX512
    static int usable = -1;
    if (usable < 0) usable = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && strcmp(memra_dot_isa(), "avx512vnni") == 0;
    /* (score runs of 16 keys start at multiples of 16, inside the padded score rows) */
    if (usable && head_dim % 16 == 0 && head_dim <= 256 && group <= 16 && block_tokens % 16 == 0) return attend_tile_task_avx512;
#endif
    (void)head_dim; (void)group; (void)block_tokens;
    return attend_tile_task;
}

size_t memra_paged_attention_scratch(int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t block_tokens, int64_t tile_rows, int64_t visible) {
    (void)tile_rows;
    const int64_t group = heads / kv_heads;
    const int64_t stride = (visible + 15) / 16 * 16;
    /* scores, one converted block, accumulators, and a transposed run of 16 keys */
    return (size_t)(PAGED_TILE_ROWS * group * stride + block_tokens * head_dim + PAGED_TILE_ROWS * group * head_dim + 16 * head_dim);
}

int64_t memra_paged_attention_tile_rows(void) {
    return PAGED_TILE_ROWS;
}

void memra_paged_attention(memra_cpu * cpu, float * out, const float * q, int type, const void * keys, const void * values, int64_t block_tokens,
                           const int32_t * block_tables, const memra_attention_sequence * sequences, int64_t sequence_count, int64_t heads,
                           int64_t kv_heads, int64_t head_dim, float scale, int64_t * tiles, int64_t tile_count) {
    int64_t visible = 0;
    for (int64_t s = 0; s < sequence_count; s++) {
        const int64_t end = (int64_t)sequences[s].position + sequences[s].rows;
        visible = end > visible ? end : visible;
    }
    paged_attention_job job = {
        .out = out, .q = q, .type = type, .keys = keys, .values = values,
        .row_bytes = memra_kv_row_bytes(type, kv_heads * head_dim),
        .block_tokens = block_tokens, .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .scale = scale,
        .block_tables = block_tables, .sequences = sequences, .tiles = tiles,
        .scratch = cpu->scores, .scratch_per_thread = cpu->scores_per_thread, .batch_invariant = cpu->batch_invariant,
        .score_stride = (visible + 15) / 16 * 16,
    };
    memra_run_chunks(cpu->pool, cpu->threads > 1, paged_attention_task(head_dim, heads / kv_heads, block_tokens), &job, tile_count * kv_heads);
}
