import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import { type Model, loadModel } from "../load-model";

let path: string;
beforeAll(async () => {
  path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
});

const prompt = (count: number, start: number) => Array.from({ length: count }, (_, i) => start + ((i * 7919) % 5000));

/** Greedy tokens of each prompt generated alone, on a fresh model. */
async function alone(prompts: number[][], maxTokens: number): Promise<number[][]> {
  const model = loadModel(path);
  const results: number[][] = [];
  for (const p of prompts) results.push([...(await model.complete(p, { temperature: 0, maxTokens })).tokens]);
  model.dispose();
  return results;
}

describe("InferenceEngine", () => {
  it("runs concurrent greedy requests in shared batched steps, each giving the tokens it gives alone", async () => {
    const prompts = [prompt(5, 1000), prompt(40, 2000), prompt(17, 3000), prompt(70, 4000)];
    const expected = await alone(prompts, 12);
    const model = loadModel(path);
    const results = await Promise.all(prompts.map((p) => model.complete(p, { temperature: 0, maxTokens: 12 })));
    expect(results.map((r) => [...r.tokens])).toEqual(expected);
    const { steps, evaluatedTokens } = model.engine.statistics;
    // Alone: every token is its own step for decode. Batched: far fewer steps than tokens.
    expect(evaluatedTokens).toBe(prompts.reduce((sum, p) => sum + p.length, 0) + 4 * 11);
    expect(steps).toBeLessThan(4 * 11);
    expect(model.engine.pool.usedBlocks).toBe(0);
    model.dispose();
  });

  it("shares a common 200-token prefix: fewer blocks, and the second prefill skips the shared part", async () => {
    const shared = prompt(200, 5000);
    const run = async (second: number[]) => {
      const model = loadModel(path, { kvCacheTokens: 1024 });
      const first = model.generate([...shared, 11, 12, 13], { temperature: 0, maxTokens: 4 });
      let peak = 0;
      const firstDone = (async () => {
        for await (const _ of first) peak = Math.max(peak, model.engine.pool.usedBlocks);
        return first.result;
      })();
      await firstDone;
      // The second request runs while the first's blocks are still cached (not evicted).
      const before = model.engine.statistics.evaluatedTokens;
      const result = await model.complete(second, { temperature: 0, maxTokens: 4 });
      const evaluated = model.engine.statistics.evaluatedTokens - before;
      const blocks = model.engine.pool.usedBlocks + model.engine.pool.cachedBlocks;
      model.dispose();
      return { result, evaluated, blocks };
    };
    const withShared = await run([...shared, 21, 22, 23]);
    const without = await run([...prompt(200, 9000), 21, 22, 23]);
    // 200 shared tokens = 12 full blocks of 16 (192 tokens) found in the prefix cache.
    expect(withShared.result.usage.cachedPromptTokens).toBe(192);
    expect(without.result.usage.cachedPromptTokens).toBe(0);
    expect(withShared.evaluated).toBe(203 - 192 + 3);
    expect(without.evaluated).toBe(203 + 3);
    expect(withShared.blocks).toBeLessThan(without.blocks);
    expect(withShared.blocks).toBe(without.blocks - 12);
  });

  it("preempts and recomputes when the pool is too small for every request, and still completes each one correctly", async () => {
    const prompts = [prompt(30, 1500), prompt(30, 2500), prompt(30, 3500), prompt(30, 4500)];
    const expected = await alone(prompts, 20);
    // 96 tokens of pool for 4 × 50 tokens of sequences.
    const model = loadModel(path, { kvCacheTokens: 96 });
    const results = await Promise.all(prompts.map((p) => model.complete(p, { temperature: 0, maxTokens: 20 })));
    expect(results.map((r) => [...r.tokens])).toEqual(expected);
    expect(model.engine.statistics.preemptions).toBeGreaterThan(0);
    expect(model.engine.pool.usedBlocks).toBe(0);
    model.dispose();
  });

  it("an abort frees the sequence's blocks while the others continue", async () => {
    const model = loadModel(path);
    const controller = new AbortController();
    const aborted = model.generate(prompt(60, 1200), { temperature: 0, maxTokens: 40, signal: controller.signal });
    const other = model.complete(prompt(20, 2200), { temperature: 0, maxTokens: 30 });
    let seen = 0;
    for await (const chunk of aborted) {
      if (chunk.token !== undefined && ++seen === 2) {
        expect(model.engine.pool.usedBlocks).toBeGreaterThan(0);
        controller.abort();
      }
    }
    expect((await aborted.result).finishReason).toBe("abort");
    const result = await other;
    expect(result.tokens.length).toBe(30);
    expect(model.engine.pool.usedBlocks).toBe(0);
    model.dispose();
  });

  it("writes a sequence's logits into one array it reuses, with the values a fresh forward gives", async () => {
    const model = loadModel(path);
    const sequence = model.engine.createSequence(64);
    const tokens = prompt(9, 1000);
    const first = await sequence.evaluate(tokens.slice(0, 8));
    const firstCopy = Float32Array.from(first!);
    const second = await sequence.evaluate(tokens.slice(8));
    expect(second, "the same array, overwritten").toBe(first);
    // the values are the model's own: compare with forwards on a fresh cache
    const cache = model.createCache(64);
    expect(Float32Array.from(model.forward(tokens.slice(0, 8), cache))).toEqual(firstCopy);
    expect(Float32Array.from(model.forward(tokens.slice(8), cache))).toEqual(second);
    cache.dispose();
    sequence.release();
    model.dispose();
  });

  it("rejects a request larger than the whole pool with a named error", async () => {
    const model: Model = loadModel(path, { kvCacheTokens: 32 });
    expect(() => model.generate(prompt(40, 1000), { maxTokens: 4 })).toThrow(/KV cache full: 44 tokens needed, KV pool size 32/);
    model.dispose();
  });
});
