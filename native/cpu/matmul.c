/*
 * out[r, o] = sum_i x[r, i] * W[o, i] over a weight in ggml layout.
 *
 * As ggml's CPU mul_mat: every activation row is converted once to the weight type's vec_dot_type
 * (q8_0 / q8_1 / q8_K / f16 / bf16, see quant-dot.h) into the context's scratch buffer, then the
 * dot-product kernels run over tiles of (output rows x activation rows). With 4 or more activation
 * rows a tile takes four weight rows at a time (memra_dot_rows4) and runs them against each
 * activation row of the tile, so the four weight rows stay in L1 while the tile's converted
 * activations stay in L2; with fewer (decode) it walks the weight rows one by one. Tiles are the
 * thread pool's chunks (claimed in order by whichever worker is free); consecutive tiles share a
 * weight block, so a block is read from memory about once while the workers cover its row tiles.
 * The types whose decoding costs about as much as the products or more (the i-quants, iq4_xs and iq4_nl
 * on x86; memra_dot_decoded_bytes) decode each group of four weight rows once per tile into a per-thread
 * buffer and multiply that with all the activation rows of the tile at once (memra_dot_decoded_tile: the
 * i-quants' x86 kernels keep several activation rows' sums in registers; the same bits as memra_dot_rows4);
 * where that kernel reads activations in a layout of its own (memra_dot_decoded_prepared_bytes), each
 * converted row is also prepared once into that layout.
 */
#include "cpu-internal.h"
#include "gemm.h"

/* Activation rows per tile: converted rows of one tile should sit comfortably in L2. The GEMM tiles
 * unpack each group of four weight rows once per tile (memra_gemm_unpack), so more rows a tile means
 * fewer unpackings: one thread's 7 matmuls of a Qwen3-0.6B layer, 512 rows of q4_0, measured 3-6% faster
 * (CPU time, Zen 5) with 384 KiB and 128 rows than with 192 KiB and 64. */
#define TILE_ACTIVATION_BYTES (384 * 1024)
#define MAX_ROWS_PER_TILE 128
/* The decoded four-row tiles (memra_dot_decoded_bytes) multiply each group of decoded weight rows with
 * all of the tile's activation rows: the more rows, the fewer times a group is decoded. Their rows (the
 * converted or the prepared ones, the larger) take up to this many bytes, and up to this many rows:
 * 512 rows of [1024 -> 3072] and [3072 -> 1024] measured 4-15% faster with 384 KiB and 128 rows than
 * with 192 KiB and 64 (iq2_xxs, iq1_m, iq3_s; 2 threads on Zen 5), 128 rows of [4096 -> 4096] iq2_s 1.2x,
 * iq4_xs and iq4_nl unchanged; pp512 of the Qwen3-0.6B shape 3% faster again with 256 rows than 128. */
#define DECODED_TILE_ACTIVATION_BYTES (384 * 1024)
#define DECODED_MAX_ROWS_PER_TILE 256
/* From this many activation rows on, tiles use the four-row kernel (it reuses each loaded activation). */
#define ROWS4_MIN_ROWS 4
/* From this many activation rows on, the GEMM kernels run when there is one for the type (gemm.h);
 * with batch invariance (memra_cpu_set_batch_invariant), from one row, so that every row count
 * sums a row's products in the same order. Alone, a row goes through the matrix-vector kernels:
 * one sequential weight stream, prefetched ahead, which decode of the 0.6B q8_0 shape measured
 * 15-30% faster than the GEMM tiles' four interleaved rows. */
#define GEMM_MIN_ROWS 4
/* From this many activation rows on, a tile unpacks each group of weight rows once into a buffer
 * for all its groups of activation rows (memra_gemm_unpack). With two groups (5-8 rows: a batch of
 * decoding sequences) the tiles unpacking in registers, each its own pass, were measured faster:
 * 8 rows x [1024 -> 65536] 10.2 -> 7.7 ms (q8_0), 8.6 -> 5.5 (q4_0), 8.2 -> 5.8 (q4_K), 11.6 -> 7.6
 * (q6_K), medians of alternating runs; from 16 rows on the buffer is faster. */
#define UNPACK_MIN_ROWS (2 * MEMRA_GEMM_TILE_A + 1)
static int64_t gemm_min_rows(const memra_cpu * cpu) {
    return cpu->batch_invariant ? 1 : GEMM_MIN_ROWS;
}

typedef struct {
    float * out;
    int64_t rows, n_in, n_out;
    int type;
    const uint8_t * weight;
    size_t weight_row_bytes;
    /* Activations as the kernels read them. */
    const uint8_t * converted;
    size_t converted_row_bytes;
    /* Conversion input (when the activation type is not f32). */
    const float * x;
    uint8_t * converted_out;
    /* Tiling. */
    int64_t outputs_per_tile, rows_per_tile, row_tiles, tiles;
    /* 1: activations are in the GEMM kernels' packed layout and tiles run memra_gemm_tile. */
    int gemm;
    /* When > 0: per-thread buffers (this many bytes each, at `unpacked`) into which a tile unpacks
     * each group of four weight rows once for all its activation rows (memra_gemm_unpack; without
     * GEMM kernels, memra_dot_decode_rows4). */
    size_t unpacked_bytes;
    uint8_t * unpacked;
    /* When > 0: the activation rows as the decoded kernel reads them (memra_dot_decoded_prepare), this many
     * bytes apart at `prepared`. */
    size_t prepared_row_bytes;
    uint8_t * prepared;
} matmul_job;

/* Converts activation rows [chunk * ROWS_PER_CONVERSION, ...). */
#define ROWS_PER_CONVERSION 4

static void convert_rows(void * argument, int64_t chunk, int thread_index) {
    (void)thread_index;
    matmul_job * job = argument;
    int64_t begin, end;
    memra_chunk_range(job->rows, ROWS_PER_CONVERSION, chunk, &begin, &end);
    for (int64_t r = begin; r < end; r++) {
        uint8_t * converted = job->converted_out + (size_t)r * job->converted_row_bytes;
        if (job->gemm) {
            memra_gemm_pack_row(job->type, job->x + r * job->n_in, converted, job->n_in);
        } else {
            memra_quantize_activation_row(job->type, job->x + r * job->n_in, converted, job->n_in);
            if (job->prepared_row_bytes) memra_dot_decoded_prepare(job->type, job->n_in, converted, job->prepared + (size_t)r * job->prepared_row_bytes);
        }
    }
}

static void multiply_tile(const matmul_job * job, int64_t tile, int thread_index) {
    const int64_t output_tile = tile / job->row_tiles;
    const int64_t row_tile = tile % job->row_tiles;
    const int64_t o_begin = output_tile * job->outputs_per_tile;
    const int64_t o_end = o_begin + job->outputs_per_tile < job->n_out ? o_begin + job->outputs_per_tile : job->n_out;
    const int64_t r_begin = row_tile * job->rows_per_tile;
    const int64_t r_end = r_begin + job->rows_per_tile < job->rows ? r_begin + job->rows_per_tile : job->rows;
    const size_t wrb = job->weight_row_bytes;
    const size_t crb = job->converted_row_bytes;
    const int64_t n_out = job->n_out;
    if (job->gemm) {
        /* unpack once when enough groups of activation rows will use the weight rows */
        uint8_t * unpacked = job->unpacked_bytes && r_end - r_begin >= UNPACK_MIN_ROWS ? job->unpacked + (size_t)thread_index * job->unpacked_bytes : NULL;
        /* While the tiles compute on one group of weight rows, the next group is fetched: a group
         * is a few kilobytes, too short a stream for the hardware prefetchers to get ahead, and
         * without this every group waits on memory (16-row decode of the 0.6B q8_0 shape: layer
         * matmuls 75-90 ms -> 52-54 ms a step). The prefetches are spread over the group's tiles. */
        const int64_t a_tiles = (r_end - r_begin + MEMRA_GEMM_TILE_A - 1) / MEMRA_GEMM_TILE_A;
        for (int64_t o = o_begin; o < o_end; o += MEMRA_GEMM_TILE_W) {
            const int w_rows = o_end - o < MEMRA_GEMM_TILE_W ? (int)(o_end - o) : MEMRA_GEMM_TILE_W;
            const int64_t next_rows = o_end - (o + MEMRA_GEMM_TILE_W) < MEMRA_GEMM_TILE_W ? o_end - (o + MEMRA_GEMM_TILE_W) : MEMRA_GEMM_TILE_W;
            /* (no pointer past the matrix for the tile's last group: nothing is fetched then) */
            const uint8_t * next = next_rows > 0 ? job->weight + (size_t)(o + MEMRA_GEMM_TILE_W) * wrb : job->weight;
            const size_t next_bytes = next_rows > 0 ? (size_t)next_rows * wrb : 0;
            const size_t per_tile = (next_bytes / (size_t)a_tiles + 63) & ~(size_t)63;
            size_t fetched = 0;
            if (unpacked) memra_gemm_unpack(job->type, job->n_in, job->weight + (size_t)o * wrb, wrb, w_rows, unpacked);
            for (int64_t r = r_begin; r < r_end; r += MEMRA_GEMM_TILE_A) {
                const int a_rows = r_end - r < MEMRA_GEMM_TILE_A ? (int)(r_end - r) : MEMRA_GEMM_TILE_A;
                for (const size_t stop = fetched + per_tile < next_bytes ? fetched + per_tile : next_bytes; fetched < stop; fetched += 64) {
                    __builtin_prefetch(next + fetched, 0, 3);
                }
                if (unpacked) {
                    memra_gemm_tile_unpacked(job->type, job->n_in, unpacked, w_rows, job->converted + (size_t)r * crb, crb, a_rows, job->out + r * n_out + o,
                                             n_out);
                } else {
                    memra_gemm_tile(job->type, job->n_in, job->weight + (size_t)o * wrb, wrb, w_rows, job->converted + (size_t)r * crb, crb, a_rows,
                                    job->out + r * n_out + o, n_out);
                }
            }
        }
        return;
    }
    int64_t o = o_begin;
    /* Few activation rows (decode): one weight row at a time, a single sequential stream from memory,
     * which the hardware prefetchers follow better than four interleaved ones (measured ~15% faster
     * for a memory-bound matrix-vector product). */
    if (job->rows < ROWS4_MIN_ROWS) o = o_end;
    uint8_t * decoded = job->unpacked_bytes ? job->unpacked + (size_t)thread_index * job->unpacked_bytes : NULL;
    for (; o + 4 <= o_end; o += 4) {
        const uint8_t * w = job->weight + (size_t)o * wrb;
        if (decoded) {
            /* the decoded rows against all the tile's activation rows (several at a time in registers) */
            memra_dot_decode_rows4(job->type, job->n_in, w, wrb, decoded);
            const size_t arb = job->prepared_row_bytes ? job->prepared_row_bytes : crb;
            const uint8_t * a = (job->prepared_row_bytes ? job->prepared : job->converted) + (size_t)r_begin * arb;
            memra_dot_decoded_tile(job->type, job->n_in, decoded, a, arb, r_end - r_begin, job->out + r_begin * n_out + o, n_out);
            continue;
        }
        for (int64_t r = r_begin; r < r_end; r++) {
            float sums[4];
            memra_dot_rows4(job->type, job->n_in, w, wrb, job->converted + (size_t)r * crb, sums);
            float * y = job->out + r * n_out + o;
            y[0] = sums[0];
            y[1] = sums[1];
            y[2] = sums[2];
            y[3] = sums[3];
        }
    }
    /* the rows left (all of them in decode): one matrix-vector product per activation row, which
     * lets the kernel prepare the activation row once for the tile's weight rows */
    if (job->rows < ROWS4_MIN_ROWS) o = o_begin;
    if (o < o_end) {
        for (int64_t r = r_begin; r < r_end; r++) {
            memra_dot_rows(job->type, job->n_in, job->weight + (size_t)o * wrb, wrb, o_end - o, job->converted + (size_t)r * crb, job->out + r * n_out + o);
        }
    }
}

size_t memra_matmul_packed_row_bytes(const memra_cpu * cpu, int type, int64_t rows, int64_t n_in) {
    return rows >= gemm_min_rows(cpu) ? memra_gemm_packed_row_bytes(type, n_in) : 0;
}

size_t memra_matmul_scratch_row_bytes(const memra_cpu * cpu, int type, int64_t rows, int64_t n_in) {
    const size_t packed = memra_matmul_packed_row_bytes(cpu, type, rows, n_in);
    const int activation_type = memra_dot_activation_type(type);
    const size_t converted = activation_type == MEMRA_TYPE_F32 ? 0 : memra_row_bytes(activation_type, n_in);
    return packed > converted ? packed : converted;
}

/* Where the per-thread unpacked weight buffers start in cpu->converted: after the activation rows, 64-byte aligned. */
static size_t unpacked_offset(size_t activation_bytes) {
    return (activation_bytes + 63) / 64 * 64;
}

/* Bytes of each thread's unpacked-weight buffer (0: the tiles read the weight rows directly): the GEMM
 * kernels' unpacked rows, or without them the decoded rows of the four-row tiles (64-byte multiples). */
static size_t unpacked_bytes(const memra_cpu * cpu, int type, int64_t rows, int64_t n_in) {
    if (memra_matmul_packed_row_bytes(cpu, type, rows, n_in) != 0) return rows >= UNPACK_MIN_ROWS ? memra_gemm_unpacked_bytes(type, n_in) : 0;
    return rows >= ROWS4_MIN_ROWS ? (memra_dot_decoded_bytes(type, n_in) + 63) / 64 * 64 : 0;
}

/* Bytes of each prepared activation row of the decoded four-row tiles (0: they read the converted rows). */
static size_t prepared_row_bytes(const memra_cpu * cpu, int type, int64_t rows, int64_t n_in) {
    if (memra_matmul_packed_row_bytes(cpu, type, rows, n_in) != 0 || rows < ROWS4_MIN_ROWS) return 0;
    return (memra_dot_decoded_prepared_bytes(type, n_in) + 63) / 64 * 64;
}

/* cpu->converted: the activation rows, then (64-byte aligned) the prepared rows, then the per-thread buffers. */
size_t memra_matmul_scratch_bytes(const memra_cpu * cpu, int type, int64_t rows, int64_t n_in, size_t activation_bytes) {
    const size_t per_thread = unpacked_bytes(cpu, type, rows, n_in);
    const size_t prepared = (size_t)rows * prepared_row_bytes(cpu, type, rows, n_in);
    return per_thread ? unpacked_offset(activation_bytes) + prepared + per_thread * (size_t)cpu->threads : activation_bytes;
}

static void multiply_tiles(void * argument, int64_t tile, int thread_index) {
    multiply_tile(argument, tile, thread_index);
}

void memra_matmul(memra_cpu * cpu, float * out, const float * x, int64_t rows, int type, const void * weight, int64_t n_in, int64_t n_out) {
    matmul_job job = {
        .out = out,
        .rows = rows,
        .n_in = n_in,
        .n_out = n_out,
        .type = type,
        .weight = weight,
        .weight_row_bytes = memra_row_bytes(type, n_in),
        .x = x,
    };
    const int activation_type = memra_dot_activation_type(type);
    const int threads = cpu->threads;
    const size_t packed_row_bytes = memra_matmul_packed_row_bytes(cpu, type, rows, n_in);
    if (packed_row_bytes != 0) {
        job.gemm = 1;
        job.converted_row_bytes = packed_row_bytes;
        job.converted_out = cpu->converted;
        job.converted = cpu->converted;
        /* (exports.c reserved memra_matmul_scratch_bytes) */
        job.unpacked_bytes = unpacked_bytes(cpu, type, rows, n_in);
        job.unpacked = (uint8_t *)cpu->converted + unpacked_offset((size_t)rows * packed_row_bytes);
        memra_run_chunks(cpu->pool, rows > ROWS_PER_CONVERSION && threads > 1, convert_rows, &job, memra_chunk_count(rows, ROWS_PER_CONVERSION));
    } else if (activation_type == MEMRA_TYPE_F32) {
        job.converted = (const uint8_t *)x;
        job.converted_row_bytes = (size_t)n_in * sizeof(float);
    } else {
        /* The caller reserved rows * converted_row_bytes, then the prepared rows and the decoded-row
         * buffers (exports.c). */
        job.converted_row_bytes = memra_row_bytes(activation_type, n_in);
        job.converted_out = cpu->converted;
        job.converted = cpu->converted;
        job.unpacked_bytes = unpacked_bytes(cpu, type, rows, n_in);
        job.prepared_row_bytes = job.unpacked_bytes ? prepared_row_bytes(cpu, type, rows, n_in) : 0;
        job.prepared = (uint8_t *)cpu->converted + unpacked_offset((size_t)rows * job.converted_row_bytes);
        job.unpacked = job.prepared + (size_t)rows * job.prepared_row_bytes;
        memra_run_chunks(cpu->pool, rows > ROWS_PER_CONVERSION && threads > 1, convert_rows, &job, memra_chunk_count(rows, ROWS_PER_CONVERSION));
    }

    /* (The decoded tiles are sized by the larger of their converted and prepared rows, against their larger
     * budget. Before, by the converted rows against 192 KiB: the prepared rows of iq4_xs and iq4_nl are
     * ~1.5x larger, and sized by those, tiles had fewer rows to decode each group of weight rows for, which
     * measured slower, e.g. 128 rows of [4096 -> 4096] iq4_nl 10.6 ms against 9.2, iq4_xs 10.5 against 10.1.) */
    const int decoded_tiles = job.unpacked_bytes != 0 && !job.gemm;
    const size_t decoded_row_bytes = job.prepared_row_bytes > job.converted_row_bytes ? job.prepared_row_bytes : job.converted_row_bytes;
    int64_t rows_per_tile = decoded_tiles ? (int64_t)(DECODED_TILE_ACTIVATION_BYTES / decoded_row_bytes) : (int64_t)(TILE_ACTIVATION_BYTES / job.converted_row_bytes);
    const int64_t max_rows_per_tile = decoded_tiles ? DECODED_MAX_ROWS_PER_TILE : MAX_ROWS_PER_TILE;
    if (rows_per_tile > max_rows_per_tile) rows_per_tile = max_rows_per_tile;
    if (rows_per_tile < 1) rows_per_tile = 1;
    /* As many row tiles as that needs, of near-equal size (128 rows: 2 x 64; 130 rows: 3 x 44, not 64 + 64 + 2). */
    job.row_tiles = memra_chunk_count(rows, rows_per_tile);
    job.rows_per_tile = memra_chunk_count(rows, job.row_tiles);

    /* Enough tiles for every worker to take several (load balance), each a multiple of 4 outputs. */
    int64_t outputs_per_tile = n_out * job.row_tiles / ((int64_t)threads * 8);
    outputs_per_tile = outputs_per_tile / 4 * 4;
    if (outputs_per_tile < 4) outputs_per_tile = 4;
    if (outputs_per_tile > 64) outputs_per_tile = 64;
    job.outputs_per_tile = outputs_per_tile;
    job.tiles = (n_out + outputs_per_tile - 1) / outputs_per_tile * job.row_tiles;
    memra_run_chunks(cpu->pool, threads > 1, multiply_tiles, &job, job.tiles);
}
