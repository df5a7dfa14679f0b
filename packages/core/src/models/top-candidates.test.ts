import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import { TOP_K_ROWS_MAX } from "../backend";
import { logSumExp } from "../evaluation";
import type { GenerateOptions } from "../generation/generation-options";
import { type Model, loadModel } from "../load-model";
import { ReferenceBackend } from "../reference-backend";
import { countingBackend } from "../testing/counting-backend";
import { expectStepsClose, generationSteps } from "../testing/generation-steps";
import { f32LogSoftmaxAt } from "../testing/f32-log-softmax";
import { HostTopK } from "../top-candidates";
import type { BatchEntry } from "./qwen3";

function tokens(count: number, seed = 1000): Int32Array {
  return Int32Array.from({ length: count }, (_, i) => (seed + i * 7919) % 150000);
}

/** The k best of `logits` by a plain sort (descending, -0 equal to +0, equal logits by ascending id): Backend.topKRows's contract. */
function bestByPlainSort(logits: Float32Array, k: number): { ids: number[]; bits: number[] } {
  const order = Array.from(logits.keys()).sort((a, b) => (logits[a]! === logits[b]! ? a - b : logits[b]! - logits[a]!));
  const ids = order.slice(0, k);
  const bits = new Uint32Array(logits.buffer, logits.byteOffset, logits.length);
  return { ids, bits: ids.map((id) => bits[id]!) };
}

const bitsOf = (values: Float32Array) => Array.from(new Uint32Array(values.buffer, values.byteOffset, values.length));

/** The reference backend counting the floats read back and the rows of topKRows; without topKRows when `withTopK` is false. */
function countingReference(withTopK: boolean) {
  const inner = new ReferenceBackend();
  return countingBackend(inner, { topKRows: withTopK ? inner.topKRows.bind(inner) : undefined });
}

describe("sampling from the best candidates (BatchEntry.top, evaluateTop)", () => {
  let path: string;
  beforeAll(async () => {
    path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
  });

  it("HostTopK (the reference backend's topKRows) keeps the sampler's order: ties by id, -0 equal to +0, exact bits", () => {
    const columns = 300;
    const rows = 3;
    const logits = Float32Array.from({ length: rows * columns }, (_, i) => [0.5, -0, 0, 1, -Infinity, 2][(i * 7) % 6]! + (i % 97 === 0 ? 3 : 0));
    for (const k of [1, 17, columns]) {
      const ids = new Int32Array(rows * k);
      const values = new Float32Array(rows * k);
      new HostTopK().rows(ids, values, logits, 0, rows, columns, k);
      for (let r = 0; r < rows; r++) {
        const expected = bestByPlainSort(logits.subarray(r * columns, (r + 1) * columns), k);
        expect(Array.from(ids.subarray(r * k, (r + 1) * k))).toEqual(expected.ids);
        expect(bitsOf(values.subarray(r * k, (r + 1) * k))).toEqual(expected.bits);
      }
    }
    const backend = new ReferenceBackend();
    const buffer = backend.allocate(2 * columns);
    expect(() => backend.topKRows(new Int32Array(5), new Float32Array(5), buffer, 2, columns, 0)).toThrow(/k from 1 to 300, got 0/);
    expect(() => backend.topKRows(new Int32Array(5), new Float32Array(5), buffer, 2, columns, 301)).toThrow(/got 301/);
    expect(() => backend.topKRows(new Int32Array(5), new Float32Array(5), buffer, 2, columns, 3)).toThrow(/top-3 of 2 rows into arrays of 5 ids/);
    expect(() => backend.topKRows(new Int32Array(9), new Float32Array(9), buffer, 3, columns, 3)).toThrow(/outside logits/);
    const wide = backend.allocate(2000);
    expect(() => backend.topKRows(new Int32Array(2000), new Float32Array(2000), wide, 1, 2000, TOP_K_ROWS_MAX + 1)).toThrow(/k from 1 to 1024/);
  });

  for (const withTopK of [true, false]) {
    it(`gives each top entry its k best in a mixed batch ${withTopK ? "with" : "without"} Backend.topKRows, other entries unchanged`, () => {
      const backend = countingReference(withTopK);
      const model = loadModel(path, { backend });
      const plain = loadModel(path, { backend: new ReferenceBackend() });
      const vocabulary = model.vocabularySize;
      const ks = [40, 0, 7, TOP_K_ROWS_MAX]; // entry 1 asks for logits
      const run = (m: Model, top: boolean) => {
        const pool = m.createKVPool(64, { blockTokens: 4 });
        const caches = [tokens(5, 1), tokens(7, 2), tokens(3, 3), tokens(4, 4)].map((prompt) => {
          const cache = pool.createSequence(64);
          m.forward(prompt, cache, { logits: [] });
          return cache;
        });
        const steps: { ids: number[]; bits: number[] }[][] = [];
        const kept: Float32Array[] = [];
        for (let step = 0; step < 3; step++) {
          const slots = ks.map((k) => (k > 0 ? { ids: new Int32Array(k), logits: new Float32Array(k) } : undefined));
          const entries: BatchEntry[] = caches.map((cache, i) => {
            const input = i === 1 && step === 1 ? Int32Array.of(11 + step, 5) : Int32Array.of(11 * (i + 1) + step);
            return top && slots[i] ? { tokens: input, cache, top: slots[i]! } : { tokens: input, cache };
          });
          const results = m.transformer.forwardBatch(entries);
          steps.push(
            results.map((logits, i) => {
              if (top && slots[i]) {
                expect(logits.length).toBe(0);
                return { ids: Array.from(slots[i]!.ids), bits: bitsOf(slots[i]!.logits) };
              }
              expect(logits.length).toBe(vocabulary);
              if (i === 1) kept.push(logits);
              return ks[i]! > 0 ? bestByPlainSort(logits, ks[i]!) : { ids: [], bits: [] };
            }),
          );
        }
        return { steps, kept };
      };
      const expected = run(plain, false);
      const before = { ...backend.counts };
      const actual = run(model, true);
      expect(actual.steps).toEqual(expected.steps);
      for (let i = 0; i < expected.kept.length; i++) expect(bitsOf(actual.kept[i]!)).toEqual(bitsOf(expected.kept[i]!));
      const read = backend.counts.floatsRead - before.floatsRead;
      if (withTopK) {
        // 3 steps of 4 rows through topKRows (the whole chunk at the largest k); only entry 1's logits came back
        expect(backend.counts.rowsPicked - before.rowsPicked).toBe(12);
        expect(read).toBe(3 * vocabulary);
      } else {
        expect(read).toBe(4 * 3 * vocabulary); // every row's logits, picked on the host
      }
    });
  }

  it("refuses a top entry that also asks for logits or greedy, or holds a bad k", () => {
    const model = loadModel(path, { backend: new ReferenceBackend() });
    const cache = model.createCache(8);
    const top = (k: number, values = k) => ({ ids: new Int32Array(k), logits: new Float32Array(values) });
    const one = Int32Array.of(1);
    expect(() => model.transformer.forwardBatch([{ tokens: one, cache, logits: "all", top: top(4) }])).toThrow(/top-candidates batch entry takes neither/);
    expect(() => model.transformer.forwardBatch([{ tokens: one, cache, greedy: new Int32Array(1), top: top(4) }])).toThrow(/top-candidates batch entry takes neither/);
    expect(() => model.transformer.forwardBatch([{ tokens: one, cache, top: top(0) }])).toThrow(/holds 0 ids and 0 logits/);
    expect(() => model.transformer.forwardBatch([{ tokens: one, cache, top: top(4, 5) }])).toThrow(/holds 4 ids and 5 logits/);
    expect(() => model.transformer.forwardBatch([{ tokens: one, cache, top: top(TOP_K_ROWS_MAX + 1) }])).toThrow(RangeError);
    expect(cache.length).toBe(0); // nothing ran
  });

  it("engine sequences evaluate to their best candidates, and generate samples from them the tokens of the whole-logits path", async () => {
    const backend = countingReference(true);
    const model = loadModel(path, { backend });
    const plain = loadModel(path, { backend: new ReferenceBackend() });
    const sequence = model.engine.createSequence(64);
    const reference = plain.engine.createSequence(64);
    let top = await sequence.evaluateTop(Array.from(tokens(6)), 40);
    let logits = await reference.evaluate(Array.from(tokens(6)));
    for (let step = 0; step < 3; step++) {
      const expected = bestByPlainSort(logits!, 40);
      expect(Array.from(top!.ids)).toEqual(expected.ids);
      expect(bitsOf(top!.logits)).toEqual(expected.bits);
      const next = expected.ids[step]!;
      top = await sequence.evaluateTop([next], step === 2 ? 5 : 40);
      logits = await reference.evaluate([next]);
    }
    expect(top!.ids.length).toBe(5);
    await expect(sequence.evaluateTop([1], 0)).rejects.toThrow(/from 1 to 1024, got 0/);
    sequence.release();
    reference.release();

    const prompt = Array.from(tokens(5, 77));
    const chains = [
      { seed: 5, maxTokens: 12 }, // llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05
      { seed: 6, maxTokens: 12, temperature: 1.5, topK: 200, topP: 1, minP: 0 },
      { seed: 7, maxTokens: 12, temperature: 1.1, topK: 30, typicalP: 0.8, xtc: { probability: 0.5, threshold: 0.1 } },
    ];
    for (const options of chains) {
      const before = backend.counts.floatsRead;
      const fast = await model.complete(prompt, options);
      expect(backend.counts.floatsRead - before).toBe(0); // no logits came back
      const whole = await plain.complete(prompt, { ...options, logitBias: { 0: 0 } }); // a logit bias (of 0): the sampler's path on the whole logits
      expect(fast.tokens).toEqual(whole.tokens);
      expect(fast.tokens.length).toBe(12);
    }
    const withPenalty = backend.counts.floatsRead;
    await model.complete(prompt, { seed: 5, maxTokens: 2, repeatPenalty: 1.2 });
    expect(backend.counts.floatsRead).toBeGreaterThan(withPenalty); // a penalty needs the logits
  });

  it("a top entry's logSumExp: in double on the host, else through Backend.logSoftmaxAt at its best candidate with the batch's scored rows", () => {
    const [inner, other] = [new ReferenceBackend(), new ReferenceBackend()];
    const backends = {
      host: countingBackend(new ReferenceBackend(), {}), // topKRows, no logSoftmaxAt: the rows come back
      device: countingBackend(inner, { topKRows: inner.topKRows.bind(inner), logSoftmaxAt: f32LogSoftmaxAt(inner) }),
      hostTopK: countingBackend(other, { topKRows: undefined, logSoftmaxAt: f32LogSoftmaxAt(other) }),
    };
    const plain = loadModel(path, { backend: new ReferenceBackend() });
    const vocabulary = plain.vocabularySize;
    const prompts = [tokens(5, 1), tokens(7, 2), tokens(3, 3)];
    // the expected: each entry's last row's logits, whole
    const plainPool = plain.createKVPool(64, { blockTokens: 4 });
    const rows = prompts.map((prompt) => plain.forward(prompt, plainPool.createSequence(64)));
    for (const [name, backend] of Object.entries(backends)) {
      const model = loadModel(path, { backend });
      const pool = model.createKVPool(64, { blockTokens: 4 });
      const tops = [3, 0, 40].map((k) => (k > 0 ? { ids: new Int32Array(k), logits: new Float32Array(k), logSumExp: new Float64Array(1) } : undefined));
      const scoring = { targets: Int32Array.of(4242), out: new Float64Array(1) };
      const entries: BatchEntry[] = prompts.map((prompt, i) => {
        const cache = pool.createSequence(64);
        return tops[i] ? { tokens: prompt, cache, top: tops[i]! } : { tokens: prompt, cache, logits: "last", logprobs: scoring };
      });
      const before = { ...backend.counts };
      model.transformer.forwardBatch(entries);
      const read = backend.counts.floatsRead - before.floatsRead;
      for (const i of [0, 2]) {
        const top = tops[i]!;
        expect(Array.from(top.ids), name).toEqual(bestByPlainSort(rows[i]!, top.ids.length).ids);
        const exact = logSumExp(rows[i]!);
        if (name === "device") expect(Math.abs(top.logSumExp[0]! - exact), name).toBeLessThan(1e-5 * Math.max(1, Math.abs(exact)));
        else expect(top.logSumExp[0], name).toBe(exact);
      }
      const score = rows[1]![4242]! - logSumExp(rows[1]!);
      expect(Math.abs(scoring.out[0]! - score), name).toBeLessThan(1e-5 * Math.max(1, Math.abs(score)));
      if (name === "device") {
        expect(read).toBe(0); // nothing but candidates and one float per row
        expect(backend.counts.rowsPicked - before.rowsPicked).toBe(3 + 3); // topKRows and one logSoftmaxAt over the 3 rows
        expect(tops[0]!.logSumExp[0]).not.toBe(logSumExp(rows[0]!)); // the f32 sums, not the host's
      } else if (name === "host") {
        expect(read).toBe(3 * vocabulary); // every row for its log Σ exp or its score
      } else {
        expect(read).toBe(2 * vocabulary); // the top rows, picked on the host; the scored row stays
      }
    }
    const cache = plain.createCache(8);
    expect(() => plain.transformer.forwardBatch([{ tokens: Int32Array.of(1), cache, top: { ids: new Int32Array(2), logits: new Float32Array(2), logSumExp: new Float64Array(0) } }])).toThrow(
      /logSumExp array is empty/,
    );
  });

  it("generate with logprobs takes its candidates and log Σ exp where the logits are: the logprobs of the whole-logits path", async () => {
    const inner = new ReferenceBackend();
    const device = countingBackend(inner, { logSoftmaxAt: f32LogSoftmaxAt(inner) });
    const model = loadModel(path, { backend: device });
    const host = loadModel(path, { backend: new ReferenceBackend() }); // host top-k and log Σ exp
    const plain = loadModel(path, { backend: new ReferenceBackend() });
    const prompt = Array.from(tokens(5, 77));
    const chains: GenerateOptions[] = [
      { temperature: 0, maxTokens: 8, logprobs: true, topLogprobs: 5 }, // greedy: the best candidate
      { seed: 5, maxTokens: 8, logprobs: true }, // llama.cpp's defaults, top-k 40
      { seed: 6, maxTokens: 8, logprobs: true, topLogprobs: 12, temperature: 1.5, topK: 4, minP: 0 }, // more top logprobs than top-k keeps
      { seed: 7, maxTokens: 8, logprobs: true, topLogprobs: 20, temperature: 1.1, topK: 30, typicalP: 0.8, xtc: { probability: 0.5, threshold: 0.1 } },
    ];
    for (const options of chains) {
      const whole = await generationSteps(plain, prompt, { ...options, logitBias: { 0: 0 } }); // a logit bias (of 0): the whole logits every step
      expect(whole.length).toBe(8);
      expect(await generationSteps(host, prompt, options)).toEqual(whole); // the same numbers, exactly
      const before = device.counts.floatsRead;
      const steps = await generationSteps(model, prompt, options);
      expect(device.counts.floatsRead - before).toBe(0); // no logits came back
      expectStepsClose(steps, whole, 1e-5);
      for (const step of steps) expect(step.top.length).toBe(options.topLogprobs ?? 0);
    }
  });
});
