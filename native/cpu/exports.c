/*
 * The entry points of memra.h: each checks every argument (null pointers, sizes, buffer lengths,
 * types, indices), records a message naming the problem and returns its status code, or calls
 * the op's kernel. Nothing here aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "cpu-internal.h"

#define FAIL(status, ...) return memra_fail(status, __VA_ARGS__)
#define CHECK(call)                      \
    do {                                 \
        const int status_ = (call);      \
        if (status_ != MEMRA_OK) return status_; \
    } while (0)

/* Dimensions beyond this are rejected before any product is formed (products then fit in int64). */
#define MAX_DIMENSION ((int64_t)1 << 40)

const char * memra_version(void) {
    return MEMRA_VERSION_STRING;
}

int memra_abi_version(void) {
    return MEMRA_ABI_VERSION;
}

const char * memra_cpu_isa(void) {
    return memra_dot_isa();
}

int memra_cpu_supports(int op, int weight_type) {
    switch (op) {
        case MEMRA_OP_MATMUL:
        case MEMRA_OP_EXPERT_MATMUL:
            return weight_type == MEMRA_NO_WEIGHT_TYPE || (memra_dot_supported(weight_type) && memra_dequantize_block_size(weight_type) > 0);
        case MEMRA_OP_EMBEDDING:
        case MEMRA_OP_RMS_NORM: /* a norm weight that is not f32 is dequantized first (memra_cpu_dequantize) */
            return weight_type == MEMRA_NO_WEIGHT_TYPE || memra_dequantize_block_size(weight_type) > 0;
        case MEMRA_OP_ROPE_NEOX:
        case MEMRA_OP_ATTENTION:
        case MEMRA_OP_SWIGLU:
        case MEMRA_OP_ADD:
        case MEMRA_OP_MOE_ROUTE:
        case MEMRA_OP_GATHER_ROWS:
        case MEMRA_OP_SCATTER_ADD_ROWS:
            return 1;
        default:
            return 0;
    }
}

/* ---- argument checks ---- */

static int check_cpu(const char * function, const memra_cpu * cpu) {
    if (!cpu) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: cpu is NULL", function);
    return MEMRA_OK;
}

/* A size argument within [minimum, MAX_DIMENSION]. */
static int check_size(const char * function, const char * name, int64_t value, int64_t minimum) {
    if (value < minimum || value > MAX_DIMENSION) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: %s is %lld, expected %lld to %lld", function, name, (long long)value, (long long)minimum,
             (long long)MAX_DIMENSION);
    }
    return MEMRA_OK;
}

static int check_product(const char * function, const char * what, int64_t a, int64_t b, int64_t * product) {
    if (__builtin_mul_overflow(a, b, product)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: %s overflows (%lld x %lld)", function, what, (long long)a, (long long)b);
    return MEMRA_OK;
}

/* A buffer of `length` elements that must hold `needed` (NULL allowed only when nothing is needed). */
static int check_buffer(const char * function, const char * name, const void * pointer, int64_t length, int64_t needed) {
    if (length < 0) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: %s_length is %lld", function, name, (long long)length);
    if (needed > 0 && !pointer) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", function, name);
    if (length < needed) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: %s holds %lld elements, %lld needed", function, name, (long long)length, (long long)needed);
    }
    return MEMRA_OK;
}

static int overlaps(const void * a, size_t a_bytes, const void * b, size_t b_bytes) {
    const uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a_bytes > 0 && b_bytes > 0 && a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

/* Bytes of one row of `n` values of `type` for dequantization, or a recorded failure. */
static int dequantized_row_bytes(const char * function, int type, int64_t n, const char * what, size_t * bytes) {
    const int64_t block = memra_dequantize_block_size(type);
    if (block == 0) FAIL(MEMRA_ERROR_UNSUPPORTED_TYPE, "%s: %s type %s is not supported", function, what, memra_type_name(type));
    if (n % block != 0) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: %s rows of %lld values are not a whole number of %s blocks (%lld values)", function, what,
             (long long)n, memra_type_name(type), (long long)block);
    }
    *bytes = (size_t)(n / block) * memra_dequantize_block_bytes(type);
    return MEMRA_OK;
}

static int check_weight_bytes(const char * function, const char * name, const void * data, int64_t bytes, int64_t rows, size_t row_bytes) {
    int64_t needed;
    CHECK(check_product(function, "weight size", rows, (int64_t)row_bytes, &needed));
    if (!data) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", function, name);
    if (bytes < needed) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: %s has %lld bytes, its shape needs %lld", function, name, (long long)bytes, (long long)needed);
    }
    return MEMRA_OK;
}

/* ---- ops ---- */

int memra_cpu_embedding(memra_cpu * cpu, float * out, int64_t out_length, int type, const void * table, int64_t table_bytes, int64_t width,
                        int64_t rows_in_table, const int32_t * ids, int64_t id_count) {
    static const char function[] = "memra_cpu_embedding";
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "width", width, 1));
    CHECK(check_size(function, "rows_in_table", rows_in_table, 1));
    CHECK(check_size(function, "id_count", id_count, 0));
    size_t row_bytes = 0;
    CHECK(dequantized_row_bytes(function, type, width, "table", &row_bytes));
    CHECK(check_weight_bytes(function, "table", table, table_bytes, rows_in_table, row_bytes));
    CHECK(check_buffer(function, "ids", ids, id_count, id_count));
    CHECK(check_buffer(function, "out", out, out_length, id_count * width));
    for (int64_t r = 0; r < id_count; r++) {
        if (ids[r] < 0 || ids[r] >= rows_in_table) {
            FAIL(MEMRA_ERROR_OUT_OF_RANGE, "%s: token id %d at position %lld is outside the table (0..%lld)", function, ids[r], (long long)r,
                 (long long)(rows_in_table - 1));
        }
    }
    memra_embedding(out, type, table, width, ids, id_count);
    return MEMRA_OK;
}

int memra_cpu_dequantize(memra_cpu * cpu, float * out, int64_t out_length, int type, const void * data, int64_t data_bytes, int64_t count) {
    static const char function[] = "memra_cpu_dequantize";
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "count", count, 0));
    size_t bytes = 0;
    CHECK(dequantized_row_bytes(function, type, count, "data", &bytes));
    if (count > 0) CHECK(check_weight_bytes(function, "data", data, data_bytes, 1, bytes));
    CHECK(check_buffer(function, "out", out, out_length, count));
    if (count > 0) memra_dequantize_row(type, data, out, count);
    return MEMRA_OK;
}

int memra_cpu_rms_norm(memra_cpu * cpu, float * out, int64_t out_length, const float * x, int64_t x_length, const float * weight,
                       int64_t weight_length, int64_t rows, int64_t width, float eps) {
    static const char function[] = "memra_cpu_rms_norm";
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "rows", rows, 0));
    CHECK(check_size(function, "width", width, 1));
    if (!(eps >= 0.0f)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: eps is %g, expected >= 0", function, (double)eps);
    int64_t values;
    CHECK(check_product(function, "rows * width", rows, width, &values));
    CHECK(check_buffer(function, "x", x, x_length, values));
    CHECK(check_buffer(function, "out", out, out_length, values));
    CHECK(check_buffer(function, "weight", weight, weight_length, width));
    if (out != x && overlaps(out, (size_t)values * 4, x, (size_t)values * 4)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out overlaps x without being x", function);
    if (values > 0) memra_rms_norm(cpu, out, x, weight, rows, width, eps);
    return MEMRA_OK;
}

static int matmul_checked(const char * function, memra_cpu * cpu, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows,
                          int type, const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out, int64_t experts, int64_t expert) {
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "rows", rows, 0));
    CHECK(check_size(function, "n_in", n_in, 1));
    CHECK(check_size(function, "n_out", n_out, 1));
    CHECK(check_size(function, "experts", experts, 1));
    if (expert < 0 || expert >= experts) FAIL(MEMRA_ERROR_OUT_OF_RANGE, "%s: expert %lld is outside 0..%lld", function, (long long)expert, (long long)(experts - 1));
    if (!memra_cpu_supports(MEMRA_OP_MATMUL, type)) FAIL(MEMRA_ERROR_UNSUPPORTED_TYPE, "%s: weight type %s has no dot-product kernel", function, memra_type_name(type));
    size_t row_bytes = 0;
    CHECK(dequantized_row_bytes(function, type, n_in, "weight", &row_bytes));
    if (memra_row_bytes(type, n_in) != row_bytes) {
        FAIL(MEMRA_ERROR_UNSUPPORTED_TYPE, "%s: weight type %s: row sizes of the dot-product kernels and of dequantize disagree", function, memra_type_name(type));
    }
    int64_t matrices_rows;
    CHECK(check_product(function, "experts * n_out", experts, n_out, &matrices_rows));
    CHECK(check_weight_bytes(function, "weight", weight, weight_bytes, matrices_rows, row_bytes));
    int64_t x_values, out_values;
    CHECK(check_product(function, "rows * n_in", rows, n_in, &x_values));
    CHECK(check_product(function, "rows * n_out", rows, n_out, &out_values));
    CHECK(check_buffer(function, "x", x, x_length, x_values));
    CHECK(check_buffer(function, "out", out, out_length, out_values));
    if (overlaps(out, (size_t)out_values * 4, x, (size_t)x_values * 4)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out overlaps x", function);
    if (rows == 0) return MEMRA_OK;
    const int activation_type = memra_dot_activation_type(type);
    if (activation_type != MEMRA_TYPE_F32) {
        const size_t converted_row_bytes = memra_matmul_scratch_row_bytes(cpu, type, rows, n_in);
        if (converted_row_bytes == 0) FAIL(MEMRA_ERROR_UNSUPPORTED_TYPE, "%s: no row size for activation type %s", function, memra_type_name(activation_type));
        int64_t converted_bytes;
        CHECK(check_product(function, "converted activations", rows, (int64_t)converted_row_bytes, &converted_bytes));
        converted_bytes = (int64_t)memra_matmul_scratch_bytes(cpu, type, rows, n_in, (size_t)converted_bytes);
        if (memra_cpu_reserve_converted(cpu, (size_t)converted_bytes) != MEMRA_OK) {
            FAIL(MEMRA_ERROR_OUT_OF_MEMORY, "%s: out of memory for %lld bytes of converted activations", function, (long long)converted_bytes);
        }
    }
    const uint8_t * matrix = (const uint8_t *)weight + (size_t)expert * (size_t)n_out * row_bytes;
    memra_matmul(cpu, out, x, rows, type, matrix, n_in, n_out);
    return MEMRA_OK;
}

int memra_cpu_matmul(memra_cpu * cpu, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows, int type, const void * weight,
                     int64_t weight_bytes, int64_t n_in, int64_t n_out) {
    return matmul_checked("memra_cpu_matmul", cpu, out, out_length, x, x_length, rows, type, weight, weight_bytes, n_in, n_out, 1, 0);
}

int memra_cpu_expert_matmul(memra_cpu * cpu, float * out, int64_t out_length, const float * x, int64_t x_length, int64_t rows, int type,
                            const void * weight, int64_t weight_bytes, int64_t n_in, int64_t n_out, int64_t experts, int64_t expert) {
    return matmul_checked("memra_cpu_expert_matmul", cpu, out, out_length, x, x_length, rows, type, weight, weight_bytes, n_in, n_out, experts, expert);
}

static int rope_checked(const char * function, memra_cpu * cpu, float * x, int64_t x_length, const int32_t * positions, int64_t rows, int64_t heads,
                        int64_t head_dim, float freq_base, const memra_rope_scaling * scaling) {
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "rows", rows, 0));
    CHECK(check_size(function, "heads", heads, 1));
    CHECK(check_size(function, "head_dim", head_dim, 2));
    if (head_dim % 2 != 0 || head_dim > MEMRA_MAX_HEAD_DIM) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: head_dim is %lld, expected an even number up to %d", function, (long long)head_dim, MEMRA_MAX_HEAD_DIM);
    }
    if (!(freq_base > 0.0f)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: freq_base is %g, expected > 0", function, (double)freq_base);
    if (scaling) {
        if (!(scaling->freq_scale > 0.0f) || !isfinite(scaling->freq_scale)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: freq_scale is %g, expected a finite value > 0", function, (double)scaling->freq_scale);
        if (!(scaling->ext_factor >= 0.0f && scaling->ext_factor <= 1.0f)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: ext_factor is %g, expected 0 to 1", function, (double)scaling->ext_factor);
        if (!(scaling->magnitude > 0.0f) || !isfinite(scaling->magnitude)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: magnitude is %g, expected a finite value > 0", function, (double)scaling->magnitude);
        if (!isfinite(scaling->corr_low) || !isfinite(scaling->corr_high)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: the correction dims must be finite", function);
    }
    int64_t width, values;
    CHECK(check_product(function, "heads * head_dim", heads, head_dim, &width));
    CHECK(check_product(function, "rows * heads * head_dim", rows, width, &values));
    CHECK(check_buffer(function, "x", x, x_length, values));
    CHECK(check_buffer(function, "positions", positions, rows, rows));
    if (values > 0) memra_rope_neox(cpu, x, positions, rows, heads, head_dim, freq_base, scaling);
    return MEMRA_OK;
}

int memra_cpu_rope_neox(memra_cpu * cpu, float * x, int64_t x_length, const int32_t * positions, int64_t rows, int64_t heads, int64_t head_dim,
                        float freq_base) {
    return rope_checked("memra_cpu_rope_neox", cpu, x, x_length, positions, rows, heads, head_dim, freq_base, NULL);
}

int memra_cpu_rope_neox_scaled(memra_cpu * cpu, float * x, int64_t x_length, const int32_t * positions, int64_t rows, int64_t heads,
                               int64_t head_dim, float freq_base, float freq_scale, float ext_factor, float magnitude, float corr_low,
                               float corr_high) {
    const memra_rope_scaling scaling = { freq_scale, ext_factor, magnitude, corr_low, corr_high };
    return rope_checked("memra_cpu_rope_neox_scaled", cpu, x, x_length, positions, rows, heads, head_dim, freq_base, &scaling);
}

int memra_cpu_attention(memra_cpu * cpu, float * out, int64_t out_length, const float * q, int64_t q_length, const float * keys, const float * values,
                        int64_t kv_length, int64_t kv_rows, int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t first_row,
                        float scale) {
    static const char function[] = "memra_cpu_attention";
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "rows", rows, 0));
    CHECK(check_size(function, "heads", heads, 1));
    CHECK(check_size(function, "kv_heads", kv_heads, 1));
    CHECK(check_size(function, "head_dim", head_dim, 1));
    CHECK(check_size(function, "first_row", first_row, 0));
    CHECK(check_size(function, "kv_rows", kv_rows, 0));
    if (head_dim > MEMRA_MAX_HEAD_DIM) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: head_dim is %lld, at most %d supported", function, (long long)head_dim, MEMRA_MAX_HEAD_DIM);
    if (heads % kv_heads != 0) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: heads (%lld) is not a multiple of kv_heads (%lld)", function, (long long)heads, (long long)kv_heads);
    if (rows > 0 && first_row + rows > kv_rows) {
        FAIL(MEMRA_ERROR_OUT_OF_RANGE, "%s: query rows reach cache row %lld, but the cache holds %lld rows", function, (long long)(first_row + rows - 1),
             (long long)kv_rows);
    }
    int64_t q_width, kv_width, q_values, kv_values;
    CHECK(check_product(function, "heads * head_dim", heads, head_dim, &q_width));
    CHECK(check_product(function, "kv_heads * head_dim", kv_heads, head_dim, &kv_width));
    CHECK(check_product(function, "rows * heads * head_dim", rows, q_width, &q_values));
    CHECK(check_product(function, "kv_rows * kv_heads * head_dim", kv_rows, kv_width, &kv_values));
    CHECK(check_buffer(function, "q", q, q_length, q_values));
    CHECK(check_buffer(function, "out", out, out_length, q_values));
    CHECK(check_buffer(function, "keys", keys, kv_length, kv_values));
    CHECK(check_buffer(function, "values", values, kv_length, kv_values));
    if (!(scale == scale)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: scale is NaN", function);
    if (out != q && overlaps(out, (size_t)q_values * 4, q, (size_t)q_values * 4)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out overlaps q without being q", function);
    if (overlaps(out, (size_t)q_values * 4, keys, (size_t)kv_values * 4) || overlaps(out, (size_t)q_values * 4, values, (size_t)kv_values * 4)) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out overlaps the keys or values", function);
    }
    if (rows == 0) return MEMRA_OK;
    const size_t scratch = memra_attention_scratch(heads, kv_heads, head_dim, first_row + rows);
    if (memra_cpu_reserve_scores(cpu, scratch) != MEMRA_OK) {
        FAIL(MEMRA_ERROR_OUT_OF_MEMORY, "%s: out of memory for %zu floats of attention scratch per thread", function, scratch);
    }
    memra_attention(cpu, out, q, keys, values, rows, heads, kv_heads, head_dim, first_row, scale);
    return MEMRA_OK;
}

/* A KV type this library stores, and its row size for `width` values. */
static int check_kv_type(const char * function, int type, int64_t width, size_t * row_bytes) {
    if (type != MEMRA_KV_F32 && type != MEMRA_KV_F16 && type != MEMRA_KV_Q8_0) {
        FAIL(MEMRA_ERROR_UNSUPPORTED_TYPE, "%s: KV type %s is not supported (f32, f16, q8_0)", function, memra_type_name(type));
    }
    if (type == MEMRA_KV_Q8_0 && width % 32 != 0) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: q8_0 KV rows of %lld values are not whole blocks of 32", function, (long long)width);
    *row_bytes = memra_kv_row_bytes(type, width);
    return MEMRA_OK;
}

/* Every slot inside the storage's `slot_count` rows. */
static int check_kv_slots(const char * function, const int32_t * slots, int64_t count, int64_t slot_count) {
    for (int64_t i = 0; i < count; i++) {
        if (slots[i] < 0 || slots[i] >= slot_count) {
            FAIL(MEMRA_ERROR_OUT_OF_RANGE, "%s: slot %d (row %lld) outside the storage's %lld slots", function, slots[i], (long long)i, (long long)slot_count);
        }
    }
    return MEMRA_OK;
}

int memra_cpu_kv_write(memra_cpu * cpu, int type, void * storage, int64_t storage_bytes, int64_t width, const int32_t * slots, int64_t count,
                       const float * source, int64_t source_length) {
    static const char function[] = "memra_cpu_kv_write";
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "width", width, 1));
    CHECK(check_size(function, "count", count, 0));
    CHECK(check_size(function, "storage_bytes", storage_bytes, 0));
    size_t row_bytes = 0;
    CHECK(check_kv_type(function, type, width, &row_bytes));
    int64_t values;
    CHECK(check_product(function, "count * width", count, width, &values));
    CHECK(check_buffer(function, "source", source, source_length, values));
    CHECK(check_buffer(function, "slots", slots, count, count));
    if (count > 0 && !storage) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: storage is NULL", function);
    CHECK(check_kv_slots(function, slots, count, storage_bytes / (int64_t)row_bytes));
    memra_kv_write(type, storage, width, slots, count, source);
    return MEMRA_OK;
}

/* Rows rotated per pass of memra_cpu_kv_rotate (its f32 scratch is this many rows). */
#define KV_ROTATE_ROWS 256

int memra_cpu_kv_rotate(memra_cpu * cpu, int type, void * storage, int64_t storage_bytes, int64_t heads, int64_t head_dim, const int32_t * slots,
                        int64_t count, int32_t delta, float freq_base, const float * rope) {
    static const char function[] = "memra_cpu_kv_rotate";
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "count", count, 0));
    CHECK(check_size(function, "storage_bytes", storage_bytes, 0));
    CHECK(check_size(function, "heads", heads, 1));
    CHECK(check_size(function, "head_dim", head_dim, 2));
    int64_t width;
    CHECK(check_product(function, "heads * head_dim", heads, head_dim, &width));
    size_t row_bytes = 0;
    CHECK(check_kv_type(function, type, width, &row_bytes));
    CHECK(check_buffer(function, "slots", slots, count, count));
    if (count > 0 && !storage) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: storage is NULL", function);
    CHECK(check_kv_slots(function, slots, count, storage_bytes / (int64_t)row_bytes));
    if (count == 0) return MEMRA_OK;
    const int64_t chunk = count < KV_ROTATE_ROWS ? count : KV_ROTATE_ROWS;
    float * scratch = malloc((size_t)(chunk * width) * sizeof(float));
    int32_t * positions = malloc((size_t)chunk * sizeof(int32_t));
    if (!scratch || !positions) {
        free(scratch);
        free(positions);
        FAIL(MEMRA_ERROR_OUT_OF_MEMORY, "%s: out of memory for %lld rows of %lld floats", function, (long long)chunk, (long long)width);
    }
    for (int64_t i = 0; i < chunk; i++) positions[i] = delta;
    int status = MEMRA_OK;
    for (int64_t first = 0; first < count && status == MEMRA_OK; first += chunk) {
        const int64_t rows = count - first < chunk ? count - first : chunk;
        for (int64_t i = 0; i < rows; i++) memra_kv_read(type, (const uint8_t *)storage + (size_t)slots[first + i] * row_bytes, scratch + i * width, width);
        status = rope ? memra_cpu_rope_neox_scaled(cpu, scratch, rows * width, positions, rows, heads, head_dim, freq_base, rope[0], rope[1], rope[2], rope[3], rope[4])
                      : memra_cpu_rope_neox(cpu, scratch, rows * width, positions, rows, heads, head_dim, freq_base);
        if (status == MEMRA_OK) memra_kv_write(type, storage, width, slots + first, rows, scratch);
    }
    free(scratch);
    free(positions);
    return status;
}

int memra_cpu_paged_attention(memra_cpu * cpu, float * out, int64_t out_length, const float * q, int64_t q_length, int type, const void * keys,
                              const void * values, int64_t storage_bytes, int64_t block_tokens, const int32_t * block_tables, int64_t table_length,
                              const int32_t * sequences, int64_t sequence_count, int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim,
                              float scale) {
    static const char function[] = "memra_cpu_paged_attention";
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "rows", rows, 0));
    CHECK(check_size(function, "heads", heads, 1));
    CHECK(check_size(function, "kv_heads", kv_heads, 1));
    CHECK(check_size(function, "head_dim", head_dim, 1));
    CHECK(check_size(function, "block_tokens", block_tokens, 1));
    CHECK(check_size(function, "table_length", table_length, 0));
    CHECK(check_size(function, "sequence_count", sequence_count, 0));
    CHECK(check_size(function, "storage_bytes", storage_bytes, 0));
    if (head_dim > MEMRA_MAX_HEAD_DIM) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: head_dim is %lld, at most %d supported", function, (long long)head_dim, MEMRA_MAX_HEAD_DIM);
    if (heads % kv_heads != 0) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: heads (%lld) is not a multiple of kv_heads (%lld)", function, (long long)heads, (long long)kv_heads);
    if (type == MEMRA_KV_Q8_0 && head_dim % 32 != 0) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: q8_0 KV needs head_dim a multiple of 32, got %lld", function, (long long)head_dim);
    int64_t q_width, kv_width, q_values, sequence_values;
    CHECK(check_product(function, "heads * head_dim", heads, head_dim, &q_width));
    CHECK(check_product(function, "kv_heads * head_dim", kv_heads, head_dim, &kv_width));
    CHECK(check_product(function, "rows * heads * head_dim", rows, q_width, &q_values));
    CHECK(check_product(function, "sequence_count * 4", sequence_count, 4, &sequence_values));
    size_t row_bytes = 0;
    CHECK(check_kv_type(function, type, kv_width, &row_bytes));
    CHECK(check_buffer(function, "q", q, q_length, q_values));
    CHECK(check_buffer(function, "out", out, out_length, q_values));
    CHECK(check_buffer(function, "block_tables", block_tables, table_length, table_length));
    CHECK(check_buffer(function, "sequences", sequences, sequence_values, sequence_values));
    if (rows > 0 && (!keys || !values)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: keys or values is NULL", function);
    if (!(scale == scale)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: scale is NaN", function);
    if (out != q && overlaps(out, (size_t)q_values * 4, q, (size_t)q_values * 4)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out overlaps q without being q", function);
    if (overlaps(out, (size_t)q_values * 4, keys, (size_t)storage_bytes) || overlaps(out, (size_t)q_values * 4, values, (size_t)storage_bytes)) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out overlaps the keys or values", function);
    }
    /* Every sequence: its query rows inside [0, rows), in order without overlap; its block table inside
     * block_tables and long enough for every visible token; every block id inside the storage. */
    const int64_t storage_blocks = storage_bytes / (int64_t)row_bytes / block_tokens;
    const memra_attention_sequence * list = (const memra_attention_sequence *)sequences;
    int64_t next_row = 0, tile_count = 0, visible = 0;
    for (int64_t s = 0; s < sequence_count; s++) {
        const memra_attention_sequence * sequence = &list[s];
        if (sequence->query_row != next_row || sequence->rows < 1 || sequence->position < 0 || sequence->table_offset < 0) {
            FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: sequence %lld (query row %d, rows %d, position %d, table offset %d) is not the next rows of the batch",
                 function, (long long)s, sequence->query_row, sequence->rows, sequence->position, sequence->table_offset);
        }
        next_row += sequence->rows;
        if (next_row > rows) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: sequences hold more than the %lld query rows", function, (long long)rows);
        const int64_t end = (int64_t)sequence->position + sequence->rows;
        const int64_t blocks = (end + block_tokens - 1) / block_tokens;
        if (sequence->table_offset + blocks > table_length) {
            FAIL(MEMRA_ERROR_OUT_OF_RANGE, "%s: sequence %lld needs %lld blocks from table offset %d, block_tables holds %lld", function, (long long)s,
                 (long long)blocks, sequence->table_offset, (long long)table_length);
        }
        for (int64_t b = 0; b < blocks; b++) {
            const int32_t block = block_tables[sequence->table_offset + b];
            if (block < 0 || block >= storage_blocks) {
                FAIL(MEMRA_ERROR_OUT_OF_RANGE, "%s: sequence %lld block %lld is %d, outside the storage's %lld blocks", function, (long long)s, (long long)b, block,
                     (long long)storage_blocks);
            }
        }
        tile_count += (sequence->rows + memra_paged_attention_tile_rows() - 1) / memra_paged_attention_tile_rows();
        visible = end > visible ? end : visible;
    }
    if (next_row != rows) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: sequences hold %lld query rows, rows is %lld", function, (long long)next_row, (long long)rows);
    if (rows == 0) return MEMRA_OK;
    const size_t scratch = memra_paged_attention_scratch(heads, kv_heads, head_dim, block_tokens, memra_paged_attention_tile_rows(), visible);
    if (memra_cpu_reserve_scores(cpu, scratch) != MEMRA_OK) {
        FAIL(MEMRA_ERROR_OUT_OF_MEMORY, "%s: out of memory for %zu floats of attention scratch per thread", function, scratch);
    }
    int64_t * tiles = malloc((size_t)tile_count * 2 * sizeof(int64_t));
    if (!tiles) FAIL(MEMRA_ERROR_OUT_OF_MEMORY, "%s: out of memory for %lld attention tiles", function, (long long)tile_count);
    int64_t tile = 0;
    for (int64_t s = 0; s < sequence_count; s++) {
        for (int64_t first = 0; first < list[s].rows; first += memra_paged_attention_tile_rows(), tile++) {
            tiles[tile * 2] = s;
            tiles[tile * 2 + 1] = first;
        }
    }
    memra_paged_attention(cpu, out, q, type, keys, values, block_tokens, block_tables, list, sequence_count, heads, kv_heads, head_dim, scale, tiles, tile_count);
    free(tiles);
    return MEMRA_OK;
}

/* Checks out/a/b of an elementwise op: out may be a or b, but not partly overlap them. */
static int check_elementwise(const char * function, const memra_cpu * cpu, const float * out, int64_t out_length, const char * a_name, const float * a,
                             int64_t a_length, const char * b_name, const float * b, int64_t b_length, int64_t length) {
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "length", length, 0));
    CHECK(check_buffer(function, "out", out, out_length, length));
    CHECK(check_buffer(function, a_name, a, a_length, length));
    CHECK(check_buffer(function, b_name, b, b_length, length));
    const size_t bytes = (size_t)length * 4;
    if ((out != a && overlaps(out, bytes, a, bytes)) || (out != b && overlaps(out, bytes, b, bytes))) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out partly overlaps %s or %s", function, a_name, b_name);
    }
    return MEMRA_OK;
}

int memra_cpu_swiglu(memra_cpu * cpu, float * out, int64_t out_length, const float * gate, int64_t gate_length, const float * up, int64_t up_length,
                     int64_t length) {
    CHECK(check_elementwise("memra_cpu_swiglu", cpu, out, out_length, "gate", gate, gate_length, "up", up, up_length, length));
    if (length > 0) memra_swiglu(cpu, out, gate, up, length);
    return MEMRA_OK;
}

int memra_cpu_add(memra_cpu * cpu, float * out, int64_t out_length, const float * a, int64_t a_length, const float * b, int64_t b_length, int64_t length) {
    CHECK(check_elementwise("memra_cpu_add", cpu, out, out_length, "a", a, a_length, "b", b, b_length, length));
    if (length > 0) memra_add(cpu, out, a, b, length);
    return MEMRA_OK;
}

int memra_cpu_moe_route(memra_cpu * cpu, int32_t * ids_out, float * weights_out, int64_t out_length, const float * logits, int64_t logits_length,
                        int64_t rows, int64_t experts, int64_t k) {
    static const char function[] = "memra_cpu_moe_route";
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "rows", rows, 0));
    CHECK(check_size(function, "experts", experts, 1));
    CHECK(check_size(function, "k", k, 1));
    if (k > experts) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: k (%lld) is larger than experts (%lld)", function, (long long)k, (long long)experts);
    int64_t logit_count, selected;
    CHECK(check_product(function, "rows * experts", rows, experts, &logit_count));
    CHECK(check_product(function, "rows * k", rows, k, &selected));
    CHECK(check_buffer(function, "logits", logits, logits_length, logit_count));
    CHECK(check_buffer(function, "ids_out", ids_out, out_length, selected));
    CHECK(check_buffer(function, "weights_out", weights_out, out_length, selected));
    if (rows > 0) memra_moe_route(ids_out, weights_out, logits, rows, experts, k);
    return MEMRA_OK;
}

/* Checks that every id is a row of a buffer holding `available` rows. */
static int check_row_ids(const char * function, const char * buffer, const int32_t * row_ids, int64_t count, int64_t available) {
    for (int64_t i = 0; i < count; i++) {
        if (row_ids[i] < 0 || row_ids[i] >= available) {
            FAIL(MEMRA_ERROR_OUT_OF_RANGE, "%s: row id %d at index %lld is outside %s (%lld rows)", function, row_ids[i], (long long)i, buffer,
                 (long long)available);
        }
    }
    return MEMRA_OK;
}

int memra_cpu_gather_rows(memra_cpu * cpu, float * out, int64_t out_length, const float * x, int64_t x_length, const int32_t * row_ids, int64_t count,
                          int64_t width) {
    static const char function[] = "memra_cpu_gather_rows";
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "count", count, 0));
    CHECK(check_size(function, "width", width, 1));
    int64_t values;
    CHECK(check_product(function, "count * width", count, width, &values));
    CHECK(check_buffer(function, "out", out, out_length, values));
    CHECK(check_buffer(function, "row_ids", row_ids, count, count));
    CHECK(check_buffer(function, "x", x, x_length, count > 0 ? width : 0));
    CHECK(check_row_ids(function, "x", row_ids, count, x_length / width));
    if (overlaps(out, (size_t)values * 4, x, (size_t)x_length * 4)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out overlaps x", function);
    memra_gather_rows(out, x, row_ids, count, width);
    return MEMRA_OK;
}

int memra_cpu_scatter_add_rows(memra_cpu * cpu, float * out, int64_t out_length, const float * x, int64_t x_length, const int32_t * row_ids,
                               const float * scales, int64_t count, int64_t width) {
    static const char function[] = "memra_cpu_scatter_add_rows";
    CHECK(check_cpu(function, cpu));
    CHECK(check_size(function, "count", count, 0));
    CHECK(check_size(function, "width", width, 1));
    int64_t values;
    CHECK(check_product(function, "count * width", count, width, &values));
    CHECK(check_buffer(function, "x", x, x_length, values));
    CHECK(check_buffer(function, "row_ids", row_ids, count, count));
    CHECK(check_buffer(function, "scales", scales, count, count));
    CHECK(check_buffer(function, "out", out, out_length, count > 0 ? width : 0));
    CHECK(check_row_ids(function, "out", row_ids, count, out_length / width));
    if (overlaps(out, (size_t)out_length * 4, x, (size_t)values * 4)) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out overlaps x", function);
    memra_scatter_add_rows(out, x, row_ids, scales, count, width);
    return MEMRA_OK;
}

/* memra_cpu_quantize: blocks of 256 values in chunks of 16 blocks over the context's threads. */
typedef struct {
    int type;
    const float * x;
    uint8_t * y;
    int64_t blocks;
    int64_t block_values;
    size_t block_bytes;
} quantize_task;

/* 16 k-quant blocks (4,096 values) or 128 of the 32-value types: enough work to be worth a dispatch. */
enum { QUANTIZE_CHUNK_VALUES = 4096 };

static void quantize_chunk(void * argument, int64_t chunk, int thread_index) {
    (void)thread_index;
    const quantize_task * t = argument;
    const int64_t per_chunk = QUANTIZE_CHUNK_VALUES / t->block_values;
    const int64_t first = chunk * per_chunk;
    const int64_t n = t->blocks - first < per_chunk ? t->blocks - first : per_chunk;
    memra_quantize_blocks(t->type, t->x + first * t->block_values, t->y + first * t->block_bytes, n);
}

/* A type memra_quantize_row writes: its block bytes, or a recorded failure. */
static int check_quantize_type(const char * function, int type, size_t * block_bytes) {
    *block_bytes = memra_quantize_block_bytes(type);
    if (*block_bytes == 0) {
        FAIL(MEMRA_ERROR_UNSUPPORTED_TYPE, "%s: type %s is not supported (q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, iq3_s, iq3_xxs, iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m)",
             function, memra_type_name(type));
    }
    return MEMRA_OK;
}

static int check_quantize(const char * function, int type, const float * x, int64_t count, const void * out, int64_t out_bytes, size_t * block_bytes) {
    CHECK(check_quantize_type(function, type, block_bytes));
    if (memra_quantize_requires_importance(type)) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: %s needs an importance matrix (memra_cpu_quantize_rows)", function, memra_type_name(type));
    }
    const int64_t block_values = memra_quantize_block_values(type);
    if (count < 0 || count % block_values != 0) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: count is %lld, not a whole number of %s blocks (%lld values)", function, (long long)count,
             memra_type_name(type), (long long)block_values);
    }
    if (count > 0 && !x) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: x is NULL", function);
    int64_t needed;
    CHECK(check_product(function, "out size", count / block_values, (int64_t)*block_bytes, &needed));
    if (needed > 0 && !out) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out is NULL", function);
    if (out_bytes < needed) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out has %lld bytes, %lld %s blocks need %lld", function, (long long)out_bytes, (long long)(count / block_values),
             memra_type_name(type), (long long)needed);
    }
    return MEMRA_OK;
}

int memra_cpu_quantize(memra_cpu * cpu, int type, const float * x, int64_t count, void * out, int64_t out_bytes) {
    static const char function[] = "memra_cpu_quantize";
    CHECK(check_cpu(function, cpu));
    size_t block_bytes;
    CHECK(check_quantize(function, type, x, count, out, out_bytes, &block_bytes));
    const int64_t block_values = memra_quantize_block_values(type);
    quantize_task task = { type, x, (uint8_t *)out, count / block_values, block_values, block_bytes };
    const int64_t per_chunk = QUANTIZE_CHUNK_VALUES / block_values;
    memra_pool_run(cpu->pool, quantize_chunk, &task, (task.blocks + per_chunk - 1) / per_chunk);
    return MEMRA_OK;
}

int memra_quantize(int type, const float * x, int64_t count, void * out, int64_t out_bytes) {
    size_t block_bytes;
    CHECK(check_quantize("memra_quantize", type, x, count, out, out_bytes, &block_bytes));
    memra_quantize_blocks(type, x, (uint8_t *)out, count / memra_quantize_block_values(type));
    return MEMRA_OK;
}

/* memra_cpu_quantize_rows with importance: whole rows, at least QUANTIZE_CHUNK_VALUES values a chunk, over the context's threads. */
typedef struct {
    int type;
    const float * x;
    const float * importance;
    uint8_t * y;
    int64_t rows;
    int64_t row_length;
    int64_t rows_per_chunk;
    size_t row_bytes;
} quantize_rows_task;

static void quantize_rows_chunk(void * argument, int64_t chunk, int thread_index) {
    (void)thread_index;
    const quantize_rows_task * t = argument;
    const int64_t first = chunk * t->rows_per_chunk;
    const int64_t end = t->rows - first < t->rows_per_chunk ? t->rows : first + t->rows_per_chunk;
    for (int64_t row = first; row < end; row++) {
        memra_quantize_row(t->type, t->x + row * t->row_length, t->y + (size_t)row * t->row_bytes, t->row_length, t->importance);
    }
}

int memra_cpu_quantize_rows(memra_cpu * cpu, int type, const float * x, int64_t rows, int64_t row_length, const float * importance, void * out,
                            int64_t out_bytes) {
    static const char function[] = "memra_cpu_quantize_rows";
    CHECK(check_cpu(function, cpu));
    size_t block_bytes;
    CHECK(check_quantize_type(function, type, &block_bytes));
    CHECK(check_size(function, "rows", rows, 0));
    CHECK(check_size(function, "row_length", row_length, 1));
    const int64_t block_values = memra_quantize_block_values(type);
    if (row_length % block_values != 0) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: row_length is %lld, not a whole number of %s blocks (%lld values)", function, (long long)row_length,
             memra_type_name(type), (long long)block_values);
    }
    if (!importance && memra_quantize_requires_importance(type)) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: %s needs an importance matrix, importance is NULL", function, memra_type_name(type));
    }
    int64_t count;
    CHECK(check_product(function, "rows * row_length", rows, row_length, &count));
    if (count > 0 && !x) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: x is NULL", function);
    const int64_t row_bytes = row_length / block_values * (int64_t)block_bytes;
    int64_t needed;
    CHECK(check_product(function, "out size", rows, row_bytes, &needed));
    if (needed > 0 && !out) FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out is NULL", function);
    if (out_bytes < needed) {
        FAIL(MEMRA_ERROR_INVALID_ARGUMENT, "%s: out has %lld bytes, %lld rows of %lld %s values need %lld", function, (long long)out_bytes, (long long)rows,
             (long long)row_length, memra_type_name(type), (long long)needed);
    }
    if (count == 0) return MEMRA_OK;
    if (!importance) {
        /* without importance rows do not matter: memra_cpu_quantize's chunks of blocks */
        quantize_task task = { type, x, (uint8_t *)out, count / block_values, block_values, block_bytes };
        const int64_t per_chunk = QUANTIZE_CHUNK_VALUES / block_values;
        memra_pool_run(cpu->pool, quantize_chunk, &task, (task.blocks + per_chunk - 1) / per_chunk);
        return MEMRA_OK;
    }
    const int64_t rows_per_chunk = row_length >= QUANTIZE_CHUNK_VALUES ? 1 : QUANTIZE_CHUNK_VALUES / row_length;
    quantize_rows_task task = { type, x, importance, (uint8_t *)out, rows, row_length, rows_per_chunk, (size_t)row_bytes };
    memra_pool_run(cpu->pool, quantize_rows_chunk, &task, (rows + rows_per_chunk - 1) / rows_per_chunk);
    return MEMRA_OK;
}
