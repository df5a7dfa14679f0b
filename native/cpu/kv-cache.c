/*
 * KV cache storage rows: f32, f16 (ggml's round-to-nearest-even) or q8_0 (ggml's quantize_row_q8_0
 * reference: d = amax / 127 as f16, q = roundf(x / d)). Written row by row into slots of a paged
 * pool; read back a head's segment at a time by the attention kernel, converted to f32 into
 * per-thread scratch (no whole-cache conversion).
 */
#include <math.h>
#include <string.h>

#include "cpu-internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MEMRA_X86 1
#endif

size_t memra_kv_row_bytes(int type, int64_t width) {
    switch (type) {
        case MEMRA_KV_F32: return (size_t)width * 4;
        case MEMRA_KV_F16: return (size_t)width * 2;
        case MEMRA_KV_Q8_0: return (size_t)(width / 32) * 34;
        default: return 0;
    }
}

static void write_q8_0(uint8_t * out, const float * x, int64_t n) {
    for (int64_t block = 0; block < n / 32; block++, x += 32, out += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t half = memra_f32_to_f16(d);
        memcpy(out, &half, 2);
        for (int j = 0; j < 32; j++) out[2 + j] = (uint8_t)(int8_t)roundf(x[j] * inverse);
    }
}

void memra_kv_write(int type, void * storage, int64_t width, const int32_t * slots, int64_t count, const float * source) {
    const size_t row_bytes = memra_kv_row_bytes(type, width);
    for (int64_t i = 0; i < count; i++) {
        uint8_t * row = (uint8_t *)storage + (size_t)slots[i] * row_bytes;
        const float * x = source + i * width;
        switch (type) {
            case MEMRA_KV_F32: memcpy(row, x, row_bytes); break;
            case MEMRA_KV_F16:
                for (int64_t j = 0; j < width; j++) {
                    const uint16_t half = memra_f32_to_f16(x[j]);
                    memcpy(row + 2 * j, &half, 2);
                }
                break;
            case MEMRA_KV_Q8_0: write_q8_0(row, x, width); break;
            default: break;
        }
    }
}

#ifdef MEMRA_X86
__attribute__((target("avx512f"))) static void f16_to_f32_avx512(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
    for (; i < n; i++) y[i] = memra_f16_to_f32(x[i]);
}

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = memra_f16_to_f32(x[i]);
}
#endif

static void f16_to_f32_portable(const uint16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = memra_f16_to_f32(x[i]);
}

typedef void (*f16_converter)(const uint16_t *, float *, int64_t);

static f16_converter choose_f16_converter(void) {
#ifdef MEMRA_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return f16_to_f32_avx512;
    if (__builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx")) return f16_to_f32_f16c;
#endif
    return f16_to_f32_portable;
}

void memra_kv_read(int type, const void * row, float * out, int64_t n) {
    static f16_converter converter = NULL; /* a benign race: every thread picks the same one */
    switch (type) {
        case MEMRA_KV_F32: memcpy(out, row, (size_t)n * 4); return;
        case MEMRA_KV_F16: {
            if (!converter) converter = choose_f16_converter();
            converter(row, out, n); /* rows are 2-byte aligned; the vector loads are unaligned loads */
            return;
        }
        case MEMRA_KV_Q8_0: {
            const uint8_t * block = row;
            for (int64_t b = 0; b < n / 32; b++, block += 34, out += 32) {
                uint16_t half;
                memcpy(&half, block, 2);
                const float d = memra_f16_to_f32(half);
                const int8_t * q = (const int8_t *)(block + 2);
                for (int j = 0; j < 32; j++) out[j] = d * (float)q[j];
            }
            return;
        }
        default: return;
    }
}
