/** The CUDA golden conformance suite, shared by golden-suite.test.ts and golden-suite-part-2.test.ts. */
import { defineGoldenSuite } from "@memra/core/internal";
import { describe, it } from "vitest";
import { cudaUnavailableReason } from "./cuda-availability";
import { CudaBackend } from "./cuda-backend";

/**
 * What the CPU emulator runs unless MEMRA_CUDA_GOLDEN says otherwise: K-quant mix with q8_K rounding
 * (q4_K, q6_K), MoE routing and expert matmuls with q8_0 rounding, head_dim 128 with 4 KV groups
 * (q8_0: its f32 twin took 2.3 times as long, the f32 matmul kernels have their op tests), and q4_1
 * with the q8_1 offset correction.
 */
export const EMULATED_GOLDEN_MODELS = ["dense-q4_K_M", "moe-q8_0", "dense-gqa4-hd128-q8_0", "dense-q4_1"];

function onEmulator(): boolean {
  const backend = CudaBackend.create();
  try {
    return backend.deviceInfo().name.includes("emulator");
  } finally {
    backend.dispose();
  }
}

/**
 * The models to run, from MEMRA_CUDA_GOLDEN: unset or empty, every model on a GPU and
 * EMULATED_GOLDEN_MODELS on the emulator; `all`, every model; otherwise a comma-separated list of
 * suite model ids (e.g. `dense-q2_K,dense-q3_K`), on either. An id the suite lacks fails the file.
 * undefined means every model.
 */
export function selectedModels(setting: string | undefined, emulator: () => boolean = onEmulator): readonly string[] | undefined {
  const value = setting?.trim() ?? "";
  if (value === "all") return undefined;
  if (value !== "") return value.split(",").map((id) => id.trim()).filter((id) => id !== "");
  return emulator() ? EMULATED_GOLDEN_MODELS : undefined;
}

export function defineCudaGoldenSuite(index: number): void {
  const unavailable = cudaUnavailableReason();
  if (unavailable !== undefined) {
    describe(`golden conformance suite (cuda backend, part ${index + 1} of 2)`, () => {
      it.skip(`skipped: ${unavailable}`, () => {});
    });
    return;
  }
  const emulated = onEmulator();
  const only = selectedModels(process.env.MEMRA_CUDA_GOLDEN, () => emulated);
  defineGoldenSuite({
    name: "cuda",
    create: () => CudaBackend.create(),
    shard: { index, count: 2 },
    ...(only ? { only } : {}),
    // On the emulator the LM head's 151,936 rows are most of a model's minute: every 4th step and
    // each prompt's last (every position still runs through the model; the int8 GEMM still takes
    // the 9 rows of a prompt). A GPU compares every step.
    ...(emulated ? { stepStride: 4 } : {}),
  });
}
