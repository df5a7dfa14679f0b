/*
 * mmv-lab.cu — designs of the q8_0 decode matrix-vector product timed side by side on the GPU
 * machine, on the q8_0_x8 layout (a group of 8 blocks: their 8 f16 scales, then their 8 × 32
 * codes) and the activations' q8_0 codes, as matrix_vector_q8_0_kernel reads them. Not the
 * library's kernels: small copies that differ in one design choice each, so that one short GPU
 * run says which choice moves the weights' bandwidth (issue 8: the 8B shape's decode needs about
 * 3.4 TB/s of HBM). Each design's sums are checked against a host reference.
 *
 *   nvcc -std=c++17 -O3 -arch=sm_90 -o mmv-lab bench/device/mmv-lab.cu && ./mmv-lab
 *
 * Prints one JSON line: for each shape (rows × inputs) and design, µs a launch (median of 5
 * timings of 40 launches each, the weights rotating over enough copies that they come from HBM)
 * and GB/s of weights.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#define CK(x)                                                                                    \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

constexpr int GROUP = 272; /* 8 blocks: 16 bytes of scales, 256 of codes */

__device__ __forceinline__ float scale_of(const uint8_t * row, int b) {
    return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short *>(row + (b >> 3) * GROUP + 2 * (b & 7)))));
}
__device__ __forceinline__ int4 codes_of(const uint8_t * row, int b, int half) {
    return __ldg(reinterpret_cast<const int4 *>(row + (b >> 3) * GROUP + 16 + 32 * (b & 7) + 16 * half));
}
__device__ __forceinline__ int4 codes_stream(const uint8_t * row, int b, int half) {
    int4 v;
    const int4 * p = reinterpret_cast<const int4 *>(row + (b >> 3) * GROUP + 16 + 32 * (b & 7) + 16 * half);
    asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ int dot16(int4 w, int4 a) { return __dp4a(w.w, a.w, __dp4a(w.z, a.z, __dp4a(w.y, a.y, __dp4a(w.x, a.x, 0)))); }

__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* A: the library's present design: one warp a row, a step 16 blocks (lane: half a block, one
 * 16-byte load), STEPS steps loaded together, then their products. */
template <int STEPS, bool STREAM>
__global__ void __launch_bounds__(128) warp_row(const uint8_t * __restrict__ w, const int8_t * __restrict__ x, const float * __restrict__ xs, float * out,
                                                int rows, int n_in) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
    const int blocks = n_in / 32;
    const uint8_t * r = w + (int64_t)(row < rows ? row : 0) * (blocks / 8) * GROUP;
    const int half = lane & 1;
    float sum = 0.0f;
    int4 q[STEPS];
    float d[STEPS];
#pragma unroll
    for (int k = 0; k < STEPS; k++) {
        const int b = 16 * k + (lane >> 1);
        const int at = b < blocks ? b : 0;
        q[k] = STREAM ? codes_stream(r, at, half) : codes_of(r, at, half);
        d[k] = scale_of(r, at);
    }
    pdl_wait();
    if (row >= rows) return;
    for (int first = 0; first < blocks; first += 16 * STEPS) {
        if (first > 0) {
#pragma unroll
            for (int k = 0; k < STEPS; k++) {
                const int b = first + 16 * k + (lane >> 1);
                const int at = b < blocks ? b : 0;
                q[k] = STREAM ? codes_stream(r, at, half) : codes_of(r, at, half);
                d[k] = scale_of(r, at);
            }
        }
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            const int b = first + 16 * k + (lane >> 1);
            if (b < blocks) {
                const int4 a = __ldg(reinterpret_cast<const int4 *>(x + b * 32 + half * 16));
                sum += (float)dot16(q[k], a) * d[k] * __ldg(xs + b);
            }
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) out[row] = sum;
}

/* B: as A, the activations' codes and scales staged in shared memory by the block first (one
 * read of x a block instead of one a warp), WARPS warps a block. */
template <int STEPS, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) warp_row_smem(const uint8_t * __restrict__ w, const int8_t * __restrict__ x, const float * __restrict__ xs,
                                                            float * out, int rows, int n_in) {
    extern __shared__ __align__(16) uint8_t smem[];
    int8_t * sx = reinterpret_cast<int8_t *>(smem);
    float * sxs = reinterpret_cast<float *>(smem + n_in);
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * WARPS + (threadIdx.x >> 5);
    const int blocks = n_in / 32;
    const uint8_t * r = w + (int64_t)(row < rows ? row : 0) * (blocks / 8) * GROUP;
    const int half = lane & 1;
    float sum = 0.0f;
    int4 q[STEPS];
    float d[STEPS];
#pragma unroll
    for (int k = 0; k < STEPS; k++) {
        const int b = 16 * k + (lane >> 1);
        const int at = b < blocks ? b : 0;
        q[k] = codes_of(r, at, half);
        d[k] = scale_of(r, at);
    }
    pdl_wait();
    for (int i = threadIdx.x; i < n_in / 16; i += WARPS * 32) reinterpret_cast<int4 *>(sx)[i] = reinterpret_cast<const int4 *>(x)[i];
    for (int i = threadIdx.x; i < blocks; i += WARPS * 32) sxs[i] = xs[i];
    __syncthreads();
    if (row >= rows) return;
    for (int first = 0; first < blocks; first += 16 * STEPS) {
        if (first > 0) {
#pragma unroll
            for (int k = 0; k < STEPS; k++) {
                const int b = first + 16 * k + (lane >> 1);
                const int at = b < blocks ? b : 0;
                q[k] = codes_of(r, at, half);
                d[k] = scale_of(r, at);
            }
        }
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            const int b = first + 16 * k + (lane >> 1);
            if (b < blocks) {
                const int4 a = *reinterpret_cast<const int4 *>(sx + b * 32 + half * 16);
                sum += (float)dot16(q[k], a) * d[k] * sxs[b];
            }
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) out[row] = sum;
}

/* C: a persistent grid (blocks_per_sm × SMs blocks of 4 warps); each warp takes rows warp,
 * warp + all warps, ...; the next row's first STEPS loads issued before this row's products. */
template <int STEPS>
__global__ void __launch_bounds__(128) persistent_rows(const uint8_t * __restrict__ w, const int8_t * __restrict__ x, const float * __restrict__ xs,
                                                       float * out, int rows, int n_in) {
    const int lane = threadIdx.x & 31, half = lane & 1;
    const int warps = gridDim.x * 4;
    const int blocks = n_in / 32;
    const int64_t row_bytes = (int64_t)(blocks / 8) * GROUP;
    int row = blockIdx.x * 4 + (threadIdx.x >> 5);
    int4 q[STEPS];
    float d[STEPS];
    auto load = [&](int rr, int first) {
        const uint8_t * r = w + (int64_t)(rr < rows ? rr : 0) * row_bytes;
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            const int b = first + 16 * k + (lane >> 1);
            const int at = b < blocks ? b : 0;
            q[k] = codes_of(r, at, half);
            d[k] = scale_of(r, at);
        }
    };
    load(row, 0);
    pdl_wait();
    for (; row < rows; row += warps) {
        float sum = 0.0f;
        for (int first = 0; first < blocks; first += 16 * STEPS) {
            int4 cq[STEPS];
            float cd[STEPS];
#pragma unroll
            for (int k = 0; k < STEPS; k++) {
                cq[k] = q[k];
                cd[k] = d[k];
            }
            /* the next loads (this row's next step, or the next row's first) before the products */
            if (first + 16 * STEPS < blocks) load(row, first + 16 * STEPS);
            else load(row + warps, 0);
#pragma unroll
            for (int k = 0; k < STEPS; k++) {
                const int b = first + 16 * k + (lane >> 1);
                if (b < blocks) {
                    const int4 a = __ldg(reinterpret_cast<const int4 *>(x + b * 32 + half * 16));
                    sum += (float)dot16(cq[k], a) * cd[k] * __ldg(xs + b);
                }
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) out[row] = sum;
    }
}

/* D: two rows a warp (the activations' loads shared by both), STEPS steps of each in flight. */
template <int STEPS>
__global__ void __launch_bounds__(128) warp_two_rows(const uint8_t * __restrict__ w, const int8_t * __restrict__ x, const float * __restrict__ xs,
                                                     float * out, int rows, int n_in) {
    const int lane = threadIdx.x & 31, half = lane & 1;
    const int row = (blockIdx.x * 4 + (threadIdx.x >> 5)) * 2;
    const int blocks = n_in / 32;
    const int64_t row_bytes = (int64_t)(blocks / 8) * GROUP;
    const uint8_t * r0 = w + (int64_t)(row < rows ? row : 0) * row_bytes;
    const uint8_t * r1 = r0 + row_bytes;
    float s0 = 0.0f, s1 = 0.0f;
    int4 q0[STEPS], q1[STEPS];
    float d0[STEPS], d1[STEPS];
    pdl_wait();
    if (row >= rows) return;
    for (int first = 0; first < blocks; first += 16 * STEPS) {
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            const int b = first + 16 * k + (lane >> 1);
            const int at = b < blocks ? b : 0;
            q0[k] = codes_of(r0, at, half);
            d0[k] = scale_of(r0, at);
            q1[k] = codes_of(r1, at, half);
            d1[k] = scale_of(r1, at);
        }
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            const int b = first + 16 * k + (lane >> 1);
            if (b < blocks) {
                const int4 a = __ldg(reinterpret_cast<const int4 *>(x + b * 32 + half * 16));
                const float ds = __ldg(xs + b);
                s0 += (float)dot16(q0[k], a) * d0[k] * ds;
                s1 += (float)dot16(q1[k], a) * d1[k] * ds;
            }
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        s0 += __shfl_xor_sync(0xffffffffu, s0, o);
        s1 += __shfl_xor_sync(0xffffffffu, s1, o);
    }
    if (lane == 0) {
        out[row] = s0;
        out[row + 1] = s1;
    }
}

/* E: SPLIT warps a row (a block of 4 rows × SPLIT warps), each warp every SPLIT-th step of 16
 * blocks, the warps' sums added in shared memory. */
template <int STEPS, int SPLIT>
__global__ void __launch_bounds__(128 * SPLIT) split_rows(const uint8_t * __restrict__ w, const int8_t * __restrict__ x, const float * __restrict__ xs,
                                                         float * out, int rows, int n_in) {
    __shared__ float partial[4 * SPLIT];
    const int lane = threadIdx.x & 31, half = lane & 1, warp = threadIdx.x >> 5;
    const int part = warp % SPLIT;
    const int row = blockIdx.x * 4 + warp / SPLIT;
    const int blocks = n_in / 32;
    const uint8_t * r = w + (int64_t)(row < rows ? row : 0) * (blocks / 8) * GROUP;
    float sum = 0.0f;
    int4 q[STEPS];
    float d[STEPS];
    bool first_pass = true;
    for (int first = part * 16 * STEPS; first < blocks; first += SPLIT * 16 * STEPS) {
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            const int b = first + 16 * k + (lane >> 1);
            const int at = b < blocks ? b : 0;
            q[k] = codes_of(r, at, half);
            d[k] = scale_of(r, at);
        }
        if (first_pass) pdl_wait();
        first_pass = false;
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            const int b = first + 16 * k + (lane >> 1);
            if (b < blocks) {
                const int4 a = __ldg(reinterpret_cast<const int4 *>(x + b * 32 + half * 16));
                sum += (float)dot16(q[k], a) * d[k] * __ldg(xs + b);
            }
        }
    }
    if (first_pass) pdl_wait();
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) partial[warp] = sum;
    __syncthreads();
    if (part == 0 && lane == 0 && row < rows) {
        float total = 0.0f;
        for (int p = 0; p < SPLIT; p++) total += partial[warp + p];
        out[row] = total;
    }
}

/* The read ceiling: every byte of the matrix read with 16-byte loads, 4 in flight a thread. */
__global__ void __launch_bounds__(256) read_all(const int4 * __restrict__ w, int64_t count, int * out) {
    int acc = 0;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += 4 * stride) {
        int4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) v[u] = i + u * stride < count ? __ldg(w + i + u * stride) : make_int4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 4; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (acc == 0x12345678) out[0] = acc;
}

struct Shape {
    int rows, n_in;
};

typedef void (*Kernel)(const uint8_t *, const int8_t *, const float *, float *, int, int);

static void launch(Kernel k, int grid, int threads, size_t smem, cudaStream_t stream, bool pdl, const uint8_t * w, const int8_t * x, const float * xs,
                   float * out, int rows, int n_in) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(grid);
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    cudaLaunchAttribute attribute;
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&config, k, w, x, xs, out, rows, n_in));
}

int main(int argc, char ** argv) {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const Shape shapes[] = {{12288, 4096}, {4096, 12288}, {6144, 4096}, {4096, 4096}, {24576, 4096}, {4096, 1024}, {6144, 1024}, {1024, 3072}, {1024, 2048}};
    std::string json = "{\"device\":\"" + std::string(prop.name) + "\",\"sms\":" + std::to_string(sms) + ",\"l2\":" + std::to_string(prop.l2CacheSize) + ",\"shapes\":{";
    cudaStream_t stream;
    CK(cudaStreamCreate(&stream));
    int * sink;
    CK(cudaMalloc(&sink, 4));
    bool first_shape = true;
    for (const Shape & s : shapes) {
        if (quick && s.rows * (int64_t)s.n_in > 4096 * 4096) continue;
        const int blocks = s.n_in / 32;
        const int64_t row_bytes = (int64_t)(blocks / 8) * GROUP, bytes = row_bytes * s.rows;
        const int copies = (int)std::max<int64_t>(2, std::min<int64_t>(64, (400ll << 20) / bytes + 1)); /* > 400 MB: from HBM */
        std::vector<uint8_t> host(bytes);
        uint32_t seed = 12345u + s.rows;
        for (int64_t i = 0; i < bytes; i++) {
            seed = seed * 1664525u + 1013904223u;
            host[i] = (uint8_t)(seed >> 24);
        }
        /* scales: small positive halves */
        for (int64_t r = 0; r < s.rows; r++)
            for (int g = 0; g < blocks / 8; g++)
                for (int j = 0; j < 8; j++) {
                    const __half h = __float2half(0.001f * (1 + ((r + g + j) % 7)));
                    memcpy(&host[r * row_bytes + g * GROUP + 2 * j], &h, 2);
                }
        std::vector<int8_t> hx(s.n_in);
        std::vector<float> hxs(blocks);
        for (int i = 0; i < s.n_in; i++) hx[i] = (int8_t)((i * 37) % 255 - 127);
        for (int b = 0; b < blocks; b++) hxs[b] = 0.01f * (1 + b % 5);
        uint8_t * w;
        int8_t * x;
        float *xs, *out;
        CK(cudaMalloc(&w, bytes * copies));
        for (int c = 0; c < copies; c++) CK(cudaMemcpy(w + bytes * c, host.data(), bytes, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&x, s.n_in));
        CK(cudaMalloc(&xs, blocks * 4));
        CK(cudaMalloc(&out, s.rows * 4 * 2));
        CK(cudaMemcpy(x, hx.data(), s.n_in, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(xs, hxs.data(), blocks * 4, cudaMemcpyHostToDevice));
        /* host reference of row sums */
        std::vector<double> ref(s.rows);
        for (int r = 0; r < s.rows; r++) {
            double total = 0;
            for (int b = 0; b < blocks; b++) {
                const uint8_t * g = &host[r * row_bytes + (b / 8) * GROUP];
                __half h;
                memcpy(&h, g + 2 * (b % 8), 2);
                int dot = 0;
                for (int i = 0; i < 32; i++) dot += (int8_t)g[16 + 32 * (b % 8) + i] * hx[b * 32 + i];
                total += (double)dot * __half2float(h) * hxs[b];
            }
            ref[r] = total;
        }
        struct Design {
            std::string name;
            Kernel kernel;
            int grid, threads;
            size_t smem;
            int rows_per_warp;
        };
        const int g4 = (s.rows + 3) / 4;
        const size_t xsmem = s.n_in + blocks * 4;
        std::vector<Design> designs = {
            {"A-steps4", warp_row<4, false>, g4, 128, 0, 1},
            {"A-steps2", warp_row<2, false>, g4, 128, 0, 1},
            {"A-steps8", warp_row<8, false>, g4, 128, 0, 1},
            {"A-steps4-stream", warp_row<4, true>, g4, 128, 0, 1},
            {"A-steps8-stream", warp_row<8, true>, g4, 128, 0, 1},
            {"B-smem4w", warp_row_smem<4, 4>, g4, 128, xsmem, 1},
            {"B-smem8w", warp_row_smem<4, 8>, (s.rows + 7) / 8, 256, xsmem, 1},
            {"B-smem16w", warp_row_smem<4, 16>, (s.rows + 15) / 16, 512, xsmem, 1},
            {"C-persist4-x8", persistent_rows<4>, std::min(g4, sms * 8), 128, 0, 1},
            {"C-persist4-x16", persistent_rows<4>, std::min(g4, sms * 16), 128, 0, 1},
            {"C-persist2-x16", persistent_rows<2>, std::min(g4, sms * 16), 128, 0, 1},
            {"D-two-rows4", warp_two_rows<4>, (s.rows / 2 + 3) / 4, 128, 0, 2},
            {"D-two-rows2", warp_two_rows<2>, (s.rows / 2 + 3) / 4, 128, 0, 2},
            {"E-split2", split_rows<4, 2>, g4, 256, 0, 1},
            {"E-split4", split_rows<4, 4>, g4, 512, 0, 1},
            {"E-split2-steps2", split_rows<2, 2>, g4, 256, 0, 1},
        };
        for (const Design & d : designs)
            if (d.smem > 48 * 1024) CK(cudaFuncSetAttribute(d.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)d.smem));
        json += std::string(first_shape ? "" : ",") + "\"" + std::to_string(s.rows) + "x" + std::to_string(s.n_in) + "\":{\"mb\":" +
                std::to_string(bytes / 1e6) + ",\"copies\":" + std::to_string(copies);
        first_shape = false;
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        const int iterations = 40;
        for (int pdl = 0; pdl < 2; pdl++) {
            for (const Design & d : designs) {
                /* check */
                CK(cudaMemset(out, 0, s.rows * 4));
                launch(d.kernel, d.grid, d.threads, d.smem, stream, false, w, x, xs, out, s.rows, s.n_in);
                CK(cudaStreamSynchronize(stream));
                std::vector<float> got(s.rows);
                CK(cudaMemcpy(got.data(), out, s.rows * 4, cudaMemcpyDeviceToHost));
                double worst = 0;
                for (int r = 0; r < s.rows; r++) worst = std::max(worst, fabs(got[r] - ref[r]) / (fabs(ref[r]) + 1e-3));
                std::vector<float> times;
                for (int t = 0; t < 5; t++) {
                    CK(cudaEventRecord(e0, stream));
                    for (int i = 0; i < iterations; i++)
                        launch(d.kernel, d.grid, d.threads, d.smem, stream, pdl, w + bytes * ((t * iterations + i) % copies), x, xs, out, s.rows, s.n_in);
                    CK(cudaEventRecord(e1, stream));
                    CK(cudaEventSynchronize(e1));
                    float ms;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    times.push_back(ms * 1000.0f / iterations);
                }
                std::sort(times.begin(), times.end());
                const float us = times[2];
                char entry[256];
                snprintf(entry, sizeof entry, ",\"%s%s\":{\"us\":%.2f,\"GBps\":%.0f,\"err\":%.1e}", d.name.c_str(), pdl ? "-pdl" : "", us, bytes / (us * 1e3), worst);
                json += entry;
                fprintf(stderr, "%6d x %6d %-20s %s %8.2f us %7.0f GB/s err %.1e\n", s.rows, s.n_in, d.name.c_str(), pdl ? "pdl" : "   ", us, bytes / (us * 1e3), worst);
            }
        }
        /* the read ceiling over the same bytes */
        {
            std::vector<float> times;
            for (int t = 0; t < 5; t++) {
                CK(cudaEventRecord(e0, stream));
                for (int i = 0; i < iterations; i++) {
                    const int4 * p = reinterpret_cast<const int4 *>(w + bytes * ((t * iterations + i) % copies));
                    read_all<<<sms * 8, 256, 0, stream>>>(p, bytes / 16, sink);
                }
                CK(cudaEventRecord(e1, stream));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                times.push_back(ms * 1000.0f / iterations);
            }
            std::sort(times.begin(), times.end());
            char entry[128];
            snprintf(entry, sizeof entry, ",\"read\":{\"us\":%.2f,\"GBps\":%.0f}", times[2], bytes / (times[2] * 1e3));
            json += entry;
            fprintf(stderr, "%6d x %6d %-20s     %8.2f us %7.0f GB/s\n", s.rows, s.n_in, "read", times[2], bytes / (times[2] * 1e3));
        }
        json += "}";
        CK(cudaFree(w));
        CK(cudaFree(x));
        CK(cudaFree(xs));
        CK(cudaFree(out));
    }
    json += "}}";
    printf("%s\n", json.c_str());
    return 0;
}
