#!/usr/bin/env node
// Records llama.cpp's greedy continuations and next-token distributions for the synthetic models of
// the golden suite (packages/core/src/conformance/golden-suite.json) as fixtures:
// packages/core/src/__fixtures__/goldens/<model-id>.json. See README.md in this folder.
//
//   cd tools/llamacpp && npm ci
//   node model-goldens.mjs                                  # every model of the suite
//   node model-goldens.mjs --models dense-f32,moe-q8_0      # some of them
//   node model-goldens.mjs --file /path/x.gguf --id dense-q8_0-dequant [--preset small --options '{...}']
//
// Reference settings (recorded in every fixture): CPU, 2 threads, flash attention off, K and V cache
// F32, context 256, batch 256 (the prompt is one batch), fresh context per prompt, temperature 0
// (greedy), no repeat penalty / token bias / grammar. The probabilities are softmax(raw logits) over
// the full vocabulary (see README.md for how that was established).
import { mkdirSync, openSync, readFileSync, readSync, closeSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { BATCH_SIZE, CONTEXT_SIZE, NODE_LLAMA_CPP, THREADS, generateModel, greedy, referenceContextOptions, referenceLlama, topDistribution } from "./golden-common.mjs";

const LOW_MARGIN = 0.1;

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const { values } = parseArgs({
  options: {
    suite: { type: "string", default: join(root, "packages/core/src/conformance/golden-suite.json") },
    out: { type: "string", default: join(root, "packages/core/src/__fixtures__/goldens") },
    models: { type: "string" },
    prompts: { type: "string" },
    file: { type: "string" },
    id: { type: "string" },
    preset: { type: "string" },
    options: { type: "string" },
    "dequantized-twin": { type: "string" },
    verbose: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (values.help) {
  console.log(`usage: node model-goldens.mjs [--models id1,id2] [--prompts p1,p2] [--suite FILE] [--out DIR] [--verbose]
       node model-goldens.mjs --file MODEL.gguf --id ID [--preset P] [--options JSON] [--dequantized-twin SOURCE_ID]`);
  process.exit(0);
}

const suite = JSON.parse(readFileSync(values.suite, "utf8"));
const N = suite.continuationTokens;
const TOP_K = suite.topK;
const promptFilter = values.prompts?.split(",");
const prompts = promptFilter ? suite.prompts.filter((p) => promptFilter.includes(p.id)) : suite.prompts;
if (promptFilter && prompts.length !== promptFilter.length) fail(`unknown prompt id in --prompts ${values.prompts}`);

// The models to record: suite entries, or one explicit file.
let jobs;
if (values.file !== undefined || values.id !== undefined) {
  if (values.file === undefined || values.id === undefined) fail("--file and --id go together");
  if (values.models !== undefined) fail("--models and --file are alternatives");
  const path = resolve(values.file);
  if (!statSync(path, { throwIfNoEntry: false })?.isFile()) fail(`no such file: ${path}`);
  jobs = [{
    id: values.id,
    preset: values.preset ?? null,
    options: values.options !== undefined ? JSON.parse(values.options) : null,
    dequantizedTwinOf: values["dequantized-twin"] ?? null,
    path,
  }];
} else {
  if (values["dequantized-twin"] !== undefined) fail("--dequantized-twin needs --file and --id");
  const wanted = values.models?.split(",");
  const entries = wanted ? suite.models.filter((m) => wanted.includes(m.id)) : suite.models;
  if (wanted && entries.length !== wanted.length) {
    fail(`unknown model id(s): ${wanted.filter((w) => !suite.models.some((m) => m.id === w)).join(", ")}`);
  }
  jobs = entries.map((m) => ({ id: m.id, preset: m.preset, options: m.options, lora: m.lora ?? null, path: null }));
}

// llama.cpp's log goes to a buffer: we read the KV cache types, flash attention, batch and CPU backend
// from it to check that our settings took effect.
const logs = [];
const llama = await referenceLlama(logs, values.verbose);
const llamaCppRelease = describeLlamaCppRelease();
console.log(`llama.cpp ${llamaCppRelease}, ${prompts.length} prompts x ${N} tokens, top ${TOP_K}`);

mkdirSync(values.out, { recursive: true });
const summary = [];
for (const job of jobs) summary.push(await recordModel(job));

console.log("\nsummary");
for (const s of summary) {
  console.log(
    `  ${s.id.padEnd(24)} ${s.seconds.toFixed(1).padStart(6)} s  margin<${LOW_MARGIN}: ${String(s.lowMargin).padStart(3)}/${s.steps}` +
      `  min margin ${s.minMargin.toFixed(6)}  argmax exceptions ${s.exceptions}  eog steps ${s.eogSteps}  ${s.bytes} B`,
  );
}
const totalBytes = summary.reduce((a, s) => a + s.bytes, 0);
console.log(`  total ${summary.reduce((a, s) => a + s.seconds, 0).toFixed(1)} s, ${totalBytes} B`);
await llama.dispose();
process.exit(summary.some((s) => s.exceptions > 0) ? 2 : 0);

async function recordModel(job) {
  const started = performance.now();
  const path = job.path ?? generateModel(job.preset, job.options);
  // A LoRA adapter (golden-suite.json's lora): written by @memra/synthetic beside the model, loaded with the context.
  const loraPath = job.lora ? generateModel(job.preset, job.options, job.lora.options) : null;
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  // ggml picks the CPU backend variant (haswell, zen4, ...) at load; the log line arrives asynchronously.
  const cpuBackend = logs.map((l) => /libggml-cpu-([\w-]+)\.so/.exec(l)?.[1]).find(Boolean) ?? null;
  const bos = model.tokens.bos;
  const shouldPrependBos = model.tokens.shouldPrependBosToken;
  if (shouldPrependBos) console.warn(`  ${job.id}: the model asks for a BOS token; llama.cpp's tokenize(text, special) does not add it and neither do we`);

  const recorded = [];
  let lowMargin = 0;
  let minMargin = Infinity;
  let exceptions = 0;
  let eogSteps = 0;
  let maxNormError = 0;
  for (const prompt of prompts) {
    const promptTokens = model.tokenize(prompt.text, prompt.special);
    if (bos != null && promptTokens[0] === bos) fail(`${job.id}/${prompt.id}: tokenize added a BOS token`);
    if (promptTokens.length > BATCH_SIZE) fail(`${job.id}/${prompt.id}: prompt of ${promptTokens.length} tokens exceeds the batch`);

    const logStart = logs.length;
    const context = await model.createContext({
      ...(loraPath ? { lora: { adapters: [{ filePath: loraPath, scale: job.lora.scale }] } } : {}),
      ...referenceContextOptions,
    });
    const sequence = context.getSequence();
    const continuation = [];
    const steps = [];
    const stepExceptions = [];
    const threadsSeen = new Set();
    const iterator = sequence.evaluateWithMetadata(promptTokens, { probabilities: true }, greedy);
    for await (const { token, probabilities } of iterator) {
      threadsSeen.add(context.currentThreads);
      const step = summarize(probabilities);
      const index = continuation.length;
      continuation.push(token);
      if (token !== step.top[0][0]) {
        exceptions++;
        stepExceptions.push({ step: index, chosen: token, argmax: step.top[0][0], chosenProb: probabilities.get(token) ?? null, maxProb: step.top[0][1] });
      }
      if (model.isEogToken(token)) eogSteps++;
      maxNormError = Math.max(maxNormError, Math.abs(step.rawSum - 1));
      if (step.margin < LOW_MARGIN) lowMargin++;
      minMargin = Math.min(minMargin, step.margin);
      steps.push({
        top: step.top.map(([id, p]) => [id, round7(p)]),
        margin: Number.isFinite(step.margin) ? Math.round(step.margin * 1e6) / 1e6 : null,
      });
      if (continuation.length >= N) break;
    }
    if (continuation.length !== N) fail(`${job.id}/${prompt.id}: generated ${continuation.length} tokens, expected ${N}`);
    await new Promise((r) => setTimeout(r, 0));
    checkContextLog(logs.slice(logStart), `${job.id}/${prompt.id}`);
    if (threadsSeen.size !== 1 || !threadsSeen.has(THREADS)) fail(`${job.id}/${prompt.id}: evaluated with threads ${[...threadsSeen]}`);
    await context.dispose();

    recorded.push({
      id: prompt.id,
      text: prompt.text,
      special: prompt.special,
      promptTokens: [...promptTokens],
      continuation,
      ...(stepExceptions.length > 0 ? { argmaxExceptions: stepExceptions } : {}),
      steps,
    });
  }
  await model.dispose();

  const fixture = {
    suiteVersion: suite.version,
    model: {
      id: job.id,
      preset: job.preset,
      options: job.options,
      ...(job.lora ? { lora: { ...job.lora, file: basename(loraPath) } } : {}),
      file: basename(path),
      ...(job.dequantizedTwinOf ? { dequantizedTwinOf: job.dequantizedTwinOf } : {}),
    },
    reference: {
      engine: `llama.cpp via node-llama-cpp@${NODE_LLAMA_CPP}`,
      llamaCppRelease,
      cpuBackend,
      threads: THREADS,
      kvCacheType: "f32",
      flashAttention: false,
      contextSize: CONTEXT_SIZE,
      batchSize: BATCH_SIZE,
      bos: shouldPrependBos ? "model asks for BOS; not added" : "none (model does not add BOS)",
      probabilities: "softmax of the raw logits over the full vocabulary (float32 from llama.cpp, renormalized in float64)",
    },
    prompts: recorded,
  };
  const file = join(values.out, `${job.id}.json`);
  const text = serialize(fixture);
  writeFileSync(file, text);
  const seconds = (performance.now() - started) / 1000;
  const total = prompts.length * N;
  console.log(`${job.id}: ${seconds.toFixed(1)} s, margin<${LOW_MARGIN} ${lowMargin}/${total}, min margin ${minMargin.toFixed(6)}, exceptions ${exceptions}, max |sum-1| ${maxNormError.toExponential(2)} -> ${file}`);
  return { id: job.id, seconds, lowMargin, minMargin, exceptions, eogSteps, steps: total, bytes: Buffer.byteLength(text) };
}

function summarize(probabilities) {
  if (probabilities == null) fail("no probabilities returned");
  return topDistribution(probabilities, TOP_K);
}

// The llama.cpp log of the context creation names the KV cache types and the other settings.
function checkContextLog(lines, where) {
  const text = lines.join("");
  const kv = /llama_kv_cache: size = .*K \((\w+)\):.*V \((\w+)\):/.exec(text);
  if (!kv) fail(`${where}: no KV cache line in llama.cpp's log`);
  if (kv[1] !== "f32" || kv[2] !== "f32") fail(`${where}: KV cache is K ${kv[1]} / V ${kv[2]}, expected f32`);
  if (!/flash_attn\s+= disabled/.test(text)) fail(`${where}: flash attention not reported disabled`);
  const batch = /n_batch\s+= (\d+)/.exec(text);
  const ubatch = /n_ubatch\s+= (\d+)/.exec(text);
  if (!batch || Number(batch[1]) < BATCH_SIZE || !ubatch || Number(ubatch[1]) < BATCH_SIZE) fail(`${where}: n_batch/n_ubatch below ${BATCH_SIZE}`);
}

function describeLlamaCppRelease() {
  const release = llama.llamaCppRelease;
  let commit = null;
  try {
    const bundle = join(here, "node_modules/node-llama-cpp/llama/gitRelease.bundle");
    const fd = openSync(bundle, "r");
    const head = Buffer.alloc(200);
    readSync(fd, head, 0, 200, 0);
    closeSync(fd);
    commit = /([0-9a-f]{40}) HEAD/.exec(head.toString("latin1"))?.[1] ?? null;
  } catch {}
  return `${release.repo}@${release.release}${commit ? ` (bundled source ${commit.slice(0, 12)})` : ""}`;
}

function round7(p) {
  return Number(p.toPrecision(7));
}

// Indented JSON except each step, which is one line.
function serialize(fixture) {
  const { prompts: list, ...head } = fixture;
  const headJson = JSON.stringify(head, null, 2);
  const promptJson = list.map((p) => {
    const { steps, ...rest } = p;
    const fields = Object.entries(rest).map(([k, v]) => `      ${JSON.stringify(k)}: ${JSON.stringify(v)}`);
    fields.push(`      "steps": [\n${steps.map((s) => `        ${JSON.stringify(s)}`).join(",\n")}\n      ]`);
    return `    {\n${fields.join(",\n")}\n    }`;
  });
  return `${headJson.slice(0, -2)},\n  "prompts": [\n${promptJson.join(",\n")}\n  ]\n}\n`;
}

function fail(message) {
  console.error(`model-goldens: ${message}`);
  process.exit(1);
}
