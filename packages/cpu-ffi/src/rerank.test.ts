/**
 * Reranking (Model.rankTokens: the last hidden row after the final norm through the classifier
 * head) on the native CPU backend against llama.cpp's scores (tools/llamacpp/rerank-goldens.mjs),
 * within the golden suite's probability bounds per weight type.
 */
import { loadModel } from "@memra/core";
import { PROBABILITY_BOUNDS, loadRerankGoldens } from "@memra/core/internal";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { CpuBackend } from "./cpu-backend";
import { nativeLibraryUnavailableReason } from "./native-availability";

const unavailable = nativeLibraryUnavailableReason();

describe("reranking on the CPU backend against llama.cpp", () => {
  if (unavailable !== undefined) {
    it.skip(`skipped: ${unavailable}`, () => {});
    return;
  }
  for (const golden of loadRerankGoldens()) {
    it(`scores as llama.cpp does: ${golden.id}`, async () => {
      const model = loadModel(await syntheticModelFile(resolveOptions(golden.preset, golden.options)), { backend: CpuBackend.create({ threads: 2 }) });
      const bound = PROBABILITY_BOUNDS[golden.options.weightType as string]!.max;
      for (const c of golden.cases) expect(Math.abs(model.rankTokens(c.tokens) - c.score), `${c.query} / ${c.document}`).toBeLessThan(bound);
      // Through the engine (all prompts batched together, the shared head from the prefix cache).
      const engine = await model.rankPromptsAsync(golden.cases.map((c) => c.tokens));
      golden.cases.forEach((c, i) => expect(Math.abs(engine[i]! - c.score), `engine: ${c.query} / ${c.document}`).toBeLessThan(bound));
      model.dispose();
    });
  }
});
