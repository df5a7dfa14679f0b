#!/usr/bin/env bun
/**
 * `memra quantize` against llama.cpp's quantizer (llama_model_quantize, tools/llamacpp/llama-quantize.ts)
 * on the same input, in one run: fresh processes, alternating (the order flips every round), the
 * medians of wall time and peak RSS and their ratios (memra / llama.cpp). Every round also checks
 * that the two output files are identical. Run from the repository root after `bun run build` and
 * `npm ci` in tools/llamacpp:
 *
 *   bun tools/llamacpp/quantize-side-by-side.ts [--types Q8_0,Q4_K_M,Q6_K] [-t 2] [--rounds 3] [--file IN.gguf]
 *
 * The input is the Qwen3-0.6B-shaped f16 synthetic model (1.2 GB) unless --file names another.
 */
import { createHash } from "node:crypto";
import { createReadStream, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { resolveOptions, syntheticModelFile } from "../../packages/synthetic/src/index";

const { values } = parseArgs({
  options: {
    types: { type: "string", default: "Q8_0,Q4_K_M,Q6_K" },
    threads: { type: "string", short: "t", default: "2" },
    rounds: { type: "string", default: "3" },
    file: { type: "string" },
  },
});
const ROOT = join(import.meta.dir, "..", "..");
const input = values.file ?? (await syntheticModelFile(resolveOptions("qwen3-0.6b", { weightType: "f16" })));
const work = mkdtempSync(join(tmpdir(), "memra-quantize-side-by-side-"));

interface Sample {
  seconds: number;
  rss: number;
}

async function run(command: string[]): Promise<Sample> {
  const started = performance.now();
  const child = Bun.spawn(command, { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  const seconds = (performance.now() - started) / 1000;
  if (code !== 0) throw new Error(`${command.join(" ")} exited with ${code}:\n${stdout.slice(-2000)}\n${stderr.slice(-2000)}`);
  return { seconds, rss: child.resourceUsage()?.maxRSS ?? Number.NaN };
}

async function sha256(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const rounds = Number(values.rounds);
console.log(`memra quantize vs llama.cpp's llama_model_quantize (node-llama-cpp 3.21.1), ${values.threads} threads, ${rounds} alternating rounds, medians`);
console.log(`input: ${input}`);
for (const type of values.types.split(",").filter(Boolean)) {
  const memra: Sample[] = [];
  const llama: Sample[] = [];
  let identical = true;
  for (let round = 0; round < rounds; round++) {
    const ours = join(work, "memra.gguf");
    const theirs = join(work, "llama.gguf");
    const runMemra = async () => memra.push(await run(["bun", "packages/cli/src/main.ts", "quantize", input, ours, type, values.threads, "--json"]));
    const runLlama = async () => llama.push(await run(["bun", "tools/llamacpp/llama-quantize.ts", input, theirs, type, values.threads]));
    if (round % 2 === 0) {
      await runMemra();
      await runLlama();
    } else {
      await runLlama();
      await runMemra();
    }
    identical &&= (await sha256(ours)) === (await sha256(theirs));
    rmSync(ours);
    rmSync(theirs);
  }
  const time = [median(memra.map((s) => s.seconds)), median(llama.map((s) => s.seconds))] as const;
  const rss = [median(memra.map((s) => s.rss)), median(llama.map((s) => s.rss))] as const;
  console.log(`\n${type}: output files ${identical ? "identical in every round" : "DIFFER"}`);
  console.log(`  time   memra ${time[0].toFixed(2).padStart(8)} s    llama.cpp ${time[1].toFixed(2).padStart(8)} s    ratio ${(time[0] / time[1]).toFixed(2)}x (lower is better)`);
  console.log(
    `  rss    memra ${(rss[0] / 2 ** 20).toFixed(0).padStart(8)} MiB  llama.cpp ${(rss[1] / 2 ** 20).toFixed(0).padStart(8)} MiB  ratio ${(rss[0] / rss[1]).toFixed(2)}x (lower is better)`,
  );
  if (!identical) process.exitCode = 1;
}
rmSync(work, { recursive: true, force: true });
