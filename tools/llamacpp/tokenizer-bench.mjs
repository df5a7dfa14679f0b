#!/usr/bin/env node
// Side-by-side tokenizer speed: llama.cpp (through node-llama-cpp, in this process) against
// @memra/tokenizer (a bun child process), on the same ~1 MB of mixed text
// (packages/tokenizer/bench/mixed-text.ts), alternating runs, reporting medians and the ratio.
// Both sides must produce the same tokens.
//
//   node tools/llamacpp/tokenizer-bench.mjs [runs]
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createInterface } from "node:readline";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadLlamaCppVocabulary, writeVocabularyGGUF } from "./tokenizer-goldens.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, "..", "..");
const runs = Number(process.argv[2] ?? 11);

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const folder = mkdtempSync(join(tmpdir(), "memra-tokenizer-bench-"));
try {
  const textPath = join(folder, "mixed.txt");
  const generated = spawnSync("bun", [join(repoRoot, "packages", "tokenizer", "bench", "mixed-text.ts"), textPath], { stdio: "inherit" });
  if (generated.status !== 0) throw new Error("bun bench/mixed-text.ts failed");
  const text = readFileSync(textPath, "utf8");
  const megabytes = Buffer.byteLength(text) / (1 << 20);

  const ggufPath = join(folder, "qwen3-vocab.gguf");
  writeVocabularyGGUF(ggufPath);
  const { llama, model } = await loadLlamaCppVocabulary(ggufPath);

  const worker = spawn("bun", [join(repoRoot, "packages", "tokenizer", "bench", "tokenize-worker.ts"), textPath], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: worker.stdout })[Symbol.asyncIterator]();
  const nextReply = async () => JSON.parse((await lines.next()).value);
  await nextReply(); // ready

  const timeLlamaCpp = () => {
    const start = performance.now();
    const ids = model.tokenize(text, false);
    const ms = performance.now() - start;
    let checksum = 0;
    for (const id of ids) checksum = (Math.imul(checksum, 31) + id) | 0;
    return { ms, tokens: ids.length, checksum };
  };
  const timeMemra = async () => {
    worker.stdin.write("run\n");
    return nextReply();
  };

  timeLlamaCpp(); // warm up
  const llamaCpp = [];
  const memra = [];
  for (let i = 0; i < runs; i++) {
    const a = timeLlamaCpp();
    const b = await timeMemra();
    if (a.tokens !== b.tokens || a.checksum !== b.checksum) {
      throw new Error(`different tokens: llama.cpp ${a.tokens} (checksum ${a.checksum}), memra ${b.tokens} (checksum ${b.checksum})`);
    }
    llamaCpp.push(a.ms);
    memra.push(b.ms);
  }
  worker.stdin.write("quit\n");

  const llamaCppMs = median(llamaCpp);
  const memraMs = median(memra);
  console.log(`text: ${megabytes.toFixed(2)} MB, ${timeLlamaCpp().tokens} tokens (identical on both sides), ${runs} alternating runs`);
  console.log(`llama.cpp (node-llama-cpp): median ${llamaCppMs.toFixed(1)} ms = ${(megabytes / (llamaCppMs / 1000)).toFixed(1)} MB/s`);
  console.log(`memra (bun, empty word cache each run): median ${memraMs.toFixed(1)} ms = ${(megabytes / (memraMs / 1000)).toFixed(1)} MB/s`);
  console.log(`speed ratio memra / llama.cpp: ${(llamaCppMs / memraMs).toFixed(2)}x`);
  await model.dispose();
  await llama.dispose();
} finally {
  rmSync(folder, { recursive: true, force: true });
}
