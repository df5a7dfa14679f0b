/*
 * Unit tests of native/cuda/launch-plan.c: the launch decisions of libmemra_cuda, checked without
 * a GPU (built with the system C compiler, and as C++ by run.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch-plan.h"
#include "memra_cuda.h"

static int failures = 0;
#define EXPECT(condition)                                                         \
    do {                                                                          \
        if (!(condition)) {                                                       \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #condition); \
            failures++;                                                           \
        }                                                                         \
    } while (0)

static void test_type_tables(void) {
    /* ..., then the i-quants iq2_xxs, iq2_xs, iq3_xxs, iq1_s, iq3_s, iq2_s, iq1_m */
    const int types[] = {0, 1, 30, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 200, 201, 202, 16, 17, 18, 19, 21, 22, 29};
    const int64_t values[] = {1, 1, 1, 32, 32, 32, 32, 32, 256, 256, 256, 256, 256, 32, 256, 256, 2048, 256, 256, 256, 256, 256, 256, 256, 256};
    const int64_t bytes[] = {4, 2, 2, 18, 20, 22, 24, 34, 84, 110, 144, 176, 210, 18, 136, 272, 1680, 144, 66, 74, 98, 50, 110, 82, 56};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        EXPECT(memra_cuda_type_block_values(types[i]) == values[i]);
        EXPECT(memra_cuda_type_block_bytes(types[i]) == bytes[i]);
        EXPECT(memra_cuda_weight_type_supported(types[i]));
    }
    EXPECT(!memra_cuda_weight_type_supported(34)); /* tq1_0: no kernel, so no claim */
    EXPECT(!memra_cuda_weight_type_supported(15)); /* q8_K: activations only */
    EXPECT(!memra_cuda_weight_type_supported(-1));
    EXPECT(memra_cuda_row_bytes(8, 4096) == 4096 / 32 * 34);
    /* q8_0 repacked (q8_0_x8): q8_0's bytes a row, rows of 256k values only; q8_0's rounding and kernels */
    EXPECT(memra_cuda_row_bytes(MEMRA_CUDA_TYPE_Q8_0_X8, 4096) == memra_cuda_row_bytes(8, 4096));
    EXPECT(memra_cuda_row_bytes(MEMRA_CUDA_TYPE_Q8_0_X8, 288) == 0);
    EXPECT(memra_cuda_activation_rounding(MEMRA_CUDA_TYPE_Q8_0_X8) == memra_cuda_activation_rounding(8));
    EXPECT(memra_cuda_int8_gemm_supports(MEMRA_CUDA_TYPE_Q8_0_X8));
    EXPECT(memra_cuda_type_is_q8_0(8) && memra_cuda_type_is_q8_0(MEMRA_CUDA_TYPE_Q8_0_X8) && !memra_cuda_type_is_q8_0(2));
    EXPECT(memra_cuda_row_bytes(MEMRA_CUDA_TYPE_Q6_K_X8, 4096) == memra_cuda_row_bytes(14, 4096));
    EXPECT(memra_cuda_row_bytes(MEMRA_CUDA_TYPE_Q6_K_X8, 1024) == 0);
    EXPECT(memra_cuda_activation_rounding(MEMRA_CUDA_TYPE_Q6_K_X8) == memra_cuda_activation_rounding(14));
    EXPECT(memra_cuda_repacked_type(8, 256) == MEMRA_CUDA_TYPE_Q8_0_X8 && memra_cuda_repacked_type(8, 288) == 8);
    EXPECT(memra_cuda_repacked_type(14, 2048) == MEMRA_CUDA_TYPE_Q6_K_X8 && memra_cuda_repacked_type(14, 1024) == 14);
    EXPECT(memra_cuda_repacked_type(2, 4096) == MEMRA_CUDA_TYPE_Q4_0_X8 && memra_cuda_repacked_type(2, 288) == 2 && memra_cuda_repacked_type(8, 0) == 8);
    EXPECT(memra_cuda_repacked_type(12, 4096) == 12 && memra_cuda_repacked_type(3, 4096) == 3); /* q4_K, q4_1: none */
    EXPECT(memra_cuda_row_bytes(MEMRA_CUDA_TYPE_Q4_0_X8, 4096) == memra_cuda_row_bytes(2, 4096));
    EXPECT(memra_cuda_int8_gemm_supports(MEMRA_CUDA_TYPE_Q4_0_X8) && !memra_cuda_int8_gemm_supports(MEMRA_CUDA_TYPE_Q6_K_X8));
    EXPECT(memra_cuda_row_bytes(14, 4096) == 16 * 210);
    EXPECT(memra_cuda_row_bytes(14, 100) == 0);
    EXPECT(memra_cuda_kv_row_bytes(0, 1024) == 4096);
    EXPECT(memra_cuda_kv_row_bytes(1, 1024) == 2048);
    EXPECT(memra_cuda_kv_row_bytes(8, 1024) == 32 * 34);
    EXPECT(memra_cuda_kv_row_bytes(8, 48) == 0);
    EXPECT(memra_cuda_kv_row_bytes(2, 64) == 0);
}

/* Every output tile the problem has is covered by exactly one block of the plan's launches. */
static void expect_matmul_covers(const memra_cuda_matmul_plan * plan, int64_t rows, int64_t n_out) {
    if (plan->kernel == MEMRA_CUDA_MATMUL_GEMM) {
        EXPECT(plan->launch.grid_x * MEMRA_CUDA_GEMM_TILE_N >= n_out);
        EXPECT((plan->launch.grid_x - 1) * MEMRA_CUDA_GEMM_TILE_N < n_out);
        EXPECT(plan->launch.grid_y <= MEMRA_CUDA_MAX_GRID_YZ);
        EXPECT(plan->rows_per_launch == plan->launch.grid_y * MEMRA_CUDA_GEMM_TILE_M);
        EXPECT(plan->launch.threads == MEMRA_CUDA_GEMM_THREADS);
    } else {
        EXPECT(plan->kernel == MEMRA_CUDA_MATMUL_VECTOR);
        EXPECT(plan->launch.grid_x * MEMRA_CUDA_MMV_WARPS >= n_out);
        EXPECT((plan->launch.grid_x - 1) * MEMRA_CUDA_MMV_WARPS < n_out);
        EXPECT(plan->rows_per_launch >= 1 && plan->rows_per_launch <= MEMRA_CUDA_MMV_MAX_ROWS);
        EXPECT(plan->launch.threads == MEMRA_CUDA_MMV_WARPS * 32);
    }
    EXPECT(plan->launches * plan->rows_per_launch >= rows);
    EXPECT((plan->launches - 1) * plan->rows_per_launch < rows);
}

static void test_matmul_plans(void) {
    memra_cuda_matmul_plan plan;
    char message[256];
    EXPECT(memra_cuda_plan_matmul_for(8, 1, 4096, 4096, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.kernel == MEMRA_CUDA_MATMUL_VECTOR && plan.launch.grid_x == 1024 && plan.rows_per_launch == 1 && plan.launches == 1);
    expect_matmul_covers(&plan, 1, 4096);
    EXPECT(memra_cuda_plan_matmul_for(12, 8, 4096, 151937, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.kernel == MEMRA_CUDA_MATMUL_VECTOR && plan.rows_per_launch == 8 && plan.launch.grid_x == 37985);
    expect_matmul_covers(&plan, 8, 151937);
    EXPECT(memra_cuda_plan_matmul_for(8, 9, 1024, 3072, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.kernel == MEMRA_CUDA_MATMUL_GEMM && plan.launch.grid_x == 48 && plan.launch.grid_y == 1 && plan.launches == 1);
    /* 48 tiles: split-K in 6 parts of 192 inputs (6 steps of 32), none empty */
    EXPECT(plan.launch.grid_z == 6 && memra_cuda_gemm_split_inputs(&plan, 1024) == 192);
    expect_matmul_covers(&plan, 9, 3072);
    EXPECT(memra_cuda_plan_matmul_for(14, 512, 4096, 151936, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.kernel == MEMRA_CUDA_MATMUL_GEMM && plan.launch.grid_x == 2374 && plan.launch.grid_y == 8 && plan.launch.grid_z == 1);
    EXPECT(memra_cuda_gemm_split_inputs(&plan, 4096) == 4096);
    expect_matmul_covers(&plan, 512, 151936);
    const int64_t huge = (int64_t)MEMRA_CUDA_MAX_GRID_YZ * MEMRA_CUDA_GEMM_TILE_M + 1;
    EXPECT(memra_cuda_plan_matmul_for(1, huge, 64, 10, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.kernel == MEMRA_CUDA_MATMUL_GEMM && plan.launches == 2 && plan.launch.grid_y == MEMRA_CUDA_MAX_GRID_YZ);
    expect_matmul_covers(&plan, huge, 10);
    /* f16 rows of 520 values: a multiple of 8 but not of the GEMM's 32: the vector kernel, 8 rows a launch. */
    EXPECT(memra_cuda_plan_matmul_for(1, 20, 520, 37, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.kernel == MEMRA_CUDA_MATMUL_VECTOR && plan.launches == 3 && plan.rows_per_launch == 8);
    expect_matmul_covers(&plan, 20, 37);
    EXPECT(memra_cuda_plan_matmul_for(8, 0, 64, 64, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.kernel == MEMRA_CUDA_MATMUL_NONE);
    /* Errors carry a status and a message. */
    EXPECT(memra_cuda_plan_matmul_for(34, 1, 256, 4, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_UNSUPPORTED_TYPE);
    EXPECT(strstr(message, "weight type 34") != NULL);
    /* the i-quants: rows of 256k values, a vector kernel for decode and the GEMM for prefill */
    EXPECT(memra_cuda_plan_matmul_for(16, 1, 128, 4, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_UNSUPPORTED);
    EXPECT(strstr(message, "n_in 128 is not a multiple of 256") != NULL);
    EXPECT(memra_cuda_plan_matmul_for(29, 1, 512, 4, &plan, message, sizeof message) == MEMRA_CUDA_OK && plan.kernel == MEMRA_CUDA_MATMUL_VECTOR);
    EXPECT(memra_cuda_plan_matmul_for(19, 70, 512, 37, &plan, message, sizeof message) == MEMRA_CUDA_OK && plan.kernel == MEMRA_CUDA_MATMUL_GEMM);
    EXPECT(!memra_cuda_int8_gemm_supports(19) && !memra_cuda_int8_gemm_supports(22));
    EXPECT(memra_cuda_repacked_type(16, 4096) == 16 && memra_cuda_repacked_type(29, 4096) == 29); /* no repacked layouts */
    EXPECT(memra_cuda_plan_matmul_for(8, 1, 100, 4, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_UNSUPPORTED);
    EXPECT(strstr(message, "n_in 100 is not a multiple of 32") != NULL);
    EXPECT(memra_cuda_plan_matmul_for(0, 1, 12, 4, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_UNSUPPORTED);
    EXPECT(memra_cuda_plan_matmul_for(0, -1, 64, 4, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(memra_cuda_gemm_shared_bytes() == 128 * 40 * 2);
    EXPECT(memra_cuda_gemm_shared_bytes() <= 48 * 1024);
}

/* The int8 GEMM: q8_0, q4_0 and q5_0 only; every 128 × 128 output tile covered once, shapes that
 * are not tile multiples rounded up, the row tiles split into launches of at most 65535. */
static void test_int8_gemm_plans(void) {
    memra_cuda_matmul_plan plan;
    char message[256];
    EXPECT(memra_cuda_int8_gemm_supports(8) && memra_cuda_int8_gemm_supports(2) && memra_cuda_int8_gemm_supports(6));
    EXPECT(!memra_cuda_int8_gemm_supports(3) && !memra_cuda_int8_gemm_supports(7) && !memra_cuda_int8_gemm_supports(12) && !memra_cuda_int8_gemm_supports(1));
    const int64_t shapes[][3] = {{9, 32, 8}, {37, 96, 200}, {130, 4096, 200}, {128, 64, 128}, {129, 64, 129}, {512, 4096, 4096}, {512, 4096, 151936}};
    /* grid x, y, and z: split-K parts by waves of 132 blocks (at most 16, none empty): 128 tiles of
     * 64 k-tiles take one wave unsplit (3 parts were 3 waves of 22 k-tiles) */
    const int64_t expected_grid[][3] = {{1, 1, 1}, {2, 1, 2}, {2, 2, 16}, {1, 1, 1}, {2, 2, 1}, {32, 4, 1}, {1187, 4, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t rows = shapes[i][0], n_in = shapes[i][1], n_out = shapes[i][2];
        EXPECT(memra_cuda_plan_int8_gemm(8, rows, n_in, n_out, 0, &plan, message, sizeof message) == MEMRA_CUDA_OK);
        EXPECT(plan.kernel == MEMRA_CUDA_MATMUL_GEMM && plan.launch.threads == MEMRA_CUDA_INT8_GEMM_THREADS && plan.launch.shared_bytes == 0);
        EXPECT(plan.launch.grid_x == expected_grid[i][0] && plan.launch.grid_y == expected_grid[i][1] && plan.launch.grid_z == expected_grid[i][2]);
        const int64_t k_tiles = (n_in + MEMRA_CUDA_INT8_GEMM_TILE_K - 1) / MEMRA_CUDA_INT8_GEMM_TILE_K;
        const int64_t per_split = memra_cuda_int8_gemm_split_tiles(&plan, n_in);
        EXPECT(per_split * plan.launch.grid_z >= k_tiles && (plan.launch.grid_z - 1) * per_split < k_tiles); /* every k-tile once, no empty part */
        EXPECT(plan.launch.grid_x * MEMRA_CUDA_INT8_GEMM_TILE_N >= n_out && (plan.launch.grid_x - 1) * MEMRA_CUDA_INT8_GEMM_TILE_N < n_out);
        EXPECT(plan.rows_per_launch == plan.launch.grid_y * MEMRA_CUDA_INT8_GEMM_TILE_M && plan.launches == 1);
    }
    /* More row tiles than grid.y holds: launches of 65535 tiles, the last one partial. */
    const int64_t huge = (int64_t)MEMRA_CUDA_MAX_GRID_YZ * MEMRA_CUDA_INT8_GEMM_TILE_M + 1;
    EXPECT(memra_cuda_plan_int8_gemm(2, huge, 64, 10, 0, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.launches == 2 && plan.launch.grid_y == MEMRA_CUDA_MAX_GRID_YZ && plan.launch.grid_x == 1 && plan.launch.grid_z == 1);
    EXPECT(plan.launches * plan.rows_per_launch >= huge && (plan.launches - 1) * plan.rows_per_launch < huge);
    /* Batched decode of a 0.6B-shaped model: 64 rows of a 1024-wide K projection, 8 tiles → 16 parts of one k-tile. */
    EXPECT(memra_cuda_plan_int8_gemm(8, 64, 1024, 1024, 0, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.launch.grid_x * plan.launch.grid_y == 8 && plan.launch.grid_z == 16 && memra_cuda_int8_gemm_split_tiles(&plan, 1024) == 1);
    /* The 8B shape's batch-64 step, one block an SM (132 slots) against two (264, the pipelined
     * kernel's 64-row tiles): gate/up (96 tiles of 64 k-tiles) was 3 parts, 288 blocks: 3 waves of
     * 22 k-tiles on 132 slots, 2 waves on 264; now 4 parts (3 waves of 16) and 8 (3 waves of 8).
     * The down projection (32 tiles of 192 k-tiles): 4 parts, one wave of 48; 8 parts, one of 24. */
    const int64_t batch_shapes[][5] = {{12288, 4096, 132, 4, 16}, {12288, 4096, 264, 8, 8}, {4096, 12288, 132, 4, 48}, {4096, 12288, 264, 8, 24}};
    for (size_t i = 0; i < sizeof batch_shapes / sizeof batch_shapes[0]; i++) {
        const int64_t n_out = batch_shapes[i][0], n_in = batch_shapes[i][1];
        EXPECT(memra_cuda_plan_int8_gemm(8, 64, n_in, n_out, batch_shapes[i][2], &plan, message, sizeof message) == MEMRA_CUDA_OK);
        EXPECT(plan.launch.grid_z == batch_shapes[i][3] && memra_cuda_int8_gemm_split_tiles(&plan, n_in) == batch_shapes[i][4]);
    }
    /* Few tiles fill the slots: 8 tiles of 16 k-tiles on 132 slots, 16 parts of one (a wave either way). */
    EXPECT(memra_cuda_plan_int8_gemm(8, 64, 1024, 1024, 264, &plan, message, sizeof message) == MEMRA_CUDA_OK && plan.launch.grid_z == 16);
    /* Errors: a type without int8 codes, n_in not a multiple of 32, no rows. */
    EXPECT(memra_cuda_plan_int8_gemm(12, 64, 256, 64, 0, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_UNSUPPORTED_TYPE);
    EXPECT(strstr(message, "weight type 12") != NULL && plan.kernel == MEMRA_CUDA_MATMUL_NONE);
    EXPECT(memra_cuda_plan_int8_gemm(8, 64, 48, 64, 0, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_UNSUPPORTED);
    EXPECT(memra_cuda_plan_int8_gemm(8, 0, 64, 64, 0, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    /* Two stages of 128 + 128 rows × (64 code bytes + 2 f32 scales): 36 KiB, under the 48 KiB of
     * static shared memory a block may have without opting in. */
    EXPECT(memra_cuda_int8_gemm_shared_bytes() == 2 * 256 * (64 + 8));
    EXPECT(memra_cuda_int8_gemm_shared_bytes() <= 48 * 1024);
    /* the pipelined kernel: 4 stages of (128 + 128) rows × 128 code bytes, 128 × 4 f32 and 128 × 4 f16
     * scales: 140 KiB, under an H100/H200 block's 227 KiB; with 64-row tiles 104 KiB, two blocks an SM */
    EXPECT(memra_cuda_int8_pipe_shared_bytes(128) == 4 * (256 * 128 + 128 * 16 + 128 * 8));
    EXPECT(memra_cuda_int8_pipe_shared_bytes(128) <= 227 * 1024);
    EXPECT(memra_cuda_int8_pipe_shared_bytes(64) == 4 * (192 * 128 + 64 * 16 + 128 * 8));
    EXPECT(2 * memra_cuda_int8_pipe_shared_bytes(64) <= 227 * 1024);
}

static void test_row_and_elementwise_plans(void) {
    memra_cuda_launch launch = memra_cuda_plan_elementwise(0);
    EXPECT(launch.grid_x == 1 && launch.threads == 256);
    launch = memra_cuda_plan_elementwise(1000);
    EXPECT(launch.grid_x == 4);
    launch = memra_cuda_plan_elementwise((int64_t)1 << 40);
    EXPECT(launch.grid_x == 65535LL * 16); /* capped: the kernels loop over the rest */
    launch = memra_cuda_plan_rows(40, 1024);
    EXPECT(launch.grid_x == 40 && launch.threads == 128);
    EXPECT(memra_cuda_plan_rows(3, 128).threads == 32);
    EXPECT(memra_cuda_plan_rows(3, 4096).threads == 256);
    EXPECT(memra_cuda_plan_rows((int64_t)1 << 30, 128).grid_x == 65535LL * 16);
    EXPECT(memra_cuda_plan_groups(129).grid_x == 2 && memra_cuda_plan_groups(129).threads == 128);
    launch = memra_cuda_plan_kv_write(100, 1024);
    EXPECT(launch.grid_x == 8 && launch.grid_y == 100 && launch.threads == 128);
    launch = memra_cuda_plan_kv_write(1 << 20, 48);
    EXPECT(launch.grid_x == 1 && launch.grid_y == MEMRA_CUDA_MAX_GRID_YZ);
    launch = memra_cuda_plan_kv_rotate(2046, 1024);
    EXPECT(launch.grid_x == 2046 && launch.grid_y == 1 && launch.threads == 128 && launch.shared_bytes == 4096);
    EXPECT(memra_cuda_plan_kv_rotate((int64_t)1 << 40, 128).grid_x == MEMRA_CUDA_MAX_GRID_X);
}

static void test_attention_and_moe_plans(void) {
    memra_cuda_launch launch;
    char message[256];
    EXPECT(memra_cuda_plan_attention(37, 32, 8, 128, &launch, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(launch.grid_x == 37 && launch.grid_y == 32 && launch.grid_z == 2 && launch.threads == 128); /* 1184 pairs: 2 splits reach 2048 blocks */
    EXPECT(memra_cuda_attention_partial_bytes(&launch, 128) == 37LL * 32 * 2 * 130 * 4);
    /* decode of one sequence (Qwen3-0.6B: 16 heads): 32 splits, the most */
    EXPECT(memra_cuda_plan_attention(1, 16, 8, 128, &launch, message, sizeof message) == MEMRA_CUDA_OK && launch.grid_z == 32);
    /* 64 sequences × 32 heads, or a prefill: one split, no partial states */
    EXPECT(memra_cuda_plan_attention(64, 32, 8, 128, &launch, message, sizeof message) == MEMRA_CUDA_OK && launch.grid_z == 1);
    EXPECT(memra_cuda_attention_partial_bytes(&launch, 128) == 0);
    EXPECT(memra_cuda_plan_attention(512, 16, 8, 128, &launch, message, sizeof message) == MEMRA_CUDA_OK && launch.grid_z == 1);
    /* several splits only for fewer (row, head) pairs than the context's split counters */
    int counters_hold = 1;
    for (int64_t heads = 1; heads <= 128; heads++) {
        for (int64_t rows = 1; rows <= 4096; rows++) {
            if (memra_cuda_plan_attention(rows, heads, 1, 64, &launch, message, sizeof message) != MEMRA_CUDA_OK) continue;
            if (launch.grid_z > 1 && rows * heads > MEMRA_CUDA_ATTENTION_COUNTERS) counters_hold = 0;
        }
    }
    EXPECT(counters_hold);
    EXPECT(memra_cuda_plan_attention(0, 16, 8, 128, &launch, message, sizeof message) == MEMRA_CUDA_OK && launch.grid_x == 0);
    EXPECT(memra_cuda_plan_attention(1, 6, 4, 128, &launch, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(memra_cuda_plan_attention(1, 4, 2, 16, &launch, message, sizeof message) == MEMRA_CUDA_OK); /* tiny models: lanes past 16 idle */
    EXPECT(memra_cuda_plan_attention(1, 8, 8, 512, &launch, message, sizeof message) == MEMRA_CUDA_ERROR_UNSUPPORTED);
    EXPECT(strstr(message, "head_dim 512") != NULL);
    EXPECT(memra_cuda_plan_moe_route(10, 128, 8, &launch, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(launch.grid_x == 3 && launch.threads == 128 && launch.shared_bytes == 4 * 128 * 4);
    EXPECT(memra_cuda_plan_moe_route(10, 128, 129, &launch, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(memra_cuda_plan_moe_route(10, 4096, 8, &launch, message, sizeof message) == MEMRA_CUDA_ERROR_UNSUPPORTED);
    EXPECT(memra_cuda_plan_moe_route(1, MEMRA_CUDA_MOE_MAX_EXPERTS, 8, &launch, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(launch.shared_bytes <= 48 * 1024);
}

/* Σ ceil(count_e / tile) of `experts` counts. */
static int64_t moe_tiles(const int64_t * counts, int64_t experts, int64_t tile) {
    int64_t tiles = 0;
    for (int64_t e = 0; e < experts; e++) tiles += (counts[e] + tile - 1) / tile;
    return tiles;
}

static void test_moe_grouping(void) {
    /* grouped from twice as many (row, expert) pairs as experts, and from the GEMM's least rows */
    EXPECT(memra_cuda_moe_grouped(32, 128, 8) == 1);  /* Qwen3-30B-A3B: 256 pairs */
    EXPECT(memra_cuda_moe_grouped(31, 128, 8) == 0);
    EXPECT(memra_cuda_moe_grouped(1, 128, 8) == 0);   /* decode of one sequence */
    EXPECT(memra_cuda_moe_grouped(512, 128, 8) == 1); /* pp512 */
    EXPECT(memra_cuda_moe_grouped(3, 4, 2) == 0);     /* 6 pairs: under MEMRA_CUDA_GEMM_MIN_ROWS */
    EXPECT(memra_cuda_moe_grouped(5, 4, 2) == 1);
    EXPECT(memra_cuda_moe_grouped(0, 4, 2) == 0 && memra_cuda_moe_grouped(INT64_MAX / 2, 4, 4) == 0);
    EXPECT(memra_cuda_moe_tile_bound(0, 8, 64) == 0);
    EXPECT(memra_cuda_moe_tile_bound(4096, 128, 128) == 32 + 128);
    EXPECT(memra_cuda_moe_tile_bound(20, 128, 64) == 20); /* each pair its own tile at most */
    /* The bound holds for every way of spreading the pairs, and is reached. */
    uint64_t state = 12345;
    int64_t counts[64];
    for (int trial = 0; trial < 2000; trial++) {
        const int64_t experts = 1 + trial % 64, tile = trial % 3 == 0 ? 64 : trial % 3 == 1 ? 128 : 7;
        int64_t pairs = 0;
        for (int64_t e = 0; e < experts; e++) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            const uint64_t r = state >> 33;
            counts[e] = (r & 3) == 0 ? 0 : (int64_t)(r % (uint64_t)(3 * tile)); /* some experts without rows */
            pairs += counts[e];
        }
        if (pairs == 0) continue;
        EXPECT(moe_tiles(counts, experts, tile) <= memra_cuda_moe_tile_bound(pairs, experts, tile));
    }
    /* reached: every expert one row past a multiple of the tile */
    for (int64_t e = 0; e < 8; e++) counts[e] = 2 * 64 + 1;
    EXPECT(moe_tiles(counts, 8, 64) == memra_cuda_moe_tile_bound(8 * 129, 8, 64));
    const memra_cuda_launch launch = memra_cuda_plan_moe_group(MEMRA_CUDA_MOE_MAX_EXPERTS);
    EXPECT(launch.grid_x == 1 && launch.threads == MEMRA_CUDA_MOE_GROUP_THREADS && launch.shared_bytes == 2 * MEMRA_CUDA_MOE_MAX_EXPERTS * 4);
    EXPECT(launch.shared_bytes <= 48 * 1024);
}

static void test_allocator_cache(void) {
    EXPECT(memra_cuda_allocation_class(0) == 512);
    EXPECT(memra_cuda_allocation_class(1) == 512);
    EXPECT(memra_cuda_allocation_class(513) == 1024);
    EXPECT(memra_cuda_allocation_class((1 << 20) - 1) == 1 << 20);
    EXPECT(memra_cuda_allocation_class((1 << 20) + 1) == 2 << 20);
    EXPECT(memra_cuda_allocation_class(5 << 20) == 6 << 20);
    memra_cuda_block_cache cache = {NULL, 0, 0, 0};
    int a, b, c;
    EXPECT(memra_cuda_cache_take(&cache, 512) == NULL);
    EXPECT(memra_cuda_cache_put(&cache, &a, 512) == 0);
    EXPECT(memra_cuda_cache_put(&cache, &b, 1024) == 0);
    EXPECT(memra_cuda_cache_put(&cache, &c, 512) == 0);
    EXPECT(cache.cached_bytes == 2048 && cache.count == 3);
    EXPECT(memra_cuda_cache_take(&cache, 2048) == NULL);
    void * taken = memra_cuda_cache_take(&cache, 512);
    EXPECT(taken == &a || taken == &c);
    EXPECT(memra_cuda_cache_take(&cache, 1024) == &b);
    EXPECT(cache.cached_bytes == 512 && cache.count == 1);
    for (int i = 0; i < 200; i++) EXPECT(memra_cuda_cache_put(&cache, &a, 4096) == 0); /* grows */
    int64_t bytes = 0, popped = 0;
    while (memra_cuda_cache_pop(&cache, &bytes)) popped++;
    EXPECT(popped == 201 && cache.cached_bytes == 0);
    memra_cuda_cache_dispose(&cache);
    EXPECT(cache.blocks == NULL);
}

static void test_arena(void) {
    memra_cuda_arena arena = {1024, 0};
    int64_t offset = -1;
    EXPECT(memra_cuda_arena_reserve(&arena, 100, &offset) == MEMRA_CUDA_ARENA_FITS && offset == 0);
    EXPECT(memra_cuda_arena_reserve(&arena, 100, &offset) == MEMRA_CUDA_ARENA_FITS && offset == 256);
    EXPECT(memra_cuda_arena_reserve(&arena, 512, &offset) == MEMRA_CUDA_ARENA_FITS && offset == 512);
    EXPECT(memra_cuda_arena_reserve(&arena, 1, &offset) == MEMRA_CUDA_ARENA_SYNCHRONIZE);
    memra_cuda_arena_reset(&arena);
    EXPECT(memra_cuda_arena_reserve(&arena, 1024, &offset) == MEMRA_CUDA_ARENA_FITS && offset == 0);
    EXPECT(memra_cuda_arena_reserve(&arena, 3000, &offset) == MEMRA_CUDA_ARENA_GROW && offset == 4096);
    EXPECT(memra_cuda_staging_chunks(0, 8) == 0);
    EXPECT(memra_cuda_staging_chunks(16, 8) == 2);
    EXPECT(memra_cuda_staging_chunks(17, 8) == 3);
}

static void test_activation_rounding_plans(void) {
    /* ggml's vec_dot_type per weight type (ggml-cpu.c type_traits_cpu): q8_0 for the 32-value
     * types, q8_1 for those with an offset, q8_K for the K-quants, f16/bf16 for themselves. */
    EXPECT(memra_cuda_activation_rounding(0) == MEMRA_CUDA_ROUND_NONE);
    EXPECT(memra_cuda_activation_rounding(1) == MEMRA_CUDA_ROUND_F16);
    EXPECT(memra_cuda_activation_rounding(30) == MEMRA_CUDA_ROUND_BF16);
    EXPECT(memra_cuda_activation_rounding(2) == MEMRA_CUDA_ROUND_Q8_0);
    EXPECT(memra_cuda_activation_rounding(6) == MEMRA_CUDA_ROUND_Q8_0);
    EXPECT(memra_cuda_activation_rounding(8) == MEMRA_CUDA_ROUND_Q8_0);
    EXPECT(memra_cuda_activation_rounding(3) == MEMRA_CUDA_ROUND_Q8_1);
    EXPECT(memra_cuda_activation_rounding(7) == MEMRA_CUDA_ROUND_Q8_1);
    EXPECT(memra_cuda_activation_rounding(12) == MEMRA_CUDA_ROUND_Q8_K);
    EXPECT(memra_cuda_activation_rounding(13) == MEMRA_CUDA_ROUND_Q8_K);
    EXPECT(memra_cuda_activation_rounding(20) == MEMRA_CUDA_ROUND_Q8_0); /* iq4_nl */
    EXPECT(memra_cuda_activation_rounding(10) == MEMRA_CUDA_ROUND_Q8_K); /* q2_K, q3_K, iq4_xs */
    EXPECT(memra_cuda_activation_rounding(11) == MEMRA_CUDA_ROUND_Q8_K);
    EXPECT(memra_cuda_activation_rounding(23) == MEMRA_CUDA_ROUND_Q8_K);
    EXPECT(memra_cuda_activation_rounding(14) == MEMRA_CUDA_ROUND_Q8_K);
    /* the i-quants, as ggml's CPU vec_dot_iq*_q8_K */
    const int iquants[] = {16, 17, 18, 19, 21, 22, 29};
    for (size_t i = 0; i < sizeof iquants / sizeof iquants[0]; i++) EXPECT(memra_cuda_activation_rounding(iquants[i]) == MEMRA_CUDA_ROUND_Q8_K);
    EXPECT(memra_cuda_rounding_block(MEMRA_CUDA_ROUND_Q8_0) == 32 && memra_cuda_rounding_block(MEMRA_CUDA_ROUND_Q8_K) == 256);
    /* One warp per block, 4 per thread block: 4096 values of q8_K = 16 warps = 4 blocks. */
    memra_cuda_launch launch = memra_cuda_plan_rounding(MEMRA_CUDA_ROUND_Q8_K, 1, 4096);
    EXPECT(launch.grid_x == 4 && launch.threads == 128);
    launch = memra_cuda_plan_rounding(MEMRA_CUDA_ROUND_Q8_0, 3, 4096); /* 384 warps */
    EXPECT(launch.grid_x == 96 && launch.threads == 128);
    launch = memra_cuda_plan_rounding(MEMRA_CUDA_ROUND_Q8_0, 100000, 12288); /* capped: the kernel loops */
    EXPECT(launch.grid_x == 65535LL * 16);
    launch = memra_cuda_plan_rounding(MEMRA_CUDA_ROUND_F16, 2, 1000); /* elementwise */
    EXPECT(launch.grid_x == 8 && launch.threads == 256);
    /* Without the GEMM every row count plans the matrix-vector kernel, 8 rows per launch. */
    memra_cuda_matmul_plan plan;
    char message[256];
    EXPECT(memra_cuda_plan_matmul_with(12, 512, 4096, 12288, 0, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.kernel == MEMRA_CUDA_MATMUL_VECTOR && plan.rows_per_launch == 8 && plan.launches == 64);
    EXPECT(memra_cuda_plan_matmul_with(12, 512, 4096, 12288, 1, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.kernel == MEMRA_CUDA_MATMUL_GEMM);
    EXPECT(memra_cuda_plan_matmul_with(0, 512, 4096, 12288, 1, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.kernel == MEMRA_CUDA_MATMUL_VECTOR); /* f32 weights: never rounded to f16 */
}

static void test_flash_attention_plans(void) {
    EXPECT(memra_cuda_flash_attention_applies(1, 128, 16));
    EXPECT(memra_cuda_flash_attention_applies(1, 64, 512));
    EXPECT(!memra_cuda_flash_attention_applies(1, 128, 15)); /* decode (even 64 sequences of one row): the warp kernel */
    EXPECT(!memra_cuda_flash_attention_applies(0, 128, 512)); /* f32 cache: would be rounded to f16 */
    EXPECT(!memra_cuda_flash_attention_applies(8, 128, 512)); /* q8_0 cache */
    EXPECT(!memra_cuda_flash_attention_applies(1, 96, 512));
    /* Sequences of 1, 64, 65 and 130 query rows: 1 + 1 + 2 + 3 tiles of at most 64 rows. */
    const int32_t sequences[] = {0, 1, 7, 0, 1, 64, 0, 2, 65, 65, 3, 5, 130, 130, 9, 9};
    int32_t tiles[3 * 8];
    EXPECT(memra_cuda_flash_tiles(sequences, 4, tiles, 8) == 7);
    const int32_t expected[] = {0, 0, 1, 1, 1, 64, 2, 65, 64, 2, 129, 1, 3, 130, 64, 3, 194, 64, 3, 258, 2};
    for (int i = 0; i < 21; i++) EXPECT(tiles[i] == expected[i]);
    EXPECT(memra_cuda_flash_tiles(sequences, 4, tiles, 6) == -1); /* does not fit */
}

static void test_argmax_plans(void) {
    memra_cuda_launch launch;
    char message[256];
    EXPECT(MEMRA_CUDA_ARGMAX_CHUNK == MEMRA_CUDA_ARGMAX_THREADS * MEMRA_CUDA_ARGMAX_VALUES && MEMRA_CUDA_ARGMAX_THREADS % 32 == 0);
    /* 151936 values: 38 chunks of 4096 (the last 384 values), a row per grid y */
    EXPECT(memra_cuda_plan_argmax(64, 151936, &launch, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(launch.grid_x == 38 && launch.grid_y == 64 && launch.grid_z == 1 && launch.threads == MEMRA_CUDA_ARGMAX_THREADS && launch.shared_bytes == 0);
    EXPECT(memra_cuda_plan_argmax(1, MEMRA_CUDA_ARGMAX_CHUNK, &launch, message, sizeof message) == MEMRA_CUDA_OK && launch.grid_x == 1 && launch.grid_y == 1);
    EXPECT(memra_cuda_plan_argmax(1, MEMRA_CUDA_ARGMAX_CHUNK + 1, &launch, message, sizeof message) == MEMRA_CUDA_OK && launch.grid_x == 2);
    EXPECT(memra_cuda_plan_argmax(0, 8, &launch, message, sizeof message) == MEMRA_CUDA_OK && launch.grid_x == 1 && launch.grid_y == 1);
    EXPECT(memra_cuda_plan_argmax(3LL << 31, 8, &launch, message, sizeof message) == MEMRA_CUDA_OK && launch.grid_y == MEMRA_CUDA_MAX_GRID_YZ);
    EXPECT(memra_cuda_plan_argmax(1, INT32_MAX, &launch, message, sizeof message) == MEMRA_CUDA_OK && launch.grid_x == (INT32_MAX / MEMRA_CUDA_ARGMAX_CHUNK) + 1);
    EXPECT(memra_cuda_plan_argmax(1, 0, &launch, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT && strstr(message, "0 columns: an argmax row"));
    EXPECT(memra_cuda_plan_argmax(1, 1LL << 31, &launch, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(memra_cuda_plan_argmax(-1, 8, &launch, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT && strstr(message, "negative"));
    /* log-softmax: the argmax's chunks, then a warp per row */
    memra_cuda_launch both[2];
    EXPECT(memra_cuda_plan_log_softmax(64, 151936, both, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(both[0].grid_x == 38 && both[0].grid_y == 64 && both[0].threads == MEMRA_CUDA_ARGMAX_THREADS && both[0].shared_bytes == 0);
    EXPECT(both[1].grid_x == 64 && both[1].grid_y == 1 && both[1].threads == 32 && both[1].shared_bytes == 0);
    EXPECT(memra_cuda_plan_log_softmax(3LL << 31, 8, both, message, sizeof message) == MEMRA_CUDA_OK && both[0].grid_x == 1 &&
           both[0].grid_y == MEMRA_CUDA_MAX_GRID_YZ && both[1].grid_x == MEMRA_CUDA_MAX_GRID_X);
    EXPECT(memra_cuda_plan_log_softmax(1, 0, both, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT && strstr(message, "0 columns: a log-softmax row"));
    EXPECT(memra_cuda_plan_log_softmax(-1, 8, both, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT && strstr(message, "negative"));
}

static void test_mmv_split_plans(void) {
    /* Qwen3-0.6B on 132 SMs, 4 steps of 8 blocks per iteration (32 blocks, 1,024 inputs) */
    EXPECT(memra_cuda_plan_mmv_split(1024, 3072 / 32, 32, 132, 0) == 4);          /* down: 3 iterations */
    EXPECT(memra_cuda_plan_mmv_split(1024, 2048 / 32, 32, 132, 0) == 2);          /* O: 2 iterations */
    EXPECT(memra_cuda_plan_mmv_split(2048 + 1024 + 1024, 1024 / 32, 32, 132, 0) == 1); /* Q/K/V: 1 iteration */
    EXPECT(memra_cuda_plan_mmv_split(151936, 1024 / 32, 32, 132, 0) == 1);        /* LM head */
    /* Qwen3-8B shape: the O and down projections' 4,096 features split 2 ways, Q/K/V's 6,144 not */
    EXPECT(memra_cuda_plan_mmv_split(4096, 12288 / 32, 32, 132, 0) == 2);
    EXPECT(memra_cuda_plan_mmv_split(4096, 4096 / 32, 32, 132, 0) == 2);
    EXPECT(memra_cuda_plan_mmv_split(4096 + 1024 + 1024, 4096 / 32, 32, 132, 0) == 1);
    /* the warp budget's edges: features × 2 · split ≤ 132 · 64 = 8448 */
    EXPECT(memra_cuda_plan_mmv_split(4224, 8 * 32, 32, 132, 0) == 2);
    EXPECT(memra_cuda_plan_mmv_split(4225, 8 * 32, 32, 132, 0) == 1);
    EXPECT(memra_cuda_plan_mmv_split(2112, 8 * 32, 32, 132, 0) == 4);
    EXPECT(memra_cuda_plan_mmv_split(2113, 8 * 32, 32, 132, 0) == 2);
    /* never more warps than iterations to give them (2 steps: 16 blocks an iteration) */
    EXPECT(memra_cuda_plan_mmv_split(8, 16, 16, 132, 0) == 1);
    EXPECT(memra_cuda_plan_mmv_split(8, 17, 16, 132, 0) == 2);
    EXPECT(memra_cuda_plan_mmv_split(8, 33, 16, 132, 0) == 4);
    EXPECT(memra_cuda_plan_mmv_split(8, 1 << 20, 16, 132, 0) == MEMRA_CUDA_MMV_WARPS);
    /* forced (MEMRA_CUDA_MMV_SPLIT), and nonsense sizes */
    EXPECT(memra_cuda_plan_mmv_split(151936, 32, 32, 132, 4) == 4 && memra_cuda_plan_mmv_split(8, 1 << 20, 16, 132, 1) == 1);
    EXPECT(memra_cuda_plan_mmv_split(8, 1 << 20, 16, 132, 3) == MEMRA_CUDA_MMV_WARPS); /* not 1, 2 or 4: the rule */
    EXPECT(memra_cuda_plan_mmv_split(0, 96, 32, 132, 0) == 1 && memra_cuda_plan_mmv_split(8, 96, 32, 0, 0) == 1 && memra_cuda_plan_mmv_split(8, 96, 0, 132, 0) == 1);
    EXPECT(memra_cuda_plan_mmv_split(INT64_MAX, INT64_MAX, 32, INT32_MAX, 0) == 1);
}

/* The pass structure of a top-k plan, checked against its rules and simulated on the host: every
 * list of every pass is a range of the row's columns, and the last pass's one list is all of them. */
static void expect_top_k_plan_sound(const memra_cuda_top_k_plan * plan, int64_t rows, int64_t columns, int64_t k) {
    EXPECT(plan->passes >= 1 && plan->passes <= MEMRA_CUDA_TOP_K_MAX_PASSES);
    if (plan->passes < 1 || plan->passes > MEMRA_CUDA_TOP_K_MAX_PASSES) return;
    EXPECT(plan->lists[plan->passes - 1] == 1);
    const int64_t grid_rows = rows < 1 ? 1 : rows > MEMRA_CUDA_MAX_GRID_YZ ? MEMRA_CUDA_MAX_GRID_YZ : rows;
    int64_t buffer_keys[2] = {0, 0};
    for (int pass = 0; pass < plan->passes; pass++) {
        const int64_t inputs_before = pass == 0 ? columns : plan->lists[pass - 1];
        const int64_t inputs = plan->inputs[pass], lists = plan->lists[pass];
        const int64_t keys = pass == 0 ? inputs : inputs * k;
        const int32_t size = plan->sort_size[pass];
        const memra_cuda_launch launch = plan->launch[pass];
        if (pass > 0) {
            EXPECT(lists < plan->lists[pass - 1]); /* strictly fewer lists each pass */
            EXPECT(inputs >= 2 && inputs * k <= MEMRA_CUDA_TOP_K_SORT);
        } else {
            EXPECT(inputs >= 1 && inputs <= MEMRA_CUDA_TOP_K_SORT);
        }
        if (pass < plan->passes - 1) EXPECT(lists > 1);
        /* blocks of `inputs` inputs: every input in one block, none empty */
        EXPECT(lists * inputs >= inputs_before && (lists - 1) * inputs < inputs_before);
        EXPECT(size >= keys && size >= k && size <= MEMRA_CUDA_TOP_K_SORT && (size & (size - 1)) == 0);
        EXPECT(launch.threads >= 32 && launch.threads <= MEMRA_CUDA_TOP_K_MAX_THREADS && launch.threads % 32 == 0);
        EXPECT(launch.threads <= (size / 2 > 32 ? size / 2 : 32));
        EXPECT(launch.grid_x == lists && launch.grid_y == grid_rows && launch.grid_z == 1 && launch.shared_bytes == 0);
        EXPECT(launch.grid_x <= MEMRA_CUDA_MAX_GRID_X);
        if (lists > 1 && rows * lists * k > buffer_keys[pass % 2]) buffer_keys[pass % 2] = rows * lists * k;
    }
    EXPECT(plan->buffer_keys[0] == buffer_keys[0] && plan->buffer_keys[1] == buffer_keys[1]);
    /* Host simulation: list x of a pass covers columns [begin[x], end[x]); pass 0's lists are the
     * chunks, a later pass's list x the lists [x * inputs, (x + 1) * inputs) before it. */
    int64_t count = plan->lists[0];
    int64_t * begin = (int64_t *)malloc((size_t)count * sizeof *begin);
    int64_t * end = (int64_t *)malloc((size_t)count * sizeof *end);
    if (!begin || !end) {
        EXPECT(!"allocation of the simulation");
        free(begin);
        free(end);
        return;
    }
    for (int64_t x = 0; x < count; x++) {
        begin[x] = x * plan->inputs[0];
        end[x] = begin[x] + plan->inputs[0] < columns ? begin[x] + plan->inputs[0] : columns;
    }
    for (int pass = 1; pass < plan->passes; pass++) {
        const int64_t inputs = plan->inputs[pass];
        int64_t next = 0;
        for (int64_t first = 0; first < count; first += inputs, next++) {
            const int64_t last = (first + inputs < count ? first + inputs : count) - 1;
            for (int64_t i = first; i < last; i++) EXPECT(end[i] == begin[i + 1]); /* adjacent, disjoint */
            begin[next] = begin[first];
            end[next] = end[last];
        }
        EXPECT(next == plan->lists[pass]);
        count = next;
    }
    EXPECT(count == 1 && begin[0] == 0 && end[0] == columns);
    free(begin);
    free(end);
}

static uint64_t top_k_random_state = 0x9E3779B97F4A7C15ull;
static uint64_t top_k_random(void) {
    top_k_random_state ^= top_k_random_state << 13;
    top_k_random_state ^= top_k_random_state >> 7;
    top_k_random_state ^= top_k_random_state << 17;
    return top_k_random_state;
}

static void test_top_k_plans(void) {
    memra_cuda_top_k_plan plan;
    char message[256];
    /* A 151936-token vocabulary, k = 40: 38 chunks of 4096, then one group of 38 lists (1520 keys). */
    EXPECT(memra_cuda_plan_top_k(64, 151936, 40, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes == 2);
    EXPECT(plan.lists[0] == 38 && plan.inputs[0] == 4096 && plan.sort_size[0] == 4096);
    EXPECT(plan.lists[1] == 1 && plan.inputs[1] == 38 && plan.sort_size[1] == 2048);
    EXPECT(plan.launch[0].grid_x == 38 && plan.launch[0].grid_y == 64 && plan.launch[0].grid_z == 1 && plan.launch[0].threads == 512);
    EXPECT(plan.launch[1].grid_x == 1 && plan.launch[1].grid_y == 64 && plan.launch[1].threads == 512 && plan.launch[1].shared_bytes == 0);
    EXPECT(plan.buffer_keys[0] == 64 * 38 * 40 && plan.buffer_keys[1] == 0);
    expect_top_k_plan_sound(&plan, 64, 151936, 40);
    /* k = 1024: groups of 4 lists: 38 → 10 → 3 → 1. */
    EXPECT(memra_cuda_plan_top_k(1, 151936, 1024, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes == 4);
    EXPECT(plan.lists[0] == 38 && plan.inputs[0] == 4096 && plan.sort_size[0] == 4096);
    EXPECT(plan.lists[1] == 10 && plan.inputs[1] == 4 && plan.sort_size[1] == 4096);
    EXPECT(plan.lists[2] == 3 && plan.inputs[2] == 4 && plan.sort_size[2] == 4096);
    EXPECT(plan.lists[3] == 1 && plan.inputs[3] == 3 && plan.sort_size[3] == 4096);
    EXPECT(plan.buffer_keys[0] == 38 * 1024 && plan.buffer_keys[1] == 10 * 1024);
    expect_top_k_plan_sound(&plan, 1, 151936, 1024);
    /* Up to 4096 columns: one pass, sorting the next power of two. */
    EXPECT(memra_cuda_plan_top_k(3, 4096, 40, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes == 1 && plan.lists[0] == 1 && plan.inputs[0] == 4096 && plan.sort_size[0] == 4096 && plan.launch[0].threads == 512);
    EXPECT(plan.buffer_keys[0] == 0 && plan.buffer_keys[1] == 0);
    EXPECT(memra_cuda_plan_top_k(3, 1000, 1000, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes == 1 && plan.inputs[0] == 1000 && plan.sort_size[0] == 1024 && plan.launch[0].threads == 512);
    EXPECT(memra_cuda_plan_top_k(3, 100, 7, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes == 1 && plan.inputs[0] == 100 && plan.sort_size[0] == 128 && plan.launch[0].threads == 64);
    EXPECT(memra_cuda_plan_top_k(3, 9, 9, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes == 1 && plan.sort_size[0] == 16 && plan.launch[0].threads == 32);
    /* 4097 columns: two chunks (the second of one value), then a merge of their lists. */
    EXPECT(memra_cuda_plan_top_k(2, 4097, 40, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes == 2 && plan.lists[0] == 2 && plan.inputs[1] == 2 && plan.sort_size[1] == 128 && plan.launch[1].threads == 64);
    EXPECT(plan.buffer_keys[0] == 2 * 2 * 40 && plan.buffer_keys[1] == 0);
    expect_top_k_plan_sound(&plan, 2, 4097, 40);
    /* The smallest: one column, k = 1. */
    EXPECT(memra_cuda_plan_top_k(1, 1, 1, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes == 1 && plan.lists[0] == 1 && plan.inputs[0] == 1 && plan.sort_size[0] == 1 && plan.launch[0].threads == 32);
    expect_top_k_plan_sound(&plan, 1, 1, 1);
    EXPECT(memra_cuda_plan_top_k(5, 151936, 1, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes == 2 && plan.lists[0] == 38 && plan.inputs[1] == 38 && plan.sort_size[1] == 64);
    expect_top_k_plan_sound(&plan, 5, 151936, 1);
    /* The longest row: 2^19 chunks, then groups of 4 lists: 11 passes, no overflow. */
    EXPECT(memra_cuda_plan_top_k(2, INT32_MAX, 1024, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes <= 11 && plan.lists[0] == (1 << 19));
    EXPECT(plan.buffer_keys[0] == 2LL * (1 << 19) * 1024 && plan.buffer_keys[1] == 2LL * (1 << 17) * 1024);
    expect_top_k_plan_sound(&plan, 2, INT32_MAX, 1024);
    EXPECT(memra_cuda_plan_top_k(2, INT32_MAX, 1, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes <= 11);
    expect_top_k_plan_sound(&plan, 2, INT32_MAX, 1);
    /* No rows: a valid plan (the launcher returns before it); rows beyond the grid: y capped. */
    EXPECT(memra_cuda_plan_top_k(0, 151936, 40, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.passes == 2 && plan.launch[0].grid_y == 1 && plan.buffer_keys[0] == 0);
    expect_top_k_plan_sound(&plan, 0, 151936, 40);
    EXPECT(memra_cuda_plan_top_k(100000, 151936, 40, &plan, message, sizeof message) == MEMRA_CUDA_OK);
    EXPECT(plan.launch[0].grid_y == MEMRA_CUDA_MAX_GRID_YZ && plan.launch[1].grid_y == MEMRA_CUDA_MAX_GRID_YZ);
    EXPECT(plan.buffer_keys[0] == 100000LL * 38 * 40);
    expect_top_k_plan_sound(&plan, 100000, 151936, 40);
    /* Errors. */
    EXPECT(memra_cuda_plan_top_k(1, 8, 0, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT && strstr(message, "k 0") &&
           strstr(message, "1..8"));
    EXPECT(memra_cuda_plan_top_k(1, 8, 9, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT && strstr(message, "k 9") &&
           strstr(message, "1..8"));
    EXPECT(memra_cuda_plan_top_k(1, 151936, 1025, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT && strstr(message, "k 1025") &&
           strstr(message, "1..1024"));
    EXPECT(memra_cuda_plan_top_k(1, 8, -1, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT && strstr(message, "k -1"));
    EXPECT(memra_cuda_plan_top_k(1, 0, 1, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT && strstr(message, "0 columns"));
    EXPECT(memra_cuda_plan_top_k(1, 1LL << 31, 1, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT &&
           strstr(message, "2147483648 columns"));
    EXPECT(memra_cuda_plan_top_k(-1, 8, 1, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT && strstr(message, "rows -1 is negative"));
    EXPECT(memra_cuda_plan_top_k(1LL << 40, INT32_MAX, 1024, &plan, message, sizeof message) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT &&
           strstr(message, "overflows"));
    /* Properties over random shapes: columns log-uniform up to INT32_MAX, k up to min(columns, 1024). */
    for (int trial = 0; trial < 4000; trial++) {
        const int bits = (int)(top_k_random() % 32);
        int64_t columns = bits == 0 ? 1 : (int64_t)(top_k_random() & ((1ull << bits) - 1)) + 1;
        if (columns > INT32_MAX) columns = INT32_MAX;
        const int64_t k_max = columns < MEMRA_CUDA_TOP_K_MAX ? columns : MEMRA_CUDA_TOP_K_MAX;
        const int64_t k = trial % 4 == 0 ? k_max : (int64_t)(top_k_random() % (uint64_t)k_max) + 1;
        const int64_t rows = trial % 8 == 0 ? (int64_t)(top_k_random() % 200000) : (int64_t)(top_k_random() % 70);
        const int planned = memra_cuda_plan_top_k(rows, columns, k, &plan, message, sizeof message);
        EXPECT(planned == MEMRA_CUDA_OK);
        if (planned != MEMRA_CUDA_OK) {
            fprintf(stderr, "top-k plan of %lld x %lld, k %lld: %s (further shapes not checked)\n", (long long)rows, (long long)columns, (long long)k, message);
            break;
        }
        const int before = failures;
        expect_top_k_plan_sound(&plan, rows, columns, k);
        EXPECT(plan.passes <= 11);
        if (failures != before) {
            fprintf(stderr, "top-k plan of %lld x %lld, k %lld (further shapes not checked)\n", (long long)rows, (long long)columns, (long long)k);
            break;
        }
    }
}

int main(void) {
    test_argmax_plans();
    test_top_k_plans();
    test_flash_attention_plans();
    test_activation_rounding_plans();
    test_type_tables();
    test_matmul_plans();
    test_mmv_split_plans();
    test_int8_gemm_plans();
    test_row_and_elementwise_plans();
    test_attention_and_moe_plans();
    test_moe_grouping();
    test_allocator_cache();
    test_arena();
    if (failures) {
        fprintf(stderr, "test-launch-plan: %d failure(s)\n", failures);
        return 1;
    }
    printf("test-launch-plan: all checks passed\n");
    return 0;
}
