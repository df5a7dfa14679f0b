#!/usr/bin/env node
// Records llama.cpp's reranking scores for synthetic models shaped as Qwen3-Reranker as llama.cpp's
// converter writes it (pooling_type rank, classifier labels yes/no, a cls.output.weight head, the
// rerank prompt in tokenizer.chat_template.rerank): packages/core/src/__fixtures__/rerank-goldens.json.
//
//   cd tools/llamacpp && npm ci && node rerank-goldens.mjs
//
// Each query–document pair is put in the GGUF's rerank template ({query}, {document} replaced, as
// llama.cpp's server formats it), tokenized whole by llama.cpp with special tokens parsed, and
// scored by node-llama-cpp's ranking context (LlamaRankingContext, rank pooling: the last token's
// hidden state after the final norm through cls_out, softmax for Qwen3; the score is the first
// label's probability). CPU, 2 threads, context 512.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const out = join(root, "packages/core/src/__fixtures__/rerank-goldens.json");

const models = [
  { id: "tiny-f32-reranker", preset: "tiny", options: { weightType: "f32", reranker: true } },
  { id: "tiny-q8_0-reranker", preset: "tiny", options: { weightType: "q8_0", reranker: true, seed: 2 } },
  { id: "small-q4_K_M-reranker", preset: "small", options: { weightType: "q4_K_M", reranker: true } },
];
const queries = ["What is the capital of France?", "how do I add two numbers in python"];
const documents = [
  "Paris is the capital and largest city of France.",
  "def add(a, b):\n    return a + b",
  "The quick brown fox jumps over the lazy dog.",
  "机器学习是人工智能的一个分支。",
  "a",
];

const llama = await getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true, logLevel: LlamaLogLevel.error });
const records = [];
for (const { id, preset, options } of models) {
  const path = execFileSync("bun", ["packages/synthetic/src/cli.ts", "--preset", preset, "--options", JSON.stringify(options)], { cwd: root, encoding: "utf8" }).trim().split("\n").pop();
  const model = await llama.loadModel({ modelPath: path });
  const template = model.fileInfo.metadata.tokenizer["chat_template.rerank"];
  if (!model.fileInsights.supportsRanking || typeof template !== "string") throw new Error(`${id}: llama.cpp does not see a reranker`);
  const context = await model.createRankingContext({ contextSize: 512, batchSize: 512, threads: 2 });
  const cases = [];
  for (const query of queries) {
    for (const document of documents) {
      const prompt = template.replaceAll("{query}", () => query).replaceAll("{document}", () => document);
      const tokens = Array.from(model.tokenize(prompt, true));
      // The ranking context's own evaluation of a token sequence (its public rank() tokenizes the
      // query and the document apart from the template, which llama.cpp's server does not).
      const score = await context._evaluateRankingForInput(tokens);
      cases.push({ query, document, tokens, score: Number(score.toPrecision(9)) });
    }
  }
  records.push({ id, preset, options, cases });
  await context.dispose();
  await model.dispose();
  console.log(`${id}: ${cases.length} pairs, scores ${cases.map((c) => c.score.toFixed(4)).join(" ")}`);
}
writeFileSync(
  out,
  `${JSON.stringify({ generatedBy: "tools/llamacpp/rerank-goldens.mjs", llamaCpp: { release: llama.llamaCppRelease.release, nodeLlamaCpp: "3.21.1", buildType: llama.buildType }, settings: { threads: 2, contextSize: 512 }, models: records }, null, 1)}\n`,
);
console.log(`wrote ${out}`);
