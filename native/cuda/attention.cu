/*
 * attention.cu — launchers of memra_cuda_kv_write and memra_cuda_paged_attention (kernels in
 * kernels/attention.cuh). Every block id, slot and sequence is checked on the host before the
 * arrays are staged, so a kernel never reads outside the storage.
 */
#include <math.h>

#include <vector>

#include "cuda-internal.cuh"
#include "kernels/attention.cuh"
#include "rounding-launch.cuh"

using namespace memra_cuda_kernels;

static int check_kv_type(const char * function, int type, int64_t width, int64_t * row_bytes) {
    *row_bytes = memra_cuda_kv_row_bytes(type, width);
    if (type != MEMRA_CUDA_TYPE_F32 && type != MEMRA_CUDA_TYPE_F16 && type != MEMRA_CUDA_TYPE_Q8_0) {
        FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED_TYPE, "%s: KV type %d is not f32 (0), f16 (1) or q8_0 (8)", function, type);
    }
    if (*row_bytes == 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: KV rows of %lld values (q8_0 needs a multiple of 32)", function, (long long)width);
    return MEMRA_CUDA_OK;
}

static int check_slots(const char * function, const int32_t * slots, int64_t count, int64_t storage_slots) {
    for (int64_t i = 0; i < count; i++) {
        if (slots[i] < 0 || slots[i] >= storage_slots) {
            FAIL(MEMRA_CUDA_ERROR_OUT_OF_RANGE, "%s: slot %d (row %lld) outside the storage's %lld slots", function, slots[i], (long long)i, (long long)storage_slots);
        }
    }
    return MEMRA_CUDA_OK;
}

/* Slots (checked) staged for a kernel; while capturing, checked again at every replay. */
static int stage_slots(const char * function, memra_cuda * cuda, const int32_t * slots, int64_t count, int64_t storage_slots, const void ** device_slots) {
    CHECK(memra_cuda_stage(function, cuda, slots, count * 4, device_slots));
    if (cuda->capture) {
        const int32_t * copy = (const int32_t *)memra_cuda_capture_host_copy(cuda, *device_slots);
        CHECK(memra_cuda_capture_check(function, cuda, [=]() { return check_slots(function, copy, count, storage_slots); }));
    }
    return MEMRA_CUDA_OK;
}

/* kv_write of `pairs` (1 or 2) storages of one type and size at the same slots, in one launch. */
static int kv_write(const char * function, memra_cuda * cuda, int type, void * const * storages, int pairs, int64_t storage_bytes, int64_t width,
                    const int32_t * slots, int64_t count, const float * const * sources, const int64_t * source_lengths) {
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "count", count, 0));
    CHECK(memra_cuda_check_size(function, "width", width, 1));
    int64_t row_bytes = 0, needed = 0;
    CHECK(check_kv_type(function, type, width, &row_bytes));
    CHECK(memra_cuda_check_product(function, "count * width", count, width, &needed));
    for (int p = 0; p < pairs; p++) {
        CHECK(memra_cuda_check_buffer(function, p == 0 ? "source" : "second source", sources[p], source_lengths[p], needed));
        if (storage_bytes < 0 || (storage_bytes > 0 && !storages[p])) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: storage is NULL", function);
    }
    if (pairs == 2 && storages[0] == storages[1] && count > 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: keys and values are one storage", function);
    if (count > 0 && !slots) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: slots is NULL", function);
    const int64_t storage_slots = storage_bytes / row_bytes;
    CHECK(check_slots(function, slots, count, storage_slots));
    if (count == 0) return MEMRA_CUDA_OK;
    const void * device_slots = NULL;
    CHECK(stage_slots(function, cuda, slots, count, storage_slots, &device_slots));
    const memra_cuda_launch launch = memra_cuda_plan_kv_write(count, width);
    dim3 grid = memra_grid(launch);
    grid.z = (unsigned)pairs;
    const int32_t * s = (const int32_t *)device_slots;
    uint8_t * first = (uint8_t *)storages[0];
    uint8_t * second = (uint8_t *)storages[pairs - 1];
    const float * first_source = sources[0];
    const float * second_source = sources[pairs - 1];
    if (type == MEMRA_CUDA_TYPE_F32) {
        MEMRA_LAUNCH(grid, launch.threads, 0, cuda->stream, kv_write_kernel<MEMRA_CUDA_TYPE_F32>)(first, second, row_bytes, width, s, count, first_source, second_source);
    } else if (type == MEMRA_CUDA_TYPE_F16) {
        MEMRA_LAUNCH(grid, launch.threads, 0, cuda->stream, kv_write_kernel<MEMRA_CUDA_TYPE_F16>)(first, second, row_bytes, width, s, count, first_source, second_source);
    } else {
        MEMRA_LAUNCH(grid, launch.threads, 0, cuda->stream, kv_write_kernel<MEMRA_CUDA_TYPE_Q8_0>)(first, second, row_bytes, width, s, count, first_source, second_source);
    }
    LAUNCH_CHECK(function, "kv_write_kernel");
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_kv_write(memra_cuda * cuda, int type, void * storage, int64_t storage_bytes, int64_t width, const int32_t * slots, int64_t count,
                                   const float * source, int64_t source_length) {
    return kv_write("memra_cuda_kv_write", cuda, type, &storage, 1, storage_bytes, width, slots, count, &source, &source_length);
}

extern "C" int memra_cuda_kv_write_pair(memra_cuda * cuda, int type, void * keys, void * values, int64_t storage_bytes, int64_t width, const int32_t * slots,
                                        int64_t count, const float * k, int64_t k_length, const float * v, int64_t v_length) {
    void * storages[2] = {keys, values};
    const float * sources[2] = {k, v};
    const int64_t lengths[2] = {k_length, v_length};
    return kv_write("memra_cuda_kv_write_pair", cuda, type, storages, 2, storage_bytes, width, slots, count, sources, lengths);
}

extern "C" int memra_cuda_kv_rotate(memra_cuda * cuda, int type, void * storage, int64_t storage_bytes, int64_t heads, int64_t head_dim, const int32_t * slots,
                                    int64_t count, int32_t delta, float freq_base, const float * rope) {
    static const char function[] = "memra_cuda_kv_rotate";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "count", count, 0));
    CHECK(memra_cuda_check_size(function, "heads", heads, 1));
    CHECK(memra_cuda_check_size(function, "head_dim", head_dim, 2));
    if (head_dim % 2 != 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: head_dim is %lld, expected an even number", function, (long long)head_dim);
    if (!(freq_base > 0.0f)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: freq_base is %g, expected > 0", function, (double)freq_base);
    float rs[5];
    CHECK(memra_cuda_check_rope_scaling(function, rope, rs));
    int64_t width = 0, row_bytes = 0;
    CHECK(memra_cuda_check_product(function, "heads * head_dim", heads, head_dim, &width));
    CHECK(check_kv_type(function, type, width, &row_bytes));
    if (width > 12288) FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: rows of %lld values exceed the kernel's 12288 (48 KiB of shared memory)", function, (long long)width);
    if (storage_bytes < 0 || (storage_bytes > 0 && !storage)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: storage is NULL", function);
    if (count > 0 && !slots) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: slots is NULL", function);
    const int64_t storage_slots = storage_bytes / row_bytes;
    CHECK(check_slots(function, slots, count, storage_slots));
    if (count == 0) return MEMRA_CUDA_OK;
    const void * device_slots = NULL;
    CHECK(stage_slots(function, cuda, slots, count, storage_slots, &device_slots));
    const rope_scaling scaling = { rs[0], rs[1], rs[2], rs[3], rs[4] };
    const float theta_scale = powf(freq_base, -2.0f / (float)head_dim); /* the host's powf, as memra_cuda_rope_neox */
    const memra_cuda_launch launch = memra_cuda_plan_kv_rotate(count, width);
    const int32_t * s = (const int32_t *)device_slots;
    uint8_t * rows = (uint8_t *)storage;
#define KV_ROTATE(KV) \
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, launch.shared_bytes, cuda->stream, kv_rotate_kernel<KV>)(rows, row_bytes, s, count, (int)heads, (int)head_dim, delta, theta_scale, scaling)
    if (type == MEMRA_CUDA_TYPE_F32) {
        KV_ROTATE(MEMRA_CUDA_TYPE_F32);
    } else if (type == MEMRA_CUDA_TYPE_F16) {
        KV_ROTATE(MEMRA_CUDA_TYPE_F16);
    } else {
        KV_ROTATE(MEMRA_CUDA_TYPE_Q8_0);
    }
#undef KV_ROTATE
    LAUNCH_CHECK(function, "kv_rotate_kernel");
    return MEMRA_CUDA_OK;
}

/* The K/V write of a QK-norm-and-RoPE op (memra_cuda_qk_norm_rope_kv, and fused into the attention):
 * v's size, the storages and the rows' slots checked; *kv_needed (rows · kv_heads · head_dim),
 * *row_bytes and *storage_slots out. */
static int check_kv_targets(const char * function, int type, int64_t rows, int64_t kv_heads, int64_t head_dim, const float * v, int64_t v_length,
                            const void * keys, const void * values, int64_t storage_bytes, const int32_t * slots, int64_t * kv_needed, int64_t * row_bytes,
                            int64_t * storage_slots) {
    int64_t kv_width = 0;
    CHECK(memra_cuda_check_product(function, "kv_heads * head_dim", kv_heads, head_dim, &kv_width));
    CHECK(memra_cuda_check_product(function, "rows * kv_heads * head_dim", rows, kv_width, kv_needed));
    CHECK(check_kv_type(function, type, kv_width, row_bytes));
    CHECK(memra_cuda_check_buffer(function, "v", v, v_length, *kv_needed));
    if (storage_bytes < 0 || (storage_bytes > 0 && (!keys || !values))) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: storage is NULL", function);
    if (keys == values && rows > 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: keys and values are one storage", function);
    if (rows > 0 && !slots) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: slots is NULL", function);
    *storage_slots = storage_bytes / *row_bytes;
    return check_slots(function, slots, rows, *storage_slots);
}

/* The rows' positions and cache slots staged for a kernel (devices[0], devices[1]); while capturing,
 * the slots are checked again at every replay. */
static int stage_positions_slots(const char * function, memra_cuda * cuda, const int32_t * positions, const int32_t * slots, int64_t rows,
                                 int64_t storage_slots, const void * devices[2]) {
    const void * hosts[2] = {positions, slots};
    const int64_t sizes[2] = {rows * 4, rows * 4};
    CHECK(memra_cuda_stage_many(function, cuda, 2, hosts, sizes, devices));
    if (cuda->capture) {
        const int32_t * copy = (const int32_t *)memra_cuda_capture_host_copy(cuda, devices[1]);
        CHECK(memra_cuda_capture_check(function, cuda, [=]() { return check_slots(function, copy, rows, storage_slots); }));
    }
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_qk_norm_rope_kv(memra_cuda * cuda, float * q, int64_t q_length, float * k, int64_t k_length, const float * v, int64_t v_length,
                                          const float * q_weight, const float * k_weight, int64_t weight_length, const int32_t * positions, int64_t rows,
                                          int64_t heads, int64_t kv_heads, int64_t head_dim, float eps, float freq_base, int type, void * keys, void * values,
                                          int64_t storage_bytes, const int32_t * slots, const float * rope) {
    static const char function[] = "memra_cuda_qk_norm_rope_kv";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_qk_norm_rope(function, q, q_length, k, k_length, q_weight, k_weight, weight_length, positions, rows, heads, kv_heads, head_dim, eps,
                                        freq_base, heads + 2 * kv_heads));
    float rs[5];
    CHECK(memra_cuda_check_rope_scaling(function, rope, rs));
    const rope_scaling scaling = { rs[0], rs[1], rs[2], rs[3], rs[4] };
    if (type == MEMRA_CUDA_TYPE_Q8_0 && head_dim % 32 != 0) {
        FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: head_dim %lld with a q8_0 cache (a head must be whole 32-value blocks)", function, (long long)head_dim);
    }
    int64_t kv_needed = 0, row_bytes = 0, storage_slots = 0;
    CHECK(check_kv_targets(function, type, rows, kv_heads, head_dim, v, v_length, keys, values, storage_bytes, slots, &kv_needed, &row_bytes, &storage_slots));
    const uintptr_t qa = (uintptr_t)q, ka = (uintptr_t)k, va = (uintptr_t)v, q_bytes = (uintptr_t)(rows * heads * head_dim) * 4, kv_bytes = (uintptr_t)kv_needed * 4;
    if (rows > 0 && ((qa < va + kv_bytes && va < qa + q_bytes) || (ka < va + kv_bytes && va < ka + kv_bytes))) {
        FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: v overlaps q or k", function);
    }
    if (rows == 0) return MEMRA_CUDA_OK;
    const void * devices[2];
    CHECK(stage_positions_slots(function, cuda, positions, slots, rows, storage_slots, devices));
    const float theta_scale = powf(freq_base, -2.0f / (float)head_dim); /* the host's powf, as memra_cuda_qk_norm_rope */
    const memra_cuda_launch launch = memra_cuda_plan_groups(rows * (heads + 2 * kv_heads) * 32); /* 128 threads: 4 warps, one per (row, head) */
    const int32_t * p = (const int32_t *)devices[0];
    const int32_t * s = (const int32_t *)devices[1];
#define MEMRA_QK_KV(KV)                                                                                                                                   \
    MEMRA_LAUNCH(memra_grid(launch), launch.threads, 0, cuda->stream, qk_norm_rope_kv_kernel<KV>)(q, k, v, q_weight, k_weight, p, s, (uint8_t *)keys,       \
                                                                                                 (uint8_t *)values, row_bytes, rows, (int)heads, (int)kv_heads, \
                                                                                                 (int)head_dim, eps, theta_scale, scaling)
    if (type == MEMRA_CUDA_TYPE_F32) MEMRA_QK_KV(MEMRA_CUDA_TYPE_F32);
    else if (type == MEMRA_CUDA_TYPE_F16) MEMRA_QK_KV(MEMRA_CUDA_TYPE_F16);
    else MEMRA_QK_KV(MEMRA_CUDA_TYPE_Q8_0);
#undef MEMRA_QK_KV
    LAUNCH_CHECK(function, "qk_norm_rope_kv_kernel");
    return MEMRA_CUDA_OK;
}

/* The batch's sequences ([query row, rows, position, table offset] each) cover rows 0..rows-1 in
 * order, and every block their KV spans is inside the storage; *longest: most rows of one sequence. */
static int check_sequences(const char * function, const int32_t * sequences, int64_t sequence_count, int64_t rows, const int32_t * block_tables,
                           int64_t table_length, int64_t block_tokens, int64_t storage_blocks, int64_t * longest_rows) {
    int64_t next_row = 0, longest = 0;
    for (int64_t s = 0; s < sequence_count; s++) {
        const int32_t * sequence = sequences + s * 4;
        if (sequence[0] != next_row || sequence[1] < 1 || sequence[2] < 0 || sequence[3] < 0) {
            FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: sequence %lld (query row %d, rows %d, position %d, table offset %d) is not the next rows of the batch",
                 function, (long long)s, sequence[0], sequence[1], sequence[2], sequence[3]);
        }
        next_row += sequence[1];
        if (sequence[1] > longest) longest = sequence[1];
        if (next_row > rows) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: sequences hold more than the %lld query rows", function, (long long)rows);
        const int64_t end = (int64_t)sequence[2] + sequence[1];
        const int64_t blocks = (end + block_tokens - 1) / block_tokens;
        if (sequence[3] + blocks > table_length) {
            FAIL(MEMRA_CUDA_ERROR_OUT_OF_RANGE, "%s: sequence %lld needs %lld blocks from table offset %d, block_tables holds %lld", function, (long long)s,
                 (long long)blocks, sequence[3], (long long)table_length);
        }
        for (int64_t b = 0; b < blocks; b++) {
            const int32_t block = block_tables[sequence[3] + b];
            if (block < 0 || block >= storage_blocks) {
                FAIL(MEMRA_CUDA_ERROR_OUT_OF_RANGE, "%s: sequence %lld block %lld is %d, outside the storage's %lld blocks", function, (long long)s, (long long)b,
                     block, (long long)storage_blocks);
            }
        }
    }
    if (next_row != rows) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: sequences hold %lld query rows, rows is %lld", function, (long long)next_row, (long long)rows);
    *longest_rows = longest;
    return MEMRA_CUDA_OK;
}

/* fused: memra_cuda_qk_norm_rope_attention_matmul's QK-norm, RoPE and K/V write in the kernel
 * (head_dim 64, 128 or 192: chunks 2, 4 or 6), else nullptr. */
template <int KV>
static void launch_attention(const memra_cuda_launch & launch, cudaStream_t stream, int chunks, float * out, float * partials, const float * q,
                             const uint8_t * keys, const uint8_t * values, int64_t row_bytes, int block_tokens, const int32_t * tables, const int32_t * sequences,
                             int sequence_count, int heads, int kv_heads, int head_dim, float scale, int * counters, int8_t * codes, float * scales,
                             const fused_qk_kv * fused) {
    const dim3 grid = memra_grid(launch);
    const int splits = (int)launch.grid_z;
    fused_qk_kv none;
    memset(&none, 0, sizeof none);
#define MEMRA_ATTENTION_CASE(N, FUSED)                                                                                                                    \
    case N:                                                                                                                                               \
        MEMRA_LAUNCH(grid, launch.threads, 0, stream, paged_attention_kernel<KV, N, FUSED>)(out, partials, q, keys, values, row_bytes, block_tokens, tables, \
                                                                                           sequences, sequence_count, heads, kv_heads, head_dim, scale, splits, \
                                                                                           counters, codes, scales, FUSED ? *fused : none);              \
        break;
    if (fused) {
        switch (chunks) {
            MEMRA_ATTENTION_CASE(2, true) MEMRA_ATTENTION_CASE(4, true) MEMRA_ATTENTION_CASE(6, true)
            default: break;
        }
    } else {
        switch (chunks) {
            MEMRA_ATTENTION_CASE(1, false) MEMRA_ATTENTION_CASE(2, false) MEMRA_ATTENTION_CASE(3, false) MEMRA_ATTENTION_CASE(4, false)
            MEMRA_ATTENTION_CASE(5, false) MEMRA_ATTENTION_CASE(6, false) MEMRA_ATTENTION_CASE(7, false) MEMRA_ATTENTION_CASE(8, false)
            default: break;
        }
    }
#undef MEMRA_ATTENTION_CASE
}

/* memra_cuda_paged_attention; with `rounding` (codes and scales for rows × heads · head_dim values),
 * where the split kernel runs (not the flash kernel) and head_dim is a multiple of 32, the block
 * that writes a head of out also writes its q8_0 codes there, and *rounded is set (else it stays
 * false and nothing is written there). */
static int paged_attention(const char * function, memra_cuda * cuda, float * out, int64_t out_length, const float * q, int64_t q_length, int type,
                           const void * keys, const void * values, int64_t storage_bytes, int64_t block_tokens, const int32_t * block_tables, int64_t table_length,
                           const int32_t * sequences, int64_t sequence_count, int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim, float scale,
                           const memra_cuda_q8_0_codes * rounding, bool * rounded, const fused_qk_kv * fused) {
    if (rounded) *rounded = false;
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    CHECK(memra_cuda_check_size(function, "block_tokens", block_tokens, 1));
    CHECK(memra_cuda_check_size(function, "table_length", table_length, 0));
    CHECK(memra_cuda_check_size(function, "sequence_count", sequence_count, 0));
    CHECK(memra_cuda_check_size(function, "storage_bytes", storage_bytes, 0));
    memra_cuda_launch launch;
    char message[512];
    const int planned = memra_cuda_plan_attention(rows, heads, kv_heads, head_dim, &launch, message, sizeof message);
    if (planned != MEMRA_CUDA_OK) FAIL(planned, "%s: %s", function, message);
    int64_t q_values = 0, kv_width = 0, row_bytes = 0;
    CHECK(memra_cuda_check_product(function, "rows * heads * head_dim", rows, heads * head_dim, &q_values));
    CHECK(memra_cuda_check_product(function, "kv_heads * head_dim", kv_heads, head_dim, &kv_width));
    CHECK(check_kv_type(function, type, kv_width, &row_bytes));
    CHECK(memra_cuda_check_buffer(function, "q", q, q_length, q_values));
    CHECK(memra_cuda_check_buffer(function, "out", out, out_length, q_values));
    if (table_length > 0 && !block_tables) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: block_tables is NULL", function);
    if (sequence_count > 0 && !sequences) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: sequences is NULL", function);
    if (rows > 0 && (!keys || !values)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: keys or values is NULL", function);
    if (!(scale == scale)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: scale is NaN", function);
    if (out == q) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out must not be q on CUDA (blocks of other heads still read it)", function);
    const int64_t storage_blocks = storage_bytes / row_bytes / block_tokens;
    int64_t longest = 0;
    CHECK(check_sequences(function, sequences, sequence_count, rows, block_tables, table_length, block_tokens, storage_blocks, &longest));
    if (rows == 0) return MEMRA_CUDA_OK;
    /* (not while capturing: the flash kernel's tiles are planned from this call's sequences) */
    if (fused && longest != 1) {
        FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: a sequence has %lld query rows (with QK-norm, RoPE and the K/V write fused: one each, a decode step)", function,
             (long long)longest);
    }
    if (!fused && cuda->flash_attention && !cuda->capture && memra_cuda_flash_attention_applies(type, head_dim, longest)) {
        /* Prefill: query tiles of up to 64 rows of one sequence each, on the tensor cores. */
        std::vector<int32_t> tiles;
        try {
            tiles.resize((size_t)(sequence_count + rows / MEMRA_CUDA_FLASH_ROWS + 1) * 3);
        } catch (...) {
            FAIL(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
        }
        const int64_t tile_count = memra_cuda_flash_tiles(sequences, sequence_count, tiles.data(), (int64_t)tiles.size() / 3);
        if (tile_count <= 0 || tile_count > MEMRA_CUDA_MAX_GRID_X) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %lld query tiles", function, (long long)tile_count);
        const void * hosts[3] = {block_tables, sequences, tiles.data()};
        const int64_t sizes[3] = {table_length * 4, sequence_count * 16, tile_count * 12};
        const void * devices[3];
        CHECK(memra_cuda_stage_many(function, cuda, 3, hosts, sizes, devices));
        const int32_t * tables = devices[0] ? (const int32_t *)devices[0] : (const int32_t *)devices[1];
        const dim3 grid((unsigned)tile_count, (unsigned)heads, 1);
        if (head_dim == 64) {
            MEMRA_LAUNCH(grid, MEMRA_CUDA_FLASH_THREADS, 0, cuda->stream, flash_attention_kernel<64>)(
                out, q, (const uint8_t *)keys, (const uint8_t *)values, row_bytes, (int)block_tokens, tables, (const int32_t *)devices[1],
                (const int32_t *)devices[2], (int)heads, (int)kv_heads, scale);
        } else {
            MEMRA_LAUNCH(grid, MEMRA_CUDA_FLASH_THREADS, 0, cuda->stream, flash_attention_kernel<128>)(
                out, q, (const uint8_t *)keys, (const uint8_t *)values, row_bytes, (int)block_tokens, tables, (const int32_t *)devices[1],
                (const int32_t *)devices[2], (int)heads, (int)kv_heads, scale);
        }
        LAUNCH_CHECK(function, "flash_attention_kernel");
        return MEMRA_CUDA_OK;
    }
    const void * hosts[2] = {block_tables, sequences};
    const int64_t sizes[2] = {table_length * 4, sequence_count * 16};
    const void * devices[2];
    CHECK(memra_cuda_stage_many(function, cuda, 2, hosts, sizes, devices));
    if (cuda->capture) {
        const int32_t * tables = (const int32_t *)memra_cuda_capture_host_copy(cuda, devices[0]);
        const int32_t * copy = (const int32_t *)memra_cuda_capture_host_copy(cuda, devices[1]);
        const bool one_row = fused != nullptr;
        CHECK(memra_cuda_capture_check(function, cuda, [=]() -> int {
            int64_t most = 0;
            CHECK(check_sequences(function, copy, sequence_count, rows, tables, table_length, block_tokens, storage_blocks, &most));
            if (one_row && most != 1) FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: a sequence has %lld query rows in a replay (fused: one each)", function, (long long)most);
            return MEMRA_CUDA_OK;
        }));
    }
    const int chunks = (int)((head_dim + 31) / 32);
    const int32_t * tables = devices[0] ? (const int32_t *)devices[0] : (const int32_t *)devices[1];
    /* Split-K: the splits' partial states, merged by the pair's last split to finish (its counter
     * in the context's zeroed array, which the merge resets). */
    workspace partials(cuda);
    const int64_t partial_bytes = memra_cuda_attention_partial_bytes(&launch, head_dim);
    if (partial_bytes > 0 && rows * heads > MEMRA_CUDA_ATTENTION_COUNTERS) {
        FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: %lld (row, head) pairs in %lld splits, more than the %d split counters", function, (long long)(rows * heads),
             (long long)launch.grid_z, MEMRA_CUDA_ATTENTION_COUNTERS);
    }
    if (partial_bytes > 0) CHECK(partials.allocate(partial_bytes));
    float * partial = (float *)partials.pointer;
    int * counters = cuda->attention_counters;
    const bool round = rounding && head_dim % 32 == 0;
    int8_t * codes = round ? (int8_t *)rounding->codes : nullptr;
    float * scales = round ? (float *)rounding->scales : nullptr;
    if (type == MEMRA_CUDA_TYPE_F32) {
        launch_attention<MEMRA_CUDA_TYPE_F32>(launch, cuda->stream, chunks, out, partial, q, (const uint8_t *)keys, (const uint8_t *)values, row_bytes,
                                              (int)block_tokens, tables, (const int32_t *)devices[1], (int)sequence_count, (int)heads, (int)kv_heads, (int)head_dim,
                                              scale, counters, codes, scales, fused);
    } else if (type == MEMRA_CUDA_TYPE_F16) {
        launch_attention<MEMRA_CUDA_TYPE_F16>(launch, cuda->stream, chunks, out, partial, q, (const uint8_t *)keys, (const uint8_t *)values, row_bytes,
                                              (int)block_tokens, tables, (const int32_t *)devices[1], (int)sequence_count, (int)heads, (int)kv_heads, (int)head_dim,
                                              scale, counters, codes, scales, fused);
    } else {
        launch_attention<MEMRA_CUDA_TYPE_Q8_0>(launch, cuda->stream, chunks, out, partial, q, (const uint8_t *)keys, (const uint8_t *)values, row_bytes,
                                               (int)block_tokens, tables, (const int32_t *)devices[1], (int)sequence_count, (int)heads, (int)kv_heads,
                                               (int)head_dim, scale, counters, codes, scales, fused);
    }
    LAUNCH_CHECK(function, "paged_attention_kernel");
    if (rounded) *rounded = round;
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_paged_attention(memra_cuda * cuda, float * out, int64_t out_length, const float * q, int64_t q_length, int type, const void * keys,
                                          const void * values, int64_t storage_bytes, int64_t block_tokens, const int32_t * block_tables, int64_t table_length,
                                          const int32_t * sequences, int64_t sequence_count, int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                          float scale) {
    return paged_attention("memra_cuda_paged_attention", cuda, out, out_length, q, q_length, type, keys, values, storage_bytes, block_tokens, block_tables,
                           table_length, sequences, sequence_count, rows, heads, kv_heads, head_dim, scale, nullptr, nullptr, nullptr);
}

/* memra_cuda_attention_matmul, and with `fused` memra_cuda_qk_norm_rope_attention_matmul (its
 * arguments checked and staged). */
static int attention_matmul(const char * function, memra_cuda * cuda, float * projected, int64_t projected_length, float * out, int64_t out_length,
                            const float * q, int64_t q_length, int type, const void * keys, const void * values, int64_t storage_bytes, int64_t block_tokens,
                            const int32_t * block_tables, int64_t table_length, const int32_t * sequences, int64_t sequence_count, int64_t rows, int64_t heads,
                            int64_t kv_heads, int64_t head_dim, float scale, int weight_type, const void * weight, int64_t weight_bytes, int64_t n_out,
                            const fused_qk_kv * fused, const memra_cuda_residual_norm * then) {
    CHECK(memra_cuda_check_size(function, "rows", rows, 0));
    CHECK(memra_cuda_check_size(function, "heads", heads, 1));
    CHECK(memra_cuda_check_size(function, "head_dim", head_dim, 1));
    int64_t width = 0, values_needed = 0;
    CHECK(memra_cuda_check_product(function, "heads * head_dim", heads, head_dim, &width));
    CHECK(memra_cuda_check_product(function, "rows * heads * head_dim", rows, width, &values_needed));
    /* The O projection's q8_0 codes from the attention's combine where the matmul reads codes. */
    workspace codes(cuda), scales(cuda);
    memra_cuda_q8_0_codes rounding = {nullptr, nullptr};
    const bool wanted = rows > 0 && width % 32 == 0 && memra_cuda_matmul_reads_q8_0_codes(cuda, weight_type, rows, width, n_out);
    if (wanted) {
        CHECK(codes.allocate(values_needed));
        CHECK(scales.allocate(values_needed / 32 * 4));
        rounding = {(const int8_t *)codes.pointer, (const float *)scales.pointer};
    }
    bool rounded = false;
    CHECK(paged_attention(function, cuda, out, out_length, q, q_length, type, keys, values, storage_bytes, block_tokens, block_tables, table_length, sequences,
                          sequence_count, rows, heads, kv_heads, head_dim, scale, wanted ? &rounding : nullptr, &rounded, fused));
    /* not rounded (one split, or a prefill's flash kernel): the matmul rounds out itself */
    if (!rounded) rounding = {nullptr, nullptr};
    return memra_cuda_matmul_with_codes(function, cuda, projected, projected_length, out, out_length, rows, weight_type, weight, weight_bytes, width, n_out,
                                        rounding, then);
}

extern "C" int memra_cuda_attention_matmul(memra_cuda * cuda, float * projected, int64_t projected_length, float * out, int64_t out_length, const float * q,
                                           int64_t q_length, int type, const void * keys, const void * values, int64_t storage_bytes, int64_t block_tokens,
                                           const int32_t * block_tables, int64_t table_length, const int32_t * sequences, int64_t sequence_count, int64_t rows,
                                           int64_t heads, int64_t kv_heads, int64_t head_dim, float scale, int weight_type, const void * weight,
                                           int64_t weight_bytes, int64_t n_out, const memra_cuda_residual_norm * then) {
    static const char function[] = "memra_cuda_attention_matmul";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_check_size(function, "heads", heads, 1));
    CHECK(memra_cuda_check_size(function, "head_dim", head_dim, 1));
    CHECK(memra_cuda_check_residual_norm(function, cuda, then, projected, weight_type, rows, heads * head_dim, n_out)); /* before the attention runs */
    return attention_matmul(function, cuda, projected, projected_length, out, out_length, q, q_length, type, keys, values, storage_bytes, block_tokens,
                            block_tables, table_length, sequences, sequence_count, rows, heads, kv_heads, head_dim, scale, weight_type, weight, weight_bytes,
                            n_out, nullptr, then);
}

static bool ranges_overlap(const void * a, int64_t a_bytes, const void * b, int64_t b_bytes) {
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return a_bytes > 0 && b_bytes > 0 && x < y + (uintptr_t)b_bytes && y < x + (uintptr_t)a_bytes;
}

extern "C" int memra_cuda_qk_norm_rope_attention_matmul(memra_cuda * cuda, float * projected, int64_t projected_length, float * out, int64_t out_length,
                                                        const float * q, int64_t q_length, int type, void * keys, void * values, int64_t storage_bytes,
                                                        int64_t block_tokens, const int32_t * block_tables, int64_t table_length, const int32_t * sequences,
                                                        int64_t sequence_count, int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim, float scale,
                                                        int weight_type, const void * weight, int64_t weight_bytes, int64_t n_out,
                                                        const memra_cuda_qk_inputs * qk, const memra_cuda_residual_norm * then, const float * rope) {
    static const char function[] = "memra_cuda_qk_norm_rope_attention_matmul";
    CHECK(memra_cuda_enter(function, cuda));
    if (!qk) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: qk is NULL", function);
    float rs[5];
    CHECK(memra_cuda_check_rope_scaling(function, rope, rs));
    const float *k = qk->k, *v = qk->v;
    const int64_t k_length = qk->k_length, v_length = qk->v_length;
    const int32_t *positions = qk->positions, *slots = qk->slots;
    CHECK(memra_cuda_check_qk_norm_rope(function, q, q_length, k, k_length, qk->q_weight, qk->k_weight, qk->weight_length, positions, rows, heads, kv_heads,
                                        head_dim, qk->eps, qk->freq_base, heads + 2 * kv_heads));
    CHECK(memra_cuda_check_residual_norm(function, cuda, then, projected, weight_type, rows, heads * head_dim, n_out)); /* before the attention runs */
    if (head_dim % 64 != 0) {
        FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: head_dim %lld (fused into the attention kernel: a multiple of 64, each RoPE pair in one lane)", function,
             (long long)head_dim);
    }
    if (rows != sequence_count) {
        FAIL(MEMRA_CUDA_ERROR_UNSUPPORTED, "%s: %lld query rows in %lld sequences (fused into the attention kernel: one row per sequence, a decode step)",
             function, (long long)rows, (long long)sequence_count);
    }
    int64_t kv_needed = 0, row_bytes = 0, storage_slots = 0;
    CHECK(check_kv_targets(function, type, rows, kv_heads, head_dim, v, v_length, keys, values, storage_bytes, slots, &kv_needed, &row_bytes, &storage_slots));
    /* out is written while other blocks still read q, k and v */
    const int64_t out_bytes = rows * heads * head_dim * 4;
    if (rows > 0 && (ranges_overlap(out, out_bytes, q, out_bytes) || ranges_overlap(out, out_bytes, k, kv_needed * 4) || ranges_overlap(out, out_bytes, v, kv_needed * 4))) {
        FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: out overlaps q, k or v", function);
    }
    if (rows == 0) {
        return attention_matmul(function, cuda, projected, projected_length, out, out_length, q, q_length, type, keys, values, storage_bytes, block_tokens,
                                block_tables, table_length, sequences, sequence_count, rows, heads, kv_heads, head_dim, scale, weight_type, weight,
                                weight_bytes, n_out, nullptr, then);
    }
    const void * devices[2];
    CHECK(stage_positions_slots(function, cuda, positions, slots, rows, storage_slots, devices));
    fused_qk_kv fused;
    fused.k = k;
    fused.v = v;
    fused.q_weight = qk->q_weight;
    fused.k_weight = qk->k_weight;
    fused.positions = (const int32_t *)devices[0];
    fused.slots = (const int32_t *)devices[1];
    fused.keys = (uint8_t *)keys;
    fused.values = (uint8_t *)values;
    fused.eps = qk->eps;
    fused.theta_scale = powf(qk->freq_base, -2.0f / (float)head_dim); /* the host's powf, as memra_cuda_qk_norm_rope_kv */
    fused.scaling = { rs[0], rs[1], rs[2], rs[3], rs[4] };
    return attention_matmul(function, cuda, projected, projected_length, out, out_length, q, q_length, type, keys, values, storage_bytes, block_tokens,
                            block_tables, table_length, sequences, sequence_count, rows, heads, kv_heads, head_dim, scale, weight_type, weight, weight_bytes,
                            n_out, &fused, then);
}
