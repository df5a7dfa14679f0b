/**
 * Rough prefill and decode speed of a whole model forward on the native CPU backend, llama-bench
 * style (ppN: one forward over N prompt tokens; tgN: N single-token forwards after it):
 *
 *   bun packages/cpu-ffi/bench/forward.bench.ts [--preset qwen3-0.6b] [--type q8_0] [--threads 2]
 *       [--prompt 128] [--decode 32] [--runs 3] [--backend cpu|reference]
 *
 * The model is a deterministic synthetic GGUF (@memra/synthetic; generated into the cache on first
 * use, ~40 s for qwen3-0.6b). Token ids are seeded random draws. Prints the best of --runs for each.
 */
import { parseArgs } from "node:util";
import { type Backend, ReferenceBackend, loadModel } from "@memra/core";
import { type PresetName, type WeightType, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { CpuBackend } from "../src/index";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "qwen3-0.6b" },
    type: { type: "string", default: "q8_0" },
    threads: { type: "string", default: "2" },
    prompt: { type: "string", default: "128" },
    decode: { type: "string", default: "32" },
    runs: { type: "string", default: "3" },
    backend: { type: "string", default: "cpu" },
  },
});

const threads = Number(values.threads);
const promptTokens = Number(values.prompt);
const decodeTokens = Number(values.decode);
const runs = Number(values.runs);
const path = await syntheticModelFile(resolveOptions(values.preset as PresetName, { weightType: values.type as WeightType }));
const backend: Backend = values.backend === "reference" ? new ReferenceBackend() : CpuBackend.create({ threads });
const model = loadModel(path, { backend, maxBatchTokens: Math.max(promptTokens, 1) });

let state = 12345;
const randomToken = () => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return 1000 + (state % 50000);
};
const prompt = Int32Array.from({ length: promptTokens }, randomToken);

function argmax(logits: Float32Array): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  return best;
}

// Warm-up: touches every weight page of the memory-mapped file once.
{
  const cache = model.createCache(16);
  model.forward(prompt.subarray(0, Math.min(8, promptTokens)), cache);
  cache.dispose();
}

let bestPrefill = Number.POSITIVE_INFINITY;
let bestDecode = Number.POSITIVE_INFINITY;
for (let run = 0; run < runs; run++) {
  const cache = model.createCache(promptTokens + decodeTokens + 1);
  let started = performance.now();
  const logits = model.forward(prompt, cache);
  bestPrefill = Math.min(bestPrefill, performance.now() - started);
  let token = argmax(logits);
  started = performance.now();
  for (let i = 0; i < decodeTokens; i++) {
    const next = model.forward([token], cache);
    token = argmax(next);
  }
  bestDecode = Math.min(bestDecode, performance.now() - started);
  cache.dispose();
}

const isa = backend instanceof CpuBackend ? ` ${backend.isa}` : "";
console.log(`${values.preset} ${values.type}, ${backend.name} backend${isa}, ${threads} threads`);
console.log(`pp${promptTokens}: ${((promptTokens / bestPrefill) * 1000).toFixed(1)} tokens/s (${bestPrefill.toFixed(0)} ms)`);
console.log(`tg${decodeTokens}: ${((decodeTokens / bestDecode) * 1000).toFixed(1)} tokens/s (${(bestDecode / decodeTokens).toFixed(1)} ms/token, after the ${promptTokens}-token prompt)`);
model.dispose();
