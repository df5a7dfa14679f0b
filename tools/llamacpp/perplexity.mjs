#!/usr/bin/env node
// Perplexity of a GGUF model over a text file as llama.cpp computes it, for comparison with
// `memra perplexity`: the text is tokenized by llama.cpp (no BOS), cut into windows of --ctx
// tokens, each window evaluated in one batch from an empty context, and the second half of each
// window's predictions scored (token j + 1 from the distribution after token j, for j in
// [ctx/2, ctx - 1)), as llama.cpp's perplexity tool and memra's computePerplexity do.
// The distributions are node-llama-cpp's full-vocabulary probabilities at temperature 0 (softmax
// of the raw logits; see README.md).
//
//   node perplexity.mjs -m MODEL.gguf -f FILE [--ctx 256] [--json]
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const THREADS = 2;
const { values } = parseArgs({
  options: {
    model: { type: "string", short: "m" },
    file: { type: "string", short: "f" },
    ctx: { type: "string", default: "256" },
    json: { type: "boolean", default: false },
  },
});
if (!values.model || !values.file) {
  console.error("usage: node perplexity.mjs -m MODEL.gguf -f FILE [--ctx 256] [--json]");
  process.exit(2);
}
const contextSize = Number(values.ctx);
const llama = await getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: values.model, gpuLayers: 0 });
const tokens = model.tokenize(readFileSync(values.file, "utf8"), false);
const windows = Math.floor(tokens.length / contextSize);
if (windows < 1) {
  console.error(`${values.file} has ${tokens.length} tokens, fewer than one window of ${contextSize}`);
  process.exit(1);
}
const first = Math.floor(contextSize / 2);
let nll = 0;
let scored = 0;
const perWindow = [];
const started = performance.now();
const context = await model.createContext({
  contextSize,
  batchSize: contextSize,
  sequences: 1,
  threads: { ideal: THREADS, min: THREADS },
  flashAttention: false,
  experimentalKvCacheKeyType: "F32",
  experimentalKvCacheValueType: "F32",
  failedCreationRemedy: false,
});
const sequence = context.getSequence();
for (let w = 0; w < windows; w++) {
  await sequence.clearHistory();
  const window = tokens.slice(w * contextSize, (w + 1) * contextSize);
  const input = window.map((token, j) =>
    j >= first && j < contextSize - 1 ? [token, { generateNext: { probabilities: true, options: { temperature: 0 } } }] : token,
  );
  const output = await sequence.controlledEvaluate(input);
  for (let j = first; j < contextSize - 1; j++) {
    const probability = output[j]?.next?.probabilities?.get(window[j + 1]);
    if (probability === undefined) throw new Error(`window ${w}, position ${j}: no probability for token ${window[j + 1]}`);
    nll -= Math.log(Math.max(probability, Number.MIN_VALUE));
    scored++;
  }
  perWindow.push(Math.exp(nll / scored));
}
const seconds = (performance.now() - started) / 1000;
const result = { perplexity: Math.exp(nll / scored), windows, scoredTokens: scored, context: contextSize, tokens: tokens.length, seconds };
if (values.json) console.log(JSON.stringify({ ...result, perWindow }));
else {
  console.log(`${tokens.length} tokens, ${windows} windows of ${contextSize}`);
  console.log(perWindow.map((p, i) => `[${i + 1}]${p.toFixed(4)}`).join(","));
  console.log(`Final estimate: PPL = ${result.perplexity.toFixed(4)} (${scored} tokens scored, ${seconds.toFixed(1)} s)`);
}
await context.dispose();
await model.dispose();
