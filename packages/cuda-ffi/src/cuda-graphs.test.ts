/**
 * CUDA graphs (CudaBackend.captureGraph): a captured step replays bit for bit what the same ops
 * compute one by one, reading its index arrays anew at every replay; the index checks run again
 * before each replay; what may not happen while capturing fails cleanly; workspace stays the
 * graph's; a model's decode steps through graphs equal its decode op by op (dense, and MoE with the
 * experts routed and run on the device). Skipped without a GPU
 * unless MEMRA_CUDA_LIBRARY names the emulated library (CI runs it on the CPU emulator).
 */
import { type BackendGraph, type DeviceBuffer, type KVStorage, computeLogprobs, computePerplexity, loadModel } from "@memra/core";
import { cosineSimilarity, expectStepsClose, firstDifference, generationSteps, loadEmbeddingGoldens, normals, tensorInfo } from "@memra/core/internal";
import { GGMLType, quantize } from "@memra/gguf";
import { argmax } from "@memra/sampler";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { cudaUnavailableReason } from "./cuda-availability";
import { CudaBackend, type CudaBackendOptions } from "./cuda-backend";
import { CudaError } from "./errors";

const unavailable = cudaUnavailableReason();

const [HIDDEN, HEADS, KV_HEADS, HEAD_DIM, VOCABULARY, BLOCK_TOKENS, BLOCKS] = [64, 2, 1, 32, 50, 4, 8];
/** The whole-model tests' vocabulary: Qwen3's cut to 2,048 tokens (@memra/synthetic's `vocabulary`).
 * They compare the CUDA backend with itself (graphs against op by op, the device's picks against the
 * host's), and on the emulator 151,936 LM-head rows were most of their time (~5 minutes in CI);
 * the golden suite and the embeddings test still decode the whole vocabulary. */
const MODEL_VOCABULARY = 2048;

/** The ops of one attention half-layer on a backend, with the step's index arrays as arguments. */
class Step {
  readonly tokens: Int32Array;
  readonly positions: Int32Array;
  readonly slots: Int32Array;
  readonly blockTables: Int32Array;
  readonly sequences: Int32Array;
  readonly out: DeviceBuffer;
  private readonly hidden: DeviceBuffer;
  private readonly normed: DeviceBuffer;
  private readonly query: DeviceBuffer;
  private readonly key: DeviceBuffer;
  private readonly attended: DeviceBuffer;
  private readonly keys: KVStorage;
  private readonly values: KVStorage;
  private readonly weights;

  constructor(
    readonly backend: CudaBackend,
    readonly rows: number,
  ) {
    const upload = (name: string, type: GGMLType, shape: number[], seed: number) => {
      const data = quantize(type, normals(shape[0]! * shape[1]!, seed, 0.1));
      return backend.uploadWeight(tensorInfo(name, type, shape, data), data);
    };
    const norm = new Uint8Array(normals(HIDDEN, 7, 1).buffer);
    this.weights = {
      table: upload("token_embd.weight", GGMLType.Q8_0, [HIDDEN, VOCABULARY], 1),
      norm: backend.uploadWeight(tensorInfo("attn_norm.weight", GGMLType.F32, [HIDDEN], norm), norm),
      q: upload("attn_q.weight", GGMLType.Q8_0, [HIDDEN, HEADS * HEAD_DIM], 2),
      k: upload("attn_k.weight", GGMLType.Q4_0, [HIDDEN, KV_HEADS * HEAD_DIM], 3),
      o: upload("attn_output.weight", GGMLType.F16, [HEADS * HEAD_DIM, HIDDEN], 4),
    };
    this.tokens = new Int32Array(rows);
    this.positions = new Int32Array(rows);
    this.slots = new Int32Array(rows);
    this.blockTables = new Int32Array(rows * 2);
    this.sequences = new Int32Array(rows * 4);
    this.hidden = backend.allocate(rows * HIDDEN);
    this.normed = backend.allocate(rows * HIDDEN);
    this.query = backend.allocate(rows * HEADS * HEAD_DIM);
    this.key = backend.allocate(rows * KV_HEADS * HEAD_DIM);
    this.attended = backend.allocate(rows * HEADS * HEAD_DIM);
    this.out = backend.allocate(rows * HIDDEN);
    this.keys = backend.allocateKV("f16", BLOCKS * BLOCK_TOKENS, KV_HEADS * HEAD_DIM);
    this.values = backend.allocateKV("f16", BLOCKS * BLOCK_TOKENS, KV_HEADS * HEAD_DIM);
  }

  /** Decode step `n`: sequence r at position n + r, in blocks 2r and 2r + 1 (a table of 2 per sequence). */
  fill(n: number): void {
    for (let r = 0; r < this.rows; r++) {
      this.tokens[r] = (n * 7 + r * 13) % VOCABULARY;
      this.positions[r] = n + r;
      this.blockTables.set([2 * r, 2 * r + 1], 2 * r);
      this.slots[r] = (2 * r + Math.floor((n + r) / BLOCK_TOKENS)) * BLOCK_TOKENS + ((n + r) % BLOCK_TOKENS);
      this.sequences.set([r, 1, n + r, 2 * r], 4 * r);
    }
  }

  run(): void {
    const b = this.backend;
    const { table, norm, q, k, o } = this.weights;
    b.embedding(this.hidden, table, this.tokens);
    b.rmsNorm(this.normed, this.hidden, norm, this.rows, 1e-6);
    b.matmul(this.query, this.normed, q, this.rows);
    b.matmul(this.key, this.normed, k, this.rows);
    b.ropeNeox(this.query, this.positions, HEADS, HEAD_DIM, 10000);
    b.ropeNeox(this.key, this.positions, KV_HEADS, HEAD_DIM, 10000);
    b.writeKV(this.keys, this.slots, this.key);
    b.writeKV(this.values, this.slots, this.key);
    const view = { keys: this.keys, values: this.values, blockTokens: BLOCK_TOKENS, blockTables: this.blockTables, sequences: this.sequences };
    b.attention(this.attended, this.query, view, { rows: this.rows, heads: HEADS, kvHeads: KV_HEADS, headDim: HEAD_DIM, scale: 1 / Math.sqrt(HEAD_DIM) });
    b.matmul(this.out, this.attended, o, this.rows);
  }
}

/**
 * A model's logits on a backend made with `options`: prompts of 3 and 5 tokens in two sequences,
 * then `steps` decode steps of both in one batch; with each recorded graph's node count and whether
 * the model records decode graphs.
 */
function decodeLogits(path: string, options: CudaBackendOptions, steps: number): { logits: Float32Array[]; nodes: number[]; recordsGraphs: boolean } {
  const nodes: number[] = [];
  const backend = CudaBackend.create(options);
  if (backend.captureGraph) {
    const capture = backend.captureGraph;
    (backend as { captureGraph?: typeof capture }).captureGraph = (record) => {
      const graph = capture(record) as BackendGraph & { nodes: number };
      nodes.push(graph.nodes);
      return graph;
    };
  }
  const model = loadModel(path, { backend, maxBatchTokens: 16 });
  try {
    const pool = model.createKVPool(64, { blockTokens: 4 });
    const caches = [pool.createSequence(64), pool.createSequence(64)];
    const logits = [model.transformer.forward(Int32Array.of(11, 12, 13), caches[0]!), model.transformer.forward(Int32Array.of(21, 22, 23, 24, 25), caches[1]!)];
    for (let step = 0; step < steps; step++) {
      logits.push(...model.transformer.forwardBatch(caches.map((cache, i) => ({ tokens: Int32Array.of(100 + step * 10 + i), cache }))));
    }
    return { logits, nodes, recordsGraphs: model.transformer.recordsDecodeGraphs };
  } finally {
    model.dispose();
  }
}

describe.skipIf(unavailable !== undefined)(`CUDA graphs${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let eager: CudaBackend;
  let recording: CudaBackend;
  beforeAll(() => {
    eager = CudaBackend.create({ graphs: false });
    recording = CudaBackend.create();
  });
  afterAll(() => {
    eager?.dispose();
    recording?.dispose();
  });

  it("a captured step replays bit for bit what its ops compute one by one, reading its index arrays at each replay", () => {
    expect(eager.captureGraph).toBeUndefined(); // graphs: false
    expect(recording.graphs).toBe(true);
    const reference = new Step(eager, 3);
    const step = new Step(recording, 3);
    step.fill(0);
    const graph = recording.captureGraph!(() => step.run()) as BackendGraph & { inputs: readonly unknown[]; nodes: number };
    // tokens, positions (both RoPEs: one input), slots (K and V: one), block tables, sequences
    expect(graph.inputs).toEqual([step.tokens, step.positions, step.slots, step.blockTables, step.sequences]);
    // 13 kernels (embedding, norm, Q and K each rounding + matrix-vector, 2 RoPEs, 2 KV writes,
    // attention, O); the inputs are copied by the replay in one copy before the graph, not by nodes
    expect(graph.nodes).toBe(13);
    for (let n = 0; n < 6; n++) {
      reference.fill(n);
      reference.run();
      step.fill(n);
      graph.replay();
      expect(firstDifference(recording.read(step.out), eager.read(reference.out)), `step ${n}`).toBe(-1);
    }
    graph.dispose();
    graph.dispose();
    expect(() => graph.replay()).toThrow(/disposed/);
  });

  it("inputs that do not fit the graph's shared input buffers get buffers and a copy node of their own, and replay as the others", () => {
    // 70,000 token ids (280,000 bytes) do not fit MEMRA_CUDA_GRAPH_INPUT_BYTES (262,144); the
    // 3 row ids after them do.
    const table = (() => {
      const data = quantize(GGMLType.Q8_0, normals(HIDDEN * VOCABULARY, 21, 0.1));
      return { eager: eager.uploadWeight(tensorInfo("t", GGMLType.Q8_0, [HIDDEN, VOCABULARY], data), data), recording: recording.uploadWeight(tensorInfo("t", GGMLType.Q8_0, [HIDDEN, VOCABULARY], data), data) };
    })();
    const tokens = new Int32Array(70_000);
    const rows = Int32Array.of(0, 0, 0);
    const fill = (n: number) => {
      for (let i = 0; i < tokens.length; i++) tokens[i] = (i * 7 + n * 11) % VOCABULARY;
      rows.set([n, 69_999 - n, 35_000 + n]);
    };
    const run = (b: CudaBackend, weight: typeof table.eager, hidden: DeviceBuffer, picked: DeviceBuffer) => {
      b.embedding(hidden, weight, tokens);
      b.gatherRows(picked, hidden, rows, HIDDEN);
    };
    const [hiddenEager, pickedEager] = [eager.allocate(tokens.length * HIDDEN), eager.allocate(3 * HIDDEN)];
    const [hidden, picked] = [recording.allocate(tokens.length * HIDDEN), recording.allocate(3 * HIDDEN)];
    fill(0);
    const graph = recording.captureGraph!(() => run(recording, table.recording, hidden, picked)) as BackendGraph & { inputs: readonly unknown[]; nodes: number };
    expect(graph.inputs).toEqual([tokens, rows]);
    expect(graph.nodes).toBe(2 + 1); // the two kernels and the token ids' own copy
    for (let n = 0; n < 3; n++) {
      fill(n);
      run(eager, table.eager, hiddenEager, pickedEager);
      graph.replay();
      expect(firstDifference(recording.read(picked), eager.read(pickedEager)), `step ${n}`).toBe(-1);
    }
    graph.dispose();
  });

  it("checks the index arrays again before each replay and launches nothing when one is bad", () => {
    const step = new Step(recording, 2);
    step.fill(1);
    const graph = recording.captureGraph!(() => step.run())!;
    graph.replay();
    const before = recording.read(step.out);
    step.fill(2);
    step.tokens[1] = VOCABULARY + 4;
    expect(() => graph.replay()).toThrow(/memra_cuda_embedding: token id 54 at position 1 is outside the table \(0..49\)/);
    step.fill(2);
    step.blockTables[2] = BLOCKS;
    expect(() => graph.replay()).toThrow(/memra_cuda_paged_attention: sequence 1 block 0 is 8, outside the storage's 8 blocks/);
    step.fill(2);
    step.slots[0] = -1;
    expect(() => graph.replay()).toThrow(/memra_cuda_kv_write: slot -1 \(row 0\) outside the storage's 32 slots/);
    expect(firstDifference(recording.read(step.out), before)).toBe(-1); // none of them ran
    step.fill(2);
    graph.replay();
    expect(firstDifference(recording.read(step.out), before)).not.toBe(-1);
    graph.dispose();
  });

  it("what would make the host wait fails while capturing, and the capture is discarded", () => {
    const step = new Step(recording, 1);
    step.fill(0);
    for (const [what, wait] of [
      ["read", () => recording.read(step.out)],
      ["write", () => recording.write(step.out, new Float32Array(4))],
      ["moeRoute", () => recording.moeRoute(step.out, 1, 8, 2)],
      ["synchronize", () => recording.synchronize()],
    ] as const) {
      let error: unknown;
      try {
        recording.captureGraph!(() => {
          step.run();
          wait();
        });
      } catch (caught) {
        error = caught;
      }
      expect(error, what).toBeInstanceOf(CudaError);
      expect((error as Error).message, what).toMatch(/while capturing a graph/);
    }
    // an op's own error (a bad token) inside the capture: thrown, and the capture discarded
    step.tokens[0] = VOCABULARY;
    expect(() => recording.captureGraph!(() => step.run())).toThrow(/token id 50/);
    // the backend runs ops and captures as before
    step.fill(3);
    step.run();
    const direct = recording.read(step.out);
    const graph = recording.captureGraph!(() => step.run())!;
    graph.replay();
    expect(firstDifference(recording.read(step.out), direct)).toBe(-1); // the same step again (KV rewritten in place)
    graph.dispose();
  });

  it("workspace given back during the capture stays the graph's: later allocations never alias it", () => {
    const data = quantize(GGMLType.Q8_0, normals(256 * 64, 11, 0.1));
    const w = recording.uploadWeight(tensorInfo("w", GGMLType.Q8_0, [256, 64], data), data);
    const x = recording.allocate(256);
    recording.write(x, normals(256, 12));
    const out = recording.allocate(64);
    // q8_0 decode: the activations' codes (256 bytes) and block scales (32 bytes) in workspace
    const graph = recording.captureGraph!(() => recording.matmul(out, x, w, 1))!;
    const patterns = Array.from({ length: 16 }, (_, i) => {
      const buffer = recording.allocate(i % 2 === 0 ? 64 : 8); // the workspace's size classes
      const pattern = normals(buffer.length, 100 + i);
      recording.write(buffer, pattern);
      return { buffer, pattern };
    });
    graph.replay();
    graph.replay();
    for (const [i, { buffer, pattern }] of patterns.entries()) expect(firstDifference(recording.read(buffer), pattern), `buffer ${i}`).toBe(-1);
    const expected = recording.allocate(64);
    recording.matmul(expected, x, w, 1);
    expect(firstDifference(recording.read(out), recording.read(expected))).toBe(-1);
    graph.dispose();
  });

  it("matmuls of one input record one rounding and one matrix-vector launch for Q, K and V", () => {
    const weights = [64, 32, 32].map((nOut, i) => {
      const data = quantize(GGMLType.Q8_0, normals(HIDDEN * nOut, 20 + i, 0.1));
      return recording.uploadWeight(tensorInfo(`w${i}`, GGMLType.Q8_0, [HIDDEN, nOut], data), data);
    });
    const x = recording.allocate(HIDDEN);
    const outs = weights.map((w) => recording.allocate(w.shape[1]!));
    const nodes = (record: () => void) => {
      const graph = recording.captureGraph!(record) as BackendGraph & { nodes: number };
      graph.dispose();
      return graph.nodes;
    };
    expect(nodes(() => weights.forEach((w, i) => recording.matmul(outs[i]!, x, w, 1)))).toBe(6);
    expect(nodes(() => recording.matmuls(outs, x, weights, 1))).toBe(2);
  });

  it.each(["tiny", "tiny-moe"] as const)("a model's decode steps through graphs give the logits of decode op by op (%s)", async (preset) => {
    const path = await syntheticModelFile(resolveOptions(preset, { weightType: "q8_0", vocabulary: MODEL_VOCABULARY }));
    // the default backend (SwiGLU and the residual norms in launches of their own), then with
    // those fusions on, whose node count the comment below adds up
    const run = (graphs: boolean, fused: CudaBackendOptions) => {
      const result = decodeLogits(path, { graphs, ...fused }, 4);
      expect(result.recordsGraphs).toBe(graphs);
      nodes.push(...result.nodes);
      return result.logits;
    };
    const nodes: number[] = [];
    const [eagerDefault, graphsDefault] = [run(false, {}), run(true, {})];
    for (let i = 0; i < eagerDefault.length; i++) expect(firstDifference(graphsDefault[i]!, eagerDefault[i]!), `default backend, logits ${i}`).toBe(-1);
    nodes.length = 0;
    const fusions = { fusedFeedForward: true, fusedNorm: true };
    const expected = run(false, fusions);
    const actual = run(true, fusions);
    expect(nodes.length).toBeGreaterThanOrEqual(1);
    // Dense: the embedding, 9 kernels per layer ((add+)norm with the Q/K/V rounding + one launch,
    // QK-norm+RoPE with the K and V write (head_dim 16: not in the attention kernel), split
    // attention (its last split merging the others), O rounding + matvec (head_dim 16: not rounded
    // by the attention), add+norm with the gate/up rounding + one launch rounding SwiGLU for down,
    // down) and the final add+norm; the 5 inputs are copied by the replay, in one copy before the
    // graph. The O and down kernels add and norm for the next op (their norm tails), so the second
    // layer's (add+)norm, both FFN add+norms and the final add+norm launch nothing: 4 fewer. The
    // LM head ends the graph (every row's logits wanted), on the final norm's codes: 1 more.
    if (preset === "tiny") for (const count of nodes) expect(count).toBe(1 + 2 * 9 + 1 - 4 + 1);
    for (let i = 0; i < expected.length; i++) expect(firstDifference(actual[i]!, expected[i]!), `logits ${i}`).toBe(-1);
  }, 240_000);

  it("a model with head_dim 64 decodes with QK-norm, RoPE and the K/V write in the attention kernel, SwiGLU's rounding in gate/up and the residual norms in the O and down kernels: the logits of the ops apart, four nodes fewer a layer", async () => {
    // small: 2 layers, hidden 256, 4 heads of 64 over 2 KV heads, FFN 512; prompts (several rows:
    // the ops apart) then batched decode steps of two sequences (one row each:
    // qkNormRopeAttentionMatmul, rmsNormSwigluMatmul, and the O and down projections' norm tails)
    const path = await syntheticModelFile(resolveOptions("small", { weightType: "q8_0", vocabulary: MODEL_VOCABULARY }));
    const run = (fused: boolean, graphs: boolean, fusedNorm = fused) =>
      decodeLogits(path, { fusedAttention: fused, fusedFeedForward: fused, fusedNorm, graphs }, 3);
    const apart = run(false, false);
    const fused = run(true, false);
    const fusedGraphs = run(true, true);
    const normsApartGraphs = run(true, true, false);
    // its widths (256, 512) are multiples of 256: every q8_0 matrix is repacked on upload unless told not
    const fileLayout = decodeLogits(path, { repackWeights: false }, 3);
    for (let i = 0; i < apart.logits.length; i++) {
      expect(firstDifference(fileLayout.logits[i]!, apart.logits[i]!), `logits ${i}, weights in the file's layout`).toBe(-1);
      expect(firstDifference(fused.logits[i]!, apart.logits[i]!), `logits ${i}, eager`).toBe(-1);
      expect(firstDifference(fusedGraphs.logits[i]!, apart.logits[i]!), `logits ${i}, graphs`).toBe(-1);
      expect(firstDifference(normsApartGraphs.logits[i]!, apart.logits[i]!), `logits ${i}, graphs, norms apart`).toBe(-1);
    }
    // Without the norm tails, per layer: (add+)norm with the Q/K/V rounding + one launch, split
    // attention with QK-norm, RoPE and the K/V write, rounding O's codes, O, add+norm with the
    // gate/up rounding + one launch rounding SwiGLU for down, down (apart: QK-norm+RoPE with the
    // K/V write, and SwiGLU-in-rounding, two more); with the embedding, the final add+norm and the
    // LM head (its rounding and matmul).
    expect(normsApartGraphs.nodes.length).toBeGreaterThanOrEqual(1);
    for (const count of normsApartGraphs.nodes) expect(count).toBe(1 + 2 * 7 + 1 + 2);
    // With them, the O and down kernels add and norm for the next op: the second layer's norm, both
    // FFN norms and the final norm launch nothing (the first layer's norm follows the embedding),
    // and the LM head reads the codes the last down kernel rounded (no rounding launch).
    expect(fusedGraphs.nodes.length).toBeGreaterThanOrEqual(1);
    for (const count of fusedGraphs.nodes) expect(count).toBe(1 + 6 + 5 + 0 + 1);
  }, 240_000);

  it("embeddings on the device: llama.cpp's within the core test's bounds, a 1-token input outside the decode graphs", async () => {
    const golden = loadEmbeddingGoldens().find((m) => m.id === "tiny-q8_0-last-eos")!;
    const path = await syntheticModelFile(resolveOptions(golden.preset, golden.options));
    const backend = CudaBackend.create();
    let captures = 0;
    const capture = backend.captureGraph!;
    (backend as { captureGraph?: typeof capture }).captureGraph = (record) => {
      captures++;
      return capture(record);
    };
    const model = loadModel(path, { backend, maxBatchTokens: 16 });
    const reference = loadModel(path);
    try {
      const cosine = cosineSimilarity;
      for (const c of golden.cases.slice(0, 3)) expect(1 - cosine(model.embed(c.text, { normalize: false }), c.embedding), c.text).toBeLessThan(5e-4);
      expect(model.transformer.recordsDecodeGraphs).toBe(true);
      const single = model.embed([785]);
      expect(1 - cosine(single, reference.embed([785]))).toBeLessThan(5e-4);
      expect(captures).toBe(0); // a decode-shaped input, but no graph recorded for its cache of its own
    } finally {
      model.dispose();
      reference.dispose();
    }
  }, 240_000);

  it("greedy decode through graphs picks on the device the argmax of the logits decode op by op gives", async () => {
    const path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", vocabulary: MODEL_VOCABULARY }));
    const eagerModel = loadModel(path, { backend: CudaBackend.create({ graphs: false }), maxBatchTokens: 16 });
    const graphModel = loadModel(path, { backend: CudaBackend.create(), maxBatchTokens: 16 });
    try {
      expect(graphModel.transformer.recordsDecodeGraphs).toBe(true);
      const vocabulary = eagerModel.vocabularySize;
      const eagerCache = eagerModel.createCache(32);
      const graphCache = graphModel.createCache(32);
      let expected = argmax(eagerModel.forward([11, 12, 13, 14], eagerCache), vocabulary);
      let actual = graphModel.forwardGreedy([11, 12, 13, 14], graphCache);
      const picks: [number, number][] = [];
      for (let step = 0; step < 6; step++) {
        picks.push([actual, expected]);
        expected = argmax(eagerModel.forward([expected], eagerCache), vocabulary);
        actual = graphModel.forwardGreedy([actual], graphCache);
      }
      for (const [a, e] of picks) expect(a).toBe(e);
    } finally {
      eagerModel.dispose();
      graphModel.dispose();
    }
  }, 240_000);

  it("perplexity and computeLogprobs score on the device (logSoftmaxAt, topKRows) as the host does from the logits", async () => {
    const path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", vocabulary: MODEL_VOCABULARY }));
    const model = loadModel(path, { backend: CudaBackend.create(), maxBatchTokens: 16 });
    try {
      const backend = model.transformer.outputBackend as CudaBackend;
      const text = Array.from({ length: 8 }, (_, i) => (1000 + i * 7919) % MODEL_VOCABULARY);
      const onDevice = computePerplexity(model, text, 8); // one window, its last 3 predictions scored
      const logprobsOnDevice = computeLogprobs(model, text.slice(0, 4), 3); // every row's best 3 and log Σ exp
      // the host's double-precision path over the logits read back
      backend.logSoftmaxAt = undefined as never;
      backend.topKRows = undefined as never;
      const onHost = computePerplexity(model, text, 8);
      const logprobsOnHost = computeLogprobs(model, text.slice(0, 4), 3);
      expect(logprobsOnDevice.positions.map((p) => p.top.map((top) => top.id))).toEqual(logprobsOnHost.positions.map((p) => p.top.map((top) => top.id)));
      logprobsOnDevice.positions.forEach((position, r) =>
        position.top.forEach((top, j) => {
          const reference = logprobsOnHost.positions[r]!.top[j]!.logprob;
          expect(Math.abs(top.logprob - reference)).toBeLessThan(1e-5 * Math.max(1, Math.abs(reference)));
        }),
      );
      expect(onDevice.scoredTokens).toBe(3);
      expect(Math.abs(onDevice.perplexity / onHost.perplexity - 1)).toBeLessThan(1e-5);
      expect(onDevice.perplexity).not.toBe(onHost.perplexity); // the f32 device sums, not the host's
    } finally {
      model.dispose();
    }
  }, 240_000);

  it("sampled generation through graphs takes the 40 best candidates from the device and samples the tokens of the whole-logits path", async () => {
    const path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", vocabulary: MODEL_VOCABULARY }));
    const model = loadModel(path, { backend: CudaBackend.create(), maxBatchTokens: 16 });
    try {
      const backend = model.transformer.outputBackend as CudaBackend;
      const topKRows = vi.spyOn(backend, "topKRows");
      const picked = () => topKRows.mock.calls.reduce((rows, call) => rows + call[3], 0);
      const options = { seed: 11, maxTokens: 6 }; // llama.cpp's default chain: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05
      const fromTop = await model.complete([11, 12, 13, 14], options);
      expect(picked()).toBe(6); // the prompt's last row and 5 decode steps
      for (const call of topKRows.mock.calls) expect(call[5]).toBe(40);
      const whole = await model.complete([11, 12, 13, 14], { ...options, logitBias: { 0: 0 } }); // a logit bias (of 0): every step's logits read back
      expect(picked()).toBe(6);
      expect(fromTop.tokens).toEqual(whole.tokens);
      expect(fromTop.tokens.length).toBe(6);
    } finally {
      model.dispose();
    }
  }, 240_000);

  it("generation with logprobs takes candidates and log Σ exp from the device: the logprobs of the whole logits within 1e-5", async () => {
    const path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", vocabulary: MODEL_VOCABULARY }));
    const model = loadModel(path, { backend: CudaBackend.create(), maxBatchTokens: 16 });
    try {
      const backend = model.transformer.outputBackend as CudaBackend;
      const [topKRows, logSoftmaxAt] = [vi.spyOn(backend, "topKRows"), vi.spyOn(backend, "logSoftmaxAt")];
      const calls = () => ({ topKRows: topKRows.mock.calls.length, logSoftmaxAt: logSoftmaxAt.mock.calls.length });
      // sampled (a greedy pick differs only on the host: core's top-candidates tests)
      const options = { seed: 11, maxTokens: 3, logprobs: true, topLogprobs: 2 };
      const fromDevice = await generationSteps(model, [11, 12, 13, 14], options);
      expect(calls()).toEqual({ topKRows: 3, logSoftmaxAt: 3 }); // the prompt's last row and 2 decode steps
      const whole = await generationSteps(model, [11, 12, 13, 14], { ...options, logitBias: { 0: 0 } }); // every step's logits read back, summed on the host
      expect(calls()).toEqual({ topKRows: 3, logSoftmaxAt: 3 });
      expectStepsClose(fromDevice, whole, 1e-5);
      expect(fromDevice.map((step) => step.logprob)).not.toEqual(whole.map((step) => step.logprob)); // the f32 device sums, not the host's
    } finally {
      model.dispose();
    }
  }, 240_000);
});
