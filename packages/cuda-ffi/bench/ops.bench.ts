/**
 * Times single CUDA ops at the shapes the issue-8 targets run, so that a GPU session sees where a
 * forward's time goes, not only the whole forward's tokens/s:
 *
 *   bun packages/cuda-ffi/bench/ops.bench.ts [--json] [--quick] [--only gemm,moe]
 *
 * - decode matrix-vector (q8_0, 1 row): µs and the weight bytes per second it streams (HBM: 4.8 TB/s
 *   on an H200); MEMRA_CUDA_MMV_STEPS=2 times the previous 2 steps in flight per warp,
 *   MEMRA_CUDA_MMV_SPLIT=1 one warp per feature where the 0.6B shapes (1,024 features) split
 *   each over 2 or 4, MEMRA_CUDA_EARLY_WEIGHTS=0 the weights (of every decode type) loaded only once the kernel
 *   before has finished;
 * - the same for q4_0, q4_K, q5_K and q6_K (the types of Q4_0 / Q4_K_M / Q5_K_M files): on the q8_0
 *   / q8_K codes with __dp4a; MEMRA_CUDA_CODES_DP4A=0 times the previous f32 kernel; and the same
 *   for q2_K, q3_K, iq4_nl and iq4_xs (Q2_K / Q3_K_M / IQ4 files), and for the iq1, iq2 and iq3
 *   types (IQ1_S / IQ1_M / IQ2_* / IQ3_* files: grid lookups per 8 values, the most decoding work
 *   per weight byte);
 * - prefill and batched-decode GEMMs (q8_0, 512 and 64 rows): µs and TFLOP/s (2 · rows · in · out);
 *   MEMRA_CUDA_INT8_GEMM=0 in the environment times the previous kernel, MEMRA_CUDA_INT8_PIPELINE=1
 *   the pipelined int8 GEMM;
 * - paged attention over a 640-token context (f16 KV): decode of 1 and 64 sequences;
 * - the norm fused with the Q/K/V rounding against the norm and the matmuls apart;
 * - argmaxRows over the vocabulary; logSoftmaxAt over 1 row of it (a step's logprobs) and 32
 *   (perplexity's scoring); topKRows over it (the sampler's candidates on the device, k 40 for 1
 *   and 64 rows, k 1024 for 1), its [rows, k] ids and values read back;
 * - moeExperts of a Qwen3-30B-A3B layer (128 experts of 2048 → 768 → 2048, 8 per row, q8_0) at 1,
 *   16, 64 and 512 rows: one matrix-vector product per (row, expert) pair below 32 rows, grouped
 *   GEMMs over the rows sorted by expert from 32 (memra_cuda_moe_grouped); µs and the bytes of the
 *   experts the rows chose per second (each chosen matrix read once: the least traffic).
 *
 * Each op is recorded `repeat` times into one CUDA graph and the graph replayed (GPU time without
 * the host's launch cost), and also called eagerly (with it); argmaxRows and topKRows read back,
 * so eagerly only. Times are medians of 5 runs. --quick: tiny shapes (a check of this script on the emulator).
 */
import { parseArgs } from "node:util";
import { type DeviceBuffer, type WeightHandle } from "@memra/core";
import { normals, tensorInfo } from "@memra/core/internal";
import { GGMLType, ggmlTypeInfo, quantize } from "@memra/gguf";
import { mulberry32 } from "@memra/synthetic";
import { CudaBackend } from "../src/index";

const { values } = parseArgs({
  options: { json: { type: "boolean", default: false }, quick: { type: "boolean", default: false }, only: { type: "string" } },
});
const quick = values.quick;
/** --only a,b: just those sections (their names in SECTIONS); by default every one. */
const SECTIONS = ["mmv", "mmv-hbm", "mmv-codes", "gemm", "attention", "norm", "argmax", "topk", "moe"] as const;
const only = values.only?.split(",").map((name) => name.trim());
for (const name of only ?? []) {
  if (!(SECTIONS as readonly string[]).includes(name)) throw new Error(`--only: no section ${name} (sections: ${SECTIONS.join(", ")})`);
}
const wanted = (section: (typeof SECTIONS)[number]) => only === undefined || only.includes(section);
const backend = CudaBackend.create();
const results: Record<string, Record<string, number | string>> = {};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Median µs of one call of `op`: eagerly (launch cost included) and from a graph of `repeat` calls. */
function time(op: () => void, options: { graph?: boolean; repeat?: number } = {}): { eagerUs: number; graphUs?: number } {
  const repeat = quick ? 2 : (options.repeat ?? 20);
  const runs = quick ? 1 : 5;
  for (let i = 0; i < 3; i++) op();
  backend.synchronize();
  const eager: number[] = [];
  for (let run = 0; run < runs; run++) {
    const started = performance.now();
    for (let i = 0; i < repeat; i++) op();
    backend.synchronize();
    eager.push(((performance.now() - started) * 1000) / repeat);
  }
  if (options.graph === false || !backend.captureGraph) return { eagerUs: median(eager) };
  const graph = backend.captureGraph(() => {
    for (let i = 0; i < repeat; i++) op();
  });
  graph.replay();
  backend.synchronize();
  const replayed: number[] = [];
  for (let run = 0; run < runs; run++) {
    const started = performance.now();
    graph.replay();
    backend.synchronize();
    replayed.push(((performance.now() - started) * 1000) / repeat);
  }
  graph.dispose();
  return { eagerUs: median(eager), graphUs: median(replayed) };
}

function weight(nIn: number, nOut: number, seed: number, type: GGMLType = GGMLType.Q8_0): WeightHandle {
  const data = quantize(type, normals(nIn * nOut, seed, 0.05));
  return backend.uploadWeight(tensorInfo(`w${seed}`, type, [nIn, nOut], data), data);
}

/**
 * A q4_0 or k-quant matrix of random codes and scales with small f16 block scales (quantizing 50M
 * values to q4_K in TypeScript takes ~25 s; timing needs only valid blocks).
 */
/** Where a block's f16 scale d (and minimum scale dmin) are, by type. */
const SCALE_AT: Partial<Record<GGMLType, { d: number; dmin?: number }>> = {
  [GGMLType.Q4_0]: { d: 0 },
  [GGMLType.IQ4_NL]: { d: 0 },
  [GGMLType.IQ4_XS]: { d: 0 },
  [GGMLType.Q2_K]: { d: 80, dmin: 82 },
  [GGMLType.Q3_K]: { d: 108 },
  [GGMLType.Q4_K]: { d: 0, dmin: 2 },
  [GGMLType.Q5_K]: { d: 0, dmin: 2 },
  [GGMLType.Q6_K]: { d: 208 },
  [GGMLType.IQ2_XXS]: { d: 0 },
  [GGMLType.IQ2_XS]: { d: 0 },
  [GGMLType.IQ2_S]: { d: 0 },
  [GGMLType.IQ3_XXS]: { d: 0 },
  [GGMLType.IQ3_S]: { d: 0 },
  [GGMLType.IQ1_S]: { d: 0 },
  // iq1_m has no d field: its f16 bits are the top nibbles of the 4 scale words at 48..55 (the
  // first word's lowest). 0x1000 at 48 and 0x1400 at 54 make them 0x1??1, 2^-11 .. 2^-8.
  [GGMLType.IQ1_M]: { d: 54, dmin: 48 },
};

/** The types whose decode multiplies the activations' q8 codes with __dp4a (matrix_vector_codes_kernel). */
const DP4A_TYPES: readonly GGMLType[] = [
  ...[GGMLType.Q4_0, GGMLType.Q5_0, GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_NL, GGMLType.IQ4_XS],
  ...[GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S, GGMLType.IQ3_XXS, GGMLType.IQ3_S, GGMLType.IQ1_S, GGMLType.IQ1_M],
];

function randomKQuant(type: GGMLType, nIn: number, nOut: number, seed: number): WeightHandle {
  const { blockSize, bytesPerBlock: blockBytes } = ggmlTypeInfo(type)!;
  const blocks = (nIn / blockSize) * nOut;
  const data = new Uint8Array(blocks * blockBytes);
  const random = mulberry32(seed);
  const words = new Uint32Array(data.buffer, 0, Math.floor(data.length / 4));
  for (let k = 0; k < words.length; k++) words[k] = (random() * 2 ** 32) >>> 0;
  const view = new DataView(data.buffer);
  const scale = SCALE_AT[type]!;
  for (let b = 0; b < blocks; b++) {
    const at = b * blockBytes;
    view.setUint16(at + scale.d, 0x1400, true); // d ≈ 0.001
    if (scale.dmin !== undefined) view.setUint16(at + scale.dmin, 0x1000, true); // dmin
  }
  return backend.uploadWeight(tensorInfo(`k${seed}`, type, [nIn, nOut], data), data);
}

function buffer(length: number, seed: number): DeviceBuffer {
  const b = backend.allocate(length);
  backend.write(b, normals(length, seed));
  return b;
}

const scale = (n: number) => (quick ? Math.max(32, Math.floor(n / 64 / 32) * 32) : n);

// ---- decode matrix-vector (1 row) ----
if (wanted("mmv")) {
  for (const [name, nIn, nOut] of [
    ["matvec-4096x12288", 4096, 12288],
    ["matvec-12288x4096", 12288, 4096],
    ["matvec-1024x32768", 1024, 32768],
    // Qwen3-0.6B's down and O projections: 1,024 features, split over 4 and 2 warps (MEMRA_CUDA_MMV_SPLIT=1: one)
    ["matvec-3072x1024", 3072, 1024],
    ["matvec-2048x1024", 2048, 1024],
  ] as const) {
    const [i, o] = [scale(nIn), scale(nOut)];
    const w = weight(i, o, i + o);
    const x = buffer(i, 1);
    const out = backend.allocate(o);
    const t = time(() => backend.matmul(out, x, w, 1));
    const bytes = backend.weightBytes(w);
    results[name] = { ...t, weightGBps: bytes / ((t.graphUs ?? t.eagerUs) * 1e-6) / 1e9 };
  }
}

// ---- the same matrix-vector products from device memory: 8 copies of the weights, one after
// another, 8 × 53 MB against the H200's 60 MB of L2 (above, each call reads the one matrix the
// call before it read, much of it from L2) ----
if (wanted("mmv-hbm")) {
  for (const [name, nIn, nOut] of [
    ["matvec-dram-4096x12288", 4096, 12288],
    ["matvec-dram-12288x4096", 12288, 4096],
  ] as const) {
    const [i, o] = [scale(nIn), scale(nOut)];
    const data = quantize(GGMLType.Q8_0, normals(i * o, i + o, 0.05));
    const copies = Array.from({ length: 8 }, (_, k) => backend.uploadWeight(tensorInfo(`dram${k}`, GGMLType.Q8_0, [i, o], data), data));
    const x = buffer(i, 1);
    const out = backend.allocate(o);
    let call = 0;
    const t = time(() => backend.matmul(out, x, copies[call++ % copies.length]!, 1), { repeat: 16 });
    const bytes = backend.weightBytes(copies[0]!);
    results[name] = { ...t, weightGBps: bytes / ((t.graphUs ?? t.eagerUs) * 1e-6) / 1e9 };
  }
}

// ---- decode matrix-vector of q4_0 and k-quant weights (Q4_K_M files: q4_K and q6_K), on the
// q8_0 / q8_K codes (__dp4a) unless MEMRA_CUDA_CODES_DP4A=0 ----
if (wanted("mmv-codes")) {
  for (const [name, type, nIn, nOut] of [
    ["matvec-q4_0-4096x12288", GGMLType.Q4_0, 4096, 12288],
    ["matvec-q4_K-4096x12288", GGMLType.Q4_K, 4096, 12288],
    ["matvec-q4_K-12288x4096", GGMLType.Q4_K, 12288, 4096],
    ["matvec-q4_K-3072x1024", GGMLType.Q4_K, 3072, 1024],
    ["matvec-q6_K-12288x4096", GGMLType.Q6_K, 12288, 4096],
    ["matvec-q5_K-4096x12288", GGMLType.Q5_K, 4096, 12288],
    ["matvec-q2_K-4096x12288", GGMLType.Q2_K, 4096, 12288],
    ["matvec-q3_K-4096x12288", GGMLType.Q3_K, 4096, 12288],
    ["matvec-iq4_nl-4096x12288", GGMLType.IQ4_NL, 4096, 12288],
    ["matvec-iq4_xs-4096x12288", GGMLType.IQ4_XS, 4096, 12288],
    ["matvec-iq2_xxs-4096x12288", GGMLType.IQ2_XXS, 4096, 12288],
    ["matvec-iq2_xs-4096x12288", GGMLType.IQ2_XS, 4096, 12288],
    ["matvec-iq2_s-4096x12288", GGMLType.IQ2_S, 4096, 12288],
    ["matvec-iq3_xxs-4096x12288", GGMLType.IQ3_XXS, 4096, 12288],
    ["matvec-iq3_s-4096x12288", GGMLType.IQ3_S, 4096, 12288],
    ["matvec-iq1_s-4096x12288", GGMLType.IQ1_S, 4096, 12288],
    ["matvec-iq1_m-4096x12288", GGMLType.IQ1_M, 4096, 12288],
  ] as const) {
    const [i, o] = [quick ? 256 : nIn, scale(nOut)];
    const w = randomKQuant(type, i, o, i + o);
    const x = buffer(i, 1);
    const out = backend.allocate(o);
    const t = time(() => backend.matmul(out, x, w, 1));
    const bytes = backend.weightBytes(w);
    results[name] = { ...t, weightGBps: bytes / ((t.graphUs ?? t.eagerUs) * 1e-6) / 1e9, codesDp4a: !DP4A_TYPES.includes(type) ? "none" : process.env.MEMRA_CUDA_CODES_DP4A === "0" ? "off" : "on" };
  }
}

// ---- GEMMs: prefill (512 rows) and batched decode (64 rows) ----
if (wanted("gemm")) {
  for (const [name, rows, nIn, nOut] of [
    ["gemm-512x4096x4096", 512, 4096, 4096],
    ["gemm-512x4096x1024", 512, 4096, 1024],
    ["gemm-512x4096x12288", 512, 4096, 12288],
    ["gemm-512x12288x4096", 512, 12288, 4096],
    ["gemm-64x1024x1024", 64, 1024, 1024],
    ["gemm-64x1024x3072", 64, 1024, 3072],
    ["gemm-64x3072x1024", 64, 3072, 1024],
    // the 8B shape's batched decode (64 sequences): its O, gate/up and down projections
    ["gemm-64x4096x4096", 64, 4096, 4096],
    ["gemm-64x4096x12288", 64, 4096, 12288],
    ["gemm-64x12288x4096", 64, 12288, 4096],
  ] as const) {
    const [r, i, o] = [quick ? 16 : rows, scale(nIn), scale(nOut)];
    const w = weight(i, o, i + 2 * o);
    const x = buffer(r * i, 2);
    const out = backend.allocate(r * o);
    const t = time(() => backend.matmul(out, x, w, r), { repeat: 5 });
    results[name] = { ...t, tflops: (2 * r * i * o) / ((t.graphUs ?? t.eagerUs) * 1e-6) / 1e12, int8Gemm: process.env.MEMRA_CUDA_INT8_GEMM === "0" ? "off" : "on", int8Pipeline: process.env.MEMRA_CUDA_INT8_PIPELINE === "1" ? "on" : "off" };
  }
}

// ---- paged attention: decode over a 640-token context, f16 KV ----
if (wanted("attention")) {
  const [kvHeads, headDim, blockTokens, context] = [8, 128, 16, quick ? 40 : 640];
  for (const [name, sequences, heads] of [
    ["attention-decode-1x16h", 1, 16],
    ["attention-decode-1x32h", 1, 32],
    ["attention-decode-64x16h", quick ? 2 : 64, 16],
  ] as const) {
    const blocksPer = Math.ceil((context + 1) / blockTokens);
    const slots = sequences * blocksPer * blockTokens;
    const keys = backend.allocateKV("f16", slots, kvHeads * headDim);
    const values = backend.allocateKV("f16", slots, kvHeads * headDim);
    const all = Int32Array.from({ length: slots }, (_, i) => i);
    backend.writeKVPair(keys, values, all, buffer(slots * kvHeads * headDim, 3), buffer(slots * kvHeads * headDim, 4));
    const blockTables = Int32Array.from({ length: sequences * blocksPer }, (_, i) => i);
    const layout = new Int32Array(sequences * 4);
    for (let s = 0; s < sequences; s++) layout.set([s, 1, context, s * blocksPer], s * 4);
    const q = buffer(sequences * heads * headDim, 5);
    const out = backend.allocate(sequences * heads * headDim);
    const t = time(() =>
      backend.attention(out, q, { keys, values, blockTokens, blockTables, sequences: layout }, { rows: sequences, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim) }),
    );
    // K and V bytes the step reads (f16), once per KV head
    const bytes = sequences * (context + 1) * kvHeads * headDim * 2 * 2;
    results[name] = { ...t, kvGBps: bytes / ((t.graphUs ?? t.eagerUs) * 1e-6) / 1e9 };
  }
}

// ---- the attn_norm → Q/K/V group of a Qwen3-0.6B layer, fused and apart (1 row) ----
if (wanted("norm")) {
  const [hidden, queryWidth, kvWidth] = [scale(1024), scale(2048), scale(1024)];
  const ws = [weight(hidden, queryWidth, 31), weight(hidden, kvWidth, 32), weight(hidden, kvWidth, 33)];
  const normData = new Uint8Array(normals(hidden, 34, 1).buffer);
  const norm = backend.uploadWeight(tensorInfo("norm", GGMLType.F32, [hidden], normData), normData);
  const [h, delta, normed] = [buffer(hidden, 35), buffer(hidden, 36), backend.allocate(hidden)];
  const outs = [backend.allocate(queryWidth), backend.allocate(kvWidth), backend.allocate(kvWidth)];
  results["norm-qkv-fused"] = time(() => backend.rmsNormMatmuls(normed, h, delta, norm, 1e-6, outs, ws, 1));
  results["norm-qkv-apart"] = time(() => {
    backend.addRmsNorm(normed, h, delta, norm, 1, 1e-6);
    backend.matmuls(outs, normed, ws, 1);
  });
}

// ---- argmaxRows over the vocabulary; logSoftmaxAt over a logits chunk (perplexity: 32 rows) ----
if (wanted("argmax")) {
  const vocabulary = quick ? 4096 : 151936;
  for (const rows of [1, quick ? 2 : 64]) {
    const logits = buffer(rows * vocabulary, 40 + rows);
    const picked = new Int32Array(rows);
    results[`argmax-${rows}x${vocabulary}`] = time(() => backend.argmaxRows(picked, logits, rows, vocabulary), { graph: false });
  }
  // 1 row: a decode step's logprobs; 32: a perplexity chunk.
  for (const rows of [1, quick ? 2 : 32]) {
    const logits = buffer(rows * vocabulary, 45 + rows);
    const targets = Int32Array.from({ length: rows }, (_, r) => (r * 7919) % vocabulary);
    const scores = new Float32Array(rows);
    results[`logsoftmax-${rows}x${vocabulary}`] = time(() => backend.logSoftmaxAt(scores, logits, rows, vocabulary, targets), { graph: false });
  }
}

// ---- topKRows over the vocabulary: sorts of 4096-value chunks, then merges of their best k ----
if (wanted("topk")) {
  const vocabulary = quick ? 3 * 4096 + 5 : 151936; // quick: still 4 chunks and a merge (2 passes; 3 for k 1024)
  for (const [rows, k] of [
    [1, 40],
    [quick ? 2 : 64, 40],
    [1, 1024],
  ] as const) {
    const logits = buffer(rows * vocabulary, 70 + rows);
    const [ids, values] = [new Int32Array(rows * k), new Float32Array(rows * k)];
    results[`topk-${rows}x${vocabulary}-k${k}`] = time(() => backend.topKRows(ids, values, logits, rows, vocabulary, k), { graph: false });
  }
}

// ---- moeExperts: a Qwen3-30B-A3B layer's routed experts ----
if (wanted("moe")) {
  const [embedding, ffn, experts, k] = quick ? [64, 32, 8, 2] : [2048, 768, 128, 8];
  // q8_0 blocks of random codes with one scale (0.01): quantizing 600 M normals would take minutes
  let state = 0x9e3779b9;
  const expertsWeight = (name: string, nIn: number, nOut: number) => {
    const blocks = (nIn / 32) * nOut * experts;
    const data = new Uint8Array(blocks * 34);
    const words = new Uint32Array(data.buffer, 0, Math.floor(data.length / 4));
    for (let i = 0; i < words.length; i++) {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      words[i] = state >>> 0;
    }
    for (let b = 0; b < blocks; b++) {
      data[b * 34] = 0x1f; // f16 0.01: 0x211f, little-endian
      data[b * 34 + 1] = 0x21;
    }
    return backend.uploadWeight(tensorInfo(name, GGMLType.Q8_0, [nIn, nOut, experts], data), data);
  };
  const weights = { gate: expertsWeight("gate_exps", embedding, ffn), up: expertsWeight("up_exps", embedding, ffn), down: expertsWeight("down_exps", ffn, embedding) };
  const matrixBytes = backend.weightBytes(weights.gate) / experts;
  for (const rows of quick ? [1, 4, 40] : [1, 16, 64, 512]) {
    const x = buffer(rows * embedding, 50 + rows);
    const logits = buffer(rows * experts, 60 + rows);
    const out = backend.allocate(rows * embedding);
    const chosen = new Set(backend.moeRoute(logits, rows, experts, k).ids).size;
    const t = time(() => backend.moeExperts(out, x, logits, weights, rows, experts, k), { repeat: 3 });
    results[`moe-experts-${rows}x${experts}e${k}`] = {
      ...t,
      chosenExperts: chosen,
      weightGBps: (3 * chosen * matrixBytes) / ((t.graphUs ?? t.eagerUs) * 1e-6) / 1e9,
    };
  }
}

const summary = {
  device: backend.deviceInfo().name,
  programmaticLaunch: backend.deviceInfo().programmaticLaunch,
  int8Gemm: process.env.MEMRA_CUDA_INT8_GEMM === "0" ? "off" : "on",
  int8Pipeline: process.env.MEMRA_CUDA_INT8_PIPELINE === "1",
  q8_0DecodeSteps: process.env.MEMRA_CUDA_MMV_STEPS === "2" ? 2 : 4,
  q8_0EarlyWeights: process.env.MEMRA_CUDA_EARLY_WEIGHTS !== "0",
  decodeSplit: process.env.MEMRA_CUDA_MMV_SPLIT ?? "auto",
  q8_0WideLoads: process.env.MEMRA_CUDA_MMV_WIDE !== "0",
  ops: results,
};
if (values.json) console.log(JSON.stringify(summary));
else console.log(JSON.stringify(summary, null, 2));
backend.dispose();
