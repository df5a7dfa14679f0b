#!/usr/bin/env node
// Split models: llama.cpp loads the shards `memra gguf-split` writes (and the file `--merge` writes
// back) and computes what it computes from the unsplit file. For two synthetic models and three ways
// of splitting, records each shard's SHA-256 and llama.cpp's next-token top-5 after a prompt from the
// first shard, from the merged file and from the original (the script fails if they differ).
// Writes packages/cli/src/__fixtures__/split-goldens.json; packages/cli/src/commands/gguf-split.test.ts
// checks that memra still writes these exact shards and computes llama.cpp's distribution from them.
//
//   cd tools/llamacpp && npm ci
//   node split-goldens.mjs
//
// Reference settings as model-goldens.mjs (CPU, 2 threads, F32 KV cache, no flash attention).
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NODE_LLAMA_CPP, generateModel, referenceContextOptions, referenceLlama, root, topDistribution } from "./golden-common.mjs";

const OUT = join(root, "packages/cli/src/__fixtures__/split-goldens.json");
const MODELS = {
  dense: { preset: "small", options: { weightType: "f16", layers: 4, vocabulary: 1024 } },
  moe: { preset: "tiny-moe", options: { weightType: "q8_0", layers: 3, hidden: 256, headDim: 64, expertFfn: 256, vocabulary: 1024 } },
};
// gguf-split's options, as memra gguf-split takes them
const SPLITS = [
  ["--split-max-tensors", "10"],
  ["--split-max-size", "1M"],
  ["--split-max-tensors", "16", "--no-tensor-first-split"],
];
const PROMPT = "The capital of France is";

const sha256 = (path) => createHash("sha256").update(readFileSync(path)).digest("hex");
const memra = (...args) => execFileSync("bun", ["packages/cli/src/main.ts", ...args], { cwd: root, encoding: "utf8" });

const llama = await referenceLlama([]);
async function nextTokenTop(path, tokens) {
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  const context = await model.createContext(referenceContextOptions);
  const sequence = context.getSequence();
  let top;
  for await (const step of sequence.evaluateWithMetadata(tokens ?? model.tokenize(PROMPT, true), { probabilities: true }, { temperature: 0 })) {
    top = topDistribution(step.probabilities, 5);
    break;
  }
  const prompt = tokens ?? model.tokenize(PROMPT, true);
  await context.dispose();
  await model.dispose();
  return { prompt: [...prompt], top };
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const models = [];
for (const [id, { preset, options }] of Object.entries(MODELS)) {
  const path = generateModel(preset, options);
  const whole = await nextTokenTop(path);
  const splits = [];
  for (const args of SPLITS) {
    const work = mkdtempSync(join(tmpdir(), "memra-split-goldens-"));
    memra("gguf-split", ...args, path, join(work, "model"));
    const shards = readdirSync(work).sort();
    const first = join(work, shards[0]);
    const fromShards = await nextTokenTop(first, whole.prompt);
    if (!same(fromShards.top, whole.top)) throw new Error(`${id} ${args.join(" ")}: llama.cpp computes another distribution from the shards`);
    const merged = join(work, "merged.gguf");
    memra("gguf-split", "--merge", first, merged);
    const fromMerged = await nextTokenTop(merged, whole.prompt);
    if (!same(fromMerged.top, whole.top)) throw new Error(`${id} ${args.join(" ")}: llama.cpp computes another distribution from the merged file`);
    splits.push({ args, shards: shards.map((name) => ({ name, sha256: sha256(join(work, name)) })), merged: sha256(merged) });
    rmSync(work, { recursive: true, force: true });
    console.error(`${id} ${args.join(" ")}: ${shards.length} shards; llama.cpp's distribution unchanged from the shards and the merged file`);
  }
  models.push({ id, preset, options, input: sha256(path), prompt: whole.prompt, top: whole.top.top, margin: whole.top.margin, splits });
}

writeFileSync(
  OUT,
  `${JSON.stringify({ reference: `llama.cpp via node-llama-cpp ${NODE_LLAMA_CPP}, loading memra gguf-split's shards (tools/llamacpp/split-goldens.mjs)`, models }, null, 1)}\n`,
);
console.error(`wrote ${OUT}`);
process.exit(0);
