/**
 * computeImatrix on the native CPU backend against llama-imatrix's files (the golden cases of
 * @memra/core's conformance/imatrix-golden.ts): the same tensor names, counts (per expert too),
 * chunk count and size as llama.cpp, and the sums within core's IMATRIX_BOUNDS.
 */
import { defineImatrixGoldenSuite } from "@memra/core/internal";
import { describe, it } from "vitest";
import { CpuBackend } from "./cpu-backend";
import { nativeLibraryUnavailableReason } from "./native-availability";

const unavailable = nativeLibraryUnavailableReason();

if (unavailable === undefined) {
  defineImatrixGoldenSuite({ name: "cpu", create: () => CpuBackend.create({ threads: 2 }) });
} else {
  describe("computeImatrix against llama-imatrix (cpu backend)", () => {
    it.skip(`skipped: ${unavailable}`, () => {});
  });
}
