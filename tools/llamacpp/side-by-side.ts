#!/usr/bin/env bun
/**
 * Memra against llama.cpp on the same GGUF files, in one run: `memra bench` and llama.cpp
 * (node-llama-cpp, tools/llamacpp/llama-bench.mjs) alternate, one fresh process each per round (the
 * order flips every round, so slow drifts of a shared machine hit both), and the medians and their
 * ratios (memra / llama.cpp) are printed. Run from the repository root after `bun run build` and
 * `npm ci` in tools/llamacpp:
 *
 *   bun tools/llamacpp/side-by-side.ts [--models q8_0,q4_K_M,moe] [-p 512] [-n 128] [-t 2] [--rounds 5]
 *       [--npl 1,4,8] [--file PATH ...] [--json OUT.json]
 *
 * --npl adds batched decode: B sequences decoded together (`memra bench --npl`, llama-bench.mjs
 * --npl: node-llama-cpp batching B sequences' tokens into one llama_decode), aggregate tokens/s.
 *
 * Models: synthetic files from @memra/synthetic (seeded, real Qwen3 vocabulary), generated into the
 * cache on first use: q8_0 / f16 / q4_K_M / q4_0 / bf16 and the i-quants iq1_s ... iq3_s = the
 * Qwen3-0.6B shape, moe = the scaled Qwen3-30B-A3B shape (q8_0). --file adds any other GGUF.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { type PresetName, type WeightType, resolveOptions, syntheticModelFile } from "../../packages/synthetic/src/index";

const { values } = parseArgs({
  options: {
    models: { type: "string", default: "q8_0,q4_K_M,moe" },
    file: { type: "string", multiple: true, default: [] },
    prompt: { type: "string", short: "p", default: "512" },
    gen: { type: "string", short: "n", default: "128" },
    threads: { type: "string", short: "t", default: "2" },
    rounds: { type: "string", default: "5" },
    json: { type: "string" },
    npl: { type: "string" },
  },
});

const ROOT = join(import.meta.dir, "..", "..");
const MODELS: Record<string, { preset: PresetName; type: WeightType; label: string }> = {
  q8_0: { preset: "qwen3-0.6b", type: "q8_0", label: "Qwen3-0.6B shape, q8_0" },
  f16: { preset: "qwen3-0.6b", type: "f16", label: "Qwen3-0.6B shape, f16" },
  q4_K_M: { preset: "qwen3-0.6b", type: "q4_K_M", label: "Qwen3-0.6B shape, Q4_K_M mix" },
  q4_0: { preset: "qwen3-0.6b", type: "q4_0", label: "Qwen3-0.6B shape, q4_0" },
  bf16: { preset: "qwen3-0.6b", type: "bf16", label: "Qwen3-0.6B shape, bf16" },
  moe: { preset: "qwen3-30b-a3b-scaled", type: "q8_0", label: "scaled Qwen3-30B-A3B shape (MoE), q8_0" },
  // every matrix of one i-quant type (random blocks: these types need an importance matrix to quantize)
  ...Object.fromEntries(
    (["iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s"] as const).map((type) => [
      type,
      { preset: "qwen3-0.6b" as PresetName, type, label: `Qwen3-0.6B shape, ${type}` },
    ]),
  ),
};

interface Sample {
  pp?: number;
  tg?: number;
  ttft: number;
  rss: number;
  /** Aggregate tokens/s of B sequences decoded together, by B. */
  [batched: `x${number}`]: number | undefined;
}

async function runJson(command: string[]): Promise<Sample> {
  const child = Bun.spawn(command, { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  if (code !== 0) throw new Error(`${command.join(" ")} exited with ${code}:\n${stderr}`);
  const line = stdout.trim().split("\n").at(-1)!;
  const result = JSON.parse(line);
  const sample: Sample = { pp: result.pp?.tps, tg: result.tg?.tps, ttft: result.ttft_ms, rss: result.peak_rss_bytes };
  for (const test of result.npl ?? []) sample[`x${test.sequences as number}`] = test.tps;
  return sample;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const m = sorted.length >> 1;
  return sorted.length % 2 ? sorted[m]! : (sorted[m - 1]! + sorted[m]!) / 2;
}

const targets: { label: string; path: string }[] = [];
for (const name of values.models.split(",").filter(Boolean)) {
  const model = MODELS[name];
  if (!model) throw new Error(`unknown model "${name}" (known: ${Object.keys(MODELS).join(", ")})`);
  targets.push({ label: model.label, path: await syntheticModelFile(resolveOptions(model.preset, { weightType: model.type })) });
}
for (const path of values.file) targets.push({ label: path, path });

const parallel = (values.npl ?? "").split(",").filter(Boolean).map(Number);
const common = ["-p", values.prompt, "-n", values.gen, "-t", values.threads, "-r", "1", "--json", ...(parallel.length > 0 ? ["--npl", parallel.join(",")] : [])];
const rounds = Number(values.rounds);
const report: unknown[] = [];
console.log(`memra vs llama.cpp (node-llama-cpp 3.21.1), ${values.threads} threads, pp${values.prompt} / tg${values.gen}, ${rounds} alternating rounds, medians`);
for (const target of targets) {
  const memra: Sample[] = [];
  const llama: Sample[] = [];
  for (let round = 0; round < rounds; round++) {
    const runMemra = async () => memra.push(await runJson(["bun", "packages/cli/src/main.ts", "bench", "-m", target.path, ...common]));
    const runLlama = async () => llama.push(await runJson(["node", "tools/llamacpp/llama-bench.mjs", "-m", target.path, ...common]));
    if (round % 2 === 0) {
      await runMemra();
      await runLlama();
    } else {
      await runLlama();
      await runMemra();
    }
  }
  const pick = (samples: Sample[], key: keyof Sample) => median(samples.map((s) => s[key] ?? Number.NaN));
  const row = (name: keyof Sample, unit: string, higherIsBetter: boolean) => {
    const ours = pick(memra, name);
    const theirs = pick(llama, name);
    const ratio = ours / theirs;
    const scale = name === "rss" ? 2 ** -20 : 1;
    console.log(
      `  ${String(name === "pp" ? `pp${values.prompt}` : name === "tg" ? `tg${values.gen}` : name.startsWith("x") ? `tg${values.gen} ${name}` : name).padEnd(10)} memra ${(ours * scale).toFixed(2).padStart(9)} ${unit.padEnd(8)} llama.cpp ${(theirs * scale).toFixed(2).padStart(9)} ${unit.padEnd(8)} ratio ${ratio.toFixed(2)}x ${higherIsBetter ? "(higher is better)" : "(lower is better)"}`,
    );
    return { memra: ours, llama: theirs, ratio, samples: { memra: memra.map((s) => s[name]), llama: llama.map((s) => s[name]) } };
  };
  console.log(`\n${target.label}\n  ${target.path}`);
  const entry = {
    model: target.label,
    path: target.path,
    pp: Number(values.prompt) > 0 ? row("pp", "t/s", true) : undefined,
    tg: Number(values.gen) > 0 ? row("tg", "t/s", true) : undefined,
    ...Object.fromEntries(parallel.map((sequences) => [`tg x${sequences}`, row(`x${sequences}`, "t/s", true)])),
    ttft: row("ttft", "ms", false),
    rss: row("rss", "MiB", false),
  };
  report.push(entry);
}
if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
