import { defineContextShiftSuite } from "@memra/core/internal";
import { describe, it } from "vitest";
import { CpuBackend } from "./cpu-backend";
import { nativeLibraryUnavailableReason } from "./native-availability";

const unavailable = nativeLibraryUnavailableReason();

if (unavailable === undefined) {
  // The generation (120 tokens, two shifts) of the YaRN model, whose shifts rescale every key.
  defineContextShiftSuite({ name: "cpu", create: () => CpuBackend.create({ threads: 2 }), generation: ["dense-yarn-f32"] });
} else {
  describe("context shift against llama.cpp (cpu backend)", () => {
    it.skip(`skipped: ${unavailable}`, () => {});
  });
}
