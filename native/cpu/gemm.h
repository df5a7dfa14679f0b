/*
 * Blocked matrix-matrix kernels for prefill and batched decode (internal to native/cpu).
 *
 * The dot-product kernels of quant-dot.h compute one weight row against one activation row and
 * redo the weight's unpacking (nibbles, scales, layout) for every activation row. A GEMM kernel
 * instead takes a tile of up to 4 weight rows x 4 activation rows: it unpacks each weight block once
 * per tile and keeps 16 accumulators in registers, and the activations come pre-arranged in a
 * "packed" layout made once per row (so the inner loop reads them with plain vector loads).
 *
 * The integer sums are exact, as in quant-dot.c: results differ from the dot-product path only in
 * the order of float additions. memra_gemm_packed_row_bytes returns 0 when no GEMM kernel applies
 * (type, shape, CPU, or MEMRA_GEMM=0 in the environment); the caller then uses the dot products.
 */
#ifndef MEMRA_GEMM_H
#define MEMRA_GEMM_H

#include <stddef.h>
#include <stdint.h>

/* Largest tile: weight rows x activation rows per memra_gemm_tile call. */
#define MEMRA_GEMM_TILE_W 4
#define MEMRA_GEMM_TILE_A 4

/* Bytes of one packed activation row of `n` values for weights of `type`, or 0 when there is no
 * GEMM kernel for it on this CPU. */
size_t memra_gemm_packed_row_bytes(int type, int64_t n);

/* Quantizes one activation row of n floats into the packed layout (memra_gemm_packed_row_bytes bytes).
 * The quantization is the one memra_quantize_activation_row does (same values, same scales). */
void memra_gemm_pack_row(int type, const float * x, void * out, int64_t n);

/* out[c * out_stride + r] = dot(weight row r, activation row c) for r < w_rows, c < a_rows, where
 * 1 <= w_rows <= MEMRA_GEMM_TILE_W and 1 <= a_rows <= MEMRA_GEMM_TILE_A; weight rows are w_stride
 * bytes apart (ggml layout), packed activation rows a_stride bytes apart. */
void memra_gemm_tile(int type, int64_t n, const void * weight, size_t w_stride, int w_rows, const void * packed, size_t a_stride, int a_rows,
                     float * out, int64_t out_stride);

/* Weight rows can be unpacked once into the layout the tiles compute with, and that buffer reused for
 * every group of activation rows (prefill runs many): bytes of the buffer for up to
 * MEMRA_GEMM_TILE_W rows of n values (0 when the type has no such route: then use memra_gemm_tile),
 * the unpacking, and the tile on unpacked rows (the same results as memra_gemm_tile, bit for bit). */
size_t memra_gemm_unpacked_bytes(int type, int64_t n);
void memra_gemm_unpack(int type, int64_t n, const void * weight, size_t w_stride, int w_rows, void * unpacked);
void memra_gemm_tile_unpacked(int type, int64_t n, const void * unpacked, int w_rows, const void * packed, size_t a_stride, int a_rows, float * out,
                              int64_t out_stride);

/* The kernel family in use ("avx512vbmi", "avx2" or "none"), for benchmarks and tests. Each family has
 * its own packed-row and unpacked-buffer layouts (the sizes above are those of the family in use). */
const char * memra_gemm_isa(void);

/* ---- for the kernel files (gemm.c, gemm-float.c) ----
 * One function per tile shape (so that every loop of a kernel has constant bounds) and the table of
 * the 16 shapes: TILE_FNS_ATTR(attribute, name, kernel) defines name_WRxAR calling
 * kernel(WR, AR, n, w, ws, a, as, out, os); TILE_TABLE(name) lists them as [WR - 1][AR - 1]. */
#define TILE_FN(attr, name, kernel, WR, AR)                                                                            \
    attr void name##_##WR##x##AR(int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os) { \
        kernel(WR, AR, n, w, ws, a, as, out, os);                                                                      \
    }
#define TILE_FNS_ATTR(attr, name, kernel)                                                                              \
    TILE_FN(attr, name, kernel, 1, 1) TILE_FN(attr, name, kernel, 1, 2) TILE_FN(attr, name, kernel, 1, 3)              \
    TILE_FN(attr, name, kernel, 1, 4) TILE_FN(attr, name, kernel, 2, 1) TILE_FN(attr, name, kernel, 2, 2)              \
    TILE_FN(attr, name, kernel, 2, 3) TILE_FN(attr, name, kernel, 2, 4) TILE_FN(attr, name, kernel, 3, 1)              \
    TILE_FN(attr, name, kernel, 3, 2) TILE_FN(attr, name, kernel, 3, 3) TILE_FN(attr, name, kernel, 3, 4)              \
    TILE_FN(attr, name, kernel, 4, 1) TILE_FN(attr, name, kernel, 4, 2) TILE_FN(attr, name, kernel, 4, 3)              \
    TILE_FN(attr, name, kernel, 4, 4)
#define TILE_TABLE(name)                                                                                               \
    {                                                                                                                  \
        { name##_1x1, name##_1x2, name##_1x3, name##_1x4 }, { name##_2x1, name##_2x2, name##_2x3, name##_2x4 },        \
        { name##_3x1, name##_3x2, name##_3x3, name##_3x4 }, { name##_4x1, name##_4x2, name##_4x3, name##_4x4 },        \
    }

typedef void memra_gemm_tile_kernel(int64_t n, const uint8_t * w, size_t ws, const uint8_t * a, size_t as, float * out, int64_t os);

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(MEMRA_NO_SIMD)
#include <immintrin.h>
/* The AVX-512 tiles' epilogue: the 16 lanes of each of a0..a3 summed into {sum a0, ..., sum a3}. */
static inline __attribute__((target("avx2,avx512f,avx512dq"), always_inline)) __m128 memra_gemm_reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    const __m256 h0 = _mm256_add_ps(_mm512_castps512_ps256(a0), _mm512_extractf32x8_ps(a0, 1));
    const __m256 h1 = _mm256_add_ps(_mm512_castps512_ps256(a1), _mm512_extractf32x8_ps(a1, 1));
    const __m256 h2 = _mm256_add_ps(_mm512_castps512_ps256(a2), _mm512_extractf32x8_ps(a2, 1));
    const __m256 h3 = _mm256_add_ps(_mm512_castps512_ps256(a3), _mm512_extractf32x8_ps(a3, 1));
    const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(h0, h1), _mm256_hadd_ps(h2, h3));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}
#endif

#endif
