#!/usr/bin/env bun
/**
 * Reranking, Memra against llama.cpp on the same reranker GGUF and the same prompt tokens, in one
 * run: each round runs a fresh process of each (the order flips every round), each timing its passes
 * over the prompts of one query and N documents, and the medians and their ratios are printed.
 * Memra is timed three ways: `rankPrompts` (the prompts' shared head, the template and the query,
 * evaluated once), `rankPromptsAsync` (the same through the engine: the documents batched together)
 * and one `rankTokens` per prompt (the same work as llama.cpp's ranking context, which evaluates
 * every prompt whole). Run from the repository root after `npm ci` in tools/llamacpp
 * and `bun native/build.ts cpu`:
 *
 *   bun tools/llamacpp/rerank-side-by-side.ts [--preset qwen3-0.6b] [--type q8_0] [--documents 16] [-t 2] [--rounds 3]
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { type PresetName, type WeightType, resolveOptions, syntheticModelFile } from "../../packages/synthetic/src/index";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "qwen3-0.6b" },
    type: { type: "string", default: "q8_0" },
    documents: { type: "string", default: "16" },
    threads: { type: "string", short: "t", default: "2" },
    rounds: { type: "string", default: "3" },
    reps: { type: "string", short: "r", default: "3" },
    child: { type: "string" },
    prompts: { type: "string" },
  },
});
const ROOT = join(import.meta.dir, "..", "..");

if (values.child !== undefined) {
  // A fresh process timing Memra's passes over the prompts.
  const { loadModel } = await import("../../packages/core/src/index");
  const { CpuBackend } = await import("../../packages/cpu-ffi/src/index");
  const prompts = JSON.parse(await Bun.file(values.prompts!).text()) as number[][];
  const model = loadModel(values.child, { backend: CpuBackend.create({ threads: Number(values.threads) }) });
  const passes = { shared: async () => model.rankPrompts(prompts), whole: async () => prompts.map((tokens) => model.rankTokens(tokens)), engine: () => model.rankPromptsAsync(prompts) };
  const result: Record<string, number[]> = {};
  for (const [name, pass] of Object.entries(passes)) {
    await pass();
    result[name] = [];
    for (let i = 0; i < Number(values.reps); i++) {
      model.engine.pool.clearPrefixCache(); // each pass evaluates the shared head once, as a new request would
      const start = performance.now();
      await pass();
      result[name].push(performance.now() - start);
    }
  }
  console.log(JSON.stringify({ ...result, scores: model.rankPrompts(prompts) }));
  model.dispose();
  process.exit(0);
}

const SENTENCES = [
  "Paris is the capital and largest city of France, on the Seine.",
  "The Eiffel Tower was completed in 1889 for the World's Fair.",
  "Berlin is the capital of Germany and its most populous city.",
  "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
  "def add(a, b):\n    return a + b",
  "The mitochondrion is the powerhouse of the cell.",
  "Mount Everest is the highest mountain above sea level.",
  "A binary search halves the interval it searches at every step.",
];
const query = "What is the capital of France?";
const documents = Array.from({ length: Number(values.documents) }, (_, i) => `${SENTENCES[i % SENTENCES.length]} ${SENTENCES[(i * 3 + 1) % SENTENCES.length]}`);
const path = await syntheticModelFile(resolveOptions(values.preset as PresetName, { weightType: values.type as WeightType, reranker: true }));
const { loadModel, rerankPrompt } = await import("../../packages/core/src/index");
const model = loadModel(path);
const prompts = documents.map((document) => model.tokenizer.encode(rerankPrompt(model.rerankTemplate!, query, document), { special: true }));
model.dispose();
const promptFile = join(mkdtempSync(join(tmpdir(), "memra-rerank-")), "prompts.json");
writeFileSync(promptFile, JSON.stringify(prompts));
const tokens = prompts.reduce((sum, p) => sum + p.length, 0);

async function runJson(command: string[]): Promise<Record<string, number[]>> {
  const child = Bun.spawn(command, { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  if (code !== 0) throw new Error(`${command.join(" ")} exited with ${code}:\n${stderr}`);
  return JSON.parse(stdout.trim().split("\n").at(-1)!);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const samples: Record<string, number[]> = { shared: [], whole: [], engine: [], llama: [] };
let scores: { memra: number[]; llama: number[] } | undefined;
for (let round = 0; round < Number(values.rounds); round++) {
  const runs = [
    async () => {
      const r = await runJson(["bun", join(import.meta.dir, "rerank-side-by-side.ts"), "--child", path, "--prompts", promptFile, "-t", values.threads!, "-r", values.reps!]);
      samples.shared!.push(median(r.shared!));
      samples.whole!.push(median(r.whole!));
      samples.engine!.push(median(r.engine!));
      scores = { memra: r.scores!, llama: scores?.llama ?? [] };
    },
    async () => {
      const r = await runJson(["node", join(import.meta.dir, "rerank-bench.mjs"), "-m", path, "--prompts", promptFile, "-t", values.threads!, "-r", values.reps!]);
      samples.llama!.push(median(r.ms!));
      scores = { memra: scores?.memra ?? [], llama: r.scores! };
    },
  ];
  if (round % 2 === 1) runs.reverse();
  for (const run of runs) await run();
}
const largest = Math.max(...scores!.memra.map((s, i) => Math.abs(s - scores!.llama[i]!)));
console.log(`${values.preset} ${values.type} reranker, 1 query × ${documents.length} documents (${tokens} prompt tokens), ${values.threads} threads, medians of ${values.rounds} rounds`);
console.log(`llama.cpp (every prompt whole):          ${median(samples.llama!).toFixed(0)} ms`);
console.log(`memra rankTokens (every prompt whole):   ${median(samples.whole!).toFixed(0)} ms = ${(median(samples.llama!) / median(samples.whole!)).toFixed(2)}x llama.cpp's speed`);
console.log(`memra rankPrompts (shared head once):    ${median(samples.shared!).toFixed(0)} ms = ${(median(samples.llama!) / median(samples.shared!)).toFixed(2)}x llama.cpp's speed`);
console.log(`memra rankPromptsAsync (engine, batched): ${median(samples.engine!).toFixed(0)} ms = ${(median(samples.llama!) / median(samples.engine!)).toFixed(2)}x llama.cpp's speed`);
console.log(`largest score difference: ${largest.toExponential(2)}`);
