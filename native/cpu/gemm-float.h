/*
 * GEMM tiles for f16 and bf16 weights (internal to native/cpu; gemm.c dispatches to them, so callers
 * use gemm.h). The same contract as memra_gemm_packed_row_bytes / memra_gemm_pack_row / memra_gemm_tile:
 * up to MEMRA_GEMM_TILE_W weight rows x MEMRA_GEMM_TILE_A activation rows per call, results equal to the
 * dot-product path's up to the order of float additions.
 */
#ifndef MEMRA_GEMM_FLOAT_H
#define MEMRA_GEMM_FLOAT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of one packed activation row, or 0 when there is no kernel for this type, length or CPU. */
size_t memra_gemm_float_packed_row_bytes(int type, int64_t n);
void memra_gemm_float_pack_row(int type, const float * x, void * out, int64_t n);
void memra_gemm_float_tile(int type, int64_t n, const void * weight, size_t w_stride, int w_rows, const void * packed, size_t a_stride, int a_rows,
                           float * out, int64_t out_stride);
/* "avx512bf16" (f16 and bf16), "avx512f" (f16 only) or "none". */
const char * memra_gemm_float_isa(void);

#endif
