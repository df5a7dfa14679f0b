#!/usr/bin/env bun
/**
 * Greedy generation with and without prompt-lookup speculative decoding, memra against llama.cpp on
 * the same GGUF and the same prompt tokens, in one run: each round runs four fresh processes (memra
 * plain, memra lookup, llama.cpp plain, llama.cpp lookup; the engines' order flips every round) and
 * the medians, the speed-ups and the memra / llama.cpp ratios are printed. Run from the repository
 * root after `bun run build` and `npm ci` in tools/llamacpp:
 *
 *   bun tools/llamacpp/speculative-side-by-side.ts [--model q8_0|q4_K_M] [-n 128] [-t 2] [--draft-max 8] [--rounds 5] [--file PATH]
 *
 * llama.cpp runs in tools/llamacpp/speculative-bench.mjs: its lookup decoding is done there the way
 * llama.cpp's llama-lookup and server loop do it, with memra's drafting rule, so that both engines
 * verify the same drafts. memra runs `model.complete` with `speculative: { method: "ngram" }`
 * (this file, --memra). tg = tokens generated after the first, per second after the prompt.
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { resolveOptions, syntheticModelFile } from "../../packages/synthetic/src/index";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: "q8_0" },
    file: { type: "string" },
    gen: { type: "string", short: "n", default: "128" },
    threads: { type: "string", short: "t", default: "2" },
    "draft-max": { type: "string", default: "8" },
    rounds: { type: "string", default: "5" },
    // one memra process (internal)
    memra: { type: "boolean", default: false },
    mode: { type: "string", default: "plain" },
    "prompt-tokens": { type: "string" },
  },
});

const ROOT = join(import.meta.dir, "..", "..");

/** A code-editing prompt: the text the answer would copy from, as lookup decoding is for. */
const PROMPT = `Rename the variable total to sum in this function and return the result unchanged:

function average(values) {
  let total = 0;
  for (const value of values) {
    total += value;
  }
  return values.length === 0 ? 0 : total / values.length;
}

function average(values) {
  let`;

interface Sample {
  readonly tokens: number[];
  readonly tg_tps: number;
  readonly drafted: number;
  readonly accepted: number;
}

if (values.memra) {
  // One measurement in this process: a warm-up generation, then the timed one.
  const { loadModel } = await import("../../packages/core/src/index");
  const { CpuBackend } = await import("../../packages/cpu-ffi/src/index");
  const model = loadModel(values.file!, { backend: CpuBackend.create({ threads: Number(values.threads) }) });
  const promptTokens = values["prompt-tokens"]!.split(",").map(Number);
  const options = {
    temperature: 0,
    maxTokens: Number(values.gen),
    ...(values.mode === "lookup" ? { speculative: { method: "ngram" as const, tokens: Number(values["draft-max"]) } } : {}),
  };
  await model.complete(promptTokens, options);
  const result = await model.complete(promptTokens, options);
  console.log(
    JSON.stringify({
      engine: "memra",
      mode: values.mode,
      tokens: result.tokens,
      tg_tps: result.timings.decodeTokensPerSecond,
      drafted: result.speculative?.drafted ?? 0,
      accepted: result.speculative?.accepted ?? 0,
    }),
  );
  model.dispose();
  process.exit(0);
}

async function runJson(command: string[]): Promise<Sample> {
  const child = Bun.spawn(command, { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  if (code !== 0) throw new Error(`${command.join(" ")} exited with ${code}:\n${stderr}`);
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as Sample;
}

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const m = sorted.length >> 1;
  return sorted.length % 2 ? sorted[m]! : (sorted[m - 1]! + sorted[m]!) / 2;
}

const path = values.file ?? (await syntheticModelFile(resolveOptions("qwen3-0.6b", { weightType: values.model as "q8_0" })));
const { Tokenizer } = await import("../../packages/tokenizer/src/index");
const { openGGUF } = await import("../../packages/gguf/src/index");
const file = openGGUF(path);
const promptTokens = Tokenizer.fromGGUFMetadata((key) => file.get(key)).encode(PROMPT);
const common = ["-n", values.gen, "-t", values.threads, "--draft-max", values["draft-max"], "--prompt-tokens", promptTokens.join(",")];
const runs: Record<string, Sample[]> = { "memra plain": [], "memra lookup": [], "llama.cpp plain": [], "llama.cpp lookup": [] };
const rounds = Number(values.rounds);
console.log(`greedy tg${values.gen} after a ${promptTokens.length}-token prompt, ${values.threads} threads, draft-max ${values["draft-max"]}, ${rounds} rounds, medians\n  ${path}`);
for (let round = 0; round < rounds; round++) {
  const memra = async (mode: string) => runs[`memra ${mode}`]!.push(await runJson(["bun", "tools/llamacpp/speculative-side-by-side.ts", "--memra", "--file", path, "--mode", mode, ...common]));
  const llama = async (mode: string) => runs[`llama.cpp ${mode}`]!.push(await runJson(["node", "tools/llamacpp/speculative-bench.mjs", "-m", path, "--mode", mode, ...common]));
  const order = round % 2 === 0 ? [memra, llama] : [llama, memra];
  for (const engine of order) for (const mode of ["plain", "lookup"]) await engine(mode);
}
const tps = (name: string) => median(runs[name]!.map((sample) => sample.tg_tps));
for (const name of Object.keys(runs)) {
  const last = runs[name]!.at(-1)!;
  console.log(`  ${name.padEnd(17)} ${tps(name).toFixed(2).padStart(8)} t/s${last.drafted ? `  (accepted ${last.accepted} of ${last.drafted} drafts)` : ""}`);
}
const agree = (a: string, b: string) => {
  const x = runs[a]!.at(-1)!.tokens;
  const y = runs[b]!.at(-1)!.tokens;
  let same = 0;
  while (same < x.length && x[same] === y[same]) same++;
  return same;
};
console.log(`  lookup speed-up: memra ${(tps("memra lookup") / tps("memra plain")).toFixed(2)}x, llama.cpp ${(tps("llama.cpp lookup") / tps("llama.cpp plain")).toFixed(2)}x`);
console.log(`  memra / llama.cpp: plain ${(tps("memra plain") / tps("llama.cpp plain")).toFixed(2)}x, lookup ${(tps("memra lookup") / tps("llama.cpp lookup")).toFixed(2)}x`);
console.log(
  `  same tokens: memra plain and lookup ${agree("memra plain", "memra lookup")} of ${values.gen}, llama.cpp plain and lookup ${agree("llama.cpp plain", "llama.cpp lookup")}, memra and llama.cpp plain ${agree("memra plain", "llama.cpp plain")}`,
);
