import { argmax, isPlainGreedy } from "@memra/sampler";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import type { DeviceBuffer } from "../backend";
import { type Model, loadModel } from "../load-model";
import { ReferenceBackend } from "../reference-backend";
import { countingBackend } from "../testing/counting-backend";

function tokens(count: number, seed = 1000): Int32Array {
  return Int32Array.from({ length: count }, (_, i) => (seed + i * 7919) % 150000);
}

/**
 * The reference backend with Backend.argmaxRows (the sampler's argmax of each row, read where the
 * logits are), counting the floats read back and the rows picked.
 */
function pickingBackend() {
  const inner = new ReferenceBackend();
  return countingBackend(inner, {
    argmaxRows: (out: Int32Array, logits: DeviceBuffer, rows: number, columns: number) => {
      const values = inner.read(logits, 0, rows * columns);
      for (let r = 0; r < rows; r++) out[r] = argmax(values.subarray(r * columns, (r + 1) * columns), columns);
    },
  });
}

describe("greedy decoding on the backend", () => {
  let path: string;
  beforeAll(async () => {
    path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
  });

  for (const withArgmax of [true, false]) {
    it(`picks each greedy entry's argmax in a mixed batch ${withArgmax ? "with" : "without"} Backend.argmaxRows, other entries unchanged`, () => {
      const backend = withArgmax ? pickingBackend() : new ReferenceBackend();
      const model = loadModel(path, { backend });
      const plain = loadModel(path, { backend: new ReferenceBackend() });
      const vocabulary = model.vocabularySize;
      const run = (m: Model, greedy: boolean) => {
        const pool = m.createKVPool(64, { blockTokens: 4 });
        const caches = [tokens(5, 1), tokens(7, 2), tokens(3, 3)].map((prompt) => {
          const cache = pool.createSequence(64);
          m.forward(prompt, cache, { logits: [] });
          return cache;
        });
        const picks: number[] = [];
        const kept: Float32Array[] = [];
        let next = [11, 22, 33];
        for (let step = 0; step < 6; step++) {
          const slots = [new Int32Array(1), undefined, new Int32Array(1)];
          // entry 1 asks for logits throughout (also the 2-token one of step 3: a prefill chunk beside decodes)
          const entries = caches.map((cache, i) => {
            const input = i === 1 && step === 3 ? Int32Array.of(next[i]!, 5) : Int32Array.of(next[i]!);
            return greedy && slots[i] ? { tokens: input, cache, greedy: slots[i]! } : { tokens: input, cache };
          });
          const results = m.transformer.forwardBatch(entries);
          next = results.map((logits, i) => {
            if (greedy && slots[i]) {
              expect(logits.length).toBe(0);
              return slots[i]![0]!;
            }
            expect(logits.length).toBe(vocabulary);
            if (i === 1) kept.push(logits);
            return argmax(logits, vocabulary);
          });
          picks.push(...next);
        }
        return { picks, kept };
      };
      const expected = run(plain, false);
      const actual = run(model, true);
      expect(actual.picks).toEqual(expected.picks);
      for (let i = 0; i < expected.kept.length; i++) expect(Array.from(actual.kept[i]!.subarray(0, 64))).toEqual(Array.from(expected.kept[i]!.subarray(0, 64)));
      if (withArgmax) {
        const { counts } = backend as ReturnType<typeof pickingBackend>;
        // 6 steps of 3 rows picked on the backend; only entry 1's logits came back
        expect(counts.rowsPicked).toBe(18);
        expect(counts.floatsRead).toBe(6 * vocabulary);
      }
    });
  }

  it("forwardGreedy equals the argmax of forward's logits, prompt chunks included", () => {
    const model = loadModel(path, { backend: pickingBackend(), maxBatchTokens: 4 });
    const plain = loadModel(path, { backend: new ReferenceBackend(), maxBatchTokens: 4 });
    const greedyCache = model.createCache(64);
    const logitsCache = plain.createCache(64);
    let a = model.forwardGreedy(tokens(10), greedyCache); // 3 chunks of at most 4
    let b = argmax(plain.forward(tokens(10), logitsCache), plain.vocabularySize);
    for (let step = 0; step < 5; step++) {
      expect(a).toBe(b);
      a = model.forwardGreedy([a], greedyCache);
      b = argmax(plain.forward([b], logitsCache), plain.vocabularySize);
    }
    expect(greedyCache.length).toBe(logitsCache.length);
    expect(() => model.forwardGreedy([], greedyCache)).toThrow(RangeError);
  });

  it("refuses a greedy entry that also asks for logits", () => {
    const model = loadModel(path, { backend: new ReferenceBackend() });
    const cache = model.createCache(8);
    expect(() => model.transformer.forwardBatch([{ tokens: Int32Array.of(1), cache, logits: "all", greedy: new Int32Array(1) }])).toThrow(/greedy batch entry/);
    expect(() => model.transformer.forwardBatch([{ tokens: Int32Array.of(1), cache, greedy: new Int32Array(0) }])).toThrow(RangeError);
    expect(cache.length).toBe(0); // nothing ran
  });

  it("engine sequences evaluate greedily, and generate at temperature 0 picks on the backend with the same tokens", async () => {
    const backend = pickingBackend();
    const model = loadModel(path, { backend });
    const plain = loadModel(path, { backend: new ReferenceBackend() });
    const sequence = model.engine.createSequence(64);
    const reference = plain.engine.createSequence(64);
    let token = await sequence.evaluateGreedy(Array.from(tokens(6)));
    let logits = await reference.evaluate(Array.from(tokens(6)));
    for (let step = 0; step < 4; step++) {
      const expected = argmax(logits!, plain.vocabularySize);
      expect(token).toBe(expected);
      token = await sequence.evaluateGreedy([token!]);
      logits = await reference.evaluate([expected]);
    }
    sequence.release();
    reference.release();

    const prompt = Array.from(tokens(5, 77));
    const before = backend.counts.floatsRead;
    const fast = await model.complete(prompt, { temperature: 0, maxTokens: 8 });
    expect(backend.counts.floatsRead - before).toBe(0); // no logits came back
    const sampled = await plain.complete(prompt, { temperature: 0, maxTokens: 8, logitBias: { 0: 0 } }); // a logit bias (of 0): the sampler's path on the whole logits
    expect(fast.tokens).toEqual(sampled.tokens);
    expect(fast.tokens.length).toBeGreaterThan(0);
    const withBias = backend.counts.floatsRead;
    await model.complete(prompt, { temperature: 0, maxTokens: 2, logitBias: { 5: -1 } });
    expect(backend.counts.floatsRead).toBeGreaterThan(withBias); // a logit bias needs the logits
  });

  it("isPlainGreedy holds only where the sampler's pick is the argmax whatever the history", () => {
    expect(isPlainGreedy({ temperature: 0 })).toBe(true);
    expect(isPlainGreedy({ temperature: 0, topK: 5, topP: 0.5, minP: 0.2 })).toBe(true); // truncation keeps the top token
    expect(isPlainGreedy({})).toBe(false); // temperature 0.8
    expect(isPlainGreedy({ temperature: 0, repeatPenalty: 1.1 })).toBe(false);
    expect(isPlainGreedy({ temperature: 0, presencePenalty: 0.5 })).toBe(false);
    expect(isPlainGreedy({ temperature: 0, logitBias: { 3: 1 } })).toBe(false);
    expect(isPlainGreedy({ temperature: 0, logitBias: new Map() })).toBe(true);
    expect(isPlainGreedy({ temperature: 0, typicalP: 0.9 })).toBe(false);
    expect(isPlainGreedy({ temperature: 0, xtc: { probability: 0.5, threshold: 0.1 } })).toBe(false);
    expect(isPlainGreedy({ temperature: 0, dry: { multiplier: 0.8 } })).toBe(false);
    expect(isPlainGreedy({ temperature: -3 } as never)).toBe(false); // invalid options: the sampler reports them
  });
});
