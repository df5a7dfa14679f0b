// Time per token of the sampling chain on a Qwen3-sized vocabulary:
// `bun packages/sampler/bench/sampler.bench.ts [tokens]`. Logits are seeded random draws
// (normal, standard deviation 3, plus a few tokens raised by 10-15 as a model's top choices are);
// 16 different logit vectors are cycled so that no step sees the same input twice in a row.
// Every token is timed alone; the median and the 99th percentile are printed.
import { createSampler } from "../src/sampler";
import type { SamplingOptions } from "../src/sampling-options";
import { SeededRandom } from "../src/seeded-random";

const VOCABULARY = 151936;
const tokens = Number(process.argv[2] ?? 2000);
const random = new SeededRandom(1234);

function normal(): number {
  // Box-Muller; 1 - u keeps the logarithm's argument in (0, 1].
  return Math.sqrt(-2 * Math.log(1 - random.nextDouble())) * Math.cos(2 * Math.PI * random.nextDouble());
}

const inputs = Array.from({ length: 16 }, () => {
  const logits = new Float32Array(VOCABULARY);
  for (let i = 0; i < VOCABULARY; i++) logits[i] = 3 * normal();
  for (let j = 0; j < 8; j++) logits[random.nextUint32() % VOCABULARY] = 10 + 5 * random.nextDouble();
  return logits;
});

function percentile(sorted: number[], fraction: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))] ?? 0;
}

function run(name: string, options: SamplingOptions, tokenText?: (id: number) => string): void {
  const sampler = createSampler({ seed: 7, ...options }, { vocabularySize: VOCABULARY, ...(tokenText ? { tokenText } : {}) });
  // A history of a long prompt's tokens, then each sampled token appended.
  const history: number[] = Array.from({ length: 512 }, () => random.nextUint32() % VOCABULARY);
  const warmup = 200;
  const times: number[] = [];
  for (let step = 0; step < warmup + tokens; step++) {
    const logits = inputs[step % inputs.length]!;
    const start = performance.now();
    const { token } = sampler.sample(logits, history);
    const elapsed = performance.now() - start;
    history.push(token);
    if (step >= warmup) times.push(elapsed);
  }
  times.sort((a, b) => a - b);
  console.log(`${name.padEnd(58)} median ${percentile(times, 0.5).toFixed(3)} ms/token   p99 ${percentile(times, 0.99).toFixed(3)} ms`);
}

console.log(`vocabulary ${VOCABULARY}, ${tokens} tokens per configuration`);
run("default chain (top-k 40, top-p 0.95, min-p 0.05, temp 0.8, repeat 1.1/64)", { repeatPenalty: 1.1, penaltyLastN: 64 });
run("greedy (temperature 0)", { temperature: 0 });
run("greedy with repeat penalty 1.1/64", { temperature: 0, repeatPenalty: 1.1 });
run("defaults + presence/frequency + logit bias", { repeatPenalty: 1.1, presencePenalty: 0.5, frequencyPenalty: 0.2, logitBias: { 0: -Infinity, 42: 2 } });
run("defaults + typical 0.9 + XTC 0.5/0.1", { typicalP: 0.9, xtc: { probability: 0.5, threshold: 0.1 } });
run("defaults + DRY 0.8 (whole history)", { dry: { multiplier: 0.8 } }, (id) => (id % 97 === 0 ? "\n" : `t${id}`));
run("no top-k (top-p 0.95 + min-p over the whole vocabulary)", { topK: 0 });
