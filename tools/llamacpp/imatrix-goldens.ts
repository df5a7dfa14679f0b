#!/usr/bin/env bun
/**
 * llama-imatrix's importance matrices of golden-suite models over a fixed calibration text, as
 * golden fixtures for `computeImatrix` and `memra imatrix`: llama.cpp's own tools/imatrix/imatrix.cpp,
 * built by build-llama-imatrix.sh against node-llama-cpp 3.21.1's prebuilt libraries, run with the
 * golden suite's settings (CPU, 2 threads, F32 KV cache, no flash attention) and llama-imatrix's
 * defaults otherwise (n_batch 2048, n_ubatch 512: several chunks of a small context packed into one
 * batch as sequences).
 *
 *   tools/llamacpp/build-llama-imatrix.sh && bun tools/llamacpp/imatrix-goldens.ts   (from the repository root)
 *
 * Writes packages/core/src/__fixtures__/imatrix/<case>.gguf (llama-imatrix's output, unchanged) and
 * imatrix-goldens.json (the cases, their settings, llama-imatrix's reported perplexity and system line).
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { readImatrix } from "../../packages/gguf/src/index";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "../../packages/synthetic/src/index";

const ROOT = join(import.meta.dir, "..", "..");
const FIXTURES = "packages/core/src/__fixtures__/imatrix";
const CALIBRATION = `${FIXTURES}/calibration.txt`;
const BINARY = join(import.meta.dir, "build", "llama-imatrix");
const THREADS = 2;

interface GoldenCase {
  readonly id: string;
  /** A golden-suite model id. */
  readonly model: string;
  readonly contextSize: number;
  readonly chunks?: number;
  readonly processOutput?: boolean;
  readonly note: string;
}

const CASES: GoldenCase[] = [
  { id: "dense-f32-c64", model: "dense-f32", contextSize: 64, note: "4 chunks packed into one batch of 4 sequences" },
  { id: "dense-gqa4-hd128-f32-c64-chunks3", model: "dense-gqa4-hd128-f32", contextSize: 64, chunks: 3, note: "GQA 4, head 128; --chunks 3 of the 4" },
  { id: "moe-f32-c64", model: "moe-f32", contextSize: 64, note: "8 experts, 2 used: per-expert sums and counts; the router is a dense matmul" },
  { id: "dense-untied-f32-c74-output", model: "dense-untied-f32", contextSize: 74, processOutput: true, note: "--process-output: output.weight collected; 4 chunks of 74 in one ubatch of 296 rows (memra's LM head runs it as 9 x 32 + 8)" },
  { id: "dense-q8_0-c128", model: "dense-q8_0", contextSize: 128, note: "q8_0 weights; 2 chunks of 128" },
  { id: "moe-f32-c12-chunks1", model: "moe-f32", contextSize: 12, chunks: 1, note: "one ubatch of 12 rows: dense matmuls (< 16 rows) skipped, experts collected" },
  { id: "moe-f32-c8", model: "moe-f32", contextSize: 8, note: "37 chunks of 8 packed into one ubatch of 296 rows (256 sequences a batch): dense matmuls collected" },
];

if (!existsSync(BINARY)) {
  console.error(`no ${BINARY}: run tools/llamacpp/build-llama-imatrix.sh first`);
  process.exit(1);
}

const suite = JSON.parse(readFileSync(join(ROOT, "packages/core/src/conformance/golden-suite.json"), "utf8")) as {
  models: Array<{ id: string; preset: PresetName; options: Partial<SyntheticModelOptions> }>;
};
const release = JSON.parse(readFileSync(join(import.meta.dir, "node_modules/node-llama-cpp/llama/llama.cpp.info.json"), "utf8")) as { tag: string };
// the commit of the bundled source (the headers imatrix.cpp was compiled with are that commit's)
const bundleHead = readFileSync(join(import.meta.dir, "node_modules/node-llama-cpp/llama/gitRelease.bundle")).subarray(0, 200).toString("latin1");
const commit = /([0-9a-f]{40}) HEAD/.exec(bundleHead)?.[1];

const results = [];
let systemInfo = "";
for (const c of CASES) {
  const entry = suite.models.find((model) => model.id === c.model);
  if (!entry) throw new Error(`no model ${c.model} in golden-suite.json`);
  const path = await syntheticModelFile(resolveOptions(entry.preset, entry.options));
  const output = `${FIXTURES}/${c.id}.gguf`;
  rmSync(join(ROOT, output), { force: true });
  const args = ["-m", path, "-f", CALIBRATION, "-o", output, "-c", String(c.contextSize), ...(c.chunks ? ["--chunks", String(c.chunks)] : []), ...(c.processOutput ? ["--process-output"] : []), "-t", String(THREADS), "-ctk", "f32", "-ctv", "f32", "-fa", "off"];
  const started = performance.now();
  const run = Bun.spawnSync([BINARY, ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const log = `${run.stdout.toString()}${run.stderr.toString()}`;
  if (run.exitCode !== 0 || !existsSync(join(ROOT, output))) {
    console.error(log);
    throw new Error(`llama-imatrix failed on ${c.id} (${run.exitCode})`);
  }
  systemInfo = /system_info: (.*)/.exec(log)?.[1]?.trim() ?? systemInfo;
  const perplexity = Number(/Final estimate: PPL = ([\d.]+)/.exec(log)?.[1]);
  const computing = /computing over (\d+) chunks, n_ctx=(\d+), batch_size=(\d+), n_seq=(\d+)/.exec(log);
  const imatrix = readImatrix(join(ROOT, output));
  results.push({
    ...c,
    preset: entry.preset,
    options: entry.options,
    modelFile: basename(path),
    file: basename(output),
    arguments: args.slice(2).map((arg) => (arg === path ? "MODEL" : arg)),
    llamaImatrix: { chunks: Number(computing?.[1]), batchSize: Number(computing?.[3]), sequences: Number(computing?.[4]), perplexity },
    entries: imatrix.entries.size,
    chunkCount: imatrix.chunkCount,
  });
  console.log(`${c.id}: ${imatrix.entries.size} entries, ${imatrix.chunkCount} chunks, PPL ${perplexity} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
}

const fixture = {
  reference: {
    engine: "llama.cpp tools/imatrix/imatrix.cpp, built by tools/llamacpp/build-llama-imatrix.sh against node-llama-cpp@3.21.1's prebuilt libraries",
    llamaCppRelease: `ggml-org/llama.cpp@${release.tag}${commit ? ` (bundled source ${commit.slice(0, 12)})` : ""}`,
    threads: THREADS,
    kvCacheType: "f32",
    flashAttention: false,
    systemInfo,
  },
  calibration: CALIBRATION,
  cases: results,
};
writeFileSync(join(ROOT, FIXTURES, "imatrix-goldens.json"), `${JSON.stringify(fixture, null, 2)}\n`);
console.log(`wrote ${FIXTURES}/imatrix-goldens.json`);
