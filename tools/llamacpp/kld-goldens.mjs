#!/usr/bin/env node
// KL divergence of quantized models from their base, from llama.cpp's distributions: a synthetic f16
// model and its Q8_0, Q4_K_M and Q2_K files (written by `memra quantize`, which gives llama-quantize's
// files byte for byte) are evaluated by llama.cpp over the same windows of a text; for every scored
// token (the second half of each window, as llama-perplexity scores them) the KL divergence of the two
// next-token distributions, the change in the probability of the actual next token and whether the
// most likely tokens agree are computed in float64 from llama.cpp's full-vocabulary probabilities.
// Writes packages/core/src/__fixtures__/kld-goldens.json, which `computeKlDivergence` is compared with.
//
//   cd tools/llamacpp && npm ci
//   node kld-goldens.mjs
//
// Reference settings as model-goldens.mjs (CPU, 2 threads, F32 KV cache, no flash attention).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NODE_LLAMA_CPP, generateModel, referenceContextOptions, referenceLlama, root } from "./golden-common.mjs";

const OUT = join(root, "packages/core/src/__fixtures__/kld-goldens.json");
const BASE = { preset: "small", options: { weightType: "f16", layers: 4, vocabulary: 1024 } };
const TYPES = ["Q8_0", "Q4_K_M", "Q2_K"];
const TEXT = "packages/cli/src/__fixtures__/demo-model/heldout-sample.txt";
const CONTEXT = 128;
const WINDOWS = 3;

const llama = await referenceLlama([]);
const first = Math.floor(CONTEXT / 2);

/** Each scored position's full next-token distribution (Float64Array over the vocabulary), window by window. */
async function distributions(path, tokens) {
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  const context = await model.createContext({ ...referenceContextOptions, contextSize: CONTEXT, batchSize: CONTEXT });
  const sequence = context.getSequence();
  const rows = [];
  for (let w = 0; w < WINDOWS; w++) {
    await sequence.clearHistory();
    const window = tokens.slice(w * CONTEXT, (w + 1) * CONTEXT);
    const input = window.map((token, j) => (j >= first && j < CONTEXT - 1 ? [token, { generateNext: { probabilities: true, options: { temperature: 0 } } }] : token));
    const output = await sequence.controlledEvaluate(input);
    for (let j = first; j < CONTEXT - 1; j++) {
      // node-llama-cpp gives every token's probability (1,024 here)
      const probabilities = output[j].next.probabilities;
      const row = new Float64Array(probabilities.size);
      for (const [id, p] of probabilities) row[id] = p;
      rows.push(row);
    }
  }
  await context.dispose();
  await model.dispose();
  return rows;
}

const basePath = generateModel(BASE.preset, BASE.options);
const tokenizer = await llama.loadModel({ modelPath: basePath, gpuLayers: 0 });
const tokens = [...tokenizer.tokenize(readFileSync(join(root, TEXT), "utf8"), false)].slice(0, WINDOWS * CONTEXT);
await tokenizer.dispose();
const targets = [];
for (let w = 0; w < WINDOWS; w++) for (let j = first; j < CONTEXT - 1; j++) targets.push(tokens[w * CONTEXT + j + 1]);

const base = await distributions(basePath, tokens);
const work = mkdtempSync(join(tmpdir(), "memra-kld-goldens-"));
const cases = [];
for (const type of TYPES) {
  const path = join(work, `${type}.gguf`);
  execFileSync("bun", ["packages/cli/src/main.ts", "quantize", basePath, path, type, "--json"], { cwd: root });
  const quantized = await distributions(path, tokens);
  const kld = [];
  const deltaP = [];
  const sameTop = [];
  const topMargin = [];
  quantized.forEach((q, i) => {
    const b = base[i];
    let sum = 0;
    let topB = 0;
    let topQ = 0;
    for (let id = 0; id < b.length; id++) {
      if (b[id] > 0) sum += b[id] * (Math.log(b[id]) - Math.log(q[id]));
      if (b[id] > b[topB]) topB = id;
      if (q[id] > q[topQ]) topQ = id;
    }
    kld.push(sum);
    deltaP.push(q[targets[i]] - b[targets[i]]);
    sameTop.push(topB === topQ);
    // how clear each model's top-1 is: ln(p1 / p2), the smaller of the two
    const margin = (row) => {
      const sorted = [...row].sort((x, y) => y - x);
      return Math.log(sorted[0] / sorted[1]);
    };
    topMargin.push(Math.min(margin(b), margin(q)));
  });
  const mean = kld.reduce((s, x) => s + x, 0) / kld.length;
  cases.push({ type, meanKld: mean, kld, deltaP, sameTop, topMargin });
  console.error(`${type}: mean KLD ${mean.toFixed(6)} over ${kld.length} tokens, same top ${sameTop.filter(Boolean).length}`);
}
rmSync(work, { recursive: true, force: true });

writeFileSync(
  OUT,
  `${JSON.stringify({ reference: `llama.cpp via node-llama-cpp ${NODE_LLAMA_CPP} (tools/llamacpp/kld-goldens.mjs)`, base: BASE, text: TEXT, context: CONTEXT, windows: WINDOWS, tokens, cases })}\n`,
);
console.error(`wrote ${OUT}`);
process.exit(0);
