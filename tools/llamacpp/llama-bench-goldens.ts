#!/usr/bin/env bun
/**
 * What llama.cpp's llama-bench prints for a few argument sets on small models, as golden fixtures for
 * `memra bench`, which takes llama-bench's flags and prints its formats: the test names in order, the
 * markdown table's header and every cell of each row but t/s (model, size, params, backend, the
 * parameter columns, test), and the CSV / JSON / JSON-lines field names, the JSON kind of each field
 * and the values that do not depend on timing (model_type, model_size, model_n_params, n_prompt, ...).
 * No timing is recorded.
 *
 * llama-bench is tools/llama-bench/llama-bench.cpp of the llama.cpp release node-llama-cpp 3.21.1
 * bundles, built against its prebuilt libraries by build-llama-bench.sh. The models: memra's demo
 * model (packages/cli/assets, committed) and two synthetic ones (@memra/synthetic, cached).
 *
 *   tools/llamacpp/build-llama-bench.sh && bun tools/llamacpp/llama-bench-goldens.ts   (from the repository root)
 *
 * Writes packages/cli/src/__fixtures__/llama-bench-goldens.json; packages/cli/src/commands/bench.test.ts
 * runs `memra bench` with the same arguments on the same models and compares.
 */
import { spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "../../packages/synthetic/src/index";

const ROOT = join(import.meta.dir, "..", "..");
const OUT = join(ROOT, "packages/cli/src/__fixtures__/llama-bench-goldens.json");
const LLAMA_BENCH = join(import.meta.dir, "build", "llama-bench");

/** The models: "demo" is the CLI's committed demo model; the others are synthetic, made on demand. */
export const MODELS: Record<string, { demo: true } | { preset: PresetName; options: Partial<SyntheticModelOptions> }> = {
  demo: { demo: true },
  "moe-q4_K_M": { preset: "tiny-moe", options: { weightType: "q4_K_M" } },
  "dense-f32": { preset: "tiny", options: { weightType: "f32" } },
};

/** Argument sets (each with -m MODEL added): small, so that memra's test runs them in seconds. */
const CASES: { id: string; model: string; args: string[] }[] = [
  { id: "lists", model: "demo", args: ["-p", "16,32", "-n", "8", "-r", "2", "-t", "1"] },
  { id: "depth", model: "demo", args: ["-d", "32", "-p", "16", "-n", "8", "-r", "1", "-t", "1"] },
  { id: "prompt-generation", model: "demo", args: ["-pg", "16,8", "-p", "16", "-n", "8", "-r", "1", "-t", "1"] },
  { id: "ranges", model: "demo", args: ["-p", "8-32*2", "-n", "4-8+4", "-d", "0,16", "-r", "1", "-t", "1"] },
  { id: "threads", model: "demo", args: ["-t", "1,2", "-p", "16", "-n", "4", "-r", "1"] },
  { id: "kv-q8_0", model: "demo", args: ["-ctk", "q8_0", "-ctv", "q8_0", "-p", "16", "-n", "4", "-r", "1", "-t", "1"] },
  { id: "batch", model: "demo", args: ["-b", "16", "-ub", "8", "-p", "32", "-n", "4", "-r", "1", "-t", "1"] },
  { id: "csv", model: "demo", args: ["-o", "csv", "-p", "16", "-n", "4", "-r", "2", "-t", "1"] },
  { id: "json", model: "demo", args: ["-o", "json", "-p", "16", "-n", "4", "-d", "8", "-r", "2", "-t", "1"] },
  { id: "jsonl", model: "demo", args: ["-o", "jsonl", "-pg", "8,4", "-p", "0", "-n", "0", "-r", "1", "-t", "1"] },
  { id: "moe-repeated-flags", model: "moe-q4_K_M", args: ["-p", "16", "-p", "8", "-n", "4", "-r", "1", "-t", "1"] },
  { id: "f32-long-flags", model: "dense-f32", args: ["--n_prompt", "16", "--n-gen", "4", "--repetitions", "1", "--threads", "1"] },
];

/** The fields whose values do not depend on timing, the machine or the path (compared value for value). */
export const STABLE_FIELDS = [
  "backends",
  "model_type",
  "model_size",
  "model_n_params",
  "n_batch",
  "n_ubatch",
  "n_threads",
  "type_k",
  "type_v",
  "n_gpu_layers",
  "n_cpu_moe",
  "n_prompt",
  "n_gen",
  "n_depth",
];

async function modelPath(id: string): Promise<string> {
  const model = MODELS[id]!;
  if ("demo" in model) return join(ROOT, "packages/cli/assets/memra-demo-qwen3-q8_0.gguf");
  return syntheticModelFile(resolveOptions(model.preset, model.options));
}

function format(args: readonly string[]): string {
  const index = args.indexOf("-o");
  return index < 0 ? "md" : args[index + 1]!;
}

/** A markdown row without its last cell (t/s), ending at the bar before it. */
function withoutSpeed(row: string): string {
  return row.slice(0, row.lastIndexOf("|", row.length - 2) + 1);
}

function stable(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(STABLE_FIELDS.map((field) => [field, record[field]]));
}

/** What one run of llama-bench printed that memra bench must print too. */
function record(output: string, kind: string): Record<string, unknown> {
  if (kind === "md") {
    const lines = output.split("\n").filter((line) => line.startsWith("|"));
    const rows = lines.slice(2);
    return {
      header: lines[0],
      rule: lines[1],
      rows: rows.map(withoutSpeed),
      tests: rows.map((row) => row.split("|").at(-3)!.trim()),
    };
  }
  if (kind === "csv") {
    const [header, ...rows] = output.trim().split("\n");
    const fields = header!.split(",");
    const parsed = rows.map((row) => Object.fromEntries(JSON.parse(`[${row}]`).map((value: string, index: number) => [fields[index], value])));
    return { fields, rows: parsed.map(stable) };
  }
  const records: Record<string, unknown>[] = kind === "json" ? JSON.parse(output) : output.trim().split("\n").map((line) => JSON.parse(line));
  const first = records[0]!;
  return {
    fields: Object.keys(first),
    kinds: Object.fromEntries(Object.entries(first).map(([field, value]) => [field, Array.isArray(value) ? "array" : typeof value])),
    rows: records.map((item) => ({ ...stable(item), samples: (item.samples_ns as unknown[]).length })),
  };
}

async function main(): Promise<void> {
  if (!existsSync(LLAMA_BENCH)) throw new Error(`no ${LLAMA_BENCH}: run tools/llamacpp/build-llama-bench.sh first`);
  const models: Record<string, unknown> = {};
  for (const [id, model] of Object.entries(MODELS)) models[id] = { ...model, file: basename(await modelPath(id)) };
  const cases: unknown[] = [];
  let build = "";
  for (const item of CASES) {
    const path = await modelPath(item.model);
    const result = spawnSync(LLAMA_BENCH, ["-m", path, ...item.args], { encoding: "utf8" });
    if (result.status !== 0) throw new Error(`llama-bench ${item.args.join(" ")}: exit ${result.status}\n${result.stderr}`);
    build ||= /^build: (.+)$/m.exec(result.stdout)?.[1] ?? "";
    cases.push({ ...item, format: format(item.args), ...record(result.stdout, format(item.args)) });
    console.error(`${item.id}: ${item.args.join(" ")}`);
  }
  const fixture = {
    reference: {
      engine: "llama.cpp's llama-bench (tools/llama-bench of the release node-llama-cpp 3.21.1 bundles), CPU, built by tools/llamacpp/build-llama-bench.sh",
      build,
      note: "timings are not recorded; md rows end before the t/s cell",
    },
    models,
    cases,
  };
  // arrays of plain values on one line each (arguments, field names, test names), markdown rows one a line
  const text = JSON.stringify(fixture, null, 2).replace(/\[\n\s+([^[\]{}]*?)\n\s*\]/g, (array: string, items: string) => (items.includes("|") ? array : `[${items.split(/,\n\s+/).join(", ")}]`));
  writeFileSync(OUT, `${text}\n`);
  console.error(`wrote ${OUT}`);
}

if (import.meta.main) await main();
