import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import type { KVCache } from "../kv-cache";
import { type Model, loadModel } from "../load-model";
import { ReferenceBackend } from "../reference-backend";
import { firstDifference } from "../testing/backend-pair";
import { type RecordingBackend, recordingBackend } from "../testing/recording-backend";

function tokens(count: number, seed = 1000): Int32Array {
  return Int32Array.from({ length: count }, (_, i) => (seed + i * 7919) % 150000);
}

describe("decode steps recorded as backend graphs", () => {
  let path: string;
  beforeAll(async () => {
    path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
  });

  it("replay the same logits as op-by-op decode while batches change size and block tables grow", () => {
    const backend = recordingBackend(new ReferenceBackend());
    const recorded = loadModel(path, { backend });
    const plain = loadModel(path, { backend: new ReferenceBackend() });
    expect(recorded.transformer.recordsDecodeGraphs).toBe(true);
    expect(plain.transformer.recordsDecodeGraphs).toBe(false); // the reference backend records no graphs
    expect(loadModel(path, { backend: recordingBackend(new ReferenceBackend()), decodeGraphs: false }).transformer.recordsDecodeGraphs).toBe(false);

    const run = (model: Model) => {
      const pool = model.createKVPool(96, { type: "f16", blockTokens: 4 });
      const prompts = [tokens(3, 11), tokens(6, 22), tokens(9, 33)];
      const caches = prompts.map(() => pool.createSequence(96));
      const logits: Float32Array[] = [];
      prompts.forEach((prompt, i) => logits.push(model.transformer.forward(prompt, caches[i]!)));
      // 14 steps: all three, then only the first two (another batch size), then all three again;
      // the sequences cross block boundaries (4 tokens) so their tables widen 2 → 4 → 8 blocks.
      for (let step = 0; step < 14; step++) {
        const active: KVCache[] = step >= 5 && step < 9 ? caches.slice(0, 2) : caches;
        const batch = active.map((cache, i) => ({ tokens: Int32Array.of((step * 31 + i * 17 + 5) % 150000), cache }));
        logits.push(...model.transformer.forwardBatch(batch));
      }
      return logits;
    };
    const expected = run(plain);
    const actual = run(recorded);
    expect(actual.length).toBe(expected.length);
    for (let i = 0; i < expected.length; i++) expect(firstDifference(actual[i]!, expected[i]!), `first differing logit of step ${i}`).toBe(-1);
    // Every decode step replayed a graph, and graphs were reused: batch sizes 3 and 2 at table
    // widths 4 and 8 blocks (prompts of 3..9 tokens and 14 steps reach 6 blocks), not one per step.
    expect(backend.replays).toBe(14);
    expect(backend.recordings).toBeGreaterThanOrEqual(2);
    expect(backend.recordings).toBeLessThanOrEqual(5);
  });

  it("keep at most 32 graphs, dropping the least recently used, and record a dropped one again when needed", () => {
    const backend = recordingBackend(new ReferenceBackend());
    const model = loadModel(path, { backend });
    // 33 KV pools: 33 keys (a graph belongs to its pool's storage)
    const caches = Array.from({ length: 33 }, () => model.createKVPool(16, { blockTokens: 16 }).createSequence(16));
    for (const cache of caches) model.transformer.forward(Int32Array.of(6, 7), cache); // prefill (2 rows): no graph
    for (const cache of caches.slice(0, 32)) model.transformer.forward(Int32Array.of(8), cache);
    expect([backend.recordings, backend.disposals]).toEqual([32, 0]);
    model.transformer.forward(Int32Array.of(9), caches[0]!); // pool 0 used again: now the most recent
    model.transformer.forward(Int32Array.of(8), caches[32]!); // the 33rd: pool 1's graph (least recent) goes
    expect([backend.recordings, backend.disposals, backend.replays]).toEqual([33, 1, 34]);
    model.transformer.forward(Int32Array.of(9), caches[1]!); // recorded again (and pool 2's goes)
    expect([backend.recordings, backend.disposals, backend.replays]).toEqual([34, 2, 35]);
    model.transformer.forward(Int32Array.of(10), caches[0]!); // still there
    expect(backend.recordings).toBe(34);
    model.transformer.releaseDecodeGraphs();
    expect(backend.disposals).toBe(34);
  });

  it("record the LM head in a step that wants every row's logits (not computed again after the replay), and not in one that wants none", () => {
    const inner = new ReferenceBackend();
    const backend = recordingBackend(inner);
    const model = loadModel(path, { backend });
    const plain = loadModel(path, { backend: new ReferenceBackend() });
    // LM head matmuls run on the inner backend: recorded ones at each replay, eager ones at once
    let heads = 0;
    const matmul = inner.matmul.bind(inner);
    inner.matmul = (out, x, weight, rows) => {
      if (weight.shape[1] === model.vocabularySize) heads++;
      matmul(out, x, weight, rows);
    };
    const run = (m: Model, counted: boolean) => {
      const pool = m.createKVPool(4, { blockTokens: 16 }); // one block a sequence: one table width throughout
      const caches = [pool.createSequence(16), pool.createSequence(16)];
      caches.forEach((cache, i) => m.transformer.forward(tokens(3, 40 + i), cache));
      const logits: Float32Array[] = [];
      const step = (k: number, wanted: "last" | []) => {
        const before = heads;
        const out = m.transformer.forwardBatch(caches.map((cache, i) => ({ tokens: Int32Array.of(100 + 10 * k + i), cache, logits: wanted })));
        if (wanted === "last") logits.push(...out);
        return heads - before;
      };
      const counts = [step(0, "last"), step(1, "last"), step(2, []), step(3, []), step(4, "last")];
      if (counted) {
        // once per step that wants logits (in the graph), never for the steps that want none
        expect(counts).toEqual([1, 1, 0, 0, 1]);
        // the steps without logits replay a graph of their own; the last step the first one's again
        expect(backend.recordings).toBe(2);
        expect(backend.replays).toBe(5);
      }
      return logits;
    };
    const actual = run(model, true);
    const expected = run(plain, false);
    for (let i = 0; i < expected.length; i++) expect(firstDifference(actual[i]!, expected[i]!), `logits ${i}`).toBe(-1);
  });

  it("reports a bad token of a replayed step as op-by-op decode does", () => {
    const model = loadModel(path, { backend: recordingBackend(new ReferenceBackend()) });
    const cache = model.createKVPool(32, { blockTokens: 4 }).createSequence(32);
    model.transformer.forward(tokens(3), cache);
    model.transformer.forward(Int32Array.of(5), cache); // records and replays the step
    expect(() => model.transformer.forward(Int32Array.of(model.vocabularySize + 3), cache)).toThrow(/token/);
  });

  it("are not used for MoE models (routing reads back to the host)", async () => {
    const moe = loadModel(await syntheticModelFile(resolveOptions("tiny-moe", { weightType: "q8_0" })), { backend: recordingBackend(new ReferenceBackend()) });
    expect(moe.transformer.recordsDecodeGraphs).toBe(false);
    const cache = moe.createCache(16);
    moe.transformer.forward(tokens(3), cache);
    expect(moe.transformer.forward(Int32Array.of(9), cache).length).toBe(moe.vocabularySize);
  });
});
