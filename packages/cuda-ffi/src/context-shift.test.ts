/**
 * The context shift against llama.cpp (core's context-shift goldens) on the CUDA backend, whose
 * rotateKV rotates the shifted keys in place (memra_cuda_kv_rotate) and whose copyKV moves the
 * rows. A GPU runs every model and the generation of the YaRN one; on the CPU emulator the suite is
 * left to MEMRA_CUDA_CONTEXT_SHIFT=1, without the generation (about 4 minutes there; rotateKV's op
 * test runs in CI).
 */
import { defineContextShiftSuite } from "@memra/core/internal";
import { describe, it } from "vitest";
import { cudaUnavailableReason } from "./cuda-availability";
import { CudaBackend } from "./cuda-backend";

const unavailable = cudaUnavailableReason();
const emulated = unavailable === undefined && CudaBackend.create().deviceInfo().name.includes("emulator");

if (unavailable !== undefined || (emulated && process.env.MEMRA_CUDA_CONTEXT_SHIFT !== "1")) {
  describe("context shift against llama.cpp (cuda backend)", () => {
    it.skip(`skipped: ${unavailable ?? "the CPU emulator (MEMRA_CUDA_CONTEXT_SHIFT=1 runs it)"}`, () => {});
  });
} else {
  // The generation (240 decode steps) only on a GPU: on the emulator it outlasts the test's timeout.
  defineContextShiftSuite({ name: "cuda", create: () => CudaBackend.create(), generation: emulated ? [] : ["dense-yarn-f32"] });
}
