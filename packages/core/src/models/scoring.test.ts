import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import { TOP_K_ROWS_MAX } from "../backend";
import { computeLogprobs, computePerplexity, logSumExp, topLogprobs } from "../evaluation";
import { loadModel } from "../load-model";
import { ReferenceBackend } from "../reference-backend";
import { countingBackend } from "../testing/counting-backend";
import { f32LogSoftmaxAt } from "../testing/f32-log-softmax";

function tokens(count: number, seed = 1000): number[] {
  return Array.from({ length: count }, (_, i) => (seed + i * 7919) % 150000);
}

/** The reference backend with an f32 Backend.logSoftmaxAt, counting floats read back and rows scored. */
function scoringBackend() {
  const inner = new ReferenceBackend();
  return countingBackend(inner, { logSoftmaxAt: f32LogSoftmaxAt(inner) });
}

describe("scoring next tokens where the logits are (BatchEntry.logprobs, forwardLogprobs, computePerplexity)", () => {
  let path: string;
  beforeAll(async () => {
    path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
  });

  it("forwardLogprobs gives log-softmax at the targets of forward's logits rows, in double precision on the host, across chunks", () => {
    const model = loadModel(path, { backend: new ReferenceBackend(), maxBatchTokens: 8 });
    const plain = loadModel(path, { backend: new ReferenceBackend() });
    const input = tokens(20);
    const rows = [0, 3, 7, 8, 15, 19]; // three chunks of at most 8
    const targets = Int32Array.from(rows, (r) => (r * 1013) % model.vocabularySize);
    const cache = model.createCache(32);
    const scores = model.forwardLogprobs(input, cache, rows, targets);
    expect(cache.length).toBe(20);
    const logits = plain.forward(input, plain.createCache(32), { logits: rows });
    const vocabulary = plain.vocabularySize;
    rows.forEach((_, i) => {
      const row = logits.subarray(i * vocabulary, (i + 1) * vocabulary);
      expect(scores[i]).toBe(row[targets[i]!]! - logSumExp(row));
    });
  });

  it("takes Backend.logSoftmaxAt where the backend has it: one float per scored row comes back", () => {
    const backend = scoringBackend();
    const model = loadModel(path, { backend });
    const plain = loadModel(path, { backend: new ReferenceBackend() });
    const input = tokens(12, 5);
    const rows = [2, 5, 11];
    const targets = Int32Array.of(17, 150_000, 4242);
    const before = backend.counts.floatsRead;
    const scores = model.forwardLogprobs(input, model.createCache(16), rows, targets);
    expect(backend.counts.floatsRead - before).toBe(0);
    expect(backend.counts.rowsPicked).toBe(3);
    const expected = plain.forwardLogprobs(input, plain.createCache(16), rows, targets);
    for (let i = 0; i < rows.length; i++) expect(Math.abs(scores[i]! - expected[i]!)).toBeLessThan(1e-5);
    expect(Array.from(scores)).not.toEqual(Array.from(expected)); // the f32 path, not the host's
  });

  it("computePerplexity equals llama.cpp's definition over forward's logits, on the host and through logSoftmaxAt", () => {
    const input = tokens(3 * 24 + 5, 11);
    const context = 24;
    const model = loadModel(path, { backend: new ReferenceBackend(), maxBatchTokens: 16 });
    const result = computePerplexity(model, input, context);
    // the definition, from whole logits: windows from an empty cache, the second half scored
    let nll = 0;
    let scored = 0;
    for (let w = 0; w < 3; w++) {
      const window = input.slice(w * context, (w + 1) * context);
      const logits = model.forward(window, model.createCache(context), { logits: "all" });
      for (let j = context / 2; j < context - 1; j++) {
        const row = logits.subarray(j * model.vocabularySize, (j + 1) * model.vocabularySize);
        nll += logSumExp(row) - row[window[j + 1]!]!;
        scored++;
      }
    }
    expect(result.scoredTokens).toBe(scored);
    expect(result.perplexity).toBe(Math.exp(nll / scored));
    const onBackend = computePerplexity(loadModel(path, { backend: scoringBackend(), maxBatchTokens: 16 }), input, context);
    expect(Math.abs(onBackend.perplexity / result.perplexity - 1)).toBeLessThan(1e-5); // per-row f32 log-probabilities within 1e-5
  });

  it("computeLogprobs takes every row's best candidates and log Σ exp where the logits are: topLogprobs of forward's logits", () => {
    const input = tokens(20, 9);
    const plain = loadModel(path, { backend: new ReferenceBackend() });
    const logits = plain.forward(input, plain.createCache(32), { logits: "all" });
    const vocabulary = plain.vocabularySize;
    const expected = (k: number) => input.map((_, r) => topLogprobs(logits.subarray(r * vocabulary, (r + 1) * vocabulary), k));
    // on the host (the reference backend: top-k on the host from each row, log Σ exp in double), across chunks of 8
    const onHost = computeLogprobs(loadModel(path, { backend: new ReferenceBackend(), maxBatchTokens: 8 }), input, 5);
    expect(onHost.positions.map((position) => position.top)).toEqual(expected(5));
    // through topKRows and an f32 logSoftmaxAt: the same candidates, logprobs within 1e-5, no logits back
    const inner = new ReferenceBackend();
    const backend = countingBackend(inner, { topKRows: inner.topKRows.bind(inner), logSoftmaxAt: f32LogSoftmaxAt(inner) });
    const before = backend.counts.floatsRead;
    const onBackend = computeLogprobs(loadModel(path, { backend, maxBatchTokens: 8 }), input, 5);
    expect(backend.counts.floatsRead - before).toBe(0);
    expect(backend.counts.rowsPicked).toBe(2 * 20); // every row through topKRows and logSoftmaxAt
    onBackend.positions.forEach((position, r) => {
      const reference = expected(5)[r]!;
      expect(position.top.map((top) => top.id)).toEqual(reference.map((top) => top.id));
      position.top.forEach((top, j) => expect(Math.abs(top.logprob - reference[j]!.logprob)).toBeLessThan(1e-5 * Math.max(1, Math.abs(reference[j]!.logprob))));
    });
    // more than TOP_K_ROWS_MAX: the logits, as before
    const wide = computeLogprobs(plain, input.slice(0, 2), TOP_K_ROWS_MAX + 1);
    expect(wide.positions.map((position) => position.top)).toEqual(expected(TOP_K_ROWS_MAX + 1).slice(0, 2));
  });

  it("refuses a tops entry that does not match its requested rows or also asks for output", () => {
    const model = loadModel(path, { backend: new ReferenceBackend() });
    const cache = model.createCache(8);
    const top = () => ({ ids: new Int32Array(3), logits: new Float32Array(3) });
    const two = Int32Array.of(1, 2);
    expect(() => model.transformer.forwardBatch([{ tokens: two, cache, logits: "all", tops: [top()] }])).toThrow(/1 tops for 2 requested rows/);
    expect(() => model.transformer.forwardBatch([{ tokens: two, cache, output: new Float32Array(1), tops: [top()] }])).toThrow(/`tops` takes neither/);
    expect(() => model.transformer.forwardBatch([{ tokens: two, cache, logits: "all", tops: [top(), { ids: new Int32Array(0), logits: new Float32Array(0) }] }])).toThrow(
      /holds 0 ids and 0 logits/,
    );
    expect(cache.length).toBe(0); // nothing ran
  });

  it("refuses a scoring entry with the wrong number of targets, a target outside the vocabulary, or an output array", () => {
    const model = loadModel(path, { backend: new ReferenceBackend() });
    const cache = model.createCache(8);
    const one = Int32Array.of(1, 2);
    const scoring = (targets: number[]) => ({ targets: Int32Array.from(targets), out: new Float64Array(targets.length) });
    expect(() => model.transformer.forwardBatch([{ tokens: one, cache, logits: "all", logprobs: scoring([3]) }])).toThrow(/1 targets and 1 outputs for 2 requested rows/);
    expect(() => model.transformer.forwardBatch([{ tokens: one, cache, logits: "all", logprobs: scoring([3, -1]) }])).toThrow(/target -1 is outside the vocabulary/);
    expect(() => model.transformer.forwardBatch([{ tokens: one, cache, output: new Float32Array(1), logprobs: scoring([3]) }])).toThrow(/scoring batch entry takes neither/);
    expect(() => model.forwardLogprobs([1, 2], cache, [0, 1], [3])).toThrow(/1 targets for 2 rows/);
    expect(cache.length).toBe(0); // nothing ran
  });
});
