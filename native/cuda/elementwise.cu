/*
 * elementwise.cu — launchers of the row and elementwise ops (kernels in kernels/elementwise.cuh):
 * argument checks on the host, index arrays validated and staged, launch sizes from launch-plan.c.
 */
#include <math.h>
#include <string.h>

#include "cuda-internal.cuh"
#include "kernels/elementwise.cuh"

using namespace memra_cuda_kernels;

static const char * type_name(int type) {
    switch (type) {
        case 0: return "f32"; case 1: return "f16"; case 2: return "q4_0"; case 3: return "q4_1"; case 6: return "q5_0"; case 7: return "q5_1";
        case 8: return "q8_0"; case 9: return "q8_1"; case 10: return "q2_K"; case 11: return "q3_K"; case 12: return "q4_K"; case 13: return "q5_K";
        case 14: return "q6_K"; case 15: return "q8_K"; case 16: return "iq2_xxs"; case 17: return "iq2_xs"; case 18: return "iq3_xxs"; case 19: return "iq1_s";
        case 20: return "iq4_nl"; case 21: return "iq3_s"; case 22: return "iq2_s"; case 23: return "iq4_xs"; case 29: return "iq1_m"; case 30: return "bf16";
        case 200: return "q8_0_x8"; case 201: return "q6_K_x8"; case 202: return "q4_0_x8";
        default: return NULL;
    }
}

int memra_cuda_check_weight_type(const char * function, int type) {
    if (memra_cuda_weight_type_supported(type)) return MEMRA_CUDA_OK;
    const char * name = type_name(type);
    if (name) FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED_TYPE, "%s: weight type %s has no CUDA kernel", function, name);
    FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED_TYPE, "%s: weight type type %d has no CUDA kernel", function, type);
}

/* Row bytes of a [rows, n] weight of `type`, checked against `bytes` and the 8-value groups. */
int memra_cuda_check_weight(const char * function, const char * name, int type, const void * data, int64_t bytes, int64_t rows, int64_t n,
                            int64_t * row_bytes) {
    CHECK(memra_cuda_check_weight_type(function, type));
    const int64_t block = memra_cuda_type_block_values(type);
    if (n <= 0 || n % block != 0 || n % 8 != 0) {
        FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: rows of %lld values: the CUDA kernels need a multiple of %lld for %s", function, (long long)n,
             (long long)(block > 8 ? block : 8), type_name(type));
    }
    *row_bytes = memra_cuda_row_bytes(type, n);
    int64_t needed = 0;
    CHECK(memra_cuda_check_product(function, "weight size", rows, *row_bytes, &needed));
    if (needed > 0 && !data) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", function, name);
    if (bytes < needed) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %s has %lld bytes, its shape needs %lld", function, name, (long long)bytes, (long long)needed);
    /* these types' kernels read them with 8- and 16-byte loads (q4_K, q5_K: a super-block's first 16
     * bytes; iq1_m: its 8 scale bytes; the repacked layouts: their codes) */
    const bool aligned_loads = type == MEMRA_CUDA_TYPE_Q8_0_X8 || type == MEMRA_CUDA_TYPE_Q6_K_X8 || type == MEMRA_CUDA_TYPE_Q4_0_X8 || type == MEMRA_CUDA_TYPE_Q4_K ||
                               type == MEMRA_CUDA_TYPE_Q5_K || type == MEMRA_CUDA_TYPE_IQ1_M;
    if (aligned_loads && (uintptr_t)data % 16 != 0)
        FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %s (%s) must be 16-byte aligned", function, name, type_name(type));
    return MEMRA_CUDA_OK;
}

static int check_ids(const char * function, const char * what, const int32_t * ids, int64_t count, int64_t available) {
    if (count > 0 && !ids) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", function, what);
    for (int64_t i = 0; i < count; i++) {
        if (ids[i] < 0 || ids[i] >= available) {
            FAIL(MEMRA_CUDA_ERROR_OUT_OF_RANGE, "%s: %s %d at position %lld is outside the table (0..%lld)", function, what, ids[i], (long long)i,
                 (long long)available - 1);
        }
    }
    return MEMRA_CUDA_OK;
}

/* While capturing: the same check on the staged copy of the ids, before every replay. */
static int recheck_ids_on_replay(const char * function, memra_cuda * cuda, const char * what, const void * device_ids, int64_t count, int64_t available) {
    if (!cuda->capture) return MEMRA_CUDA_OK;
    const int32_t * copy = (const int32_t *)memra_cuda_capture_host_copy(cuda, device_ids);
    return memra_cuda_capture_check(function, cuda, [=]() { return check_ids(function, what, copy, count, available); });
}

extern "C" int memra_cuda_embedding(memra_cuda * cuda, float * out, int64_t out_length, int type, const void * table, int64_t table_bytes, int64_t width,
                                    int64_t rows_in_table, const int32_t * ids, int64_t id_count) {
    static const char function[] = "memra_cuda_embedding";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "id_count", id_count, 0));
    CHECK(memra_cuda_check_size(function, "rows_in_table", rows_in_table, 1));
    int64_t row_bytes = 0, needed = 0;
    CHECK(memra_cuda_check_weight(function, "table", type, table, table_bytes, rows_in_table, width, &row_bytes));
    CHECK(memra_cuda_check_product(function, "id_count * width", id_count, width, &needed));
    CHECK(memra_cuda_check_buffer(function, "out", out, out_length, needed));
    CHECK(check_ids(function, "token id", ids, id_count, rows_in_table));
    if (id_count == 0) return MEMRA_CUDA_OK;
    const void * device_ids = NULL;
    CHECK(memra_cuda_stage(function, cuda, ids, id_count * 4, &device_ids));
    CHECK(recheck_ids_on_replay(function, cuda, "token id", device_ids, id_count, rows_in_table));
    const memra_cuda_launch launch = memra_cuda_plan_groups(id_count * (width / 8));
    MEMRA_CUDA_DISPATCH_TYPE(type, (MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, embedding_kernel<T>)(
                                       out, (const uint8_t *)table, row_bytes, width, (const int32_t *)device_ids, id_count)));
    LAUNCH_CHECK(function, "embedding_kernel");
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_dequantize(memra_cuda * cuda, float * out, int64_t out_length, int type, const void * data, int64_t data_bytes, int64_t count) {
    static const char function[] = "memra_cuda_dequantize";
    CHECK(memra_cuda_enter(function, cuda));
    /* Its one index is a temporary, not an input a replay could refresh. */
    REFUSE_WHILE_CAPTURING(function, cuda, "weights are not dequantized");
    int64_t row_bytes = 0;
    CHECK(memra_cuda_check_weight(function, "data", type, data, data_bytes, 1, count, &row_bytes));
    CHECK(memra_cuda_check_buffer(function, "out", out, out_length, count));
    /* One "row" of `count` values, looked up once: the embedding kernel with the id 0. */
    const int32_t zero = 0;
    const void * device_ids = NULL;
    CHECK(memra_cuda_stage(function, cuda, &zero, 4, &device_ids));
    const memra_cuda_launch launch = memra_cuda_plan_groups(count / 8);
    MEMRA_CUDA_DISPATCH_TYPE(type, (MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, embedding_kernel<T>)(
                                       out, (const uint8_t *)data, row_bytes, count, (const int32_t *)device_ids, 1)));
    LAUNCH_CHECK(function, "embedding_kernel");
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_rms_norm(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, const float * weight,
                                   int64_t weight_length, int64_t rows, int64_t width, float eps) {
    static const char function[] = "memra_cuda_rms_norm";
    /* out already RMSNorm(x) · weight, made by the projection before (its norm tail): nothing to
     * launch, and its codes stay kept for a matmul of out next (the LM head) */
    if (memra_cuda_norm_handoff_holds(cuda, out, x, weight, eps, rows, width)) return MEMRA_CUDA_OK;
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    CHECK(memra_cuda_check_size(function, "width", width, 1));
    int64_t needed = 0;
    CHECK(memra_cuda_check_product(function, "rows * width", rows, width, &needed));
    CHECK(memra_cuda_check_buffer(function, "x", x, x_length, needed));
    CHECK(memra_cuda_check_buffer(function, "out", out, out_length, needed));
    CHECK(memra_cuda_check_buffer(function, "weight", weight, weight_length, width));
    if (!(eps >= 0.0f)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: eps must be non-negative", function);
    if (rows == 0) return MEMRA_CUDA_OK;
    const memra_cuda_launch launch = memra_cuda_plan_rows(rows, width);
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, rms_norm_kernel)(out, x, weight, rows, width, eps);
    LAUNCH_CHECK(function, "rms_norm_kernel");
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_add_rms_norm(memra_cuda * cuda, float * out, int64_t out_length, float * hidden, int64_t hidden_length, const float * delta,
                                       int64_t delta_length, const float * weight, int64_t weight_length, int64_t rows, int64_t width, float eps) {
    static const char function[] = "memra_cuda_add_rms_norm";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    CHECK(memra_cuda_check_size(function, "width", width, 1));
    int64_t needed = 0;
    CHECK(memra_cuda_check_product(function, "rows * width", rows, width, &needed));
    CHECK(memra_cuda_check_buffer(function, "out", out, out_length, needed));
    CHECK(memra_cuda_check_buffer(function, "hidden", hidden, hidden_length, needed));
    CHECK(memra_cuda_check_buffer(function, "delta", delta, delta_length, needed));
    CHECK(memra_cuda_check_buffer(function, "weight", weight, weight_length, width));
    if (!(eps >= 0.0f)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: eps must be non-negative", function);
    const uintptr_t o = (uintptr_t)out, h = (uintptr_t)hidden, d = (uintptr_t)delta, bytes = (uintptr_t)needed * 4;
    if (rows > 0 && ((o < h + bytes && h < o + bytes) || (o < d + bytes && d < o + bytes) || (h < d + bytes && d < h + bytes))) {
        FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out, hidden and delta must not overlap", function);
    }
    if (rows == 0) return MEMRA_CUDA_OK;
    const memra_cuda_launch launch = memra_cuda_plan_rows(rows, width);
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, add_rms_norm_kernel)(out, hidden, delta, weight, rows, width, eps);
    LAUNCH_CHECK(function, "add_rms_norm_kernel");
    return MEMRA_CUDA_OK;
}

int memra_cuda_check_rope_scaling(const char * function, const float * values, float out[5]) {
    const float plain[5] = { 1.0f, 0.0f, 1.0f, 0.0f, 0.0f };
    const float * s = values ? values : plain;
    if (!(s[0] > 0.0f) || !isfinite(s[0])) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: freq_scale is %g, expected a finite value > 0", function, (double)s[0]);
    if (!(s[1] >= 0.0f && s[1] <= 1.0f)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: ext_factor is %g, expected 0 to 1", function, (double)s[1]);
    if (!(s[2] > 0.0f) || !isfinite(s[2])) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: magnitude is %g, expected a finite value > 0", function, (double)s[2]);
    if (!isfinite(s[3]) || !isfinite(s[4])) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: the correction dims must be finite", function);
    for (int i = 0; i < 5; i++) out[i] = s[i];
    return MEMRA_CUDA_OK;
}

static int rope_checked(const char * function, memra_cuda * cuda, float * x, int64_t x_length, const int32_t * positions, int64_t rows, int64_t heads,
                        int64_t head_dim, float freq_base, rope_scaling scaling) {
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    CHECK(memra_cuda_check_size(function, "heads", heads, 1));
    CHECK(memra_cuda_check_size(function, "head_dim", head_dim, 2));
    if (head_dim % 2 != 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: head_dim %lld is odd", function, (long long)head_dim);
    if (!(freq_base > 0.0f)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: freq_base must be positive", function);
    const float given[5] = { scaling.freq_scale, scaling.ext_factor, scaling.magnitude, scaling.corr_low, scaling.corr_high };
    float checked[5];
    CHECK(memra_cuda_check_rope_scaling(function, given, checked));
    int64_t width = 0, needed = 0;
    CHECK(memra_cuda_check_product(function, "heads * head_dim", heads, head_dim, &width));
    CHECK(memra_cuda_check_product(function, "rows * heads * head_dim", rows, width, &needed));
    CHECK(memra_cuda_check_buffer(function, "x", x, x_length, needed));
    if (rows > 0 && !positions) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: positions is NULL", function);
    if (rows == 0) return MEMRA_CUDA_OK;
    /* The host's powf, as the CPU backend computes it, so both rotate by the same angles. */
    const float theta_scale = powf(freq_base, -2.0f / (float)head_dim);
    const void * device_positions = NULL;
    CHECK(memra_cuda_stage(function, cuda, positions, rows * 4, &device_positions));
    const memra_cuda_launch launch = memra_cuda_plan_elementwise(rows * heads * (head_dim / 2));
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, rope_neox_kernel)(x, (const int32_t *)device_positions, rows, heads, head_dim, theta_scale,
                                                                                        scaling);
    LAUNCH_CHECK(function, "rope_neox_kernel");
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_rope_neox(memra_cuda * cuda, float * x, int64_t x_length, const int32_t * positions, int64_t rows, int64_t heads, int64_t head_dim,
                                    float freq_base) {
    const rope_scaling plain = { 1.0f, 0.0f, 1.0f, 0.0f, 0.0f };
    return rope_checked("memra_cuda_rope_neox", cuda, x, x_length, positions, rows, heads, head_dim, freq_base, plain);
}

extern "C" int memra_cuda_rope_neox_scaled(memra_cuda * cuda, float * x, int64_t x_length, const int32_t * positions, int64_t rows, int64_t heads,
                                           int64_t head_dim, float freq_base, float freq_scale, float ext_factor, float magnitude, float corr_low,
                                           float corr_high) {
    const rope_scaling scaling = { freq_scale, ext_factor, magnitude, corr_low, corr_high };
    return rope_checked("memra_cuda_rope_neox_scaled", cuda, x, x_length, positions, rows, heads, head_dim, freq_base, scaling);
}

static int overlaps(const void * a, int64_t a_bytes, const void * b, int64_t b_bytes);

int memra_cuda_check_qk_norm_rope(const char * function, const float * q, int64_t q_length, const float * k, int64_t k_length, const float * q_weight,
                                   const float * k_weight, int64_t weight_length, const int32_t * positions, int64_t rows, int64_t heads, int64_t kv_heads,
                                   int64_t head_dim, float eps, float freq_base, int64_t warps_per_row) {
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    CHECK(memra_cuda_check_size(function, "heads", heads, 1));
    CHECK(memra_cuda_check_size(function, "kv_heads", kv_heads, 1));
    if (head_dim < 2 || head_dim >= 256 || head_dim % 2 != 0) {
        FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: head_dim %lld (an even number below 256: one warp per head)", function, (long long)head_dim);
    }
    if (warps_per_row > 65536) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %lld heads", function, (long long)warps_per_row);
    if (!(eps >= 0.0f)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: eps must be non-negative", function);
    if (!(freq_base > 0.0f)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: freq_base must be positive", function);
    int64_t q_needed = 0, k_needed = 0;
    CHECK(memra_cuda_check_product(function, "rows * heads * head_dim", rows, heads * head_dim, &q_needed));
    CHECK(memra_cuda_check_product(function, "rows * kv_heads * head_dim", rows, kv_heads * head_dim, &k_needed));
    CHECK(memra_cuda_check_buffer(function, "q", q, q_length, q_needed));
    CHECK(memra_cuda_check_buffer(function, "k", k, k_length, k_needed));
    CHECK(memra_cuda_check_buffer(function, "q_weight", q_weight, weight_length, head_dim));
    CHECK(memra_cuda_check_buffer(function, "k_weight", k_weight, weight_length, head_dim));
    if (rows > 0 && !positions) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: positions is NULL", function);
    if (rows > 0 && overlaps(q, q_needed * 4, k, k_needed * 4)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: q overlaps k", function);
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_qk_norm_rope(memra_cuda * cuda, float * q, int64_t q_length, float * k, int64_t k_length, const float * q_weight,
                                       const float * k_weight, int64_t weight_length, const int32_t * positions, int64_t rows, int64_t heads,
                                       int64_t kv_heads, int64_t head_dim, float eps, float freq_base, const float * rope) {
    static const char function[] = "memra_cuda_qk_norm_rope";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_qk_norm_rope(function, q, q_length, k, k_length, q_weight, k_weight, weight_length, positions, rows, heads, kv_heads, head_dim, eps,
                                        freq_base, heads + kv_heads));
    float s[5];
    CHECK(memra_cuda_check_rope_scaling(function, rope, s));
    const rope_scaling scaling = { s[0], s[1], s[2], s[3], s[4] };
    if (rows == 0) return MEMRA_CUDA_OK;
    const float theta_scale = powf(freq_base, -2.0f / (float)head_dim); /* the host's powf, as memra_cuda_rope_neox */
    const void * device_positions = NULL;
    CHECK(memra_cuda_stage(function, cuda, positions, rows * 4, &device_positions));
    const int64_t head_rows = rows * (heads + kv_heads);
    const memra_cuda_launch launch = memra_cuda_plan_groups(head_rows * 32); /* 128 threads: 4 warps, one per (row, head) */
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, qk_norm_rope_kernel)(q, k, q_weight, k_weight, (const int32_t *)device_positions, rows,
                                                                                           (int)heads, (int)kv_heads, (int)head_dim, eps, theta_scale, scaling);
    LAUNCH_CHECK(function, "qk_norm_rope_kernel");
    return MEMRA_CUDA_OK;
}

static int overlaps(const void * a, int64_t a_bytes, const void * b, int64_t b_bytes) {
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + (uintptr_t)b_bytes && y < x + (uintptr_t)a_bytes;
}

static int check_elementwise(const char * function, const float * out, int64_t out_length, const char * a_name, const float * a, int64_t a_length,
                             const char * b_name, const float * b, int64_t b_length, int64_t length) {
    CHECK(memra_cuda_check_size(function, "length", length, 0));
    CHECK(memra_cuda_check_buffer(function, "out", out, out_length, length));
    CHECK(memra_cuda_check_buffer(function, a_name, a, a_length, length));
    CHECK(memra_cuda_check_buffer(function, b_name, b, b_length, length));
    if ((out != a && overlaps(out, length * 4, a, length * 4)) || (out != b && overlaps(out, length * 4, b, length * 4))) {
        FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out partly overlaps an input", function);
    }
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_swiglu(memra_cuda * cuda, float * out, int64_t out_length, const float * gate, int64_t gate_length, const float * up,
                                 int64_t up_length, int64_t length) {
    static const char function[] = "memra_cuda_swiglu";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(check_elementwise(function, out, out_length, "gate", gate, gate_length, "up", up, up_length, length));
    if (length == 0) return MEMRA_CUDA_OK;
    const memra_cuda_launch launch = memra_cuda_plan_elementwise(length);
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, swiglu_kernel)(out, gate, up, length);
    LAUNCH_CHECK(function, "swiglu_kernel");
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_add(memra_cuda * cuda, float * out, int64_t out_length, const float * a, int64_t a_length, const float * b, int64_t b_length,
                              int64_t length) {
    static const char function[] = "memra_cuda_add";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(check_elementwise(function, out, out_length, "a", a, a_length, "b", b, b_length, length));
    if (length == 0) return MEMRA_CUDA_OK;
    const memra_cuda_launch launch = memra_cuda_plan_elementwise(length);
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, add_kernel)(out, a, b, length);
    LAUNCH_CHECK(function, "add_kernel");
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_gather_rows(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, const int32_t * row_ids,
                                      int64_t count, int64_t width) {
    static const char function[] = "memra_cuda_gather_rows";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "count", count, 0));
    CHECK(memra_cuda_check_size(function, "width", width, 1));
    int64_t needed = 0;
    CHECK(memra_cuda_check_product(function, "count * width", count, width, &needed));
    CHECK(memra_cuda_check_buffer(function, "out", out, out_length, needed));
    if (!x && x_length > 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: x is NULL", function);
    CHECK(check_ids(function, "row id", row_ids, count, x_length / width));
    if (count == 0) return MEMRA_CUDA_OK;
    if (overlaps(out, needed * 4, x, x_length * 4)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out overlaps x", function);
    const void * device_ids = NULL;
    CHECK(memra_cuda_stage(function, cuda, row_ids, count * 4, &device_ids));
    CHECK(recheck_ids_on_replay(function, cuda, "row id", device_ids, count, x_length / width));
    const memra_cuda_launch launch = memra_cuda_plan_elementwise(needed);
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, gather_rows_kernel)(out, x, (const int32_t *)device_ids, count, width);
    LAUNCH_CHECK(function, "gather_rows_kernel");
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_scatter_add_rows(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, const int32_t * row_ids,
                                           const float * scales, int64_t count, int64_t width) {
    static const char function[] = "memra_cuda_scatter_add_rows";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "count", count, 0));
    CHECK(memra_cuda_check_size(function, "width", width, 1));
    int64_t needed = 0;
    CHECK(memra_cuda_check_product(function, "count * width", count, width, &needed));
    CHECK(memra_cuda_check_buffer(function, "x", x, x_length, needed));
    if (!out && out_length > 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out is NULL", function);
    CHECK(check_ids(function, "row id", row_ids, count, out_length / width));
    if (count > 0 && !scales) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: scales is NULL", function);
    if (count == 0) return MEMRA_CUDA_OK;
    if (overlaps(out, out_length * 4, x, needed * 4)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out overlaps x", function);
    const void * device_ids = NULL;
    const void * device_scales = NULL;
    {
        const void * hosts[2] = {row_ids, scales};
        const int64_t sizes[2] = {count * 4, count * 4};
        const void * devices[2];
        CHECK(memra_cuda_stage_many(function, cuda, 2, hosts, sizes, devices));
        device_ids = devices[0];
        device_scales = devices[1];
    }
    CHECK(recheck_ids_on_replay(function, cuda, "row id", device_ids, count, out_length / width));
    const memra_cuda_launch launch = memra_cuda_plan_elementwise(width);
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, scatter_add_rows_kernel)(out, x, (const int32_t *)device_ids, (const float *)device_scales,
                                                                                     count, width);
    LAUNCH_CHECK(function, "scatter_add_rows_kernel");
    return MEMRA_CUDA_OK;
}
