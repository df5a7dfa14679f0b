/**
 * Batch invariance on the native CPU backend: concurrent greedy requests, decoded together in
 * batched steps (matrix-matrix work on the weights, per-sequence paged attention), give the tokens
 * each gives alone — up to the first near-tie (top-1/top-2 logit margin < MARGIN_BOUND), where a
 * different row count in the matmul may legitimately flip the choice. KV in f16 (the default) and q8_0.
 */
import { type KVType, loadModel } from "@memra/core";
import { MARGIN_BOUND } from "@memra/core/internal";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { CpuBackend } from "./cpu-backend";
import { nativeLibraryUnavailableReason } from "./native-availability";

const unavailable = nativeLibraryUnavailableReason();

function topTwo(row: Float32Array): { best: number; margin: number } {
  let best = 0;
  let second = -Infinity;
  for (let i = 1; i < row.length; i++) {
    if (row[i]! > row[best]!) {
      second = row[best]!;
      best = i;
    } else if (row[i]! > second) second = row[i]!;
  }
  return { best, margin: row[best]! - second };
}

describe.skipIf(unavailable !== undefined)("batched decode on the cpu backend", () => {
  for (const kvType of ["f16", "q8_0"] as KVType[]) {
    it(`8 concurrent greedy requests give the tokens each gives alone, up to a near-tie (KV ${kvType})`, async () => {
      const path = await syntheticModelFile(resolveOptions("small", { weightType: "q8_0" }));
      using backend = CpuBackend.create({ threads: 2 });
      const model = loadModel(path, { backend, kvType, maxSequences: 8 });
      const prompts = Array.from({ length: 8 }, (_, s) => Array.from({ length: 5 + s * 9 }, (_, i) => 1000 + ((s * 7919 + i * 104729) % 60000)));
      const steps = 16;
      // Alone: one sequence at a time, recording every step's margin.
      const alone = prompts.map((prompt) => {
        const cache = model.createCache(prompt.length + steps);
        let logits = model.forward(prompt, cache);
        const tokens: number[] = [];
        const margins: number[] = [];
        for (let step = 0; step < steps; step++) {
          const { best, margin } = topTwo(logits);
          tokens.push(best);
          margins.push(margin);
          logits = model.forward([best], cache);
        }
        return { tokens, margins };
      });
      const together = await Promise.all(prompts.map((prompt) => model.complete(prompt, { temperature: 0, maxTokens: steps })));
      expect(model.engine.statistics.steps).toBeLessThan(8 * steps); // the decodes really ran batched
      let compared = 0;
      for (let s = 0; s < prompts.length; s++) {
        const firstTie = alone[s]!.margins.findIndex((margin) => margin < MARGIN_BOUND);
        const decided = firstTie < 0 ? steps : firstTie; // from the tie step on, the choice may flip
        const got = [...together[s]!.tokens];
        const end = Math.min(decided, got.length);
        expect(got.slice(0, end), `sequence ${s}`).toEqual(alone[s]!.tokens.slice(0, end));
        compared += end;
      }
      expect(compared).toBeGreaterThan(8 * steps * 0.5);
      model.dispose();
    }, 120_000);
  }
});
