/**
 * The golden conformance suite (every synthetic model against llama.cpp's recorded outputs) on the
 * CUDA backend, with core's PROBABILITY_BOUNDS (the CPU backends' bounds). This file runs the first
 * half of the models, golden-suite-part-2.test.ts the second (two workers).
 *
 * The backend runs with activation rounding on (as ggml's CPU matmul rounds activations for the
 * weight type) and the tensor-core GEMM off: prefill goes through the f32 matrix-vector kernel,
 * whose products of rounded values are llama.cpp's up to summation order. The f16 GEMM is
 * checked against the reference backend by NMSE in cuda-backend.test.ts; it is not within these
 * bounds (measured on the emulator: dense-q6_K has top-1 flips at margins 0.10–0.22, moe-q8_0 a
 * top-5 probability difference of 0.41, where the GEMM's f16 rounding changes an expert choice).
 *
 * On the CPU emulator of native/cuda (MEMRA_CUDA_LIBRARY=native/build/libmemra_cuda_emulated.so)
 * a model takes about a minute, so the emulator runs EMULATED_GOLDEN_MODELS, one per kernel family;
 * MEMRA_CUDA_GOLDEN=all runs them all. A GPU runs them all.
 */
import { defineCudaGoldenSuite } from "./golden-suite-definition";

defineCudaGoldenSuite(0);
