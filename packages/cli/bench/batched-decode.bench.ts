/**
 * Aggregate decode throughput of N concurrent greedy sequences on one model (continuous batching
 * through the engine) against one sequence alone, on the native CPU backend:
 *
 *   bun packages/cli/bench/batched-decode.bench.ts [--preset qwen3-0.6b] [--type q8_0] [--threads 2]
 *       [--sequences 1,16] [--prompt 32] [--decode 48] [--block-tokens 16] [--kv-type f16] [--reps 3]
 *
 * The rate counts tokens generated while every sequence is decoding: from the moment the last one
 * got its first token to the moment the first one got its last, so prefill is left out.
 */
import { parseArgs } from "node:util";
import { type KVType, loadModel } from "@memra/core";
import { CpuBackend } from "@memra/cpu-ffi";
import { type PresetName, type WeightType, resolveOptions, syntheticModelFile } from "@memra/synthetic";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "qwen3-0.6b" },
    type: { type: "string", default: "q8_0" },
    threads: { type: "string", default: "2" },
    sequences: { type: "string", default: "1,16" },
    prompt: { type: "string", default: "32" },
    decode: { type: "string", default: "48" },
    "block-tokens": { type: "string", default: "16" },
    "kv-type": { type: "string", default: "f16" },
    reps: { type: "string", default: "3" },
  },
});

const path = await syntheticModelFile(resolveOptions(values.preset as PresetName, { weightType: values.type as WeightType }));
const counts = values.sequences.split(",").map(Number);
const promptTokens = Number(values.prompt);
const decodeTokens = Number(values.decode);
const reps = Number(values.reps);
const backend = CpuBackend.create({ threads: Number(values.threads) });
const model = loadModel(path, {
  backend,
  maxBatchTokens: 512,
  maxSequences: Math.max(...counts),
  kvCacheTokens: Math.max(...counts) * (promptTokens + decodeTokens + 16),
  kvBlockTokens: Number(values["block-tokens"]),
  kvType: values["kv-type"] as KVType,
});
console.log(`${values.preset} ${values.type}, cpu ${backend.isa} ${backend.threads} threads, KV ${values["kv-type"]} blocks of ${values["block-tokens"]}`);

const promptOf = (seed: number) => Array.from({ length: promptTokens }, (_, i) => 1000 + ((seed * 7919 + i * 104729) % 50000));

async function run(sequences: number): Promise<number> {
  const times: number[][] = [];
  await Promise.all(
    Array.from({ length: sequences }, async (_, s) => {
      const stamps: number[] = [];
      times.push(stamps);
      // prefillChunkTokens: whole prompts in the first step, as a server admitting a burst would.
      const stream = model.generate(promptOf(s), { temperature: 0, maxTokens: decodeTokens, prefillChunkTokens: 512 });
      for await (const chunk of stream) if (chunk.token !== undefined) stamps.push(performance.now());
      await stream.result;
    }),
  );
  const start = Math.max(...times.map((t) => t[0]!));
  const end = Math.min(...times.map((t) => t[t.length - 1]!));
  const tokens = times.reduce((sum, t) => sum + t.filter((time) => time > start && time <= end).length, 0);
  return (tokens / (end - start)) * 1000;
}

// As llama-bench: every test once untimed first (the first 16-sequence run pays for the KV pages
// and scratch it touches for the first time: its steps measured ~40% slower), then --reps timed
// runs, alternating the sequence counts; medians.
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
for (const sequences of counts) await run(sequences);
const samples = new Map<number, number[]>(counts.map((c) => [c, []]));
for (let rep = 0; rep < reps; rep++) for (const sequences of counts) samples.get(sequences)!.push(await run(sequences));
const rates = new Map<number, number>();
for (const sequences of counts) {
  const rate = median(samples.get(sequences)!);
  rates.set(sequences, rate);
  const all = samples.get(sequences)!.map((r) => r.toFixed(1)).join(", ");
  console.log(`${String(sequences).padStart(3)} sequences: ${rate.toFixed(1)} tokens/s aggregate decode (${(rate / sequences).toFixed(1)} per sequence; median of ${all})`);
}
const one = rates.get(1);
for (const [sequences, rate] of rates) if (one && sequences > 1) console.log(`${sequences} vs 1: ${(rate / one).toFixed(2)}× (medians)`);
model.dispose();
