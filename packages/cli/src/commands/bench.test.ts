/**
 * `memra bench`: memra's --json report, and llama-bench's flags and formats checked against what
 * llama-bench itself prints (llama-bench-goldens.json, recorded by tools/llamacpp/llama-bench-goldens.ts):
 * the same arguments on the same models give the same test names in the same order, the same markdown
 * header and cells (all but t/s), and CSV / JSON fields that are llama-bench's, of its kinds and values.
 */
import { basename } from "node:path";
import { GGUFFile, openGGUFModel } from "@memra/gguf";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
// (a relative import: the CLI's tests may look at the native library the CLI itself would use)
import { nativeLibraryUnavailableReason } from "../../../cpu-ffi/src/native-availability";
import { cudaAvailable } from "../../../cuda-ffi/src/index";
import goldens from "../__fixtures__/llama-bench-goldens.json";
import { demoModelPath } from "../default-model";
import { llamaModelDescription } from "../llama-model-description";
import { summarize } from "./bench";
import { parseIntegerRange } from "./llama-bench-arguments";
import { benchFieldNames, formatModelSize, formatParameterCount, printfFixed } from "./llama-bench-printer";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
let model = "";

beforeAll(async () => {
  model = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
});

function run(args: string[]) {
  const result = Bun.spawnSync(["bun", MAIN, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

describe("memra bench", () => {
  it("--json gives pp and tg in tokens/s, llama-bench style, on the native backend when it is built", () => {
    const result = run(["bench", "-m", model, "-p", "16", "-n", "4", "-r", "2", "-t", "1", "--json"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report.pp.tokens).toBe(16);
    expect(report.tg.tokens).toBe(4);
    for (const test of [report.pp, report.tg]) {
      expect(test.samples).toHaveLength(2);
      expect(test.tps).toBeGreaterThan(0);
      expect(test.tps).toBeCloseTo((test.samples[0] + test.samples[1]) / 2, 6);
    }
    expect(report.ttft_ms).toBeGreaterThan(0);
    expect(report.peak_rss_bytes).toBeGreaterThan(10 * 2 ** 20);
    // auto picks the native CPU backend whenever its library is there (CI builds it)
    if (nativeLibraryUnavailableReason() === undefined) expect(report.backend).toMatch(/^cpu \w+, 1 thread$/);
    else expect(report.backend).toBe("reference");
  });

  it("prints a table with ppN and tgN rows", () => {
    const result = run(["bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "--device", "reference"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/\| +pp8 \| +[\d.]+ ± [\d.]+ \|/);
    expect(result.stdout).toMatch(/\| +tg2 \| +[\d.]+ ± [\d.]+ \|/);
    expect(result.stdout).toMatch(/\| reference  \|/);
  });

  it("--npl measures B sequences decoded together (llama-batched-bench's S_TG), in the JSON and the table", () => {
    const result = run(["bench", "-m", model, "-p", "0", "-n", "4", "-r", "2", "-t", "1", "--npl", "1,3", "--json"]);
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report.npl.map((test: { sequences: number }) => test.sequences)).toEqual([1, 3]);
    for (const test of report.npl) {
      expect(test.tokens).toBe(4);
      expect(test.samples).toHaveLength(2);
      expect(test.tps).toBeGreaterThan(0);
    }
    const table = run(["bench", "-m", model, "-p", "0", "-n", "2", "-r", "1", "--npl", "2", "--device", "reference"]);
    expect(table.stdout).toMatch(/\| +tg2 x2 \| +[\d.]+ ± [\d.]+ \|/);
    const csv = run(["bench", "-m", model, "-p", "0", "-n", "2", "-r", "1", "--npl", "2", "--device", "reference", "-o", "csv"]).stdout.trim().split("\n");
    expect(csv[0]).toBe(benchFieldNames(true).join(","));
    expect(csv.slice(1).map((row) => row.split(",").at(-1))).toEqual(['"0"', '"2"']);
    expect(run(["bench", "-m", model, "-n", "0", "--npl", "2"]).stderr).toMatch(/--npl measures generation/);
    expect(run(["bench", "-m", model, "--npl", "0"]).stderr).toMatch(/--npl must be a positive integer/);
  });

  it("rejects bad options by name", () => {
    expect(run(["bench", "-m", model, "--prompt=-3"]).stderr).toMatch(/--prompt must be a non-negative integer/);
    expect(run(["bench", "-m", model, "-p", "0", "-n", "0"]).stderr).toMatch(/nothing to measure/);
    expect(run(["bench", "-m", model, "--device", "gpu"]).stderr).toMatch(/--device must be auto, cuda, cpu or reference/);
    expect(run(["bench", "-m", model, "-r", "0"]).code).toBe(1);
  });

  it.skipIf(cudaAvailable())("--device cuda without a GPU or driver fails with the driver's reason, before loading", () => {
    const result = run(["bench", "-m", model, "-p", "4", "-n", "0", "--device", "cuda"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^memra bench: --device cuda: CUDA is unavailable: .+/);
  });

  it("summarizes samples as mean, sample standard deviation and median", () => {
    const summary = summarize(512, [100, 110, 130]);
    expect(summary.tps).toBeCloseTo(113.3333, 3);
    expect(summary.stddev).toBeCloseTo(Math.sqrt(((100 - 113.3333) ** 2 + (110 - 113.3333) ** 2 + (130 - 113.3333) ** 2) / 2), 3);
    expect(summary.median).toBe(110);
    expect(summarize(1, [4, 2]).median).toBe(3);
  });
});

type Golden = (typeof goldens.cases)[number] & { header?: string; rule?: string; rows?: unknown[]; tests?: string[]; fields?: string[]; kinds?: Record<string, string> };

/** The fields that must be there in every CSV / JSON record (with the samples in JSON). */
const REQUIRED_FIELDS = ["model_type", "model_size", "model_n_params", "n_threads", "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts"];

/** Whether `ours` is `theirs` with some fields left out, the rest in llama-bench's order. */
function isOrderedSubset(ours: readonly string[], theirs: readonly string[]): boolean {
  let at = 0;
  for (const field of ours) {
    at = theirs.indexOf(field, at);
    if (at < 0) return false;
    at++;
  }
  return true;
}

describe("memra bench against llama-bench (llama-bench-goldens.json)", () => {
  // the native CPU backend prints llama-bench's "CPU"; without it the reference backend stands in,
  // and only its backend and threads cells (always 1 thread) may differ
  const native = nativeLibraryUnavailableReason() === undefined;
  const device = native ? "cpu" : "reference";
  const paths = new Map<string, string>();

  beforeAll(async () => {
    for (const [id, spec] of Object.entries(goldens.models) as [string, { demo?: boolean; preset?: PresetName; options?: Partial<SyntheticModelOptions>; file: string }][]) {
      const path = spec.demo ? demoModelPath() : await syntheticModelFile(resolveOptions(spec.preset!, spec.options));
      // a different file than the one llama-bench ran (a changed generator) needs the goldens recorded again
      expect(basename(path), `model ${id}: run tools/llamacpp/llama-bench-goldens.ts again`).toBe(spec.file);
      paths.set(id, path);
    }
  });

  for (const golden of goldens.cases as Golden[]) {
    it(`${golden.id}: ${golden.args.join(" ")}`, () => {
      const result = run(["bench", "-m", paths.get(golden.model)!, ...golden.args, "--device", device]);
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
      if (golden.format === "md") {
        const lines = result.stdout.split("\n").filter((line) => line.startsWith("|"));
        expect(lines[0]).toBe(golden.header);
        expect(lines[1]).toBe(golden.rule);
        const names = golden.header!.split("|").map((cell) => cell.trim());
        const cells = (row: string) => row.split("|").map((cell, index) => (native || (names[index] !== "backend" && names[index] !== "threads") ? cell : ""));
        const rows = lines.slice(2).map((row) => row.slice(0, row.lastIndexOf("|", row.length - 2) + 1));
        expect(rows.map(cells)).toEqual((golden.rows as string[]).map(cells));
        expect(lines.slice(2).map((row) => row.split("|").at(-3)!.trim())).toEqual(golden.tests);
        for (const row of lines.slice(2)) expect(row).toMatch(/\| +\d+\.\d\d ± \d+\.\d\d \|$/);
        return;
      }
      const stable = (record: Record<string, unknown>) => {
        const kept = Object.fromEntries(Object.keys(golden.rows![0] as object).filter((field) => field !== "samples").map((field) => [field, record[field]]));
        if (!native) for (const field of ["backends", "n_threads"]) delete kept[field];
        return kept;
      };
      const expected = (golden.rows as Record<string, unknown>[]).map((row) => {
        const { samples: _, ...rest } = row;
        return stable(rest);
      });
      let fields: string[];
      let records: Record<string, unknown>[];
      if (golden.format === "csv") {
        const [header, ...rows] = result.stdout.trim().split("\n");
        fields = header!.split(",");
        records = rows.map((row) => Object.fromEntries(JSON.parse(`[${row}]`).map((value: string, index: number) => [fields[index], value])));
      } else {
        records = golden.format === "json" ? JSON.parse(result.stdout) : result.stdout.trim().split("\n").map((line) => JSON.parse(line));
        fields = Object.keys(records[0]!);
        for (const field of fields) expect(Array.isArray(records[0]![field]) ? "array" : typeof records[0]![field], field).toBe(golden.kinds![field]);
        expect(records.map((record) => (record.samples_ns as unknown[]).length)).toEqual((golden.rows as { samples: number }[]).map((row) => row.samples));
        expect(records.map((record) => (record.samples_ts as unknown[]).length)).toEqual((golden.rows as { samples: number }[]).map((row) => row.samples));
      }
      expect(isOrderedSubset(fields, golden.fields!), `${fields.join(",")} within llama-bench's ${golden.fields!.join(",")}`).toBe(true);
      expect(fields).toEqual(expect.arrayContaining(REQUIRED_FIELDS));
      expect(records.map(stable)).toEqual(expected);
    });
  }
});

describe("llama-bench's flags", () => {
  it("refuses what memra cannot honour, naming it", () => {
    const cases: [string[], RegExp][] = [
      [["-ctk", "q8_0", "-ctv", "f16"], /-ctk q8_0 with -ctv f16: memra keeps K and V in one element type/],
      [["-ctk", "q4_0", "-ctv", "q4_0"], /-ctk q4_0: memra's KV cache holds f16, q8_0, f32/],
      [["-fa", "1"], /llama-bench's -fa is not supported: memra has one attention path/],
      [["-mmp", "0"], /llama-bench's -mmp is not supported/],
      [["-ngl", "99", "--device", "cpu"], /-ngl 99: no CUDA GPU here \(--device cpu\)/],
      [["-o", "sql"], /-o\/--output must be one of none, md, csv, json, jsonl, got "sql"/],
      [["-p", "16,32", "--json"], /--json is memra's report of one pp and one tg test/],
      [["--json", "-o", "json"], /give --json or -o\/-oe, not both/],
      [["-pg", "16"], /-pg must be PP,TG/],
      [["-p", "8-32*1"], /-p\/--prompt: the range "8-32\*1" does not grow/],
      [["-t", "0"], /-t\/--threads must be a positive integer/],
    ];
    for (const [args, message] of cases) {
      const result = run(["bench", "-m", model, ...args]);
      expect(result.code, args.join(" ")).toBe(1);
      expect(result.stderr, args.join(" ")).toMatch(message);
    }
  });

  it("--kv-type runs one test per type (llama-bench's type_k / type_v columns); -oe writes a second format to stderr", () => {
    const result = run(["bench", "-m", model, "-p", "8", "-n", "0", "-r", "1", "--kv-type", "f16,q8_0", "--device", "reference", "-oe", "jsonl", "--progress"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/\| type_k \| type_v \|/);
    expect(result.stdout).toMatch(/\|    f16 \|    f16 \| +pp8 \|/);
    expect(result.stdout).toMatch(/\|   q8_0 \|   q8_0 \| +pp8 \|/);
    const records = result.stderr.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line));
    expect(records.map((record) => [record.type_k, record.n_prompt])).toEqual([["f16", 8], ["q8_0", 8]]);
    expect(result.stderr).toMatch(/^memra bench: benchmark 2\/2: prompt run 1\/1$/m);
  });

  it("reads llama-bench's integer lists and ranges", () => {
    expect(parseIntegerRange("64-512*2", "-p")).toEqual([64, 128, 256, 512]);
    expect(parseIntegerRange("1-7+3,16", "-p")).toEqual([1, 4, 7, 16]);
    expect(parseIntegerRange("0-2", "-d")).toEqual([0, 1, 2]);
    expect(parseIntegerRange("-1,0", "-ngl", true)).toEqual([-1, 0]);
    expect(() => parseIntegerRange("-1", "-p")).toThrow(/-p must be a non-negative integer/);
    expect(() => parseIntegerRange("4|8", "-p")).toThrow(/-p must be/);
  });

  it("describes a model as llama_model_desc does, guessing the file type as llama.cpp's loader does when general.file_type is absent", () => {
    const file = openGGUFModel(model);
    expect(llamaModelDescription(file).type).toBe("qwen3 ?B Q8_0");
    const metadata = new Map(file.metadata);
    metadata.delete("general.file_type");
    const unlabelled = new GGUFFile({ version: file.version, alignment: file.alignment, metadata, tensors: file.tensors, dataOffset: file.dataOffset, header: file.header, contents: file.contents });
    expect(llamaModelDescription(unlabelled).type).toBe("qwen3 ?B (guessed) Q8_0");
  });

  it("prints sizes and counts as llama-bench's printf does, ties to even", () => {
    expect(printfFixed(0.125, 2)).toBe("0.12");
    expect(printfFixed(0.375, 2)).toBe("0.38");
    expect(printfFixed(2.5, 0)).toBe("2");
    expect(printfFixed(1.005, 2)).toBe("1.00"); // 1.005 is 1.00499999999999989... as a double
    expect(formatModelSize(4467712)).toBe("4.26 MiB");
    expect(formatModelSize(1.5 * 2 ** 30)).toBe("1.50 GiB");
    expect(formatParameterCount(4197120)).toBe("4.20 M");
    expect(formatParameterCount(751632384)).toBe("751.63 M");
    expect(formatParameterCount(8190735360)).toBe("8.19 B");
  });
});
