#!/usr/bin/env node
// Records llama.cpp's embeddings (node-llama-cpp's LlamaEmbeddingContext.getEmbeddingFor: the
// pooled hidden states after the final norm, not normalized) of a few texts for synthetic models
// shaped as embedding models: packages/core/src/__fixtures__/embedding-goldens.json.
//
//   cd tools/llamacpp && npm ci && node embedding-goldens.mjs
//
// Models: Qwen3-Embedding's setup (pooling_type last, add_eos_token), mean pooling, and a chat model
// without pooling metadata (llama.cpp then takes the last token's row). CPU, 2 threads, context 256.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const out = join(root, "packages/core/src/__fixtures__/embedding-goldens.json");

const models = [
  { id: "tiny-q8_0-last-eos", preset: "tiny", options: { weightType: "q8_0", poolingType: "last", addEosToken: true } },
  { id: "tiny-f32-mean", preset: "tiny", options: { weightType: "f32", poolingType: "mean" } },
  { id: "tiny-q8_0-no-pooling", preset: "tiny", options: { weightType: "q8_0" } },
];
const texts = [
  "The quick brown fox jumps over the lazy dog.",
  "What is the capital of France?",
  "Paris is the capital and largest city of France.",
  "def add(a, b):\n    return a + b",
  "机器学习是人工智能的一个分支。",
  "a",
];

const llama = await getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true, logLevel: LlamaLogLevel.error });
const records = [];
for (const { id, preset, options } of models) {
  const path = execFileSync("bun", ["packages/synthetic/src/cli.ts", "--preset", preset, "--options", JSON.stringify(options)], { cwd: root, encoding: "utf8" }).trim().split("\n").pop();
  const model = await llama.loadModel({ modelPath: path });
  const context = await model.createEmbeddingContext({ contextSize: 256, batchSize: 256, threads: 2 });
  const cases = [];
  for (const text of texts) {
    const embedding = await context.getEmbeddingFor(text);
    cases.push({ text, tokens: context.calculateInputLength(text), embedding: embedding.vector.map((value) => Number(value.toPrecision(9))) });
  }
  records.push({ id, preset, options, cases });
  await context.dispose();
  await model.dispose();
  console.log(`${id}: ${cases.length} texts, ${cases[0].embedding.length} dimensions`);
}
writeFileSync(
  out,
  `${JSON.stringify({ generatedBy: "tools/llamacpp/embedding-goldens.mjs", llamaCpp: { release: llama.llamaCppRelease.release, nodeLlamaCpp: "3.21.1", buildType: llama.buildType }, settings: { threads: 2, contextSize: 256 }, models: records }, null, 1)}\n`,
);
console.log(`wrote ${out}`);
