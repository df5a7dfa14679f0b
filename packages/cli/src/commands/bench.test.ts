import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
// (a relative import: the CLI's tests may look at the native library the CLI itself would use)
import { nativeLibraryUnavailableReason } from "../../../cpu-ffi/src/native-availability";
import { cudaAvailable } from "../../../cuda-ffi/src/index";
import { summarize } from "./bench";

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
    expect(result.stdout).toMatch(/\| pp8 +\| +[\d.]+ ± [\d.]+ \|/);
    expect(result.stdout).toMatch(/\| tg2 +\| +[\d.]+ ± [\d.]+ \|/);
    expect(result.stdout).toMatch(/reference/);
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
    expect(table.stdout).toMatch(/\| tg2 x2 +\| +[\d.]+ ± [\d.]+ \|/);
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
