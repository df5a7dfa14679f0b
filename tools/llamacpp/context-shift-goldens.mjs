#!/usr/bin/env node
// Records llama.cpp's context shift (llama_memory_seq_rm of [keep, keep + discard), then seq_add of
// -discard to the positions after: what llama-cli's and llama-server's --context-shift do when the
// context fills) on some synthetic models of the golden suite: a prompt is evaluated, ranges are
// erased from the KV cache (node-llama-cpp's sequence.eraseContextTokenRanges, which shifts the
// cells after them), more tokens are fed, and llama.cpp's greedy continuation with its top-5
// distribution per step is recorded. Writes packages/core/src/__fixtures__/context-shift-goldens.json.
//
//   cd tools/llamacpp && npm ci
//   node context-shift-goldens.mjs [--models dense-f32,moe-q8_0]
//
// Reference settings as model-goldens.mjs: CPU, 2 threads, flash attention off, K and V cache F32,
// context 256, batch 256, temperature 0. Every erased range starts after position 0: node-llama-cpp
// evaluates the sequence again, instead of shifting, when a range starts at the cache's first cell.
import { readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";
import { CONTEXT_SIZE, NODE_LLAMA_CPP, THREADS, generateModel, greedy, referenceContextOptions, referenceLlama, root, topDistribution } from "./golden-common.mjs";

const TOP_K = 5;
const CONTINUATION = 16;
// The generation: llama-server's loop with --context-shift in a context of 160 tokens and n_keep 10: before
// a generated token is fed, when n_past + 1 >= n_ctx, half of the tokens after n_keep are discarded.
const GENERATION = { context: 160, keep: 10, tokens: 120 };
const MODELS = ["dense-f32", "dense-gqa4-hd128-f32", "dense-yarn-f32", "dense-linear-q8_0", "moe-f32"];

const { values } = parseArgs({
  options: {
    models: { type: "string" },
    out: { type: "string", default: join(root, "packages/core/src/__fixtures__/context-shift-goldens.json") },
  },
});
const suite = JSON.parse(readFileSync(join(root, "packages/core/src/conformance/golden-suite.json"), "utf8"));
const wanted = values.models?.split(",") ?? MODELS;
const entries = wanted.map((id) => suite.models.find((m) => m.id === id) ?? fail(`unknown model id ${id}`));

// The prompt: every suite prompt's text, one after another (special tokens parsed).
const promptText = suite.prompts.map((p) => p.text).join("\n");
const feedText = " Then the answer was";
const moreText = "\nAnd after that,";
// Each scenario: erase ranges and feed tokens after the prompt, then generate. `feed` / `more` name the texts above.
const SCENARIOS = [
  { id: "unaligned", ops: [{ erase: { keep: 8, discard: 40 } }, { feed: "feed" }] },
  { id: "block-aligned-discard", ops: [{ erase: { keep: 17, discard: 16 } }, { feed: "feed" }] },
  { id: "two-shifts", ops: [{ erase: { keep: 4, discard: 20 } }, { feed: "feed" }, { erase: { keep: 4, discard: 30 } }, { feed: "more" }] },
];

const logs = [];
const llama = await referenceLlama(logs);

const models = [];
for (const entry of entries) {
  const started = performance.now();
  const path = generateModel(entry.preset, entry.options);
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  const promptTokens = model.tokenize(promptText, true);
  const texts = { feed: model.tokenize(feedText, false), more: model.tokenize(moreText, false) };
  const scenarios = [];
  for (const scenario of SCENARIOS) {
    const context = await model.createContext(referenceContextOptions);
    const sequence = context.getSequence();
    await sequence.evaluateWithoutGeneratingNewTokens(promptTokens);
    const ops = [{ evaluate: [...promptTokens] }];
    let last;
    for (const op of scenario.ops) {
      if (op.erase) {
        const { keep, discard } = op.erase;
        const before = sequence.nextTokenIndex;
        await sequence.eraseContextTokenRanges([{ start: keep, end: keep + discard }]);
        if (sequence.nextTokenIndex !== before - discard) fail(`${entry.id}/${scenario.id}: the erase left ${sequence.nextTokenIndex} tokens, expected ${before - discard}`);
        ops.push({ shift: { keep, discard } });
      } else {
        last = texts[op.feed];
        ops.push({ evaluate: [...last] });
        if (op !== scenario.ops.at(-1)) await sequence.evaluateWithoutGeneratingNewTokens(last);
      }
    }
    const continuation = [];
    const steps = [];
    const iterator = sequence.evaluateWithMetadata(last, { probabilities: true }, greedy);
    for await (const { token, probabilities } of iterator) {
      const step = summarize(probabilities);
      if (token !== step.top[0][0]) fail(`${entry.id}/${scenario.id}: greedy token ${token} is not the argmax ${step.top[0][0]}`);
      continuation.push(token);
      steps.push({ top: step.top.map(([id, p]) => [id, Number(p.toPrecision(7))]), margin: Math.round(step.margin * 1e6) / 1e6 });
      if (continuation.length >= CONTINUATION) break;
    }
    await context.dispose();
    scenarios.push({ id: scenario.id, ops, continuation, steps });
  }
  const generation = await recordGeneration(model, entry.id, promptTokens);
  await model.dispose();
  models.push({ id: entry.id, preset: entry.preset, options: entry.options, file: basename(path), scenarios, generation });
  console.log(`${entry.id}: ${((performance.now() - started) / 1000).toFixed(1)} s, prompt ${promptTokens.length} tokens`);
}
await llama.dispose();

const fixture = {
  suiteVersion: suite.version,
  reference: {
    engine: `llama.cpp via node-llama-cpp@${NODE_LLAMA_CPP}`,
    llamaCppRelease: `${llama.llamaCppRelease.repo}@${llama.llamaCppRelease.release}`,
    threads: THREADS,
    kvCacheType: "f32",
    flashAttention: false,
    contextSize: CONTEXT_SIZE,
    shift: "sequence.eraseContextTokenRanges([{ start: keep, end: keep + discard }]): llama_memory_seq_rm, then llama_memory_seq_add of -discard",
    probabilities: "softmax of the raw logits over the full vocabulary, renormalized in float64; top 5 per generated step",
  },
  models,
};
writeFileSync(values.out, serialize(fixture));
console.log(`-> ${values.out}`);

async function recordGeneration(model, id, promptTokens) {
  const context = await model.createContext(referenceContextOptions);
  const sequence = context.getSequence();
  const { keep } = GENERATION;
  const tokens = [];
  const steps = [];
  const shifts = [];
  let feed = [...promptTokens];
  let expected = promptTokens.length;
  while (tokens.length < GENERATION.tokens) {
    if (tokens.length > 0 && sequence.nextTokenIndex + 1 >= GENERATION.context) {
      const discard = Math.floor((sequence.nextTokenIndex - keep) / 2);
      await sequence.eraseContextTokenRanges([{ start: keep, end: keep + discard }]);
      shifts.push({ generated: tokens.length, discard });
      expected -= discard;
    }
    const iterator = sequence.evaluateWithMetadata(feed, { probabilities: true }, greedy)[Symbol.asyncIterator]();
    const { value } = await iterator.next();
    await iterator.return();
    if (sequence.nextTokenIndex !== expected) fail(`${id}: the sequence holds ${sequence.nextTokenIndex} tokens, expected ${expected}`);
    const step = summarize(value.probabilities);
    if (value.token !== step.top[0][0]) fail(`${id}: greedy token ${value.token} is not the argmax ${step.top[0][0]}`);
    if (model.isEogToken(value.token)) fail(`${id}: generated an end-of-generation token`);
    tokens.push(value.token);
    steps.push({ top: step.top.map(([t, p]) => [t, Number(p.toPrecision(7))]), margin: Math.round(step.margin * 1e6) / 1e6 });
    feed = [value.token];
    expected++;
  }
  await context.dispose();
  return { ...GENERATION, promptTokens: [...promptTokens], shifts, continuation: tokens, steps };
}

function summarize(probabilities) {
  return topDistribution(probabilities, TOP_K);
}

// Indented JSON, each step and each token list on one line.
function serialize(value) {
  const replacer = (key, v) => (key === "steps" ? v.map((step) => `@@${JSON.stringify(step)}@@`) : Array.isArray(v) && v.every((x) => typeof x === "number") ? `@@${JSON.stringify(v)}@@` : v);
  return `${JSON.stringify(value, replacer, 2).replace(/"@@(.*?)@@"/g, (_, inner) => inner.replace(/\\"/g, '"'))}\n`;
}

function fail(message) {
  console.error(`context-shift-goldens: ${message}`);
  process.exit(1);
}
