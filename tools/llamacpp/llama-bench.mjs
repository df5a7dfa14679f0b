// llama.cpp's speed on a GGUF file through node-llama-cpp (CPU, prebuilt binary), measured the way
// `memra bench` measures ours, with the same options and the same JSON shape:
//
//   node tools/llamacpp/llama-bench.mjs -m FILE [-p 512] [-n 128] [-t 2] [-r 5] [--json]
//
//   ppN  one evaluation of N prompt tokens in an empty sequence (batch size N, as llama-bench's
//        n_ubatch 512 for N <= 512), with the last token's logits and a greedy pick of the next
//   tgN  N single-token decodes in an empty sequence (see runGeneration)
//   ttft one single-token decode in an empty sequence and its greedy next token
//   tgN xB with --npl B,...: B sequences of one context (sequences: B) each evaluating one token
//        per step, concurrently, which node-llama-cpp batches into one llama_decode per step (the
//        aggregate tokens/s of all B, as llama-batched-bench's S_TG and `memra bench --npl`)
// Every evaluation computes the last token's logits, as llama-bench's batches do (llama_batch_get_one
// outputs the last token) and as `memra bench` does: node-llama-cpp's evaluateWithoutGeneratingNewTokens
// requests no logits, so llama.cpp skips the output projection (151,936 x hidden for Qwen3), which
// made its ttft and tg look faster than the same work measured on our side.
// Each test runs once untimed, then REPS times. Context settings are node-llama-cpp's defaults (what a
// user of it gets: f16 KV cache, its flash-attention default) except the thread count.
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const { values } = parseArgs({
  options: {
    model: { type: "string", short: "m" },
    prompt: { type: "string", short: "p", default: "512" },
    gen: { type: "string", short: "n", default: "128" },
    threads: { type: "string", short: "t", default: "2" },
    reps: { type: "string", short: "r", default: "5" },
    json: { type: "boolean", default: false },
    npl: { type: "string" },
  },
});
if (!values.model) {
  console.error("usage: node llama-bench.mjs -m FILE [-p 512] [-n 128] [-t 2] [-r 5] [--json]");
  process.exit(1);
}
const promptTokens = Number(values.prompt);
const genTokens = Number(values.gen);
const threads = Number(values.threads);
const reps = Number(values.reps);

function summarize(tokens, samples) {
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  const variance = samples.length > 1 ? samples.reduce((a, b) => a + (b - mean) ** 2, 0) / (samples.length - 1) : 0;
  const sorted = [...samples].sort((a, b) => a - b);
  const m = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[m] : (sorted[m - 1] + sorted[m]) / 2;
  return { tokens, tps: mean, stddev: Math.sqrt(variance), median, samples };
}

// The same token ids as memra bench (packages/cli/src/commands/bench.ts).
function benchTokens(count, vocabulary) {
  let state = 0x2545f491;
  const span = Math.max(1, Math.min(vocabulary, 150000) - 1000);
  return Array.from({ length: count }, () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return Math.min(vocabulary - 1, 1000 + (state % span));
  });
}

const llama = await getLlama({
  gpu: false,
  build: "never",
  usePrebuiltBinaries: true,
  skipDownload: true,
  maxThreads: threads,
  logLevel: LlamaLogLevel.error,
});
const loadStarted = performance.now();
const model = await llama.loadModel({ modelPath: values.model, gpuLayers: 0 });
const loadMs = performance.now() - loadStarted;
const contextSize = Math.max(promptTokens, genTokens + 1, 2) + 16;
const context = await model.createContext({
  contextSize,
  batchSize: Math.max(promptTokens, 1),
  sequences: 1,
  threads: { ideal: threads, min: threads },
});
const vocabulary = model.tokens.nTokens ?? model.fileInsights.tensorInfo?.find?.((t) => t.name === "token_embd.weight")?.dimensions?.[1] ?? 151936;
const prompt = benchTokens(Math.max(promptTokens, 1), vocabulary);

// Evaluates tokens with logits for the last one and picks the next token greedily in llama.cpp's
// sampler (controlledEvaluate: native sampling, none of evaluate's JS token handling).
async function evaluateWithLogits(sequence, tokens) {
  const input = tokens.map((token, i) => (i === tokens.length - 1 ? [token, { generateNext: { token: true, options: { temperature: 0 } } }] : token));
  const output = await sequence.controlledEvaluate(input);
  if (output[tokens.length - 1]?.next?.token == null) throw new Error("llama.cpp returned no next token");
}

async function runPrompt() {
  const sequence = context.getSequence();
  try {
    const started = performance.now();
    await evaluateWithLogits(sequence, prompt.slice(0, promptTokens));
    return performance.now() - started;
  } finally {
    sequence.dispose();
  }
}

// Generation as llama-bench's tg test: one decode per token, each with its logits and a greedy pick
// in llama.cpp's native sampler; the token fed is the benchmark's next id, not the pick (llama-bench
// feeds random tokens). Sampling through sequence.evaluate costs node-llama-cpp up to a second per
// token on some random-weight models (its JS token handling), which would measure the binding
// rather than llama.cpp; controlledEvaluate samples natively.
async function runGeneration(count) {
  const sequence = context.getSequence();
  try {
    const started = performance.now();
    for (let i = 0; i < count; i++) await evaluateWithLogits(sequence, [prompt[i % prompt.length]]);
    return performance.now() - started;
  } finally {
    sequence.dispose();
  }
}

// B sequences decoding together: each step, every sequence evaluates one token (concurrently, so
// node-llama-cpp's batching puts them in one decode), each with its logits and a greedy pick.
// The context's sequences are taken once and emptied before each run (a disposed sequence's id is
// not free again at once).
async function runParallel(active, count) {
  await Promise.all(active.map((sequence) => sequence.clearHistory()));
  const started = performance.now();
  for (let i = 0; i < count; i++) await Promise.all(active.map((sequence, j) => evaluateWithLogits(sequence, [prompt[(i + j) % prompt.length]])));
  return performance.now() - started;
}

const pp = [];
const tg = [];
const ttft = [];
const npl = [];
if (promptTokens > 0) {
  await runPrompt();
  for (let rep = 0; rep < reps; rep++) pp.push((promptTokens / (await runPrompt())) * 1000);
}
if (genTokens > 0) {
  await runGeneration(Math.min(genTokens, 8));
  for (let rep = 0; rep < reps; rep++) tg.push((genTokens / (await runGeneration(genTokens))) * 1000);
}
for (let rep = 0; rep < reps; rep++) ttft.push(await runGeneration(1));
for (const sequences of (values.npl ?? "").split(",").filter(Boolean).map(Number)) {
  const parallelContext = await model.createContext({
    contextSize: sequences * (genTokens + 16),
    batchSize: Math.max(sequences, 1),
    sequences,
    threads: { ideal: threads, min: threads },
  });
  const active = Array.from({ length: sequences }, () => parallelContext.getSequence());
  await runParallel(active, Math.min(genTokens, 8));
  const samples = [];
  for (let rep = 0; rep < reps; rep++) samples.push(((sequences * genTokens) / (await runParallel(active, genTokens))) * 1000);
  npl.push({ sequences, ...summarize(genTokens, samples) });
  await parallelContext.dispose();
}

const results = {
  model: values.model,
  backend: `llama.cpp (node-llama-cpp 3.21.1) cpu, ${threads} threads`,
  threads,
  reps,
  load_ms: loadMs,
  ...(pp.length ? { pp: summarize(promptTokens, pp) } : {}),
  ...(tg.length ? { tg: summarize(genTokens, tg) } : {}),
  ...(npl.length ? { npl } : {}),
  ttft_ms: summarize(1, ttft).median,
  peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
};
await context.dispose();
await model.dispose();
await llama.dispose();
if (values.json) {
  console.log(JSON.stringify(results));
} else {
  if (results.pp) console.log(`pp${promptTokens}: ${results.pp.tps.toFixed(2)} ± ${results.pp.stddev.toFixed(2)} tokens/s`);
  if (results.tg) console.log(`tg${genTokens}: ${results.tg.tps.toFixed(2)} ± ${results.tg.stddev.toFixed(2)} tokens/s`);
  console.log(`ttft ${results.ttft_ms.toFixed(2)} ms, peak RSS ${(results.peak_rss_bytes / 2 ** 20).toFixed(0)} MiB`);
}
