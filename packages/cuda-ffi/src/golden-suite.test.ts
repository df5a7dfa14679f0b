/**
 * The golden conformance suite (every synthetic model against llama.cpp's recorded outputs) on the
 * CUDA backend, with core's PROBABILITY_BOUNDS (the CPU backends' bounds). This file runs the first
 * half of the models, golden-suite-part-2.test.ts the second (two workers).
 *
 * The backend runs as created by default: activations rounded as ggml's CPU matmul rounds them for
 * the weight type; decode on the f32 matrix-vector kernel; prefill of quantized weights on the
 * integer tensor-core GEMM (q8 activation codes × weight codes, exact), of f16/bf16 weights on the
 * f16 GEMM. Before the integer GEMM, the f16 GEMM for every type was outside these bounds
 * (measured on the emulator: dense-q6_K top-1 flips at margins 0.10–0.22, moe-q8_0 a top-5
 * probability difference of 0.41).
 *
 * On the CPU emulator of native/cuda (MEMRA_CUDA_LIBRARY=native/build/libmemra_cuda_emulated.so)
 * a model took about a minute, so the emulator runs EMULATED_GOLDEN_MODELS, one per kernel family,
 * comparing every 4th step and the last of each prompt (the LM head's rows were most of the time);
 * MEMRA_CUDA_GOLDEN=all runs them all, MEMRA_CUDA_GOLDEN=dense-q2_K,dense-q3_K (any suite ids,
 * comma-separated) just those, on the emulator or a GPU. A GPU runs them all by default.
 */
import { defineCudaGoldenSuite } from "./golden-suite-definition";

defineCudaGoldenSuite(0);
