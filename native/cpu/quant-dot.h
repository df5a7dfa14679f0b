/*
 * Quantized dot products for the CPU backend (internal to native/cpu; not part of the C ABI).
 *
 * As in ggml, a weight row of type T is multiplied with an activation row that was first
 * converted to T's "vec_dot_type":
 *   q4_0, q5_0, q8_0, iq4_nl -> q8_0   (32 values: f16 d = max|x|/127, int8 q = round_even(x*127/max|x|))
 *   q4_1, q5_1               -> q8_1   (q8_0 values plus f16 s = f16(d_f32 * sum(q)))
 *   q2_K..q6_K, iq4_xs       -> q8_K   (256 values: f32 d = 1/iscale, iscale = -127/x_maxabs, q = min(127, round_even(iscale*x)), int16 bsums[16])
 *   iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s -> q8_K
 *   f16 -> f16, bf16 -> bf16, f32 -> f32
 * so that results match llama.cpp's CPU backend up to summation order.
 * Every function here is pure (no allocation, no global state) and safe to call from any thread.
 */
#ifndef MEMRA_QUANT_DOT_H
#define MEMRA_QUANT_DOT_H

#include <stddef.h>
#include <stdint.h>

/* ggml type ids (ggml.h enum ggml_type). */
enum {
    MEMRA_TYPE_F32 = 0, MEMRA_TYPE_F16 = 1, MEMRA_TYPE_Q4_0 = 2, MEMRA_TYPE_Q4_1 = 3,
    MEMRA_TYPE_Q5_0 = 6, MEMRA_TYPE_Q5_1 = 7, MEMRA_TYPE_Q8_0 = 8, MEMRA_TYPE_Q8_1 = 9,
    MEMRA_TYPE_Q2_K = 10, MEMRA_TYPE_Q3_K = 11, MEMRA_TYPE_Q4_K = 12, MEMRA_TYPE_Q5_K = 13,
    MEMRA_TYPE_Q6_K = 14, MEMRA_TYPE_Q8_K = 15, MEMRA_TYPE_IQ2_XXS = 16, MEMRA_TYPE_IQ2_XS = 17,
    MEMRA_TYPE_IQ3_XXS = 18, MEMRA_TYPE_IQ1_S = 19, MEMRA_TYPE_IQ4_NL = 20, MEMRA_TYPE_IQ3_S = 21,
    MEMRA_TYPE_IQ2_S = 22, MEMRA_TYPE_IQ4_XS = 23, MEMRA_TYPE_IQ1_M = 29, MEMRA_TYPE_BF16 = 30,
};

/* Whether `type` has a dot-product kernel here. */
int memra_dot_supported(int type);

/* The type activations are converted to before a dot product with weights of `type` (see above). */
int memra_dot_activation_type(int type);

/* Bytes of one row of `n` values of ggml type `type` (n a multiple of the block size), 0 if unknown. */
size_t memra_row_bytes(int type, int64_t n);

/* Converts one activation row of n floats to memra_dot_activation_type(weight_type) into `out`
 * (memra_row_bytes(activation type, n) bytes). n is a multiple of the weight type's block size. */
void memra_quantize_activation_row(int weight_type, const float * x, void * out, int64_t n);

/* The dot product of one weight row (ggml layout, `type`) with one converted activation row. */
float memra_dot_row(int type, int64_t n, const void * weight_row, const void * activation_row);

/* Four weight rows at once against one activation row (out[0..3]); lets kernels reuse the loaded
 * activation. Rows are `row_stride` bytes apart. */
void memra_dot_rows4(int type, int64_t n, const void * weight_rows, size_t row_stride, const void * activation_row, float * out);
/* out[r] = memra_dot_row(row r) for r < rows (rows row_stride bytes apart), bit for bit; for a
 * matrix-vector product: some kernels prepare the activation row once for all the rows. */
void memra_dot_rows(int type, int64_t n, const void * weight_rows, size_t row_stride, int64_t rows, const void * activation_row, float * out);

/* Matrix-matrix products of the types whose decoding costs about as much as their products or more (the
 * i-quants; iq4_xs and iq4_nl on the x86 paths): four weight rows decoded once (memra_dot_decode_rows4
 * writes memra_dot_decoded_bytes(type, n) bytes, 0 when the type has no such route), then multiplied with
 * any number of activation rows (memra_dot_decoded_rows4: out[0..3], bit for bit what memra_dot_rows4
 * returns for the same rows). Where memra_dot_decoded_prepared_bytes(type, n) is not 0, the activation
 * row memra_dot_decoded_rows4 reads is the converted row prepared once by memra_dot_decoded_prepare
 * (into that many bytes): arranged as the kernel uses it for every group of weight rows. */
size_t memra_dot_decoded_bytes(int type, int64_t n);
void memra_dot_decode_rows4(int type, int64_t n, const void * weight_rows, size_t row_stride, void * decoded);
size_t memra_dot_decoded_prepared_bytes(int type, int64_t n);
void memra_dot_decoded_prepare(int type, int64_t n, const void * activation_row, void * prepared);
void memra_dot_decoded_rows4(int type, int64_t n, const void * decoded, const void * activation_row, float * out);
/* memra_dot_decoded_rows4 for `rows` activation rows (as that reads them, prepared or converted),
 * activation_stride bytes apart: out[c * out_stride + r] for r < 4, c < rows, bit for bit what
 * memra_dot_decoded_rows4 returns for row c. Where the path has a kernel for it, it keeps the products of
 * several activation rows with the four decoded rows in registers at once. */
void memra_dot_decoded_tile(int type, int64_t n, const void * decoded, const void * activation_rows, size_t activation_stride, int64_t rows, float * out,
                            int64_t out_stride);

/* Which SIMD path the kernels chose at run time: "avx512vnni", "avx2", "neondot" (NEON with the dot-product extension), "neon" or "scalar". */
const char * memra_dot_isa(void);

/* ---- Additions (tests and benchmarks) ----
 * The same entry points on an explicit SIMD path: "scalar", "avx2", "avx512vnni" (x86), "neon", "neondot" (AArch64). A path that this
 * build or CPU cannot run falls back to "scalar"; memra_dot_isa_available says which ones can run.
 * The environment variable MEMRA_CPU_ISA (one of those names) forces the path memra_dot_row & co. use,
 * when available; it is read once, at the first call. For unsupported types the dot products return NaN. */
int memra_dot_isa_available(const char * isa);
void memra_quantize_activation_row_isa(const char * isa, int weight_type, const float * x, void * out, int64_t n);
float memra_dot_row_isa(const char * isa, int type, int64_t n, const void * weight_row, const void * activation_row);
void memra_dot_rows4_isa(const char * isa, int type, int64_t n, const void * weight_rows, size_t row_stride, const void * activation_row, float * out);
void memra_dot_rows_isa(const char * isa, int type, int64_t n, const void * weight_rows, size_t row_stride, int64_t rows, const void * activation_row,
                        float * out);
size_t memra_dot_decoded_bytes_isa(const char * isa, int type, int64_t n);
void memra_dot_decode_rows4_isa(const char * isa, int type, int64_t n, const void * weight_rows, size_t row_stride, void * decoded);
size_t memra_dot_decoded_prepared_bytes_isa(const char * isa, int type, int64_t n);
void memra_dot_decoded_prepare_isa(const char * isa, int type, int64_t n, const void * activation_row, void * prepared);
void memra_dot_decoded_rows4_isa(const char * isa, int type, int64_t n, const void * decoded, const void * activation_row, float * out);
void memra_dot_decoded_tile_isa(const char * isa, int type, int64_t n, const void * decoded, const void * activation_rows, size_t activation_stride,
                                int64_t rows, float * out, int64_t out_stride);

#endif
