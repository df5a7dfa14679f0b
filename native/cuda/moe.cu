/*
 * moe.cu — launchers of memra_cuda_moe_route (kernel in kernels/moe.cuh: routes on the device,
 * then copies the [rows, k] ids and weights to the caller's host arrays) and of
 * memra_cuda_moe_experts (routing and the chosen experts' SwiGLU FFNs all on the device).
 */
#include "cuda-internal.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/moe.cuh"
#include "rounding-launch.cuh"

using namespace memra_cuda_kernels;

extern "C" int memra_cuda_moe_route(memra_cuda * cuda, int32_t * ids_out, float * weights_out, int64_t out_length, const float * logits, int64_t logits_length,
                                    int64_t rows, int64_t experts, int64_t k) {
    static const char function[] = "memra_cuda_moe_route";
    CHECK(memra_cuda_enter(function, cuda));
    REFUSE_WHILE_CAPTURING(function, cuda, "routing cannot be read back to the host");
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    memra_cuda_launch launch;
    char message[512];
    const int planned = memra_cuda_plan_moe_route(rows, experts, k, &launch, message, sizeof message);
    if (planned != MEMRA_CUDA_OK) FAIL(planned, "%s: %s", function, message);
    int64_t needed = 0, out_needed = 0;
    CHECK(memra_cuda_check_product(function, "rows * experts", rows, experts, &needed));
    CHECK(memra_cuda_check_product(function, "rows * k", rows, k, &out_needed));
    CHECK(memra_cuda_check_buffer(function, "logits", logits, logits_length, needed));
    CHECK(memra_cuda_check_buffer(function, "ids_out", ids_out, out_length, out_needed));
    CHECK(memra_cuda_check_buffer(function, "weights_out", weights_out, out_length, out_needed));
    if (rows == 0) return MEMRA_CUDA_OK;
    uint8_t * scratch = (uint8_t *)memra_cuda_alloc(cuda, out_needed * 8);
    if (!scratch) return memra_cuda_last_status();
    int32_t * ids = (int32_t *)scratch;
    float * weights = (float *)(scratch + out_needed * 4);
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, launch.shared_bytes, cuda->stream, moe_route_kernel)(ids, weights, logits, rows, (int)experts, (int)k);
    cudaError_t error = cudaGetLastError();
    if (error == cudaSuccess) PROFILE_MARK("moe_route_kernel");
    if (error == cudaSuccess) error = cudaMemcpyAsync(ids_out, ids, (size_t)out_needed * 4, cudaMemcpyDeviceToHost, cuda->stream);
    if (error == cudaSuccess) error = cudaMemcpyAsync(weights_out, weights, (size_t)out_needed * 4, cudaMemcpyDeviceToHost, cuda->stream);
    const int waited = error == cudaSuccess ? memra_cuda_wait(function, cuda) : MEMRA_CUDA_OK;
    memra_cuda_free(cuda, scratch);
    if (error != cudaSuccess) return memra_cuda_fail_cuda(error, function, "routing");
    return waited;
}

/* What an expert kernel reads: `values` (x, or x rounded), or the q8 `codes` and block `scales` of
 * x rounded for the weight type (expert_reads_codes). */
struct expert_input {
    const float * values;
    const int8_t * codes;
    const float * scales;
};

/* Whether the experts of `type` multiply the activations' q8 codes (expert_matrix_vector_codes_kernel):
 * q8_0, q4_0, q5_0 and the k-quants, where the context rounds activations and codes_mmv is on. */
static bool expert_reads_codes(const memra_cuda * cuda, int type) {
    return cuda->activation_rounding && cuda->codes_mmv && (memra_cuda_type_is_q8_0(type) || codes_matrix_vector_type(type));
}

template <int TYPE>
static void launch_expert_codes(dim3 grid, cudaStream_t stream, float * out, float * second_out, const expert_input & x, int64_t x_row_divisor,
                                const void * weights, const void * second_weights, int64_t blocks_per_matrix, int64_t matrix_bytes, int64_t row_bytes,
                                const int32_t * ids, int64_t first, int64_t n_in, int64_t n_out) {
    MEMRA_LAUNCH(grid, MEMRA_CUDA_MMV_WARPS * 32, 0, stream, expert_matrix_vector_codes_kernel<TYPE>)(
        out, second_out, x.codes, x.scales, x_row_divisor, (const uint8_t *)weights, (const uint8_t *)second_weights, blocks_per_matrix, matrix_bytes, row_bytes,
        ids, first, n_in, n_out);
}

/* Launches expert_matrix_vector_kernel (or its codes form) for `type` over pairs × n_out outputs
 * of `weights`, and of `second_weights` into second_out in the same launch where given (grid y: at
 * most MEMRA_CUDA_MAX_GRID_YZ pairs a launch). */
static int launch_experts(const char * function, memra_cuda * cuda, int type, float * out, const expert_input & x, int64_t x_row_divisor, const void * weights,
                          int64_t n_in, int64_t n_out, const int32_t * ids, int64_t pairs, float * second_out = nullptr,
                          const void * second_weights = nullptr) {
    const int64_t row_bytes = memra_cuda_row_bytes(type, n_in);
    const int64_t blocks_per_matrix = (n_out + MEMRA_CUDA_MMV_WARPS - 1) / MEMRA_CUDA_MMV_WARPS;
    for (int64_t first = 0; first < pairs; first += MEMRA_CUDA_MAX_GRID_YZ) {
        const int64_t count = pairs - first < MEMRA_CUDA_MAX_GRID_YZ ? pairs - first : MEMRA_CUDA_MAX_GRID_YZ;
        const dim3 grid((unsigned)(blocks_per_matrix * (second_weights ? 2 : 1)), (unsigned)count, 1);
        if (x.codes) {
#define MEMRA_EXPERT_CODES(T)                                                                                                                          \
    launch_expert_codes<T>(grid, cuda->stream, out, second_out, x, x_row_divisor, weights, second_weights, blocks_per_matrix, n_out * row_bytes, row_bytes, ids, \
                           first, n_in, n_out)
            switch (type) {
                case MEMRA_CUDA_TYPE_Q8_0: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_Q8_0); break;
                case MEMRA_CUDA_TYPE_Q8_0_X8: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_Q8_0_X8); break;
                case MEMRA_CUDA_TYPE_Q6_K_X8: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_Q6_K_X8); break;
                case MEMRA_CUDA_TYPE_Q4_0_X8: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_Q4_0_X8); break;
                case MEMRA_CUDA_TYPE_Q4_0: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_Q4_0); break;
                case MEMRA_CUDA_TYPE_Q5_0: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_Q5_0); break;
                case MEMRA_CUDA_TYPE_Q4_K: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_Q4_K); break;
                case MEMRA_CUDA_TYPE_Q5_K: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_Q5_K); break;
                case MEMRA_CUDA_TYPE_Q2_K: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_Q2_K); break;
                case MEMRA_CUDA_TYPE_Q3_K: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_Q3_K); break;
                case MEMRA_CUDA_TYPE_IQ4_NL: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_IQ4_NL); break;
                case MEMRA_CUDA_TYPE_IQ4_XS: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_IQ4_XS); break;
                case MEMRA_CUDA_TYPE_IQ2_XXS: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_IQ2_XXS); break;
                case MEMRA_CUDA_TYPE_IQ2_XS: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_IQ2_XS); break;
                case MEMRA_CUDA_TYPE_IQ2_S: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_IQ2_S); break;
                case MEMRA_CUDA_TYPE_IQ3_XXS: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_IQ3_XXS); break;
                case MEMRA_CUDA_TYPE_IQ3_S: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_IQ3_S); break;
                case MEMRA_CUDA_TYPE_IQ1_S: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_IQ1_S); break;
                case MEMRA_CUDA_TYPE_IQ1_M: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_IQ1_M); break;
                default: MEMRA_EXPERT_CODES(MEMRA_CUDA_TYPE_Q6_K); break;
            }
#undef MEMRA_EXPERT_CODES
            LAUNCH_CHECK(function, "expert_matrix_vector_codes_kernel");
            continue;
        }
        MEMRA_CUDA_DISPATCH_TYPE(type, (MEMRA_LAUNCH(grid, MEMRA_CUDA_MMV_WARPS * 32, 0, cuda->stream, expert_matrix_vector_kernel<T>)(
                                           out, second_out, x.values, x_row_divisor, (const uint8_t *)weights, (const uint8_t *)second_weights, blocks_per_matrix,
                                           n_out * row_bytes, row_bytes, ids, first, n_in, n_out)));
        LAUNCH_CHECK(function, "expert_matrix_vector_kernel");
    }
    return MEMRA_CUDA_OK;
}

/* `x` (or silu(x) · up, where up is given) rounded for `type` when the context rounds activations:
 * into `rounded` as values, or as q8 codes with their block scales in `scales` where the experts of
 * `type` read codes; *input is what the expert kernel reads. With up and no rounding, the SwiGLU
 * product alone goes to `rounded`. */
static int round_for(const char * function, memra_cuda * cuda, int type, const float * x, int64_t rows, int64_t n_in, workspace & rounded, workspace & scales,
                     expert_input * input, const float * up = nullptr) {
    *input = expert_input{x, nullptr, nullptr};
    const int rounding = cuda->activation_rounding ? memra_cuda_activation_rounding(type) : MEMRA_CUDA_ROUND_NONE;
    if (rounding == MEMRA_CUDA_ROUND_NONE && !up) return MEMRA_CUDA_OK;
    if (expert_reads_codes(cuda, type)) {
        CHECK(rounded.allocate(rows * n_in));
        CHECK(scales.allocate(rows * n_in / memra_cuda_rounding_block(rounding) * 4));
        const memra_cuda_launch launch = memra_cuda_plan_rounding(rounding, rows, n_in);
        launch_rounding<true>(rounding, launch, cuda->stream, nullptr, nullptr, x, rows * n_in, (int8_t *)rounded.pointer, (float *)scales.pointer, up);
        LAUNCH_CHECK(function, "round_activations_kernel");
        *input = expert_input{nullptr, (const int8_t *)rounded.pointer, (const float *)scales.pointer};
        return MEMRA_CUDA_OK;
    }
    CHECK(rounded.allocate(rows * n_in * 4));
    if (rounding == MEMRA_CUDA_ROUND_NONE) {
        const memra_cuda_launch launch = memra_cuda_plan_elementwise(rows * n_in);
        MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, swiglu_kernel)((float *)rounded.pointer, x, up, rows * n_in);
        LAUNCH_CHECK(function, "swiglu_kernel");
    } else {
        const memra_cuda_launch launch = memra_cuda_plan_rounding(rounding, rows, n_in);
        launch_rounding<false>(rounding, launch, cuda->stream, (float *)rounded.pointer, nullptr, x, rows * n_in, nullptr, nullptr, up);
        LAUNCH_CHECK(function, "round_activations_kernel");
    }
    input->values = (const float *)rounded.pointer;
    return MEMRA_CUDA_OK;
}

/* Whether the three projections have a GEMM for `pairs` rows (the grouped path's kernels; q8_1
 * activations, which it lacks, were refused before). */
static bool grouped_gemms_apply(int64_t pairs, int gate_type, int up_type, int down_type, int64_t embedding, int64_t ffn) {
    const int types[3] = {gate_type, up_type, down_type};
    const int64_t n_in[3] = {embedding, embedding, ffn}, n_out[3] = {ffn, ffn, embedding};
    for (int t = 0; t < 3; t++) {
        memra_cuda_matmul_plan plan;
        char message[256];
        if (memra_cuda_plan_matmul_with(types[t], pairs, n_in[t], n_out[t], 1, &plan, message, sizeof message) != MEMRA_CUDA_OK) return false;
        if (plan.kernel != MEMRA_CUDA_MATMUL_GEMM) return false;
    }
    return true;
}

/* The chosen experts of many rows (memra_cuda_moe_grouped), routing already on the device: the
 * pairs sorted by expert (moe_group_kernel), each slot's input row gathered, gate and up as one
 * grouped GEMM call on the shared input, down as a grouped GEMM on silu(gate) · up (fused into its
 * input's rounding), and the routing-weighted sum of each row's pairs. */
static int grouped_experts(const char * function, memra_cuda * cuda, float * out, const float * x, const int32_t * ids, const float * weights, int64_t rows,
                           int64_t experts, int64_t k, int gate_type, const void * gate, int64_t gate_bytes, int up_type, const void * up, int64_t up_bytes,
                           int down_type, const void * down, int64_t down_bytes, int64_t embedding, int64_t ffn) {
    const int64_t pairs = rows * k;
    memra_cuda_moe_tiles tiles;
    /* an expert's rows at pp512 of 30B-A3B: 32 on average; the pipelined GEMM's 64-row tiles waste less of them */
    tiles.int8_rows = cuda->int8_pipeline ? MEMRA_CUDA_INT8_PIPE_SMALL_ROWS : MEMRA_CUDA_INT8_GEMM_TILE_M;
    tiles.int8_bound = memra_cuda_moe_tile_bound(pairs, experts, tiles.int8_rows);
    tiles.gemm_bound = memra_cuda_moe_tile_bound(pairs, experts, MEMRA_CUDA_GEMM_TILE_M);
    workspace sorting(cuda), sorted_x(cuda), gate_out(cuda), up_out(cuda), down_out(cuda);
    CHECK(sorting.allocate((2 * pairs + 3 * (tiles.int8_bound + tiles.gemm_bound)) * 4));
    int32_t * slot_pairs = (int32_t *)sorting.pointer;
    int32_t * pair_slots = slot_pairs + pairs;
    int32_t * int8_tiles = pair_slots + pairs;
    int32_t * gemm_tiles = int8_tiles + 3 * tiles.int8_bound;
    tiles.int8_tiles = int8_tiles;
    tiles.gemm_tiles = gemm_tiles;
    const memra_cuda_launch group = memra_cuda_plan_moe_group(experts);
    MEMRA_LAUNCH(memra_grid(group), group.threads, group.shared_bytes, cuda->stream, moe_group_kernel)(
        slot_pairs, pair_slots, int8_tiles, (int)tiles.int8_rows, tiles.int8_bound, gemm_tiles, MEMRA_CUDA_GEMM_TILE_M, tiles.gemm_bound, ids, pairs,
        (int)experts);
    LAUNCH_CHECK(function, "moe_group_kernel");
    const int64_t x_values = pairs * embedding, hidden_values = pairs * ffn;
    CHECK(sorted_x.allocate(x_values * 4));
    const memra_cuda_launch gather = memra_cuda_plan_elementwise(x_values);
    MEMRA_LAUNCH(memra_grid(gather), gather.threads, 0, cuda->stream, gather_pair_rows_kernel)((float *)sorted_x.pointer, x, slot_pairs, pairs, (int)k,
                                                                                              embedding);
    LAUNCH_CHECK(function, "gather_pair_rows_kernel");
    CHECK(gate_out.allocate(hidden_values * 4));
    CHECK(up_out.allocate(hidden_values * 4));
    CHECK(down_out.allocate(x_values * 4));
    float * const projections[2] = {(float *)gate_out.pointer, (float *)up_out.pointer};
    const int64_t projection_lengths[2] = {hidden_values, hidden_values}, ffns[2] = {ffn, ffn};
    const int32_t projection_types[2] = {gate_type, up_type};
    const void * const projection_weights[2] = {gate, up};
    const int64_t projection_bytes[2] = {gate_bytes, up_bytes};
    CHECK(memra_cuda_grouped_matmul(function, cuda, 2, projections, projection_lengths, (const float *)sorted_x.pointer, x_values, pairs, projection_types,
                                    projection_weights, projection_bytes, embedding, ffns, experts, nullptr, 0, tiles));
    float * const down_target = (float *)down_out.pointer;
    const int32_t down_type32 = down_type;
    CHECK(memra_cuda_grouped_matmul(function, cuda, 1, &down_target, &x_values, (const float *)gate_out.pointer, hidden_values, pairs, &down_type32, &down,
                                    &down_bytes, ffn, &embedding, experts, (const float *)up_out.pointer, hidden_values, tiles));
    const memra_cuda_launch combine = memra_cuda_plan_elementwise(rows * embedding);
    MEMRA_LAUNCH(memra_grid(combine), combine.threads, 0, cuda->stream, expert_combine_kernel)(out, (const float *)down_out.pointer, ids, weights, pair_slots, rows,
                                                                                             (int)k, embedding);
    LAUNCH_CHECK(function, "expert_combine_kernel");
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_moe_experts(memra_cuda * cuda, float * out, int64_t out_length, const float * x, int64_t x_length, const float * logits,
                                      int64_t logits_length, int64_t rows, int64_t experts, int64_t k, int gate_type, const void * gate, int64_t gate_bytes,
                                      int up_type, const void * up, int64_t up_bytes, int down_type, const void * down, int64_t down_bytes, int64_t embedding,
                                      int64_t ffn) {
    static const char function[] = "memra_cuda_moe_experts";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    CHECK(memra_cuda_check_size(function, "embedding", embedding, 1));
    CHECK(memra_cuda_check_size(function, "ffn", ffn, 1));
    memra_cuda_launch route;
    char message[512];
    const int planned = memra_cuda_plan_moe_route(rows, experts, k, &route, message, sizeof message);
    if (planned != MEMRA_CUDA_OK) FAIL(planned, "%s: %s", function, message);
    int64_t pairs = 0, x_needed = 0, logits_needed = 0, matrices = 0, row_bytes = 0;
    CHECK(memra_cuda_check_product(function, "rows * k", rows, k, &pairs));
    if (pairs > INT32_MAX) FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: %lld (row, expert) pairs: at most %d in one call", function, (long long)pairs, INT32_MAX);
    CHECK(memra_cuda_check_product(function, "rows * embedding", rows, embedding, &x_needed));
    CHECK(memra_cuda_check_product(function, "rows * experts", rows, experts, &logits_needed));
    CHECK(memra_cuda_check_buffer(function, "x", x, x_length, x_needed));
    CHECK(memra_cuda_check_buffer(function, "out", out, out_length, x_needed));
    CHECK(memra_cuda_check_buffer(function, "logits", logits, logits_length, logits_needed));
    CHECK(memra_cuda_check_product(function, "experts * ffn", experts, ffn, &matrices));
    CHECK(memra_cuda_check_weight(function, "gate", gate_type, gate, gate_bytes, matrices, embedding, &row_bytes));
    CHECK(memra_cuda_check_weight(function, "up", up_type, up, up_bytes, matrices, embedding, &row_bytes));
    CHECK(memra_cuda_check_product(function, "experts * embedding", experts, embedding, &matrices));
    CHECK(memra_cuda_check_weight(function, "down", down_type, down, down_bytes, matrices, ffn, &row_bytes));
    if (cuda->activation_rounding) {
        const int types[3] = {gate_type, up_type, down_type};
        for (int t = 0; t < 3; t++) {
            /* q4_1 / q5_1 need the per-block offset correction, which only the gather path applies */
            if (memra_cuda_activation_rounding(types[t]) == MEMRA_CUDA_ROUND_Q8_1)
                FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: expert weights of type %d (q8_1 activations) go through gather, matmul and scatter", function, types[t]);
        }
    }
    const uintptr_t o = (uintptr_t)out, i = (uintptr_t)x;
    if (rows > 0 && o < i + (uintptr_t)x_needed * 4 && i < o + (uintptr_t)x_needed * 4) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out overlaps x", function);
    if ((uintptr_t)x % 16 != 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: x must be 16-byte aligned", function);
    if (rows == 0) return MEMRA_CUDA_OK;
    const bool grouped = cuda->gemm && memra_cuda_moe_grouped(rows, experts, k) && grouped_gemms_apply(pairs, gate_type, up_type, down_type, embedding, ffn);

    /* Routing: ids and weights stay on the device. */
    workspace routing(cuda), gate_out(cuda), up_out(cuda), down_out(cuda), rounded_x(cuda), rounded_up(cuda), rounded_h(cuda), scales_x(cuda), scales_up(cuda),
        scales_h(cuda);
    CHECK(routing.allocate(pairs * 8));
    int32_t * ids = (int32_t *)routing.pointer;
    float * weights = (float *)((uint8_t *)routing.pointer + pairs * 4);
    MEMRA_LAUNCH(memra_grid(route), route.threads, route.shared_bytes, cuda->stream, moe_route_kernel)(ids, weights, logits, rows, (int)experts, (int)k);
    LAUNCH_CHECK(function, "moe_route_kernel");
    if (grouped) return grouped_experts(function, cuda, out, x, ids, weights, rows, experts, k, gate_type, gate, gate_bytes, up_type, up, up_bytes, down_type, down,
                                        down_bytes, embedding, ffn);
    CHECK(gate_out.allocate(pairs * ffn * 4));
    CHECK(up_out.allocate(pairs * ffn * 4));
    CHECK(down_out.allocate(pairs * embedding * 4));
    /* gate and up of every pair from its row's rounded input (one launch where they share a type),
     * down from the pair's hidden values silu(gate) · up, rounded as the SwiGLU is computed */
    expert_input source;
    CHECK(round_for(function, cuda, gate_type, x, rows, embedding, rounded_x, scales_x, &source));
    if (up_type == gate_type) {
        CHECK(launch_experts(function, cuda, gate_type, (float *)gate_out.pointer, source, k, gate, embedding, ffn, ids, pairs, (float *)up_out.pointer, up));
    } else {
        CHECK(launch_experts(function, cuda, gate_type, (float *)gate_out.pointer, source, k, gate, embedding, ffn, ids, pairs));
        if (memra_cuda_activation_rounding(up_type) != memra_cuda_activation_rounding(gate_type) ||
            expert_reads_codes(cuda, up_type) != expert_reads_codes(cuda, gate_type)) {
            CHECK(round_for(function, cuda, up_type, x, rows, embedding, rounded_up, scales_up, &source));
        }
        CHECK(launch_experts(function, cuda, up_type, (float *)up_out.pointer, source, k, up, embedding, ffn, ids, pairs));
    }
    CHECK(round_for(function, cuda, down_type, (const float *)gate_out.pointer, pairs, ffn, rounded_h, scales_h, &source, (const float *)up_out.pointer));
    CHECK(launch_experts(function, cuda, down_type, (float *)down_out.pointer, source, 1, down, ffn, embedding, ids, pairs));
    const memra_cuda_launch combine = memra_cuda_plan_elementwise(x_needed);
    MEMRA_LAUNCH(memra_grid(combine), combine.threads, 0, cuda->stream, expert_combine_kernel)(out, (const float *)down_out.pointer, ids, weights, nullptr, rows,
                                                                                             (int)k, embedding);
    LAUNCH_CHECK(function, "expert_combine_kernel");
    return MEMRA_CUDA_OK;
}
