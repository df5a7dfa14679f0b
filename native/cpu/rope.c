/*
 * NEOX rotary embedding, as ggml's rope_f32 with GGML_ROPE_TYPE_NEOX: theta_scale =
 * powf(freq_base, -2.0f / n_dims); per row, theta starts at the position (as f32) and is
 * multiplied by theta_scale pair by pair; cos and sin in f32; each head rotates
 * (i, i + head_dim / 2). With scaling (linear or YaRN), each pair's angle and its cos and sin
 * are scaled as ggml's rope_yarn does (freq_scale, ext_factor, corr_dims; the magnitude is
 * attn_factor times 1 + 0.1 ln(1 / freq_scale) for YaRN, computed by the caller).
 */
#include <math.h>

#include "cpu-internal.h"

/* Below this many values rope runs on the calling thread alone; above, in chunks of about CHUNK_VALUES. */
#define PARALLEL_VALUES 32768
#define CHUNK_VALUES 8192

typedef struct {
    float * x;
    const int32_t * positions;
    int64_t rows, heads, head_dim, rows_per_chunk;
    float theta_scale;
    const memra_rope_scaling * scaling; /* NULL: plain RoPE */
} rope_job;

/* rope_yarn_ramp: 1 below the first correction dim, 0 from the second on, linear between. */
static float rope_ramp(float low, float high, int64_t pair) {
    const float y = ((float)pair - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

static void rope_rows(void * argument, int64_t chunk, int thread_index) {
    (void)thread_index;
    const rope_job * job = argument;
    int64_t begin, end;
    memra_chunk_range(job->rows, job->rows_per_chunk, chunk, &begin, &end);
    const int64_t half = job->head_dim / 2;
    float cos_theta[MEMRA_MAX_HEAD_DIM / 2];
    float sin_theta[MEMRA_MAX_HEAD_DIM / 2];
    for (int64_t r = begin; r < end; r++) {
        float theta = (float)job->positions[r];
        const memra_rope_scaling * scaling = job->scaling;
        for (int64_t i = 0; i < half; i++) {
            if (scaling) {
                const float interpolated = scaling->freq_scale * theta;
                float angle = interpolated;
                if (scaling->ext_factor != 0.0f) {
                    const float mix = rope_ramp(scaling->corr_low, scaling->corr_high, i) * scaling->ext_factor;
                    angle = interpolated * (1.0f - mix) + theta * mix;
                }
                cos_theta[i] = cosf(angle) * scaling->magnitude;
                sin_theta[i] = sinf(angle) * scaling->magnitude;
            } else {
                cos_theta[i] = cosf(theta);
                sin_theta[i] = sinf(theta);
            }
            theta *= job->theta_scale;
        }
        for (int64_t h = 0; h < job->heads; h++) {
            float * v = job->x + (r * job->heads + h) * job->head_dim;
            for (int64_t i = 0; i < half; i++) {
                const float x0 = v[i];
                const float x1 = v[i + half];
                v[i] = x0 * cos_theta[i] - x1 * sin_theta[i];
                v[i + half] = x0 * sin_theta[i] + x1 * cos_theta[i];
            }
        }
    }
}

void memra_rope_neox(memra_cpu * cpu, float * x, const int32_t * positions, int64_t rows, int64_t heads, int64_t head_dim, float freq_base,
                     const memra_rope_scaling * scaling) {
    int64_t rows_per_chunk = CHUNK_VALUES / (heads * head_dim);
    if (rows_per_chunk < 1) rows_per_chunk = 1;
    rope_job job = { x, positions, rows, heads, head_dim, rows_per_chunk, powf(freq_base, -2.0f / (float)head_dim), scaling };
    memra_run_chunks(cpu->pool, rows * heads * head_dim >= PARALLEL_VALUES, rope_rows, &job, memra_chunk_count(rows, rows_per_chunk));
}
