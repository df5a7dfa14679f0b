/**
 * Prefill and decode speed of a whole model forward on the CUDA backend, llama-bench style
 * (ppN: one forward over N prompt tokens; tgN: N single-token forwards after it):
 *
 *   bun packages/cuda-ffi/bench/forward.bench.ts [--preset qwen3-0.6b] [--type q8_0] [--layers N]
 *       [--hidden H --heads A --kv-heads K --head-dim D --ffn F] [--prompt 512] [--decode 128] [--runs 3]
 *       [--batch 64 --batch-prompt 16] [--graphs 0] [--pick device|host|sample|host-sample] [--json]
 *
 * --batch N adds batched decode: N sequences share one KV pool, each is prefilled with
 * --batch-prompt tokens, then every step decodes one token of each of them in one forward
 * (Transformer.forwardBatch); `tgN_batchB` is the aggregate tokens/s, `batchSpeedup` its ratio to
 * the batch-1 tgN (issue 8 asks ≥ 20× at 64).
 *
 * Decode steps replay CUDA graphs (the default); --graphs 0 launches every op of them instead, to
 * measure what the graphs save. Each decoded token is the greedy pick of the step before, made on
 * the GPU (Transformer.forwardGreedy: one int read back per sequence); --pick host reads every
 * step's logits back and picks on the host instead. --pick sample samples with llama.cpp's default
 * chain (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05; seeded) from the 40 best candidates
 * picked on the GPU (BatchEntry.top, Backend.topKRows: 80 numbers read back per sequence);
 * --pick host-sample runs the same chain on the whole logits read back (the path before topKRows).
 *
 * --profile N times N more single-sequence decode steps kernel by kernel, after the figures (with
 * decode graphs on, on the same file loaded again without them)
 * (CudaBackend.profileKernels: each launch's GPU time from the end of the one before, the host's
 * launches queued first) and adds `profile`: per kernel, launches and µs per step and share, the
 * largest first, the step's total, and the last step's launches in order: where a decode step's time
 * goes. `prefillProfile` is the same for the prompt's prefill, and with --batch B `batchProfile`
 * for N batched decode steps of B sequences.
 *
 * Shape overrides build e.g. a Qwen3-8B-shaped model (--hidden 4096 --heads 32 --kv-heads 8
 * --head-dim 128 --ffn 12288) with fewer layers, to keep the synthetic file small: then tokens/s
 * is reported as measured and as scaled to --full-layers (time × full / measured layers, which
 * charges the LM head as often as a layer: a low figure). --distinct-layers N instead builds all
 * the layers and generates N of them (the others repeat their bytes, each uploaded on its own):
 * a 36-layer model measured whole, for the generation time of N layers (and the file's size).
 */
import { parseArgs } from "node:util";
import { type KVCache, loadModel } from "@memra/core";
import { type Sampler, createSampler, topCandidatesSuffice } from "@memra/sampler";
import { type PresetName, type WeightType, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { CudaBackend } from "../src/index";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "qwen3-0.6b" },
    type: { type: "string", default: "q8_0" },
    layers: { type: "string" },
    "full-layers": { type: "string" },
    "distinct-layers": { type: "string" },
    hidden: { type: "string" },
    heads: { type: "string" },
    "kv-heads": { type: "string" },
    "head-dim": { type: "string" },
    ffn: { type: "string" },
    prompt: { type: "string", default: "512" },
    decode: { type: "string", default: "128" },
    runs: { type: "string", default: "3" },
    batch: { type: "string", default: "0" },
    "batch-prompt": { type: "string", default: "16" },
    graphs: { type: "string", default: "1" },
    pick: { type: "string", default: "device" },
    profile: { type: "string", default: "0" },
    json: { type: "boolean", default: false },
  },
});

const overrides: Record<string, number | string> = { weightType: values.type as WeightType };
for (const [flag, key] of [
  ["layers", "layers"],
  ["hidden", "hidden"],
  ["heads", "heads"],
  ["kv-heads", "kvHeads"],
  ["head-dim", "headDim"],
  ["ffn", "ffn"],
  ["distinct-layers", "distinctLayers"],
] as const) {
  if (values[flag] !== undefined) overrides[key] = Number(values[flag]);
}
const options = resolveOptions(values.preset as PresetName, overrides);
const promptTokens = Number(values.prompt);
const decodeTokens = Number(values.decode);
const runs = Number(values.runs);
const path = await syntheticModelFile(options);
const backend = CudaBackend.create({ graphs: values.graphs !== "0" });
const batch = Number(values.batch);
const batchPrompt = Number(values["batch-prompt"]);
const maxBatchTokens = Math.max(promptTokens, batch, batchPrompt, 1);
let model = loadModel(path, { backend, maxBatchTokens });

let state = 12345;
const randomToken = () => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return 1000 + (state % 50000);
};
const prompt = Int32Array.from({ length: promptTokens }, randomToken);
const PICKS = ["device", "host", "sample", "host-sample"];
if (!PICKS.includes(values.pick)) throw new Error(`--pick is one of ${PICKS.join(", ")}, not ${values.pick}`);
const pick = values.pick;
const argmax = (logits: Float32Array) => {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  return best;
};
// --pick sample / host-sample: one seeded sampler of llama.cpp's default chain per sequence
const SAMPLING = { seed: 1 };
const topK = topCandidatesSuffice(SAMPLING, model.vocabularySize);
const samplers = new Map<KVCache, Sampler>();
const samplerOf = (cache: KVCache) => {
  let sampler = samplers.get(cache);
  if (!sampler) samplers.set(cache, (sampler = createSampler(SAMPLING, { vocabularySize: model.vocabularySize })));
  return sampler;
};
const topOf = (cache: KVCache) => ({ ids: new Int32Array(topK), logits: new Float32Array(topK), cache });
/** The next token after `tokens`: picked as --pick says. */
const next = (tokens: Int32Array | number[], cache: KVCache): number => {
  if (pick === "device") return model.forwardGreedy(tokens, cache);
  if (pick === "host") return argmax(model.forward(tokens, cache));
  if (pick === "host-sample") return samplerOf(cache).sample(model.forward(tokens, cache), []).token;
  const all = Int32Array.from(tokens);
  if (all.length > 1) model.forward(all.subarray(0, all.length - 1), cache, { logits: [] });
  const top = topOf(cache);
  model.transformer.forwardBatch([{ tokens: all.subarray(all.length - 1), cache, top }]);
  return samplerOf(cache).sampleTop!(top.ids, top.logits, []).token;
};

{
  const cache = model.createCache(16);
  model.forward(prompt.subarray(0, Math.min(8, promptTokens)), cache);
  cache.dispose();
}
// Figures are medians of `runs` timed runs after one untimed run (which records the decode graphs).
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const prefillMs: number[] = [];
const decodeMs: number[] = [];
const batchMs: number[] = [];
// One KV pool for every run: decode graphs belong to a pool, so the runs after the first replay
// the graph the first (untimed) one recorded.
const pool = model.createKVPool(Math.ceil((promptTokens + decodeTokens + 1) / 16), { blockTokens: 16 });
for (let run = 0; run <= runs; run++) {
  const cache = pool.createSequence(promptTokens + decodeTokens + 1);
  let started = performance.now();
  let token = next(prompt, cache);
  if (run > 0) prefillMs.push(performance.now() - started);
  started = performance.now();
  for (let i = 0; i < decodeTokens; i++) token = next([token], cache);
  if (run > 0) decodeMs.push(performance.now() - started);
  cache.dispose();
}
pool.dispose();
// Batched decode: `batch` sequences, one token each per forwardBatch step.
/** Sequence i's prompt in batched decode: `batchPrompt` tokens of the prompt, from token i (wrapped). */
const batchPromptOf = (i: number) => {
  const first = i % Math.max(1, promptTokens - batchPrompt);
  return prompt.subarray(first, first + batchPrompt);
};
if (batch > 0) {
  const blockTokens = 16;
  const perSequence = Math.ceil((batchPrompt + decodeTokens + 1) / blockTokens);
  // one pool for all runs, as above: the timed runs replay the graphs the untimed one recorded
  const pool = model.createKVPool(batch * perSequence, { blockTokens });
  for (let run = 0; run <= runs; run++) {
    const caches = Array.from({ length: batch }, () => pool.createSequence(batchPrompt + decodeTokens + 1));
    let tokens = caches.map((cache, i) => next(batchPromptOf(i), cache));
    const picked = caches.map(() => new Int32Array(1));
    const tops = caches.map(topOf);
    const started = performance.now();
    for (let step = 0; step < decodeTokens; step++) {
      if (pick === "device") {
        model.transformer.forwardBatch(caches.map((cache, i) => ({ tokens: Int32Array.of(tokens[i]!), cache, greedy: picked[i]! })));
        tokens = picked.map((token) => token[0]!);
      } else if (pick === "sample") {
        model.transformer.forwardBatch(caches.map((cache, i) => ({ tokens: Int32Array.of(tokens[i]!), cache, top: tops[i]! })));
        tokens = tops.map((top) => samplerOf(top.cache).sampleTop!(top.ids, top.logits, []).token);
      } else {
        const logits = model.transformer.forwardBatch(caches.map((cache, i) => ({ tokens: Int32Array.of(tokens[i]!), cache })));
        tokens = pick === "host" ? logits.map(argmax) : logits.map((row, i) => samplerOf(caches[i]!).sample(row, []).token);
      }
    }
    if (run > 0) batchMs.push(performance.now() - started);
    for (const cache of caches) cache.dispose();
  }
  pool.dispose();
}
// --profile N: N more decode steps of one sequence, every launch timed (eager ops only); with it,
// one prefill of the prompt (`prefillProfile`) and, with --batch B, N batched decode steps of B
// sequences (`batchProfile`), timed the same way.
const profileSteps = Number(values.profile);
/** Per kernel (launches and µs a step, share, largest first) and the last step's launches in order. */
function profileOf(steps: number, step: () => void): Record<string, unknown> {
  const perKernel = new Map<string, { launches: number; microseconds: number }>();
  let total = 0;
  let lastStep: { kernel: string; microseconds: number }[] = [];
  for (let i = 0; i < steps; i++) {
    lastStep = backend.profileKernels(step, { holdMicroseconds: 30_000 });
    for (const { kernel, microseconds } of lastStep) {
      const entry = perKernel.get(kernel) ?? { launches: 0, microseconds: 0 };
      entry.launches++;
      entry.microseconds += microseconds;
      perKernel.set(kernel, entry);
      total += microseconds;
    }
  }
  return {
    steps,
    stepUs: total / steps,
    kernels: [...perKernel.entries()]
      .sort((a, b) => b[1].microseconds - a[1].microseconds)
      .map(([kernel, { launches, microseconds }]) => ({ kernel, launchesPerStep: launches / steps, usPerStep: microseconds / steps, share: microseconds / total })),
    // the last step's launches in order (µs each): which matmul of a layer, and the LM head (the
    // last matrix-vector launch), take the time
    lastStep: lastStep.map(({ kernel, microseconds }) => [kernel, Math.round(microseconds * 10) / 10]),
  };
}
let profile: Record<string, unknown> | undefined;
let prefillProfile: Record<string, unknown> | undefined;
let batchProfile: Record<string, unknown> | undefined;
const graphsRecorded = model.transformer.recordsDecodeGraphs;
if (profileSteps > 0) {
  // The figures above are taken: with decode graphs, the same file is loaded again without them
  // (the launches are timed one by one), which spares a second run its model's writing (a minute
  // at the 8B shape).
  // (the first model stays loaded: its dispose would take the backend with it)
  if (graphsRecorded) model = loadModel(path, { backend, maxBatchTokens, decodeGraphs: false });
  const cache = model.createCache(promptTokens + profileSteps + 1);
  let token = 0;
  prefillProfile = profileOf(1, () => (token = next(prompt, cache)));
  profile = profileOf(profileSteps, () => (token = next([token], cache)));
  cache.dispose();
  if (batch > 0) {
    const pool = model.createKVPool(batch * Math.ceil((batchPrompt + profileSteps + 1) / 16), { blockTokens: 16 });
    const caches = Array.from({ length: batch }, () => pool.createSequence(batchPrompt + profileSteps + 1));
    let tokens = caches.map((c, i) => next(batchPromptOf(i), c));
    const picked = caches.map(() => new Int32Array(1));
    batchProfile = profileOf(profileSteps, () => {
      model.transformer.forwardBatch(caches.map((c, i) => ({ tokens: Int32Array.of(tokens[i]!), cache: c, greedy: picked[i]! })));
      tokens = picked.map((t) => t[0]!);
    });
    for (const c of caches) c.dispose();
    pool.dispose();
  }
}
const fullLayers = values["full-layers"] ? Number(values["full-layers"]) : options.layers;
const scale = options.layers / fullLayers; // time per token grows ~linearly with layers
const medianPrefill = median(prefillMs);
const medianDecode = median(decodeMs);
const medianBatch = batch > 0 ? median(batchMs) : Number.POSITIVE_INFINITY;
const result = {
  runs,
  preset: values.preset,
  type: values.type,
  layers: options.layers,
  ...(options.distinctLayers !== undefined ? { distinctLayers: options.distinctLayers } : {}),
  fullLayers,
  device: backend.deviceInfo().name,
  programmaticLaunch: backend.deviceInfo().programmaticLaunch,
  graphs: graphsRecorded,
  pick,
  [`pp${promptTokens}`]: (promptTokens / medianPrefill) * 1000,
  [`tg${decodeTokens}`]: (decodeTokens / medianDecode) * 1000,
  [`pp${promptTokens}Scaled`]: (promptTokens / medianPrefill) * 1000 * scale,
  [`tg${decodeTokens}Scaled`]: (decodeTokens / medianDecode) * 1000 * scale,
  ...(batch > 0
    ? {
        [`tg${decodeTokens}_batch${batch}`]: ((batch * decodeTokens) / medianBatch) * 1000,
        [`tg${decodeTokens}_batch${batch}Scaled`]: ((batch * decodeTokens) / medianBatch) * 1000 * scale,
        batchSpeedup: ((batch * decodeTokens) / medianBatch) / (decodeTokens / medianDecode),
      }
    : {}),
  ...(profile ? { profile } : {}),
  ...(prefillProfile ? { prefillProfile } : {}),
  ...(batchProfile ? { batchProfile } : {}),
};
if (values.json) console.log(JSON.stringify(result));
else console.log(result);
model.dispose();
