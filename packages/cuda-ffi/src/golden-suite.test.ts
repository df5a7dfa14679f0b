/**
 * The golden conformance suite (every synthetic model against llama.cpp's recorded outputs) on the
 * CUDA backend, when a GPU is present. Bounds: core's PROBABILITY_BOUNDS, which were set for
 * backends that round activations as ggml's CPU matmul does; the CUDA kernels use f32
 * activations for decode and f16 for prefill (as ggml-cuda's f16 paths do), so a GPU session may
 * have to state measured bounds here as the CPU backend does. Not yet run on a GPU.
 */
import { defineGoldenSuite } from "@memra/core/internal";
import { describe, it } from "vitest";
import { cudaUnavailableReason } from "./cuda-availability";
import { CudaBackend } from "./cuda-backend";

const unavailable = cudaUnavailableReason();

if (unavailable === undefined) {
  defineGoldenSuite({ name: "cuda", create: () => CudaBackend.create() });
} else {
  describe("golden conformance suite (cuda backend)", () => {
    it.skip(`skipped: ${unavailable}`, () => {});
  });
}
