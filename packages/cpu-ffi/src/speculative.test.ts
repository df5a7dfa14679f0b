/**
 * Speculative decoding on the native CPU backend: the rows of a verification step come from a
 * matrix-matrix product where decoding one token at a time runs matrix-vector products, so the
 * logits may differ in the last bits. Greedy tokens must agree up to the first near-tie (top-1 /
 * top-2 logit margin < MARGIN_BOUND), as batched decode must; a seeded sample the same way.
 */
import { loadModel } from "@memra/core";
import { MARGIN_BOUND } from "@memra/core/internal";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { CpuBackend } from "./cpu-backend";
import { nativeLibraryUnavailableReason } from "./native-availability";

const unavailable = nativeLibraryUnavailableReason();

describe.skipIf(unavailable !== undefined)("speculative decoding on the cpu backend", () => {
  for (const weightType of ["q8_0", "q4_K_M"] as const) {
    it(`ngram drafts keep the greedy tokens up to a near-tie, in fewer steps (${weightType})`, async () => {
      const path = await syntheticModelFile(resolveOptions("small", { weightType }));
      using backend = CpuBackend.create({ threads: 2 });
      const model = loadModel(path, { backend });
      try {
        const prompt = "one two three four one two three four one two three";
        const plain = await model.complete(prompt, { temperature: 0, maxTokens: 64, logprobs: true, topLogprobs: 2 });
        let steps = model.engine.statistics.steps;
        const fast = await model.complete(prompt, { temperature: 0, maxTokens: 64, speculative: { method: "ngram" } });
        steps = model.engine.statistics.steps - steps;
        // The chunks' top logprobs give each step's margin (log-probabilities differ as logits do).
        const stream = model.generate(prompt, { temperature: 0, maxTokens: 64, logprobs: true, topLogprobs: 2 });
        const margins: number[] = [];
        for await (const chunk of stream) if (chunk.topLogprobs) margins.push(chunk.topLogprobs[0]!.logprob - chunk.topLogprobs[1]!.logprob);
        const tie = margins.findIndex((margin) => margin < MARGIN_BOUND);
        const decided = tie < 0 ? plain.tokens.length : tie; // the tie's own pick may flip, the picks before it not
        expect(fast.tokens.slice(0, decided)).toEqual(plain.tokens.slice(0, decided));
        expect(decided).toBeGreaterThan(16);
        expect(fast.speculative!.accepted).toBeGreaterThan(16);
        expect(steps).toBeLessThan(64 - 16);
      } finally {
        model.dispose();
      }
    }, 120_000);
  }
});
