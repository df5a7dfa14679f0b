#!/usr/bin/env bun
/**
 * llama-perplexity's two-run KL divergence and its other perplexity options, as goldens for
 * `saveKlDivergenceBase` / `computeKlDivergenceFromBase` / `computeStridedPerplexity` and `memra
 * perplexity`: llama.cpp's own tools/perplexity, built by build-llama-perplexity.sh against
 * node-llama-cpp 3.21.1's prebuilt libraries, run with the golden suite's settings (CPU, 2 threads,
 * F32 KV cache, no flash attention) and its defaults otherwise.
 *
 *   tools/llamacpp/build-llama-perplexity.sh && bun tools/llamacpp/kld-base-goldens.ts   (from the repository root)
 *
 * The base is the golden suite's dense-f32 model with its vocabulary cut to 1,023 tokens (odd, so
 * that each saved row carries llama.cpp's padding value; 2 KB a row instead of 297 KB), the
 * quantized models are its Q8_0 and Q4_K_M files written by `memra quantize` (llama-quantize's bytes).
 * Writes into packages/core/src/__fixtures__/kld-base/:
 *   base.kld               llama-perplexity -m BASE -f TEXT -c 128 --chunks 3 --kl-divergence-base (390 KB)
 *   kld-base-goldens.json  what llama-perplexity printed: the saving run's perplexity, the statistics
 *                          of --kl-divergence on base.kld for the base itself, Q8_0 and Q4_K_M, the
 *                          Q4_K_M statistics on the file `memra perplexity` writes (llama.cpp reading
 *                          memra's file), --ppl-output-type 1, and --ppl-stride with both output types
 *                          and at llama.cpp's own sizing of the window (-b / -c sequences, rounded to 256).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "../../packages/synthetic/src/index";

const ROOT = join(import.meta.dir, "..", "..");
const FIXTURES = "packages/core/src/__fixtures__/kld-base";
const TEXT = "packages/cli/src/__fixtures__/demo-model/heldout-sample.txt";
const BINARY = join(import.meta.dir, "build", "llama-perplexity");
const SETTINGS = ["-t", "2", "-ctk", "f32", "-ctv", "f32", "-fa", "off"];
const BASE: { preset: PresetName; options: Partial<SyntheticModelOptions> } = { preset: "small", options: { weightType: "f32", vocabulary: 1023 } };
const CONTEXT = 128;
const CHUNKS = 3;
const TYPES = ["Q8_0", "Q4_K_M"];
// strided: -c 192 + 128 / 2 = 256, a multiple of 256 (llama.cpp rounds its context up to one), -b 192 (one sequence)
const STRIDED = { context: 192, stride: 128, batch: 192, chunks: 6 };
// strided at llama.cpp's own sizing: -c 100 + 40 / 2 = 120 tokens, rounded up to 256, evaluated 100 a step.
// (With -b larger than -c, -b 2048 by default, llama-perplexity 3.21.1's strided mode fails: its
// context is split into -b / -c sequences, each too short for the window: "failed to find a memory
// slot".)
const STRIDED_SIZED = { context: 100, stride: 40, batch: 100, chunks: 4 };

if (!existsSync(BINARY)) {
  console.error(`no ${BINARY}: run tools/llamacpp/build-llama-perplexity.sh first`);
  process.exit(1);
}

function llamaPerplexity(args: string[]): { stdout: string; log: string } {
  const run = Bun.spawnSync([BINARY, ...args, ...SETTINGS], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const stdout = run.stdout.toString();
  const log = run.stderr.toString();
  if (run.exitCode !== 0) {
    console.error(stdout, log);
    throw new Error(`llama-perplexity ${args.join(" ")} failed (${run.exitCode})`);
  }
  return { stdout, log };
}

function memra(args: string[]): string {
  const run = Bun.spawnSync(["bun", "packages/cli/src/main.ts", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (run.exitCode !== 0) throw new Error(`memra ${args.join(" ")} failed: ${run.stderr.toString()}`);
  return run.stdout.toString();
}

/** The --kl-divergence report from its "chunk" table on, the ETA line before it dropped. */
function report(stdout: string): string {
  const start = stdout.indexOf("chunk ");
  if (start < 0) throw new Error(`no --kl-divergence table in:\n${stdout}`);
  return `${stdout.slice(start).trimEnd()}\n`;
}

/** "[1]x,[2]y," or the --ppl-output-type 1 lines, without llama.cpp's ETA line. */
function perplexityLines(stdout: string): string {
  return `${stdout
    .split("\n")
    .filter((line) => /^\[\d+\]|^ +\d+ {2}/.test(line))
    .join("\n")}\n`;
}

const basePath = await syntheticModelFile(resolveOptions(BASE.preset, BASE.options));
const work = mkdtempSync(join(tmpdir(), "memra-kld-base-goldens-"));
const baseFile = `${FIXTURES}/base.kld`;
rmSync(join(ROOT, baseFile), { force: true });

const save = llamaPerplexity(["-m", basePath, "-f", TEXT, "-c", String(CONTEXT), "--chunks", String(CHUNKS), "--kl-divergence-base", baseFile]);
const finalEstimate = /Final estimate: PPL = .*/.exec(save.log)?.[0];
const systemInfo = /system_info: (.*)/.exec(save.log)?.[1]?.trim();

const models: Record<string, string> = { F32: basePath };
for (const type of TYPES) {
  models[type] = join(work, `${type}.gguf`);
  memra(["quantize", basePath, models[type]!, type, "--json"]);
}
const cases = Object.entries(models).map(([type, path]) => {
  const { stdout } = llamaPerplexity(["-m", path, "--kl-divergence-base", baseFile, "--kl-divergence"]);
  console.error(`${type}: ${/Mean {4}KLD: .*/.exec(stdout)?.[0]}`);
  return { type, report: report(stdout) };
});

// llama.cpp reading the file memra writes
const memraFile = join(work, "memra.kld");
memra(["perplexity", "-m", basePath, "-f", TEXT, "-c", String(CONTEXT), "--chunks", String(CHUNKS), "--kl-divergence-base", memraFile, "--kv-type", "f32", "--device", "reference"]);
const readingMemra = { type: "Q4_K_M", report: report(llamaPerplexity(["-m", models.Q4_K_M!, "--kl-divergence-base", memraFile, "--kl-divergence"]).stdout) };

const outputType1 = perplexityLines(llamaPerplexity(["-m", basePath, "-f", TEXT, "-c", String(CONTEXT), "--chunks", String(CHUNKS), "-b", String(CONTEXT), "--ppl-output-type", "1"]).stdout);
const stridedArgs = ["-m", basePath, "-f", TEXT, "-c", String(STRIDED.context), "--ppl-stride", String(STRIDED.stride), "-b", String(STRIDED.batch), "--chunks", String(STRIDED.chunks)];
const strided = llamaPerplexity(stridedArgs);
const stridedWindow = /Calculation chunk = (\d+)/.exec(strided.log)?.[1];
const stridedType1 = perplexityLines(llamaPerplexity([...stridedArgs, "--ppl-output-type", "1"]).stdout);
const sizedArgs = ["-m", basePath, "-f", TEXT, "-c", String(STRIDED_SIZED.context), "--ppl-stride", String(STRIDED_SIZED.stride), "-b", String(STRIDED_SIZED.batch), "--chunks", String(STRIDED_SIZED.chunks)];
const sized = llamaPerplexity(sizedArgs);
const sizedWindow = /Calculation chunk = (\d+)/.exec(sized.log)?.[1];
rmSync(work, { recursive: true, force: true });

const release = JSON.parse(readFileSync(join(import.meta.dir, "node_modules/node-llama-cpp/llama/llama.cpp.info.json"), "utf8")) as { tag: string };
writeFileSync(
  join(ROOT, FIXTURES, "kld-base-goldens.json"),
  `${JSON.stringify(
    {
      reference: `llama-perplexity of llama.cpp ${release.tag} (node-llama-cpp 3.21.1's libraries; tools/llamacpp/kld-base-goldens.ts)`,
      settings: SETTINGS.join(" "),
      systemInfo,
      base: BASE,
      types: TYPES,
      text: TEXT,
      context: CONTEXT,
      chunks: CHUNKS,
      save: { file: "base.kld", perplexity: perplexityLines(save.stdout), finalEstimate },
      cases,
      readingMemra,
      outputType1,
      strided: { ...STRIDED, window: Number(stridedWindow), perplexity: perplexityLines(strided.stdout), outputType1: stridedType1 },
      stridedSized: { ...STRIDED_SIZED, window: Number(sizedWindow), perplexity: perplexityLines(sized.stdout) },
    },
    null,
    1,
  )}\n`,
);
console.error(`wrote ${FIXTURES}/base.kld and kld-base-goldens.json`);
