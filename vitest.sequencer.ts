/**
 * The order test files start in: the long ones first, longest first, so that no long file starts
 * last while the other worker idles.
 *
 * Vitest orders files by their durations in its results cache, and without a cache (a clean clone,
 * as in CI) by file size, largest first. The golden-suite files are a few lines that run for
 * minutes, so on a clean clone they started last: the main suite ended with one worker running the
 * reference golden suite alone for about 100 s, the emulated CUDA run with cuda-graphs.test.ts alone
 * for about 45 s.
 *
 * SECONDS holds each long file's duration on 2 cores, measured in a clean-clone CI run (a fresh
 * synthetic-model cache); files not listed keep vitest's order after them. Only the order matters,
 * so the figures need updating only when a file's rank changes a lot.
 */
import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

export const SECONDS: Record<string, number> = {
  // bun run test
  "packages/cpu-ffi/src/golden-suite.test.ts": 158,
  "packages/core/src/conformance/golden-suite-part-1.test.ts": 130,
  "packages/core/src/conformance/golden-suite-part-2.test.ts": 97,
  "packages/core/src/placement/mixed-backend.test.ts": 78,
  "packages/core/src/generation/generate.test.ts": 60,
  "packages/sampler/src/grammar/json-schema-to-gbnf.test.ts": 42,
  "packages/core/src/compute-imatrix.test.ts": 33,
  "packages/cli/src/commands/generate-chat.test.ts": 27,
  "packages/cli/src/demo-model.test.ts": 24,
  "packages/cli/src/commands/imatrix.test.ts": 23,
  "packages/cpu-ffi/src/compute-imatrix.test.ts": 15,
  "packages/core/src/models/top-candidates.test.ts": 15,
  "packages/core/src/generation/structured-output.test.ts": 14,
  "packages/core/src/load-model.test.ts": 13,
  "packages/cli/src/commands/quantize.test.ts": 13,
  // the CUDA backend on the emulator (.ci/run)
  "packages/cuda-ffi/src/cuda-graphs.test.ts": 163,
  "packages/cuda-ffi/src/golden-suite.test.ts": 121,
  "packages/cuda-ffi/src/golden-suite-part-2.test.ts": 89,
  "packages/cuda-ffi/src/cuda-backend.test.ts": 78,
  "packages/cuda-ffi/src/cuda-residual-norm.test.ts": 28,
};

/** A file's listed duration in seconds, 0 when not listed. */
export function listedSeconds(root: string, moduleId: string): number {
  return SECONDS[relative(root, moduleId).split("\\").join("/")] ?? 0;
}

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = await super.sort(files);
    const root = this.ctx.config.root;
    // Array.prototype.sort is stable: files with equal (or no) listed durations keep vitest's order.
    return ordered.sort((a, b) => listedSeconds(root, b.moduleId) - listedSeconds(root, a.moduleId));
  }
}
