/**
 * computeHellaswag / computeWinogrande / computeMultipleChoice on the native CPU backend against
 * llama-perplexity (every case of @memra/core's conformance/perplexity-task-golden.ts): the same
 * tasks picked and scored right or wrong, near-ties aside, and the same printed figures.
 */
import { definePerplexityTaskGoldenSuite } from "@memra/core/internal";
import { describe, it } from "vitest";
import { CpuBackend } from "./cpu-backend";
import { nativeLibraryUnavailableReason } from "./native-availability";

const unavailable = nativeLibraryUnavailableReason();

if (unavailable === undefined) {
  definePerplexityTaskGoldenSuite({ name: "cpu", create: () => CpuBackend.create({ threads: 2 }) });
} else {
  describe("llama-perplexity's task scores (cpu backend)", () => {
    it.skip(`skipped: ${unavailable}`, () => {});
  });
}
