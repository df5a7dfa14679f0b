#!/usr/bin/env bun
/**
 * llama-imatrix's --in-file, --output-format dat, --from-chunk, --save-frequency and
 * --show-statistics, as golden fixtures for `memra imatrix`: llama.cpp's own
 * tools/imatrix/imatrix.cpp (built by build-llama-imatrix.sh) run on the fixtures of
 * imatrix-goldens.ts (the same golden-suite models, calibration text and settings: CPU, 2 threads,
 * F32 KV cache, no flash attention).
 *
 *   tools/llamacpp/build-llama-imatrix.sh && bun tools/llamacpp/imatrix-in-file-goldens.ts   (from the repository root)
 *
 * Cases run in order (later ones read files earlier ones wrote). Writes llama-imatrix's outputs,
 * unchanged, to packages/core/src/__fixtures__/imatrix/in-file/, the --show-statistics text (its
 * log prefixes stripped) beside them as <case>.txt, and imatrix-in-file-goldens.json: each case's
 * arguments (MODEL for the model's path), the files it wrote, and whether they are to be matched
 * byte for byte ("exact": nothing computed, only files combined or rewritten) or within the
 * computed-sums tolerance ("computed").
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "../../packages/synthetic/src/index";

const ROOT = join(import.meta.dir, "..", "..");
const FIXTURES = "packages/core/src/__fixtures__/imatrix";
const OUT = `${FIXTURES}/in-file`;
const CALIBRATION = `${FIXTURES}/calibration.txt`;
const BINARY = join(import.meta.dir, "build", "llama-imatrix");
const COMMON = ["-t", "2", "-ctk", "f32", "-ctv", "f32", "-fa", "off"];

interface InFileCase {
  readonly id: string;
  /** A golden-suite model id (llama-imatrix wants -m even when it only combines files). */
  readonly model: string;
  /** llama-imatrix's arguments after -m MODEL. */
  readonly arguments: readonly string[];
  /** Files it writes (relative to the repository root), or the statistics text for kind "statistics". */
  readonly outputs: readonly string[];
  readonly kind: "exact" | "computed" | "statistics";
  readonly note: string;
}

const CASES: InFileCase[] = [
  {
    id: "from-chunk",
    model: "dense-f32",
    arguments: ["-f", CALIBRATION, "-o", `${OUT}/dense-f32-c64-from1.gguf`, "-c", "64", "--from-chunk", "1"],
    outputs: [`${OUT}/dense-f32-c64-from1.gguf`],
    kind: "computed",
    note: "--from-chunk 1: the first 64 tokens dropped, 3 chunks of the rest",
  },
  {
    id: "combine-dense",
    model: "dense-f32",
    arguments: ["--in-file", `${FIXTURES}/dense-f32-c64.gguf,${OUT}/dense-f32-c64-from1.gguf`, "-o", `${OUT}/combined-dense.gguf`, "-c", "64"],
    outputs: [`${OUT}/combined-dense.gguf`],
    kind: "exact",
    note: "two GGUF files of the same model, no -f: sums and counts added, datasets concatenated",
  },
  {
    id: "combine-moe",
    model: "moe-f32",
    arguments: ["--in-file", `${FIXTURES}/moe-f32-c64.gguf,${FIXTURES}/moe-f32-c12-chunks1.gguf`, "-o", `${OUT}/combined-moe.gguf`],
    outputs: [`${OUT}/combined-moe.gguf`],
    kind: "exact",
    note: "per-expert counts added (one file with unrouted experts); default -c 512: chunk_size 512, chunk_count the largest count / 512",
  },
  {
    id: "dat-dense",
    model: "dense-f32",
    arguments: ["--in-file", `${FIXTURES}/dense-f32-c64.gguf`, "--output-format", "dat", "-o", `${OUT}/dense-f32-c64.dat`, "-c", "64"],
    outputs: [`${OUT}/dense-f32-c64.dat`],
    kind: "exact",
    note: "a GGUF imatrix rewritten in the legacy format",
  },
  {
    id: "dat-moe-partial",
    model: "moe-f32",
    arguments: ["--in-file", `${FIXTURES}/moe-f32-c12-chunks1.gguf`, "--output-format", "dat", "-o", `${OUT}/moe-f32-c12-chunks1.dat`, "-c", "12"],
    outputs: [`${OUT}/moe-f32-c12-chunks1.dat`],
    kind: "exact",
    note: "legacy format of experts some of which no token reached (stored as 1 × ncall)",
  },
  {
    id: "combine-dense-dat",
    model: "dense-f32",
    arguments: ["--in-file", `${OUT}/dense-f32-c64.dat,${OUT}/dense-f32-c64-from1.gguf`, "-o", `${OUT}/combined-dense-dat.gguf`, "-c", "64"],
    outputs: [`${OUT}/combined-dense-dat.gguf`],
    kind: "exact",
    note: "a legacy .dat (sums × chunk size, counts ncall × chunk size) then a GGUF",
  },
  {
    id: "combine-moe-dat",
    model: "moe-f32",
    arguments: ["--in-file", `${OUT}/moe-f32-c12-chunks1.dat,${FIXTURES}/moe-f32-c64.gguf`, "-o", `${OUT}/combined-moe-dat.gguf`, "-c", "12"],
    outputs: [`${OUT}/combined-moe-dat.gguf`],
    kind: "exact",
    note: "a legacy .dat's single expert count broadcast to the GGUF's per-expert counts",
  },
  {
    id: "combine-dense-to-dat",
    model: "dense-f32",
    arguments: ["--in-file", `${FIXTURES}/dense-f32-c64.gguf,${OUT}/dense-f32-c64-from1.gguf`, "--output-format", "dat", "-o", `${OUT}/combined-dense.dat`, "-c", "64"],
    outputs: [`${OUT}/combined-dense.dat`],
    kind: "exact",
    note: "two files combined into the legacy format: its one dataset name is the last file's",
  },
  {
    id: "continue",
    model: "dense-f32",
    arguments: ["-f", CALIBRATION, "--in-file", `${OUT}/dense-f32-c64-from1.gguf`, "-o", `${OUT}/continue.gguf`, "-c", "64", "--chunks", "2", "--save-frequency", "2"],
    outputs: [`${OUT}/continue.gguf`, `${OUT}/continue.gguf.at_5`],
    kind: "computed",
    note: "computing on top of a loaded file (3 chunks): 2 chunks more in one ubatch; the copy at chunk 5 is saved as the first weight of the ubatch crosses it",
  },
  {
    id: "save-frequency",
    model: "dense-f32",
    arguments: ["-f", CALIBRATION, "-o", `${OUT}/save-frequency.gguf`, "-c", "64", "-b", "64", "--save-frequency", "2"],
    outputs: [`${OUT}/save-frequency.gguf`, `${OUT}/save-frequency.gguf.at_2`, `${OUT}/save-frequency.gguf.at_4`],
    kind: "computed",
    note: "one chunk a ubatch (-b 64): copies at chunks 2 and 4",
  },
  ...(
    [
      ["statistics-dense", "dense-f32", `${FIXTURES}/dense-f32-c64.gguf`],
      ["statistics-moe", "moe-f32", `${FIXTURES}/moe-f32-c64.gguf`],
      ["statistics-moe-partial", "moe-f32", `${FIXTURES}/moe-f32-c12-chunks1.gguf`],
      ["statistics-output", "dense-untied-f32", `${FIXTURES}/dense-untied-f32-c74-output.gguf`],
      ["statistics-dat", "dense-f32", `${OUT}/dense-f32-c64.dat`],
    ] as const
  ).map(([id, model, file]): InFileCase => ({
    id,
    model,
    arguments: ["--in-file", file, "--show-statistics"],
    outputs: [`${OUT}/${id}.txt`],
    kind: "statistics",
    note: `--show-statistics of ${basename(file)}`,
  })),
];

if (!existsSync(BINARY)) {
  console.error(`no ${BINARY}: run tools/llamacpp/build-llama-imatrix.sh first`);
  process.exit(1);
}

const suite = JSON.parse(readFileSync(join(ROOT, "packages/core/src/conformance/golden-suite.json"), "utf8")) as {
  models: Array<{ id: string; preset: PresetName; options: Partial<SyntheticModelOptions> }>;
};
rmSync(join(ROOT, OUT), { recursive: true, force: true });
mkdirSync(join(ROOT, OUT), { recursive: true });

const results = [];
for (const c of CASES) {
  const entry = suite.models.find((model) => model.id === c.model);
  if (!entry) throw new Error(`no model ${c.model} in golden-suite.json`);
  const path = await syntheticModelFile(resolveOptions(entry.preset, entry.options));
  const before = new Set(readdirSync(join(ROOT, OUT)));
  const run = Bun.spawnSync([BINARY, "-m", path, ...c.arguments, ...COMMON], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const log = `${run.stdout.toString()}${run.stderr.toString()}`;
  if (run.exitCode !== 0) {
    console.error(log);
    throw new Error(`llama-imatrix failed on ${c.id} (${run.exitCode})`);
  }
  if (c.kind === "statistics") {
    // the log's "0.00.015.072 I " before each message
    const text = log.replace(/^\d+\.\d+\.\d+\.\d+ [A-Z] /gm, "");
    const start = text.indexOf("\nComputing statistics");
    // build-llama-imatrix.sh drains llama.cpp's logger at exit, without which the end is now and then lost
    if (start < 0 || !text.includes("\nComputing weighted average statistics per layer")) throw new Error(`${c.id}: no statistics in\n${log}`);
    writeFileSync(join(ROOT, c.outputs[0]!), text.slice(start));
  }
  const written = readdirSync(join(ROOT, OUT)).filter((name) => !before.has(name));
  const expected = c.outputs.map((output) => basename(output));
  if (written.sort().join() !== [...expected].sort().join()) throw new Error(`${c.id}: llama-imatrix wrote ${written.join(", ")}, expected ${expected.join(", ")}`);
  results.push({ ...c, preset: entry.preset, options: entry.options, modelFile: basename(path) });
  console.log(`${c.id}: ${expected.join(", ")}`);
}

const release = JSON.parse(readFileSync(join(import.meta.dir, "node_modules/node-llama-cpp/llama/llama.cpp.info.json"), "utf8")) as { tag: string };
const fixture = {
  reference: {
    engine: "llama.cpp tools/imatrix/imatrix.cpp, built by tools/llamacpp/build-llama-imatrix.sh against node-llama-cpp@3.21.1's prebuilt libraries",
    llamaCppRelease: `ggml-org/llama.cpp@${release.tag}`,
    common: COMMON,
  },
  cases: results,
};
writeFileSync(join(ROOT, FIXTURES, "imatrix-in-file-goldens.json"), `${JSON.stringify(fixture, null, 2)}\n`);
console.log(`wrote ${FIXTURES}/imatrix-in-file-goldens.json`);
