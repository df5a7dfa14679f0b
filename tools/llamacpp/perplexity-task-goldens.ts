#!/usr/bin/env bun
/**
 * llama-perplexity's --hellaswag, --winogrande and --multiple-choice on golden-suite models, as
 * golden fixtures for computeHellaswag / computeWinogrande / computeMultipleChoice and `memra
 * perplexity --hellaswag ...`: llama.cpp's own tools/perplexity/perplexity.cpp, built by
 * build-llama-perplexity.sh, run with the golden suite's settings (CPU, 2 threads, F32 KV cache, no
 * flash attention) over the data files of perplexity-task-data.ts, with all tasks and with fewer
 * (the random pick).
 *
 *   tools/llamacpp/build-llama-perplexity.sh
 *   bun tools/llamacpp/perplexity-task-data.ts        # only to make the data files again
 *   bun tools/llamacpp/perplexity-task-goldens.ts     (from the repository root)
 *
 * Writes packages/core/src/__fixtures__/perplexity-tasks/perplexity-task-goldens.json: per case the
 * arguments, the task count llama-perplexity loaded, its per-task lines as printed (stdout) and its
 * final lines (stderr, without the log prefix), and its wall time. Also the indices of the tasks
 * scored, in order, where llama.cpp draws them (HellaSwag always, the others for fewer tasks than
 * the file holds), from perplexity-task-selection.cpp (llama.cpp's selection code built with this
 * machine's C++ library), since llama-perplexity does not print them.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "../../packages/synthetic/src/index";

const ROOT = join(import.meta.dir, "..", "..");
const FIXTURES = "packages/core/src/__fixtures__/perplexity-tasks";
const BINARY = join(import.meta.dir, "build", "llama-perplexity");
const SELECTION = join(import.meta.dir, "build", "perplexity-task-selection");
const THREADS = 2;

type Kind = "hellaswag" | "winogrande" | "multiple-choice";

interface GoldenCase {
  readonly id: string;
  readonly kind: Kind;
  /** A golden-suite model id. */
  readonly model: string;
  /** --hellaswag-tasks / --winogrande-tasks / --multiple-choice-tasks; absent: the default. */
  readonly tasks?: number;
  /** -c; absent: 512. */
  readonly context?: number;
  readonly note: string;
}

const DATA: Record<Kind, string> = {
  hellaswag: `${FIXTURES}/hellaswag.txt`,
  winogrande: `${FIXTURES}/winogrande.csv`,
  "multiple-choice": `${FIXTURES}/multiple-choice.bin`,
};

const CASES: GoldenCase[] = [
  { id: "hellaswag-dense-f32", kind: "hellaswag", model: "dense-f32", note: "all 48 tasks (the default 400 is more), in llama.cpp's shuffled order" },
  { id: "hellaswag-moe-q8_0-20", kind: "hellaswag", model: "moe-q8_0", tasks: 20, note: "20 of 48 tasks" },
  { id: "winogrande-dense-q8_0-c128", kind: "winogrande", model: "dense-q8_0", context: 128, note: "all 120 tasks (the header skipped, the last line not read), -c 128: the final score is printed from 100 tasks" },
  { id: "winogrande-moe-f32-30", kind: "winogrande", model: "moe-f32", tasks: 30, note: "30 of 120 tasks" },
  { id: "multiple-choice-moe-f32", kind: "multiple-choice", model: "moe-f32", note: "all 40 tasks: final score and random chance" },
  { id: "multiple-choice-dense-f32-15", kind: "multiple-choice", model: "dense-f32", tasks: 15, note: "15 of 40 tasks: no final score under 100 picked tasks" },
];

if (!existsSync(BINARY)) {
  console.error(`no ${BINARY}: run tools/llamacpp/build-llama-perplexity.sh first`);
  process.exit(1);
}
const compile = Bun.spawnSync(["c++", "-O2", "-std=c++17", "-o", SELECTION, join(import.meta.dir, "perplexity-task-selection.cpp")], { stderr: "pipe" });
if (compile.exitCode !== 0) throw new Error(`cannot compile perplexity-task-selection.cpp: ${compile.stderr.toString()}`);

const suite = JSON.parse(readFileSync(join(ROOT, "packages/core/src/conformance/golden-suite.json"), "utf8")) as {
  models: Array<{ id: string; preset: PresetName; options: Partial<SyntheticModelOptions> }>;
};
const release = JSON.parse(readFileSync(join(import.meta.dir, "node_modules/node-llama-cpp/llama/llama.cpp.info.json"), "utf8")) as { tag: string };
const bundleHead = readFileSync(join(import.meta.dir, "node_modules/node-llama-cpp/llama/gitRelease.bundle")).subarray(0, 200).toString("latin1");
const commit = /([0-9a-f]{40}) HEAD/.exec(bundleHead)?.[1];

const FLAG: Record<Kind, string> = { hellaswag: "--hellaswag", winogrande: "--winogrande", "multiple-choice": "--multiple-choice" };
const LOADED: Record<Kind, RegExp> = {
  hellaswag: /hellaswag_score : loaded (\d+) tasks/,
  winogrande: /winogrande_score : loaded (\d+) tasks/,
  "multiple-choice": /multiple_choice_score: there are (\d+) tasks/,
};
const TASK_LINE: Record<Kind, RegExp> = {
  hellaswag: /^\d+\t[\d.]+%\t\[[\d.]+%, [\d.]+%\]$/,
  winogrande: /^\d+\t[\d.]+\t.*  [12]  [12]$/,
  "multiple-choice": /^\d+\t[\d.]+$/,
};

const results = [];
let systemInfo = "";
for (const c of CASES) {
  const entry = suite.models.find((model) => model.id === c.model);
  if (!entry) throw new Error(`no model ${c.model} in golden-suite.json`);
  const path = await syntheticModelFile(resolveOptions(entry.preset, entry.options));
  const args = ["-m", path, "-f", DATA[c.kind], FLAG[c.kind], ...(c.tasks ? [`${FLAG[c.kind]}-tasks`, String(c.tasks)] : []), ...(c.context ? ["-c", String(c.context)] : []), "-t", String(THREADS), "-ctk", "f32", "-ctv", "f32", "-fa", "off"];
  const started = performance.now();
  const run = Bun.spawnSync([BINARY, ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const seconds = (performance.now() - started) / 1000;
  const stdout = run.stdout.toString();
  const stderr = run.stderr.toString();
  if (run.exitCode !== 0) {
    console.error(stdout, stderr);
    throw new Error(`llama-perplexity failed on ${c.id} (${run.exitCode})`);
  }
  systemInfo = /system_info: (.*)/.exec(stderr)?.[1]?.trim() ?? systemInfo;
  const loaded = Number(LOADED[c.kind].exec(stderr)?.[1]);
  const lines = stdout.split("\n").filter((line) => TASK_LINE[c.kind].test(line));
  const final = stderr
    .split("\n")
    .map((line) => line.replace(/^[\d.]+ [IWE] /, ""))
    .filter((line) => /^(Final|Random chance)/.test(line));
  // hellaswag always draws (all tasks come shuffled); the others draw only for fewer tasks
  const count = c.kind === "hellaswag" ? (c.tasks ?? 400) : c.tasks;
  const selection = count === undefined ? undefined : Bun.spawnSync([SELECTION, c.kind === "hellaswag" ? "hellaswag" : "sampled", String(loaded), String(count)]).stdout.toString().trim().split("\n").map(Number);
  if (lines.length === 0) throw new Error(`no task lines from llama-perplexity on ${c.id}:\n${stdout}`);
  results.push({
    ...c,
    preset: entry.preset,
    options: entry.options,
    modelFile: basename(path),
    data: DATA[c.kind],
    arguments: args.slice(2),
    loaded,
    ...(selection ? { selection } : {}),
    lines,
    final,
    seconds: Number(seconds.toFixed(2)),
  });
  console.log(`${c.id}: ${lines.length} tasks of ${loaded}; ${lines.at(-1)}${final.length ? `; ${final.join("; ")}` : ""} (${seconds.toFixed(1)} s)`);
}

const fixture = {
  reference: {
    engine: "llama.cpp tools/perplexity/perplexity.cpp, built by tools/llamacpp/build-llama-perplexity.sh against node-llama-cpp@3.21.1's prebuilt libraries",
    llamaCppRelease: `ggml-org/llama.cpp@${release.tag}${commit ? ` (bundled source ${commit.slice(0, 12)})` : ""}`,
    threads: THREADS,
    kvCacheType: "f32",
    flashAttention: false,
    systemInfo,
    selection: "tools/llamacpp/perplexity-task-selection.cpp: llama.cpp's selection code, built with this machine's c++",
  },
  cases: results,
};
writeFileSync(join(ROOT, FIXTURES, "perplexity-task-goldens.json"), `${JSON.stringify(fixture, null, 2)}\n`);
console.log(`wrote ${FIXTURES}/perplexity-task-goldens.json`);
