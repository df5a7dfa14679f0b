/**
 * computeImatrix on the CUDA backend against llama-imatrix's files (the golden cases of @memra/core's
 * conformance/imatrix-golden.ts): the collector hides the backend's fused ops and graph recording,
 * so every weight matmul runs unfused and its input is read back. A GPU runs every case; the CPU
 * emulator of native/cuda (MEMRA_CUDA_LIBRARY=native/build/libmemra_cuda_emulated.so) runs
 * EMULATED_IMATRIX_CASES (about 20 s): q8_0 weights (rounded activations), and routed experts with
 * their counts. Measured on the emulator: every case within core's IMATRIX_BOUNDS (largest scaled
 * deviation 1.9e-3 for q8_0, 2.7e-6 for f32).
 */
import { defineImatrixGoldenSuite } from "@memra/core/internal";
import { describe, it } from "vitest";
import { cudaUnavailableReason } from "./cuda-availability";
import { CudaBackend } from "./cuda-backend";

export const EMULATED_IMATRIX_CASES = ["dense-q8_0-c128", "moe-f32-c12-chunks1"];

const unavailable = cudaUnavailableReason();

if (unavailable === undefined) {
  const probe = CudaBackend.create();
  const emulated = probe.deviceInfo().name.includes("emulator");
  probe.dispose();
  defineImatrixGoldenSuite({ name: "cuda", create: () => CudaBackend.create(), ...(emulated ? { only: EMULATED_IMATRIX_CASES } : {}) });
} else {
  describe("computeImatrix against llama-imatrix (cuda backend)", () => {
    it.skip(`skipped: ${unavailable}`, () => {});
  });
}
