import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

// The `run` tool brings back at most 8 files from $OUT, named in letters, digits, '.', '_' and '-',
// and when it stops a command at its limit, only what is there then (.library/device/README.md):
// run.sh keeps summary.json, targets.json and logs.tar.gz there, each replaced whole after a step.
const root = join(import.meta.dirname, "../..");
const script = join(root, "bench/device/run.sh");
const kept = ["logs.tar.gz", "summary.json", "targets.json"];
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface Step {
  step: string;
  status: number | null;
  skipped?: string;
  seconds: number;
  log?: string;
}

function runScript(env: Record<string, string>) {
  const out = mkdtempSync(join(tmpdir(), "memra-device-out-"));
  dirs.push(out);
  const result = spawnSync("bash", [script], { env: { ...process.env, ...env, OUT: out }, encoding: "utf8", timeout: 60_000 });
  const files = readdirSync(out).sort();
  const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as { steps: Step[]; only: string; benchmarks: unknown[] };
  return { out, result, files, summary };
}

function tarList(file: string): string[] {
  const listed = spawnSync("tar", ["-tzf", file], { encoding: "utf8" });
  expect(listed.status, listed.stderr).toBe(0);
  return listed.stdout
    .split("\n")
    .map((line) => line.replace(/^\.\//, ""))
    .filter((line) => line !== "");
}

describe("bench/device/run.sh's output folder", () => {
  it("holds three files after a run: the summary, the targets and every step's log packed in one", () => {
    const { out, result, files, summary } = runScript({ MEMRA_DEVICE_ONLY: "^environment$" });
    expect(result.status, result.stderr).toBe(0);
    expect(files).toEqual(kept);
    expect(summary.only).toBe("^environment$");
    const ran = summary.steps.filter((step) => step.skipped === undefined);
    expect(ran).toEqual([{ step: "environment", status: 0, seconds: expect.any(Number), log: "logs.tar.gz:environment.log" }]);
    // every other step named, as not run: a rerun on a warm machine shows what it left out
    expect(summary.steps.length).toBeGreaterThan(20);
    for (const step of summary.steps.slice(1)) expect(step).toMatchObject({ status: null, skipped: "not selected" });
    expect(tarList(join(out, "logs.tar.gz"))).toEqual(expect.arrayContaining(["environment.log", "targets.txt", "targets.json"]));
    const targets = JSON.parse(readFileSync(join(out, "targets.json"), "utf8")) as { targets: unknown[] };
    expect(targets.targets.length).toBeGreaterThan(0);
    // the reply carries the output's end: the targets report is last
    expect(result.stdout).toMatch(/issue 8 targets:[\s\S]*tg128 of a variant \/ default/);
    expect(result.stdout.trimEnd().split("\n").at(-1)).toMatch(/8B no-wide/);
  });

  it("names the steps a spent budget skipped, and still writes its files", () => {
    const { result, files, summary } = runScript({ MEMRA_DEVICE_BUDGET: "5" });
    expect(result.status, result.stderr).toBe(0);
    expect(files).toEqual(kept);
    expect(summary.steps.length).toBeGreaterThan(20);
    for (const step of summary.steps) expect(step).toMatchObject({ status: null, skipped: "budget" });
  });

  it("writes nothing else to $OUT: every path the script names there is one of the three (or its .tmp)", () => {
    const text = readFileSync(script, "utf8");
    const named = [...text.matchAll(/\$OUT\/([\w.$-]+)/g)].map((match) => match[1]!.replace(/\.tmp$/, ""));
    expect(named.length).toBeGreaterThanOrEqual(3);
    for (const name of named) expect(kept, `$OUT/${name} in run.sh`).toContain(name);
    const summaryPath = /SUMMARY="\$OUT\/([\w.]+)"/.exec(text)?.[1];
    expect(summaryPath).toBe("summary.json");
  });
});
