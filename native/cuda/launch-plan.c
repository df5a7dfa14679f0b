/*
 * launch-plan.c — launch decisions and allocator/arena bookkeeping of libmemra_cuda, as plain C
 * (see launch-plan.h). Status values are memra_cuda.h's.
 */
#include "launch-plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memra_cuda.h"

int64_t memra_cuda_type_block_values(int type) {
    switch (type) {
        case MEMRA_CUDA_TYPE_F32: case MEMRA_CUDA_TYPE_F16: case MEMRA_CUDA_TYPE_BF16: return 1;
        case MEMRA_CUDA_TYPE_Q4_0: case MEMRA_CUDA_TYPE_Q4_1: case MEMRA_CUDA_TYPE_Q5_0: case MEMRA_CUDA_TYPE_Q5_1:
        case MEMRA_CUDA_TYPE_Q8_0: case MEMRA_CUDA_TYPE_IQ4_NL: return 32;
        case MEMRA_CUDA_TYPE_Q2_K: case MEMRA_CUDA_TYPE_Q3_K: case MEMRA_CUDA_TYPE_Q4_K: case MEMRA_CUDA_TYPE_Q5_K: case MEMRA_CUDA_TYPE_Q6_K:
        case MEMRA_CUDA_TYPE_IQ4_XS: case MEMRA_CUDA_TYPE_Q8_0_X8: case MEMRA_CUDA_TYPE_Q4_0_X8: return 256;
        case MEMRA_CUDA_TYPE_IQ2_XXS: case MEMRA_CUDA_TYPE_IQ2_XS: case MEMRA_CUDA_TYPE_IQ2_S: case MEMRA_CUDA_TYPE_IQ3_XXS: case MEMRA_CUDA_TYPE_IQ3_S:
        case MEMRA_CUDA_TYPE_IQ1_S: case MEMRA_CUDA_TYPE_IQ1_M: return 256;
        case MEMRA_CUDA_TYPE_Q6_K_X8: return 2048;
        default: return 0;
    }
}

int64_t memra_cuda_type_block_bytes(int type) {
    switch (type) {
        case MEMRA_CUDA_TYPE_F32: return 4;
        case MEMRA_CUDA_TYPE_F16: case MEMRA_CUDA_TYPE_BF16: return 2;
        case MEMRA_CUDA_TYPE_Q4_0: return 18;
        case MEMRA_CUDA_TYPE_Q4_1: return 20;
        case MEMRA_CUDA_TYPE_Q5_0: return 22;
        case MEMRA_CUDA_TYPE_Q5_1: return 24;
        case MEMRA_CUDA_TYPE_Q8_0: return 34;
        case MEMRA_CUDA_TYPE_IQ4_NL: return 18;
        case MEMRA_CUDA_TYPE_Q2_K: return 84;
        case MEMRA_CUDA_TYPE_Q3_K: return 110;
        case MEMRA_CUDA_TYPE_Q4_K: return 144;
        case MEMRA_CUDA_TYPE_Q5_K: return 176;
        case MEMRA_CUDA_TYPE_Q6_K: return 210;
        case MEMRA_CUDA_TYPE_IQ4_XS: return 136;
        case MEMRA_CUDA_TYPE_IQ2_XXS: return 66;
        case MEMRA_CUDA_TYPE_IQ2_XS: return 74;
        case MEMRA_CUDA_TYPE_IQ2_S: return 82;
        case MEMRA_CUDA_TYPE_IQ3_XXS: return 98;
        case MEMRA_CUDA_TYPE_IQ3_S: return 110;
        case MEMRA_CUDA_TYPE_IQ1_S: return 50;
        case MEMRA_CUDA_TYPE_IQ1_M: return 56;
        case MEMRA_CUDA_TYPE_Q8_0_X8: return 272;
        case MEMRA_CUDA_TYPE_Q6_K_X8: return 1680;
        case MEMRA_CUDA_TYPE_Q4_0_X8: return 144;
        default: return 0;
    }
}

int memra_cuda_type_is_q8_0(int type) { return type == MEMRA_CUDA_TYPE_Q8_0 || type == MEMRA_CUDA_TYPE_Q8_0_X8; }

int memra_cuda_repacked_type(int type, int64_t n) {
    if (type == MEMRA_CUDA_TYPE_Q8_0 && n > 0 && n % 256 == 0) return MEMRA_CUDA_TYPE_Q8_0_X8;
    if (type == MEMRA_CUDA_TYPE_Q4_0 && n > 0 && n % 256 == 0) return MEMRA_CUDA_TYPE_Q4_0_X8;
    if (type == MEMRA_CUDA_TYPE_Q6_K && n > 0 && n % 2048 == 0) return MEMRA_CUDA_TYPE_Q6_K_X8;
    return type;
}

int memra_cuda_weight_type_supported(int type) { return memra_cuda_type_block_values(type) > 0; }

int64_t memra_cuda_row_bytes(int type, int64_t n) {
    const int64_t values = memra_cuda_type_block_values(type);
    if (values == 0 || n < 0 || n % values != 0) return 0;
    return n / values * memra_cuda_type_block_bytes(type);
}

int64_t memra_cuda_kv_row_bytes(int type, int64_t width) {
    if (width <= 0) return 0;
    switch (type) {
        case MEMRA_CUDA_TYPE_F32: return width * 4;
        case MEMRA_CUDA_TYPE_F16: return width * 2;
        case MEMRA_CUDA_TYPE_Q8_0: return width % 32 == 0 ? width / 32 * 34 : 0;
        default: return 0;
    }
}

static int fail(char * message, size_t message_bytes, int status, const char * format, ...) {
    if (message && message_bytes > 0) {
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(message, message_bytes, format, arguments);
        va_end(arguments);
    }
    return status;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Split-K parts of a GEMM with `tiles` output tiles and `k_steps` steps of its k loop: 1 from
 * `target` tiles on, else enough parts to reach it, at most `most` and `k_steps`, and none empty. */
static int64_t split_parts(int64_t tiles, int64_t k_steps, int64_t target, int64_t most) {
    if (tiles >= target) return 1;
    const int64_t wanted = min64(min64(ceil_div(target, tiles), most), k_steps);
    return ceil_div(k_steps, ceil_div(k_steps, wanted));
}

static memra_cuda_launch launch_of(int64_t x, int64_t y, int64_t z, int32_t threads, int32_t shared) {
    memra_cuda_launch launch = {x, y, z, threads, shared};
    return launch;
}

int32_t memra_cuda_gemm_shared_bytes(void) {
    return (MEMRA_CUDA_GEMM_TILE_M + MEMRA_CUDA_GEMM_TILE_N) * (MEMRA_CUDA_GEMM_TILE_K + MEMRA_CUDA_GEMM_PAD) * 2;
}

int memra_cuda_plan_matmul_for(int type, int64_t rows, int64_t n_in, int64_t n_out, memra_cuda_matmul_plan * plan, char * message,
                               size_t message_bytes) {
    return memra_cuda_plan_matmul_with(type, rows, n_in, n_out, 1, plan, message, message_bytes);
}

int memra_cuda_plan_matmul_with(int type, int64_t rows, int64_t n_in, int64_t n_out, int allow_gemm, memra_cuda_matmul_plan * plan, char * message,
                                size_t message_bytes) {
    memra_cuda_matmul_plan none = {MEMRA_CUDA_MATMUL_NONE, {0, 0, 0, 0, 0}, 0, 0};
    *plan = none;
    if (!memra_cuda_weight_type_supported(type)) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_UNSUPPORTED_TYPE, "weight type %d has no CUDA matmul kernel", type);
    }
    if (rows < 0 || n_in <= 0 || n_out <= 0) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "rows %lld, n_in %lld, n_out %lld: sizes must be positive", (long long)rows,
                    (long long)n_in, (long long)n_out);
    }
    const int64_t block = memra_cuda_type_block_values(type);
    const int64_t multiple = block > MEMRA_CUDA_GROUP_VALUES ? block : MEMRA_CUDA_GROUP_VALUES;
    if (n_in % multiple != 0) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_UNSUPPORTED, "n_in %lld is not a multiple of %lld (the CUDA kernels read %lld values at a time)",
                    (long long)n_in, (long long)multiple, (long long)multiple);
    }
    if (rows == 0) return MEMRA_CUDA_OK;
    /* f32 weights stay on the f32 matrix-vector kernel: the GEMM would round them to f16. */
    if (allow_gemm && type != MEMRA_CUDA_TYPE_F32 && rows >= MEMRA_CUDA_GEMM_MIN_ROWS && n_in % MEMRA_CUDA_GEMM_TILE_K == 0) {
        plan->kernel = MEMRA_CUDA_MATMUL_GEMM;
        const int64_t row_tiles = ceil_div(rows, MEMRA_CUDA_GEMM_TILE_M);
        const int64_t tiles_per_launch = min64(row_tiles, MEMRA_CUDA_MAX_GRID_YZ);
        const int64_t column_tiles = ceil_div(n_out, MEMRA_CUDA_GEMM_TILE_N);
        const int64_t splits = split_parts(column_tiles * tiles_per_launch, n_in / MEMRA_CUDA_GEMM_TILE_K, MEMRA_CUDA_GEMM_TARGET_BLOCKS, MEMRA_CUDA_GEMM_MAX_SPLITS);
        plan->launch = launch_of(column_tiles, tiles_per_launch, splits, MEMRA_CUDA_GEMM_THREADS, 0);
        plan->rows_per_launch = tiles_per_launch * MEMRA_CUDA_GEMM_TILE_M;
        plan->launches = ceil_div(rows, plan->rows_per_launch);
        return MEMRA_CUDA_OK;
    }
    plan->kernel = MEMRA_CUDA_MATMUL_VECTOR;
    plan->rows_per_launch = min64(rows, MEMRA_CUDA_MMV_MAX_ROWS);
    plan->launches = ceil_div(rows, plan->rows_per_launch);
    plan->launch = launch_of(ceil_div(n_out, MEMRA_CUDA_MMV_WARPS), 1, 1, MEMRA_CUDA_MMV_WARPS * 32, 0);
    if (plan->launch.grid_x > MEMRA_CUDA_MAX_GRID_X) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_UNSUPPORTED, "n_out %lld needs more blocks than a grid holds", (long long)n_out);
    }
    return MEMRA_CUDA_OK;
}

int32_t memra_cuda_plan_mmv_split(int64_t features, int64_t blocks, int64_t iteration_blocks, int32_t multiprocessors, int32_t forced) {
    if (forced == 1 || forced == 2 || forced == 4) return forced;
    if (features <= 0 || blocks <= 0 || iteration_blocks <= 0 || multiprocessors <= 0) return 1;
    const int64_t iterations = ceil_div(blocks, iteration_blocks);
    const int64_t warps = (int64_t)multiprocessors * MEMRA_CUDA_MMV_SPLIT_WARPS_PER_SM;
    int32_t split = 1;
    while (split < MEMRA_CUDA_MMV_WARPS && split < iterations && features <= warps / (2 * split)) split *= 2;
    return split;
}

int64_t memra_cuda_gemm_split_inputs(const memra_cuda_matmul_plan * plan, int64_t n_in) {
    const int64_t k_steps = n_in / MEMRA_CUDA_GEMM_TILE_K;
    return ceil_div(k_steps, plan->launch.grid_z > 0 ? plan->launch.grid_z : 1) * MEMRA_CUDA_GEMM_TILE_K;
}

int memra_cuda_int8_gemm_supports(int type) {
    return memra_cuda_type_is_q8_0(type) || type == MEMRA_CUDA_TYPE_Q4_0 || type == MEMRA_CUDA_TYPE_Q4_0_X8 || type == MEMRA_CUDA_TYPE_Q5_0;
}

int32_t memra_cuda_int8_gemm_shared_bytes(void) {
    /* per stage: int8 codes of TILE_M + TILE_N rows of TILE_K, and an f32 scale per row and block */
    const int32_t blocks = MEMRA_CUDA_INT8_GEMM_TILE_K / 32;
    const int32_t stage = (MEMRA_CUDA_INT8_GEMM_TILE_M + MEMRA_CUDA_INT8_GEMM_TILE_N) * (MEMRA_CUDA_INT8_GEMM_TILE_K + blocks * 4);
    return MEMRA_CUDA_INT8_GEMM_STAGES * stage;
}

int32_t memra_cuda_int8_pipe_shared_bytes(int32_t tile_m) {
    const int32_t row_bytes = MEMRA_CUDA_INT8_PIPE_BLOCKS * 32;
    const int32_t stage = (tile_m + MEMRA_CUDA_INT8_GEMM_TILE_N) * row_bytes + tile_m * MEMRA_CUDA_INT8_PIPE_BLOCKS * 4 + MEMRA_CUDA_INT8_GEMM_TILE_N * MEMRA_CUDA_INT8_PIPE_BLOCKS * 2;
    return MEMRA_CUDA_INT8_PIPE_STAGES * stage;
}

/* Split-K parts of `tiles` output tiles over k_steps k-tiles when `slots` blocks run at once: the
 * count (at most `most`, parts of equal k-tiles but the last, none empty) whose waves × k-tiles a
 * block is least, and the fewest parts among equals (each part's sums cost a write and a read). */
static int64_t wave_parts(int64_t tiles, int64_t k_steps, int64_t slots, int64_t most) {
    int64_t best = 1, best_cost = -1;
    for (int64_t wanted = 1; wanted <= min64(most, k_steps); wanted++) {
        const int64_t per_part = ceil_div(k_steps, wanted), parts = ceil_div(k_steps, per_part);
        const int64_t cost = ceil_div(tiles * parts, slots) * per_part;
        if (best_cost < 0 || cost < best_cost) {
            best_cost = cost;
            best = parts;
        }
    }
    return best;
}

int memra_cuda_plan_int8_gemm(int type, int64_t rows, int64_t n_in, int64_t n_out, int64_t slots, memra_cuda_matmul_plan * plan, char * message,
                              size_t message_bytes) {
    memra_cuda_matmul_plan none = {MEMRA_CUDA_MATMUL_NONE, {0, 0, 0, 0, 0}, 0, 0};
    *plan = none;
    if (!memra_cuda_int8_gemm_supports(type)) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_UNSUPPORTED_TYPE, "weight type %d has no int8 GEMM (q8_0, q4_0, q5_0 only)", type);
    }
    if (rows <= 0 || n_in <= 0 || n_out <= 0) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "rows %lld, n_in %lld, n_out %lld: sizes must be positive", (long long)rows,
                    (long long)n_in, (long long)n_out);
    }
    if (n_in % 32 != 0) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_UNSUPPORTED, "n_in %lld is not a multiple of 32", (long long)n_in);
    }
    const int64_t column_tiles = ceil_div(n_out, MEMRA_CUDA_INT8_GEMM_TILE_N);
    if (column_tiles > MEMRA_CUDA_MAX_GRID_X) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_UNSUPPORTED, "n_out %lld needs more blocks than a grid holds", (long long)n_out);
    }
    const int64_t row_tiles = ceil_div(rows, MEMRA_CUDA_INT8_GEMM_TILE_M);
    const int64_t tiles_per_launch = min64(row_tiles, MEMRA_CUDA_MAX_GRID_YZ);
    const int64_t splits = wave_parts(column_tiles * tiles_per_launch, ceil_div(n_in, MEMRA_CUDA_INT8_GEMM_TILE_K),
                                      slots > 0 ? slots : MEMRA_CUDA_INT8_GEMM_DEFAULT_SLOTS, MEMRA_CUDA_INT8_GEMM_MAX_SPLITS);
    plan->kernel = MEMRA_CUDA_MATMUL_GEMM;
    plan->launch = launch_of(column_tiles, tiles_per_launch, splits, MEMRA_CUDA_INT8_GEMM_THREADS, 0); /* static shared memory */
    plan->rows_per_launch = tiles_per_launch * MEMRA_CUDA_INT8_GEMM_TILE_M;
    plan->launches = ceil_div(rows, plan->rows_per_launch);
    return MEMRA_CUDA_OK;
}

int64_t memra_cuda_int8_gemm_split_tiles(const memra_cuda_matmul_plan * plan, int64_t n_in) {
    const int64_t k_tiles = ceil_div(n_in, MEMRA_CUDA_INT8_GEMM_TILE_K);
    return ceil_div(k_tiles, plan->launch.grid_z > 0 ? plan->launch.grid_z : 1);
}

int memra_cuda_activation_rounding(int type) {
    switch (type) {
        case MEMRA_CUDA_TYPE_Q4_0:
        case MEMRA_CUDA_TYPE_Q4_0_X8:
        case MEMRA_CUDA_TYPE_Q5_0:
        case MEMRA_CUDA_TYPE_Q8_0:
        case MEMRA_CUDA_TYPE_Q8_0_X8:
        case MEMRA_CUDA_TYPE_IQ4_NL: return MEMRA_CUDA_ROUND_Q8_0;
        case MEMRA_CUDA_TYPE_Q4_1:
        case MEMRA_CUDA_TYPE_Q5_1: return MEMRA_CUDA_ROUND_Q8_1;
        case MEMRA_CUDA_TYPE_Q2_K:
        case MEMRA_CUDA_TYPE_Q3_K:
        case MEMRA_CUDA_TYPE_Q4_K:
        case MEMRA_CUDA_TYPE_Q5_K:
        case MEMRA_CUDA_TYPE_Q6_K:
        case MEMRA_CUDA_TYPE_Q6_K_X8:
        case MEMRA_CUDA_TYPE_IQ4_XS:
        case MEMRA_CUDA_TYPE_IQ2_XXS:
        case MEMRA_CUDA_TYPE_IQ2_XS:
        case MEMRA_CUDA_TYPE_IQ2_S:
        case MEMRA_CUDA_TYPE_IQ3_XXS:
        case MEMRA_CUDA_TYPE_IQ3_S:
        case MEMRA_CUDA_TYPE_IQ1_S:
        case MEMRA_CUDA_TYPE_IQ1_M: return MEMRA_CUDA_ROUND_Q8_K;
        case MEMRA_CUDA_TYPE_F16: return MEMRA_CUDA_ROUND_F16;
        case MEMRA_CUDA_TYPE_BF16: return MEMRA_CUDA_ROUND_BF16;
        default: return MEMRA_CUDA_ROUND_NONE;
    }
}

int64_t memra_cuda_rounding_block(int rounding) {
    switch (rounding) {
        case MEMRA_CUDA_ROUND_Q8_0:
        case MEMRA_CUDA_ROUND_Q8_1: return 32;
        case MEMRA_CUDA_ROUND_Q8_K: return 256;
        default: return 1;
    }
}

memra_cuda_launch memra_cuda_plan_rounding(int rounding, int64_t rows, int64_t n_in) {
    const int64_t block = memra_cuda_rounding_block(rounding);
    if (block == 1) return memra_cuda_plan_elementwise(rows * n_in);
    const int64_t warps = rows * n_in / block;
    return launch_of(min64(ceil_div(warps > 0 ? warps : 1, 4), 65535LL * 16), 1, 1, 128, 0);
}

memra_cuda_launch memra_cuda_plan_elementwise(int64_t count) {
    const int64_t blocks = ceil_div(count > 0 ? count : 1, 256);
    return launch_of(min64(blocks, 65535LL * 16), 1, 1, 256, 0);
}

memra_cuda_launch memra_cuda_plan_rows(int64_t rows, int64_t width) {
    const int32_t threads = width >= 2048 ? 256 : width >= 256 ? 128 : 32;
    return launch_of(min64(rows > 0 ? rows : 1, 65535LL * 16), 1, 1, threads, 0);
}

memra_cuda_launch memra_cuda_plan_groups(int64_t groups) {
    return launch_of(min64(ceil_div(groups > 0 ? groups : 1, 128), 65535LL * 16), 1, 1, 128, 0);
}

memra_cuda_launch memra_cuda_plan_kv_write(int64_t count, int64_t width) {
    const int64_t warps_per_row = ceil_div(width > 0 ? width : 1, 32);
    return launch_of(ceil_div(warps_per_row, 4), min64(count > 0 ? count : 1, MEMRA_CUDA_MAX_GRID_YZ), 1, 128, 0);
}

memra_cuda_launch memra_cuda_plan_kv_rotate(int64_t count, int64_t width) {
    return launch_of(min64(count > 0 ? count : 1, MEMRA_CUDA_MAX_GRID_X), 1, 1, 128, (int32_t)((width > 0 ? width : 1) * 4));
}

int memra_cuda_plan_attention(int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim, memra_cuda_launch * launch, char * message,
                              size_t message_bytes) {
    *launch = launch_of(0, 0, 0, 0, 0);
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "heads %lld is not a positive multiple of kv_heads %lld", (long long)heads,
                    (long long)kv_heads);
    }
    if (head_dim <= 0 || head_dim > MEMRA_CUDA_ATTENTION_MAX_HEAD_DIM) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_UNSUPPORTED, "head_dim %lld: the CUDA attention kernel handles 1..%d",
                    (long long)head_dim, MEMRA_CUDA_ATTENTION_MAX_HEAD_DIM);
    }
    if (heads > MEMRA_CUDA_MAX_GRID_YZ) return fail(message, message_bytes, MEMRA_CUDA_ERROR_UNSUPPORTED, "%lld heads exceed a grid's y", (long long)heads);
    if (rows < 0 || rows > MEMRA_CUDA_MAX_GRID_X) return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "rows %lld", (long long)rows);
    const int64_t pairs = (rows > 0 ? rows : 1) * heads;
    const int64_t splits = pairs >= MEMRA_CUDA_ATTENTION_TARGET_BLOCKS ? 1 : min64(ceil_div(MEMRA_CUDA_ATTENTION_TARGET_BLOCKS, pairs), MEMRA_CUDA_ATTENTION_MAX_SPLITS);
    *launch = launch_of(rows, heads, splits, MEMRA_CUDA_ATTENTION_WARPS * 32, 0);
    return MEMRA_CUDA_OK;
}

int64_t memra_cuda_attention_partial_bytes(const memra_cuda_launch * launch, int64_t head_dim) {
    if (launch->grid_z <= 1) return 0;
    return launch->grid_x * launch->grid_y * launch->grid_z * (head_dim + 2) * 4;
}

int memra_cuda_flash_attention_applies(int kv_type, int64_t head_dim, int64_t longest) {
    return kv_type == MEMRA_CUDA_TYPE_F16 && (head_dim == 64 || head_dim == 128) && longest >= MEMRA_CUDA_FLASH_MIN_ROWS;
}

int64_t memra_cuda_flash_tiles(const int32_t * sequences, int64_t sequence_count, int32_t * tiles, int64_t capacity) {
    int64_t count = 0;
    for (int64_t s = 0; s < sequence_count; s++) {
        const int32_t first = sequences[s * 4], rows = sequences[s * 4 + 1];
        for (int32_t r = 0; r < rows; r += MEMRA_CUDA_FLASH_ROWS) {
            if (count >= capacity) return -1;
            tiles[count * 3] = (int32_t)s;
            tiles[count * 3 + 1] = first + r;
            tiles[count * 3 + 2] = rows - r < MEMRA_CUDA_FLASH_ROWS ? rows - r : MEMRA_CUDA_FLASH_ROWS;
            count++;
        }
    }
    return count;
}

int memra_cuda_plan_moe_route(int64_t rows, int64_t experts, int64_t k, memra_cuda_launch * launch, char * message, size_t message_bytes) {
    *launch = launch_of(0, 0, 0, 0, 0);
    if (experts <= 0 || experts > MEMRA_CUDA_MOE_MAX_EXPERTS) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_UNSUPPORTED, "%lld experts: the CUDA router handles 1..%d", (long long)experts,
                    MEMRA_CUDA_MOE_MAX_EXPERTS);
    }
    if (k <= 0 || k > experts || k > MEMRA_CUDA_MOE_MAX_K) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "k %lld must be in 1..min(experts %lld, %d)", (long long)k, (long long)experts,
                    MEMRA_CUDA_MOE_MAX_K);
    }
    const int warps = 4;
    *launch = launch_of(min64(ceil_div(rows > 0 ? rows : 1, warps), MEMRA_CUDA_MAX_GRID_X), 1, 1, warps * 32, (int32_t)(warps * experts * 4));
    return MEMRA_CUDA_OK;
}

int memra_cuda_moe_grouped(int64_t rows, int64_t experts, int64_t k) {
    if (rows <= 0 || experts <= 0 || k <= 0 || rows > INT64_MAX / k) return 0;
    const int64_t pairs = rows * k;
    return pairs >= MEMRA_CUDA_GEMM_MIN_ROWS && pairs / 2 >= experts;
}

int64_t memra_cuda_moe_tile_bound(int64_t pairs, int64_t experts, int64_t tile_rows) {
    if (pairs <= 0 || experts <= 0 || tile_rows <= 0) return 0;
    return min64(pairs, pairs / tile_rows + min64(experts, pairs));
}

memra_cuda_launch memra_cuda_plan_moe_group(int64_t experts) {
    return launch_of(1, 1, 1, MEMRA_CUDA_MOE_GROUP_THREADS, (int32_t)(2 * experts * 4));
}

int64_t memra_cuda_allocation_class(int64_t bytes) {
    const int64_t small = 512, large = 2LL << 20;
    if (bytes <= small) return small;
    if (bytes < (1LL << 20)) return ceil_div(bytes, small) * small;
    return ceil_div(bytes, large) * large;
}

void * memra_cuda_cache_take(memra_cuda_block_cache * cache, int64_t bytes) {
    for (int64_t i = cache->count - 1; i >= 0; i--) {
        if (cache->blocks[i].bytes == bytes) {
            void * pointer = cache->blocks[i].pointer;
            cache->blocks[i] = cache->blocks[cache->count - 1];
            cache->count--;
            cache->cached_bytes -= bytes;
            return pointer;
        }
    }
    return NULL;
}

int memra_cuda_cache_put(memra_cuda_block_cache * cache, void * pointer, int64_t bytes) {
    if (cache->count == cache->capacity) {
        const int64_t capacity = cache->capacity ? cache->capacity * 2 : 64;
        memra_cuda_cached_block * blocks = (memra_cuda_cached_block *)realloc(cache->blocks, (size_t)capacity * sizeof *blocks);
        if (!blocks) return -1;
        cache->blocks = blocks;
        cache->capacity = capacity;
    }
    cache->blocks[cache->count].pointer = pointer;
    cache->blocks[cache->count].bytes = bytes;
    cache->count++;
    cache->cached_bytes += bytes;
    return 0;
}

void * memra_cuda_cache_pop(memra_cuda_block_cache * cache, int64_t * bytes) {
    if (cache->count == 0) return NULL;
    cache->count--;
    *bytes = cache->blocks[cache->count].bytes;
    cache->cached_bytes -= *bytes;
    return cache->blocks[cache->count].pointer;
}

void memra_cuda_cache_dispose(memra_cuda_block_cache * cache) {
    free(cache->blocks);
    cache->blocks = NULL;
    cache->count = cache->capacity = cache->cached_bytes = 0;
}

int memra_cuda_arena_reserve(memra_cuda_arena * arena, int64_t bytes, int64_t * offset) {
    if (bytes > arena->capacity) {
        int64_t capacity = arena->capacity > 0 ? arena->capacity * 2 : (1LL << 20);
        while (capacity < bytes) capacity *= 2;
        *offset = capacity;
        return MEMRA_CUDA_ARENA_GROW;
    }
    const int64_t start = ceil_div(arena->used, MEMRA_CUDA_ARENA_ALIGNMENT) * MEMRA_CUDA_ARENA_ALIGNMENT;
    if (start + bytes > arena->capacity) return MEMRA_CUDA_ARENA_SYNCHRONIZE;
    *offset = start;
    arena->used = start + bytes;
    return MEMRA_CUDA_ARENA_FITS;
}

void memra_cuda_arena_reset(memra_cuda_arena * arena) { arena->used = 0; }

int64_t memra_cuda_staging_chunks(int64_t bytes, int64_t chunk_bytes) {
    if (bytes <= 0 || chunk_bytes <= 0) return 0;
    return ceil_div(bytes, chunk_bytes);
}

/* What both row readers check: rows not negative, columns 1..INT32_MAX ("an argmax row", "a log-softmax row"). */
static int check_rows(int64_t rows, int64_t columns, const char * what, memra_cuda_launch * launch, char * message, size_t message_bytes) {
    *launch = launch_of(0, 0, 0, 0, 0);
    if (rows < 0) return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "rows %lld is negative", (long long)rows);
    if (columns < 1 || columns > INT32_MAX) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%lld columns: %s row holds 1..%d values", (long long)columns, what, INT32_MAX);
    }
    return MEMRA_CUDA_OK;
}

int memra_cuda_plan_argmax(int64_t rows, int64_t columns, memra_cuda_launch * launch, char * message, size_t message_bytes) {
    const int checked = check_rows(rows, columns, "an argmax", launch, message, message_bytes);
    if (checked != MEMRA_CUDA_OK) return checked;
    *launch = launch_of(ceil_div(columns, MEMRA_CUDA_ARGMAX_CHUNK), min64(rows > 0 ? rows : 1, MEMRA_CUDA_MAX_GRID_YZ), 1, MEMRA_CUDA_ARGMAX_THREADS, 0);
    return MEMRA_CUDA_OK;
}

int memra_cuda_plan_log_softmax(int64_t rows, int64_t columns, memra_cuda_launch launch[2], char * message, size_t message_bytes) {
    launch[1] = launch_of(0, 0, 0, 0, 0);
    const int checked = check_rows(rows, columns, "a log-softmax", &launch[0], message, message_bytes);
    if (checked != MEMRA_CUDA_OK) return checked;
    launch[0] = launch_of(ceil_div(columns, MEMRA_CUDA_ARGMAX_CHUNK), min64(rows > 0 ? rows : 1, MEMRA_CUDA_MAX_GRID_YZ), 1, MEMRA_CUDA_ARGMAX_THREADS, 0);
    launch[1] = launch_of(min64(rows > 0 ? rows : 1, MEMRA_CUDA_MAX_GRID_X), 1, 1, 32, 0);
    return MEMRA_CUDA_OK;
}

/* 1 when a * b overflows int64 (both non-negative), else 0 with the product in *out. */
static int checked_mul(int64_t a, int64_t b, int64_t * out) { return __builtin_mul_overflow(a, b, out); }

static int32_t power_of_two_at_least(int64_t n) {
    int32_t size = 1;
    while (size < n) size <<= 1;
    return size;
}

int memra_cuda_plan_top_k(int64_t rows, int64_t columns, int64_t k, memra_cuda_top_k_plan * plan, char * message, size_t message_bytes) {
    memset(plan, 0, sizeof *plan);
    if (rows < 0) return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "rows %lld is negative", (long long)rows);
    if (columns < 1 || columns > INT32_MAX) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%lld columns: a top-k row holds 1..%d values", (long long)columns, INT32_MAX);
    }
    if (k < 1 || k > columns || k > MEMRA_CUDA_TOP_K_MAX) {
        return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "k %lld: the top-k of rows of %lld values takes 1..%lld of them", (long long)k,
                    (long long)columns, (long long)min64(columns, MEMRA_CUDA_TOP_K_MAX));
    }
    const int64_t grid_rows = min64(rows > 0 ? rows : 1, MEMRA_CUDA_MAX_GRID_YZ);
    const int64_t group = MEMRA_CUDA_TOP_K_SORT / k;
    int64_t lists = 0;
    for (int pass = 0; lists != 1; pass++) {
        if (pass == MEMRA_CUDA_TOP_K_MAX_PASSES) return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "top-k needs more than %d passes", pass);
        int64_t inputs, keys;
        if (pass == 0) {
            inputs = min64(columns, MEMRA_CUDA_TOP_K_SORT);
            keys = inputs;
            lists = ceil_div(columns, inputs);
        } else {
            inputs = min64(group, lists);
            keys = inputs * k;
            lists = ceil_div(lists, inputs);
        }
        const int32_t size = power_of_two_at_least(keys);
        int32_t threads = size / 2;
        if (threads < 32) threads = 32;
        if (threads > MEMRA_CUDA_TOP_K_MAX_THREADS) threads = MEMRA_CUDA_TOP_K_MAX_THREADS;
        plan->lists[pass] = lists;
        plan->inputs[pass] = inputs;
        plan->sort_size[pass] = size;
        plan->launch[pass] = launch_of(lists, grid_rows, 1, threads, 0);
        plan->passes = pass + 1;
        if (lists > 1) {
            int64_t list_keys = 0, buffer = 0;
            if (checked_mul(rows, lists, &list_keys) || checked_mul(list_keys, k, &buffer) || buffer > INT64_MAX / 16) {
                return fail(message, message_bytes, MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "the top-k workspace of %lld rows of %lld values overflows", (long long)rows,
                            (long long)columns);
            }
            if (buffer > plan->buffer_keys[pass % 2]) plan->buffer_keys[pass % 2] = buffer;
        }
    }
    return MEMRA_CUDA_OK;
}
