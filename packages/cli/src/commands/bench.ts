import { parseArgs } from "node:util";
import { loadModel } from "@memra/core";
import { backendOptionHelp, describeBackend } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { defaultModelPath } from "../default-model";
import { placeModel, placementOptionHelp, placementParseOptions, loraOptionHelp, loraOrderOf, loraParseOptions, ropeScalingOptionHelp, ropeScalingParseOptions } from "../placement-arguments";
import { parsePositiveInteger } from "./model-arguments";

export const benchUsage = `usage: memra bench [-m MODEL] [-p 512] [-n 128] [-t THREADS] [-r REPS] [--json]

Measures prompt processing and generation speed the way llama-bench does:
  ppN  one forward pass over N prompt tokens in an empty cache (tokens/s)
  tgN  N single-token forward passes in an empty cache, each fed the greedy pick of the last (tokens/s)
  tgN xB  with --npl: B sequences decoded together, N batched steps of one token each (aggregate
       tokens/s of all B, as llama-batched-bench's S_TG)
Each test runs once untimed (warm-up) and then REPS times; the table shows mean ± standard deviation.
Also reports the time to first token for a one-token prompt (ttft) and the process's peak resident memory.

options:
  -m, --model FILE     GGUF model (default: the built-in demo model)
  -p, --prompt N       prompt tokens for pp (default 512; 0 skips pp)
  -n, --gen N          generated tokens for tg (default 128; 0 skips tg)
  -t, --threads N      threads of the native backend (default: one per processor)
  -r, --reps N         timed repetitions of each test (default 5)
  --npl B[,B...]       also tg with B parallel sequences (llama-batched-bench's -npl), e.g. 1,4,8
${backendOptionHelp}
  --ctx N              tokens of KV cache the plan reserves (default: what the tests need)
${placementOptionHelp}
${ropeScalingOptionHelp}
${loraOptionHelp}
  --json               one JSON object: {"pp": {"tokens", "tps", ...}, "tg": {...}, "ttft_ms", "peak_rss_bytes", ...}

examples:
  memra bench -m qwen3-0.6b-q8_0.gguf -t 2
  memra bench -m qwen3-0.6b-q8_0.gguf -p 128 -n 32 -r 3 --json`;

export interface BenchTest {
  readonly tokens: number;
  /** Mean tokens per second over the repetitions. */
  readonly tps: number;
  readonly stddev: number;
  readonly median: number;
  readonly samples: readonly number[];
}

function nonNegativeInteger(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (value.trim() === "" || !Number.isInteger(parsed) || parsed < 0) throw new CliError(`${name} must be a non-negative integer, got "${value}"`);
  return parsed;
}

export function summarize(tokens: number, samples: readonly number[]): BenchTest {
  const mean = samples.reduce((sum, value) => sum + value, 0) / samples.length;
  const variance = samples.length > 1 ? samples.reduce((sum, value) => sum + (value - mean) ** 2, 0) / (samples.length - 1) : 0;
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return { tokens, tps: mean, stddev: Math.sqrt(variance), median, samples };
}

/** Deterministic token ids from the middle of the vocabulary (no special tokens), as llama-bench uses random ones. */
function benchTokens(count: number, vocabulary: number): Int32Array {
  let state = 0x2545f491;
  const span = Math.max(1, Math.min(vocabulary, 150000) - 1000);
  return Int32Array.from({ length: count }, () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return Math.min(vocabulary - 1, 1000 + (state % span));
  });
}

function peakRssBytes(): number {
  return process.resourceUsage().maxRSS * 1024;
}

export async function benchCommand(args: string[], io: CliIO): Promise<void> {
  const { values: parsed, tokens } = parseArgs({
    tokens: true,
    args,
    options: {
      model: { type: "string", short: "m" },
      prompt: { type: "string", short: "p" },
      gen: { type: "string", short: "n" },
      threads: { type: "string", short: "t" },
      reps: { type: "string", short: "r" },
      npl: { type: "string" },
      device: { type: "string" },
      ctx: { type: "string" },
      ...placementParseOptions,
      ...ropeScalingParseOptions,
      ...loraParseOptions,
      json: { type: "boolean", default: false },
      quiet: { type: "boolean", short: "q", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const values = { ...parsed, loraOrder: loraOrderOf(tokens) };
  if (values.help) {
    io.stdout(`${benchUsage}\n`);
    return;
  }
  const promptTokens = nonNegativeInteger(values.prompt, "--prompt", 512);
  const genTokens = nonNegativeInteger(values.gen, "--gen", 128);
  const reps = parsePositiveInteger(values.reps, "--reps", 5);
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  if (promptTokens === 0 && genTokens === 0) throw new CliError("nothing to measure: --prompt and --gen are both 0");
  const parallel = values.npl === undefined ? [] : values.npl.split(",").map((item) => parsePositiveInteger(item.trim(), "--npl", 1));
  if (parallel.length > 0 && genTokens === 0) throw new CliError("--npl measures generation: give --gen above 0");
  const mostSequences = Math.max(1, ...parallel);

  const path = values.model ?? (await defaultModelPath(io, values.quiet || values.json));
  const contextTokens = Math.max(promptTokens, genTokens + 1, 2);
  const notice = (message: string) => values.quiet || values.json || io.stderr(`${message}\n`);
  const maxBatchTokens = Math.max(promptTokens, mostSequences);
  const placed = await placeModel(path, values, threads, { defaultContext: contextTokens, maxBatchTokens, sequences: mostSequences }, notice);
  const backend = placed.primary;
  const loadStarted = performance.now();
  const model = loadModel(path, { ...placed.load, maxBatchTokens });
  const loadMs = performance.now() - loadStarted;
  try {
    const vocabulary = model.vocabularySize;
    const prompt = benchTokens(Math.max(promptTokens, 1), vocabulary);

    const runPrompt = (): number => {
      const cache = model.createCache(contextTokens);
      try {
        const started = performance.now();
        model.forward(prompt.subarray(0, promptTokens), cache);
        return performance.now() - started;
      } finally {
        cache.dispose();
      }
    };
    const runGeneration = (count: number): number => {
      const cache = model.createCache(contextTokens);
      try {
        let token = prompt[0]!;
        const started = performance.now();
        // greedy decode as `memra generate --temperature 0` runs it: the token picked where the logits are
        for (let i = 0; i < count; i++) token = model.forwardGreedy([token], cache);
        return performance.now() - started;
      } finally {
        cache.dispose();
      }
    };

    /** B sequences decoded together: `count` batched steps of one token each (greedy picks); the time of all. */
    const runParallel = (sequences: number, count: number): number => {
      const pool = model.createKVPool(sequences * Math.ceil((count + 1) / 16), { blockTokens: 16 });
      const caches = Array.from({ length: sequences }, () => pool.createSequence(count + 1));
      try {
        const picks = caches.map(() => new Int32Array(1));
        const tokens = caches.map((_, i) => prompt[i % prompt.length]!);
        const started = performance.now();
        for (let step = 0; step < count; step++) {
          model.transformer.forwardBatch(caches.map((cache, i) => ({ tokens: Int32Array.of(tokens[i]!), cache, greedy: picks[i]! })));
          picks.forEach((pick, i) => {
            tokens[i] = pick[0]!;
          });
        }
        return performance.now() - started;
      } finally {
        for (const cache of caches) cache.dispose();
        pool.dispose();
      }
    };

    const pp: number[] = [];
    const tg: number[] = [];
    const batched: { sequences: number; samples: number[] }[] = [];
    const ttft: number[] = [];
    // Each phase starts from a collected heap, so the peak RSS is the engine's, not the garbage
    // (logits arrays, disposed caches) a previous phase left for the collector.
    const collect = () => Bun.gc(true);
    if (promptTokens > 0) {
      runPrompt(); // warm-up: pages the weights in
      for (let rep = 0; rep < reps; rep++) pp.push((promptTokens / runPrompt()) * 1000);
    }
    collect();
    if (genTokens > 0) {
      runGeneration(Math.min(genTokens, 8));
      for (let rep = 0; rep < reps; rep++) tg.push((genTokens / runGeneration(genTokens)) * 1000);
    }
    collect();
    for (const sequences of parallel) {
      runParallel(sequences, Math.min(genTokens, 8));
      const samples: number[] = [];
      for (let rep = 0; rep < reps; rep++) samples.push(((sequences * genTokens) / runParallel(sequences, genTokens)) * 1000);
      batched.push({ sequences, samples });
      collect();
    }
    for (let rep = 0; rep < reps; rep++) ttft.push(runGeneration(1));

    const results = {
      model: path,
      backend: describeBackend(backend),
      threads: (backend as { threads?: number }).threads ?? 1,
      reps,
      load_ms: loadMs,
      ...(pp.length ? { pp: summarize(promptTokens, pp) } : {}),
      ...(tg.length ? { tg: summarize(genTokens, tg) } : {}),
      ...(batched.length ? { npl: batched.map(({ sequences, samples }) => ({ sequences, ...summarize(genTokens, samples) })) } : {}),
      ttft_ms: summarize(1, ttft).median,
      peak_rss_bytes: peakRssBytes(),
      weight_bytes: model.memory.weightBytes,
    };
    if (values.json) {
      io.stdout(`${JSON.stringify(results)}\n`);
      return;
    }
    const config = model.config;
    const name = `${config.architecture} ${config.blockCount}x${config.embeddingLength}`;
    const size = `${(model.memory.weightBytes / 2 ** 20).toFixed(0)} MiB`;
    const rows: string[][] = [["model", "size", "backend", "test", "t/s"]];
    const row = (test: string, result: BenchTest) =>
      rows.push([name, size, results.backend, test, `${result.tps.toFixed(2)} ± ${result.stddev.toFixed(2)}`]);
    if (results.pp) row(`pp${promptTokens}`, results.pp);
    if (results.tg) row(`tg${genTokens}`, results.tg);
    for (const test of results.npl ?? []) row(`tg${genTokens} x${test.sequences}`, test);
    const widths = rows[0]!.map((_, column) => Math.max(...rows.map((cells) => cells[column]!.length)));
    const line = (cells: string[]) => `| ${cells.map((cell, column) => (column === cells.length - 1 ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!))).join(" | ")} |`;
    io.stdout(`${line(rows[0]!)}\n| ${widths.map((w, column) => (column === widths.length - 1 ? `${"-".repeat(w - 1)}:` : "-".repeat(w))).join(" | ")} |\n`);
    for (const cells of rows.slice(1)) io.stdout(`${line(cells)}\n`);
    io.stdout(`ttft (one-token prompt): ${results.ttft_ms.toFixed(2)} ms; peak RSS ${(results.peak_rss_bytes / 2 ** 20).toFixed(0)} MiB; load ${loadMs.toFixed(0)} ms\n`);
  } finally {
    model.dispose();
  }
}
