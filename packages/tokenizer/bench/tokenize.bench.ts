// Tokenizer throughput on ~1 MB of mixed text: `bun packages/tokenizer/bench/tokenize.bench.ts`.
// "cold" empties the word cache before every run (what a first encode of new text costs), "warm"
// keeps it. For the comparison with llama.cpp run tools/llamacpp/tokenizer-bench.mjs.
import { qwen3Vocabulary } from "../src/__fixtures__/qwen3-vocabulary";
import { Tokenizer } from "../src/tokenizer";
import { mixedText } from "./mixed-text";

const runs = Number(process.argv[2] ?? 9);
const vocabulary = qwen3Vocabulary();
const buildStart = performance.now();
const tokenizer = Tokenizer.fromVocabulary(vocabulary);
const buildMs = performance.now() - buildStart;
const text = mixedText(vocabulary);
const megabytes = new TextEncoder().encode(text).length / (1 << 20);

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

function time(clearCache: boolean): { ms: number; tokens: number } {
  if (clearCache) tokenizer.clearCache();
  const start = performance.now();
  const tokens = tokenizer.encode(text).length;
  return { ms: performance.now() - start, tokens };
}

time(true); // warm up the JIT
const cold: number[] = [];
const warm: number[] = [];
let tokens = 0;
for (let i = 0; i < runs; i++) {
  const c = time(true);
  cold.push(c.ms);
  tokens = c.tokens;
  warm.push(time(false).ms);
}
const ids = tokenizer.encode(text);
const decode: number[] = [];
for (let i = 0; i < runs; i++) {
  const start = performance.now();
  tokenizer.decode(ids);
  decode.push(performance.now() - start);
}

console.log(`tokenizer build: ${buildMs.toFixed(0)} ms (${vocabulary.tokens.length} tokens, ${vocabulary.merges.length} merges)`);
console.log(`text: ${megabytes.toFixed(2)} MB, ${tokens} tokens`);
console.log(`encode cold cache: median ${median(cold).toFixed(1)} ms = ${(megabytes / (median(cold) / 1000)).toFixed(1)} MB/s`);
console.log(`encode warm cache: median ${median(warm).toFixed(1)} ms = ${(megabytes / (median(warm) / 1000)).toFixed(1)} MB/s`);
console.log(`decode: median ${median(decode).toFixed(1)} ms = ${(megabytes / (median(decode) / 1000)).toFixed(1)} MB/s`);
