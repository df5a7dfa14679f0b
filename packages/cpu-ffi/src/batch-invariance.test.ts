/**
 * Batch invariance of the native CPU backend (CpuBackendOptions.batchInvariant): a row's result
 * does not depend on how many other rows share its matmul or its attention call. Decoding one
 * token, a speculative verification step of several, a batched decode step and a prefill chunk
 * then compute every row with the same arithmetic, so speculative decoding and batched serving
 * give exactly the tokens decoding one sequence one token at a time gives.
 */
import { ReferenceBackend, loadModel } from "@memra/core";
import { ALL_GGML_TYPES, BackendPair, generationSteps, normals, pagedLayout, tensorInfo, weightBytes } from "@memra/core/internal";
import { ggmlTypeInfo, ggmlTypeName } from "@memra/gguf";
import { mulberry32, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CpuBackend } from "./cpu-backend";
import { nativeLibraryUnavailableReason } from "./native-availability";

const unavailable = nativeLibraryUnavailableReason();

/** The first index where a and b differ in their bits, or -1. */
function firstDifference(a: Float32Array, b: Float32Array): number {
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  if (ua.length !== ub.length) return 0;
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return i;
  return -1;
}

describe.skipIf(unavailable !== undefined)("batch invariance of the cpu backend (batchInvariant: true)", () => {
  let backend: CpuBackend;
  let pair: BackendPair;
  beforeAll(() => {
    backend = CpuBackend.create({ threads: 2, batchInvariant: true });
    pair = new BackendPair(backend, new ReferenceBackend());
    expect(backend.batchInvariant).toBe(true);
  });
  afterAll(() => backend?.dispose());
  const upload = (values: Float32Array) => {
    const buffer = backend.allocate(values.length);
    backend.write(buffer, values);
    return buffer;
  };

  it("matmul: every row of 2 to 20, 33 and 70 rows is the row's own 1-row matmul, bit for bit, for every supported weight type", () => {
    // 1024 inputs: a whole number of the GEMM kernels' 256-value groups; 96: none (dot products only)
    for (const nIn of [1024, 96]) {
      const nOut = 70; // not a multiple of 4
      for (const type of ALL_GGML_TYPES.filter((t) => backend.supportsOp("matmul", t))) {
        if (nIn % ggmlTypeInfo(type)!.blockSize !== 0) continue; // K-quants: 256-value blocks
        const data = weightBytes(type, normals(nIn * nOut, 500 + type, 0.05), 600 + type);
        const [w] = pair.weights(tensorInfo(`w.${ggmlTypeName(type)}`, type, [nIn, nOut], data), data);
        const x = normals(70 * nIn, 700 + type);
        const alone = new Float32Array(70 * nOut);
        for (let r = 0; r < 70; r++) {
          const out = backend.allocate(nOut);
          backend.matmul(out, upload(x.subarray(r * nIn, (r + 1) * nIn)), w, 1);
          alone.set(backend.read(out), r * nOut);
        }
        for (const rows of [2, 3, 4, 5, 7, 8, 9, 16, 17, 20, 33, 70]) {
          const out = backend.allocate(rows * nOut);
          backend.matmul(out, upload(x.subarray(0, rows * nIn)), w, rows);
          expect(firstDifference(backend.read(out), alone.subarray(0, rows * nOut)), `${ggmlTypeName(type)}, ${nIn} inputs, ${rows} rows`).toBe(-1);
        }
      }
    }
  });

  it("paged attention: every row of a prefill chunk or a verification step is the row decoded alone at its position, bit for bit (f32, f16 and q8_0 KV)", () => {
    for (const [heads, kvHeads, headDim] of [
      [4, 2, 64],
      [16, 8, 128],
      [8, 1, 128],
    ] as const) {
      const kvWidth = kvHeads * headDim;
      const blockTokens = 16;
      const blocks = 12;
      const random = mulberry32(31 + headDim);
      for (const type of ["f32", "f16", "q8_0"] as const) {
        const keys = backend.allocateKV(type, blocks * blockTokens, kvWidth);
        const values = backend.allocateKV(type, blocks * blockTokens, kvWidth);
        const slots = Int32Array.from({ length: blocks * blockTokens }, (_, i) => i);
        backend.writeKV(keys, slots, upload(normals(slots.length * kvWidth, 40)));
        backend.writeKV(values, slots, upload(normals(slots.length * kvWidth, 41)));
        const scale = 1 / Math.sqrt(headDim);
        // a decode step, a verification step of 1 + 5 drafts, a prefill chunk after a cached prefix, a prefill from 0
        const shapes = [
          [1, 40],
          [6, 57],
          [17, 21],
          [33, 0],
        ] as const;
        const { rows, sequences, blockTables } = pagedLayout(shapes, blockTokens, () => Math.floor(random() * blocks));
        const q = normals(rows * heads * headDim, 42);
        const out = backend.allocate(rows * heads * headDim);
        backend.attention(out, upload(q), { keys, values, blockTokens, blockTables, sequences }, { rows, heads, kvHeads, headDim, scale });
        const batched = backend.read(out);
        for (let s = 0; s < shapes.length; s++) {
          const [first, count, position, table] = sequences.subarray(4 * s, 4 * s + 4);
          for (let i = 0; i < count!; i++) {
            const row = first! + i;
            const single = backend.allocate(heads * headDim);
            const qRow = upload(q.subarray(row * heads * headDim, (row + 1) * heads * headDim));
            backend.attention(single, qRow, { keys, values, blockTokens, blockTables, sequences: Int32Array.of(0, 1, position! + i, table!) }, { rows: 1, heads, kvHeads, headDim, scale });
            const expected = batched.subarray(row * heads * headDim, (row + 1) * heads * headDim);
            expect(firstDifference(backend.read(single), expected), `${type} KV, ${heads}/${kvHeads} heads of ${headDim}, sequence ${s} row ${i}`).toBe(-1);
          }
        }
      }
    }
  });

  for (const weightType of ["q8_0", "q4_K_M"] as const) {
    it(`speculative decoding and 8 concurrent requests give exactly the tokens (and logprobs) of decoding one at a time, no near-tie excepted (${weightType})`, async () => {
      const path = await syntheticModelFile(resolveOptions("small", { weightType }));
      const model = loadModel(path, { backend: CpuBackend.create({ threads: 2, batchInvariant: true }), maxSequences: 8 });
      try {
        const prompt = model.tokenizer.encode("one two three four one two three four one two three");
        // the logprobs too, to the bit: the verification rows' logits are the one-row steps' logits
        const options = { temperature: 0, maxTokens: 64, logprobs: true, topLogprobs: 3 };
        const plain = await generationSteps(model, prompt, options);
        const steps = model.engine.statistics.steps;
        const fast = await generationSteps(model, prompt, { ...options, speculative: { method: "ngram" } });
        expect(model.engine.statistics.steps - steps).toBeLessThan(64 - 16);
        expect(fast).toEqual(plain);
        // one at a time, then together (batched decode steps, prefills chunked beside them)
        const prompts = Array.from({ length: 8 }, (_, s) => Array.from({ length: 5 + s * 9 }, (_, i) => 1000 + ((s * 7919 + i * 104729) % 60000)));
        const alone: number[][] = [];
        for (const p of prompts) alone.push([...(await model.complete(p, { temperature: 0, maxTokens: 16 })).tokens]);
        const before = model.engine.statistics.steps;
        const together = await Promise.all(prompts.map((p) => model.complete(p, { temperature: 0, maxTokens: 16 })));
        expect(model.engine.statistics.steps - before).toBeLessThan(8 * 16); // they really ran batched
        expect(together.map((result) => [...result.tokens])).toEqual(alone);
      } finally {
        model.dispose();
      }
    }, 120_000);

    it(`a model's logits for a row are the same in a decode step of one row as in a step of several (${weightType}, small)`, async () => {
      const path = await syntheticModelFile(resolveOptions("small", { weightType }));
      const model = loadModel(path, { backend: CpuBackend.create({ threads: 2, batchInvariant: true }) });
      try {
        const tokens = [785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13, 576, 3974, 13876, 38835, 34208, 916];
        const vocabulary = model.vocabularySize;
        // one token at a time, each step's logits
        const oneCache = model.createCache(64);
        const stepwise = tokens.map((token) => model.forward([token], oneCache));
        oneCache.dispose();
        // a prefix of 6 at once, then chunks of 1, 4 and 5 rows with every row's logits
        const cache = model.createCache(64);
        const rows: Float32Array[] = [];
        let at = 0;
        for (const size of [6, 1, 4, 5]) {
          const logits = model.forward(tokens.slice(at, at + size), cache, { logits: "all" });
          for (let i = 0; i < size; i++) rows.push(logits.subarray(i * vocabulary, (i + 1) * vocabulary));
          at += size;
        }
        cache.dispose();
        for (let i = 0; i < tokens.length; i++) expect(firstDifference(rows[i]!, stepwise[i]!), `row ${i}`).toBe(-1);
      } finally {
        model.dispose();
      }
    }, 120_000);
  }
});
