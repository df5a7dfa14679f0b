import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { type Backend, type KVType, devicesInUse, loadModel, type Model } from "@memra/core";
import { openGGUFModel } from "@memra/gguf";
import { backendOptionHelp, describeBackend, parsePlacementDeviceChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { defaultModelPath } from "../default-model";
import { type LlamaModelDescription, llamaModelDescription } from "../llama-model-description";
import {
  type ChosenPlacement,
  parsePlacementArguments,
  placeModel,
  placementOptionHelp,
  placementParseOptions,
  loraOptionHelp,
  loraOrderOf,
  loraParseOptions,
  ropeScalingOptionHelp,
  ropeScalingParseOptions,
} from "../placement-arguments";
import { llamaBenchArguments, parseIntegerRange } from "./llama-bench-arguments";
import { BENCH_OUTPUT_FORMATS, type BenchOutputFormat, type BenchPrinter, type BenchRecord, type MarkdownColumn, llamaBenchPrinter, samplesTokensPerSecond } from "./llama-bench-printer";
import { parsePositiveInteger } from "./model-arguments";

export const benchUsage = `usage: memra bench [-m MODEL] [-p 512] [-n 128] [-pg PP,TG] [-d 0] [-t THREADS] [-r 5] [-o md|csv|json|jsonl] [--json]

Measures prompt processing and generation speed as llama-bench does, with its flags and its output:
  ppN       N prompt tokens, in forward passes of -b tokens (each in steps of -ub), after the cache
            holds -d tokens (tokens/s)
  tgN       N single-token forward passes, each fed the greedy pick of the last (tokens/s)
  ppP+tgG   P prompt tokens then G generated ones, timed together (-pg P,G)
  NAME @ dD the test after D tokens already in the KV cache (-d D; the fill is not timed)
  tgN xB    with --npl: B sequences decoded together, N batched steps of one token each (aggregate
            tokens/s of all B, as llama-batched-bench's S_TG)
Every combination of the parameters runs, in llama-bench's order: for each model, -ngl, -ncmoe, -b,
-ub, KV type, -t and -d, the pp tests, then tg, then pg. Each test has an untimed warm-up (its prompt
and one generated token, as llama-bench's) and then runs REPS times; the table shows mean ± standard
deviation. Lists are comma-separated or repeated flags; ranges are first-last, first-last+step or
first-last*mult (e.g. -p 64-512*2).

options:
  -m, --model FILE[,FILE]     GGUF model(s) (default: the built-in demo model)
  -p, --n-prompt N            prompt tokens (default 512; 0 skips pp; --prompt too)
  -n, --n-gen N               generated tokens (default 128; 0 skips tg; --gen too)
  -pg PP,TG                   prompt then generation, timed together (repeatable)
  -d, --n-depth N             tokens already in the KV cache before each test (default 0)
  -b, --batch-size N          prompt tokens per forward call (default 2048)
  -ub, --ubatch-size N        most tokens one forward step computes (default 512)
  -ctk, --cache-type-k T      KV cache element type: f16 (default), q8_0, or memra's f32; memra keeps K
  -ctv, --cache-type-v T      and V in one type, so -ctk and -ctv must agree
  --kv-type T[,T]             both at once, one test per type (memra's flag)
  -t, --threads N             threads of the native backend (default: one per processor)
  -ngl, --n-gpu-layers N      layers on the GPU (llama.cpp's -ngl; -1, the default: as many as fit);
                              needs a CUDA GPU
  -ncmoe, --n-cpu-moe N       keep the experts of the first N layers in RAM (MoE models)
  -r, --repetitions N         timed repetitions of each test (default 5; --reps too)
  -o, --output FORMAT         stdout: md (default, llama-bench's table), csv, json, jsonl, none
  -oe, --output-err FORMAT    the same to stderr (default none)
  --delay SECONDS             pause before each test (default 0)
  --progress                  print each step to stderr
  --no-warmup                 skip the untimed warm-up runs
  --npl B[,B...]              also tg with B parallel sequences (llama-batched-bench's -npl), e.g. 1,4,8
${backendOptionHelp}
  --ctx N                     tokens of KV cache the plan reserves (default: what the tests need)
${placementOptionHelp}
${ropeScalingOptionHelp}
${loraOptionHelp}
  --json                      memra's report of one pp and one tg test: {"pp": {"tokens", "tps", ...},
                              "tg": {...}, "ttft_ms", "peak_rss_bytes", ...}

llama-bench flags memra has no equivalent for (-fa, -mmp, -nkvo, -sm, -ot, -dev, ...) are refused
with the reason.

examples:
  memra bench -m qwen3-0.6b-q8_0.gguf -t 2
  memra bench -m qwen3-0.6b-q8_0.gguf -p 512 -n 128 -d 0,4096 -o csv
  memra bench -m qwen3-0.6b-q8_0.gguf -p 128 -n 32 -r 3 --json`;

export interface BenchTest {
  readonly tokens: number;
  /** Mean tokens per second over the repetitions. */
  readonly tps: number;
  readonly stddev: number;
  readonly median: number;
  readonly samples: readonly number[];
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

/** The KV cache types memra has; llama-bench's others (bf16, q4_0, ...) are refused by name. */
const KV_TYPES: readonly KVType[] = ["f16", "q8_0", "f32"];

/** One test, as llama-bench's cmd_params_instance: the parameters it runs with. */
interface BenchInstance {
  readonly model: string;
  /** -ngl: -1 for as many as fit. */
  readonly gpuLayers: number;
  readonly cpuMoe: number | "all";
  readonly batch: number;
  readonly ubatch: number;
  readonly kvType: KVType;
  /** -t; undefined: the backend's default. */
  readonly threads: number | undefined;
  readonly depth: number;
  readonly prompt: number;
  readonly gen: number;
  /** memra's --npl: sequences decoded together; 0 for llama-bench's one-sequence tests. */
  readonly parallel: number;
}

/** Tokens one forward step of the instance computes (the scratch size its model is loaded with). */
function stepTokens(instance: BenchInstance): number {
  return Math.max(1, instance.parallel, Math.min(instance.batch, instance.ubatch, Math.max(instance.prompt, instance.depth)));
}

/** What decides a model load: two instances with the same key run on one loaded model. */
function loadKey(instance: BenchInstance): string {
  return JSON.stringify([instance.model, instance.gpuLayers, instance.cpuMoe, instance.threads, Math.min(instance.batch, instance.ubatch)]);
}

function list<T>(given: readonly string[] | undefined, parse: (text: string) => T[], fallback: readonly T[]): T[] {
  return given === undefined || given.length === 0 ? [...fallback] : given.flatMap(parse);
}

function sameList<T>(a: readonly T[], b: readonly T[]): boolean {
  return a.length === b.length && a.every((value, index) => value === b[index]);
}

function parseKvTypes(text: string, name: string): KVType[] {
  return text.split(",").map((item) => {
    const type = item.trim() as KVType;
    if (!KV_TYPES.includes(type)) throw new CliError(`${name} ${item}: memra's KV cache holds ${KV_TYPES.join(", ")}`);
    return type;
  });
}

function parseOutputFormat(text: string | undefined, name: string, fallback: BenchOutputFormat): BenchOutputFormat {
  if (text === undefined) return fallback;
  if (!(BENCH_OUTPUT_FORMATS as readonly string[]).includes(text)) throw new CliError(`${name} must be one of ${BENCH_OUTPUT_FORMATS.join(", ")}, got "${text}"`);
  return text as BenchOutputFormat;
}

/** -pg PP,TG: exactly two non-negative integers. */
function parsePromptGeneration(text: string): [number, number] {
  const parts = text.split(",");
  const numbers = parts.map((part) => Number(part.trim()));
  if (parts.length !== 2 || parts.some((part) => part.trim() === "") || numbers.some((value) => !Number.isInteger(value) || value < 0)) {
    throw new CliError(`-pg must be PP,TG (two non-negative integers), got "${text}"`);
  }
  return [numbers[0]!, numbers[1]!];
}

/** Every backend a loaded model computes on. */
function backendsOf(load: ChosenPlacement["load"]): Backend[] {
  if ("backend" in load) return [load.backend];
  const { layers, experts = [], embedding, output } = load.placement;
  return [...new Set([...layers, ...experts, ...(embedding ? [embedding] : []), ...(output ? [output] : [])])];
}

/** The loaded model of a run of instances with one load key. */
interface LoadedModel {
  readonly key: string;
  readonly model: Model;
  readonly placed: ChosenPlacement;
  readonly loadMs: number;
  /** llama-bench's backend column: CUDA when a layer is on a GPU, CPU for the native backend, else the backend's name. */
  readonly backendLabel: string;
  readonly threads: number;
  readonly gpuInfo: string;
}

export async function benchCommand(args: string[], io: CliIO): Promise<void> {
  const { values: parsed, tokens } = parseArgs({
    tokens: true,
    args: llamaBenchArguments(args),
    options: {
      model: { type: "string", short: "m", multiple: true },
      prompt: { type: "string", short: "p", multiple: true },
      "n-prompt": { type: "string", multiple: true },
      gen: { type: "string", short: "n", multiple: true },
      "n-gen": { type: "string", multiple: true },
      pg: { type: "string", multiple: true },
      "n-depth": { type: "string", short: "d", multiple: true },
      "batch-size": { type: "string", short: "b", multiple: true },
      "ubatch-size": { type: "string", multiple: true },
      "cache-type-k": { type: "string", multiple: true },
      "cache-type-v": { type: "string", multiple: true },
      "kv-type": { type: "string", multiple: true },
      threads: { type: "string", short: "t", multiple: true },
      "n-gpu-layers": { type: "string", multiple: true },
      "n-cpu-moe": { type: "string", multiple: true },
      reps: { type: "string", short: "r" },
      repetitions: { type: "string" },
      output: { type: "string", short: "o" },
      "output-err": { type: "string" },
      delay: { type: "string" },
      progress: { type: "boolean", default: false },
      "no-warmup": { type: "boolean", default: false },
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

  // llama-bench's parameters, each a list (cmd_params), with its defaults
  const both = (a: readonly string[] | undefined, b: readonly string[] | undefined) => (a || b ? [...(a ?? []), ...(b ?? [])] : undefined);
  const prompts = list(both(values.prompt, values["n-prompt"]), (text) => parseIntegerRange(text, "-p/--prompt"), [512]);
  const gens = list(both(values.gen, values["n-gen"]), (text) => parseIntegerRange(text, "-n/--gen"), [128]);
  const promptGenerations = (values.pg ?? []).map(parsePromptGeneration);
  const depths = list(values["n-depth"], (text) => parseIntegerRange(text, "-d/--n-depth"), [0]);
  const positive = (name: string) => (text: string) =>
    parseIntegerRange(text, name).map((value) => {
      if (value < 1) throw new CliError(`${name} must be a positive integer, got "${text}"`);
      return value;
    });
  const batches = list(values["batch-size"], positive("-b/--batch-size"), [2048]);
  const ubatches = list(values["ubatch-size"], positive("-ub/--ubatch-size"), [512]);
  const threadCounts: (number | undefined)[] = list(values.threads, positive("-t/--threads"), [undefined]);
  const repsText = values.repetitions ?? values.reps;
  const reps = parsePositiveInteger(repsText, values.repetitions === undefined ? "--reps" : "--repetitions", 5);
  const delaySeconds = values.delay === undefined ? 0 : Number(values.delay);
  if (!Number.isInteger(delaySeconds) || delaySeconds < 0) throw new CliError(`--delay must be a non-negative integer (seconds), got "${values.delay}"`);

  // KV cache types: memra's one type for K and V, so -ctk and -ctv pair up
  const kvGiven = values["kv-type"] !== undefined;
  if (kvGiven && (values["cache-type-k"] || values["cache-type-v"])) throw new CliError("give --kv-type or -ctk/-ctv, not both");
  const typesK = list<KVType>(values["cache-type-k"], (text) => parseKvTypes(text, "-ctk"), ["f16"]);
  const typesV = list<KVType>(values["cache-type-v"], (text) => parseKvTypes(text, "-ctv"), ["f16"]);
  const kvTypes: KVType[] = kvGiven ? list<KVType>(values["kv-type"], (text) => parseKvTypes(text, "--kv-type"), ["f16"]) : typesK.flatMap((k) => typesV.map((v) => [k, v] as const)).map(([k, v]) => {
    if (k !== v) throw new CliError(`-ctk ${k} with -ctv ${v}: memra keeps K and V in one element type; give -ctk and -ctv the same type, or --kv-type T[,T] for one test per type`);
    return k;
  });

  // placement: llama-bench's -ngl / -ncmoe lists, or memra's --gpu-layers / --cpu-moe
  if (values["n-gpu-layers"] && values["gpu-layers"] !== undefined) throw new CliError("give -ngl or --gpu-layers, not both");
  if (values["n-cpu-moe"] && values["cpu-moe"] !== undefined) throw new CliError("give -ncmoe or --cpu-moe, not both");
  parsePlacementArguments(values); // --gpu-layers, --cpu-moe, --gpu-mem and --cpu-mem named when malformed
  const memraGpuLayers = values["gpu-layers"] === undefined || values["gpu-layers"] === "auto" ? -1 : Number(values["gpu-layers"]);
  const gpuLayerCounts = list(values["n-gpu-layers"], (text) => parseIntegerRange(text, "-ngl/--n-gpu-layers", true).map((value) => Math.max(-1, value)), [memraGpuLayers]);
  const memraCpuMoe = values["cpu-moe"] === undefined ? 0 : values["cpu-moe"] === "all" ? ("all" as const) : Number(values["cpu-moe"]);
  const cpuMoes: (number | "all")[] = list(values["n-cpu-moe"], (text) => parseIntegerRange(text, "-ncmoe/--n-cpu-moe"), [memraCpuMoe]);

  const parallel = values.npl === undefined ? [] : values.npl.split(",").map((item) => parsePositiveInteger(item.trim(), "--npl", 1));
  if (parallel.length > 0 && gens.every((count) => count === 0)) throw new CliError("--npl measures generation: give --gen above 0");
  if (parallel.length > 0 && depths.some((depth) => depth > 0)) throw new CliError("--npl measures from an empty cache: give it without -d");
  const mostParallel = Math.max(0, ...parallel);
  if (mostParallel > Math.min(...batches, ...ubatches)) throw new CliError(`--npl ${mostParallel} exceeds -b/-ub: one step of ${mostParallel} sequences must fit in a batch`);

  const output = parseOutputFormat(values.output, "-o/--output", "md");
  const outputErr = parseOutputFormat(values["output-err"], "-oe/--output-err", "none");
  const legacyJson = values.json;
  if (legacyJson && (values.output !== undefined || values["output-err"] !== undefined)) throw new CliError("give --json or -o/-oe, not both (-o json is llama-bench's JSON)");

  const choice = parsePlacementDeviceChoice(values.device);
  const cuda = choice === "cuda" || choice === "auto" ? await import("@memra/cuda-ffi") : undefined; // loads nothing native at import
  const gpuPresent = choice === "cuda" || choice === "cpu+reference" || (choice === "auto" && cuda!.cudaAvailable());
  if (values["n-gpu-layers"] && !gpuPresent && gpuLayerCounts.some((count) => count > 0)) {
    throw new CliError(`-ngl ${gpuLayerCounts.find((count) => count > 0)}: no CUDA GPU here (--device ${choice}), so every layer runs on the CPU; leave -ngl out or give 0`);
  }

  const quiet = values.quiet || legacyJson;
  const notice = (message: string) => quiet || io.stderr(`${message}\n`);
  const models = values.model ? values.model.flatMap((text) => text.split(",")) : [await defaultModelPath(io, quiet)];

  // llama-bench's get_cmd_params_instances: its loop order, pp then tg then pg for each
  const instances: BenchInstance[] = [];
  for (const model of models)
    for (const gpuLayers of gpuLayerCounts)
      for (const cpuMoe of cpuMoes)
        for (const batch of batches)
          for (const ubatch of ubatches)
            for (const kvType of kvTypes)
              for (const threads of threadCounts)
                for (const depth of depths) {
                  const base = { model, gpuLayers, cpuMoe, batch, ubatch, kvType, threads, depth, parallel: 0 };
                  for (const prompt of prompts) if (prompt > 0) instances.push({ ...base, prompt, gen: 0 });
                  for (const gen of gens) if (gen > 0) instances.push({ ...base, prompt: 0, gen });
                  for (const [prompt, gen] of promptGenerations) if (prompt > 0 || gen > 0) instances.push({ ...base, prompt, gen });
                  for (const sequences of parallel) for (const gen of gens) if (gen > 0) instances.push({ ...base, prompt: 0, gen, parallel: sequences });
                }
  if (instances.length === 0) throw new CliError("nothing to measure: --prompt and --gen are both 0");
  if (legacyJson) {
    const single = [models, gpuLayerCounts, cpuMoes, batches, ubatches, kvTypes, threadCounts, prompts, gens].every((values) => values.length === 1);
    if (!single || promptGenerations.length > 0 || depths.some((depth) => depth > 0)) {
      throw new CliError("--json is memra's report of one pp and one tg test: give single values (no lists, -d or -pg), or use -o json for llama-bench's JSON");
    }
  }

  // what each model load must hold: the largest step, context and sequence count of its instances
  const needs = new Map<string, { rows: number; context: number; sequences: number; kvType: KVType }>();
  const widest = (a: KVType, b: KVType) => (KV_TYPES.indexOf(a) > KV_TYPES.indexOf(b) ? a : b);
  for (const instance of instances) {
    const key = loadKey(instance);
    const need = needs.get(key) ?? { rows: 1, context: 2, sequences: 1, kvType: instance.kvType };
    needs.set(key, {
      rows: Math.max(need.rows, stepTokens(instance)),
      context: Math.max(need.context, instance.depth + instance.prompt + instance.gen + 1),
      sequences: Math.max(need.sequences, instance.parallel),
      kvType: widest(need.kvType, instance.kvType),
    });
  }

  // llama-bench's markdown shows a parameter's column when it is not the default (threads always on a CPU)
  const cpuLike = !gpuPresent || choice === "cpu+reference";
  const columns = new Set<MarkdownColumn>();
  if (!cpuLike) columns.add("n_gpu_layers");
  if (!sameList(cpuMoes, [0])) columns.add("n_cpu_moe");
  if (cpuLike || values.threads !== undefined) columns.add("n_threads");
  if (!sameList(batches, [2048])) columns.add("n_batch");
  if (!sameList(ubatches, [512])) columns.add("n_ubatch");
  if (!sameList(kvTypes, ["f16"])) columns.add("type_k").add("type_v");
  const backendsSeen = new Set<string>();
  const markdown = {
    columns,
    footer: () => `build: memra (${[...backendsSeen].join("; ")}); peak RSS ${(peakRssBytes() / 2 ** 20).toFixed(0)} MiB`,
  };
  const printers: { printer: BenchPrinter; write: (text: string) => void }[] = [];
  if (!legacyJson) {
    const toStdout = llamaBenchPrinter(output, markdown, parallel.length > 0);
    const toStderr = llamaBenchPrinter(outputErr, markdown, parallel.length > 0);
    if (toStdout) printers.push({ printer: toStdout, write: (text) => io.stdout(text) });
    if (toStderr) printers.push({ printer: toStderr, write: (text) => io.stderr(text) });
  }
  const progress = (message: string) => values.progress && io.stderr(`memra bench: ${message}\n`);

  const descriptions = new Map<string, LlamaModelDescription>();
  const describe = (path: string) => {
    let description = descriptions.get(path);
    if (!description) descriptions.set(path, (description = llamaModelDescription(openGGUFModel(path))));
    return description;
  };
  for (const path of models) describe(path); // a missing or broken file fails before anything runs
  for (const { printer, write } of printers) write(printer.header());

  const cpuInfo = cpus()[0]?.model.trim() ?? "";
  let loaded: LoadedModel | undefined;
  const load = async (instance: BenchInstance): Promise<LoadedModel> => {
    const key = loadKey(instance);
    if (loaded?.key === key) return loaded;
    loaded?.model.dispose();
    loaded = undefined;
    const need = needs.get(key)!;
    const placementValues = {
      ...values,
      "gpu-layers": instance.gpuLayers < 0 ? undefined : String(instance.gpuLayers),
      "cpu-moe": instance.cpuMoe === 0 ? undefined : String(instance.cpuMoe),
    };
    const placed = await placeModel(instance.model, placementValues, instance.threads, { defaultContext: need.context, maxBatchTokens: need.rows, sequences: need.sequences, kvType: need.kvType }, notice);
    const started = performance.now();
    const model = loadModel(instance.model, { ...placed.load, maxBatchTokens: need.rows, kvType: need.kvType });
    const loadMs = performance.now() - started;
    const backends = backendsOf(placed.load);
    const onGpu = devicesInUse(placed.plan).some((device) => device.startsWith("cuda"));
    const native = backends.find((backend) => (backend as { threads?: number }).threads !== undefined) as { threads?: number } | undefined;
    const gpus = backends.flatMap((backend) => ("deviceInfo" in backend && typeof backend.deviceInfo === "function" ? [(backend.deviceInfo() as { name: string }).name] : []));
    for (const backend of backends) backendsSeen.add(describeBackend(backend));
    loaded = {
      key,
      model,
      placed,
      loadMs,
      backendLabel: onGpu ? "CUDA" : placed.primary.name === "cpu" ? "CPU" : placed.primary.name,
      // the reference backend computes on one thread whatever -t says
      threads: native?.threads ?? (placed.primary.name === "reference" ? 1 : (instance.threads ?? 1)),
      gpuInfo: [...new Set(gpus)].join(", "),
    };
    return loaded;
  };

  const records: { instance: BenchInstance; record: BenchRecord }[] = [];
  try {
    for (const [index, instance] of instances.entries()) {
      const step = `benchmark ${index + 1}/${instances.length}`;
      progress(`${step}: starting`);
      const { model, backendLabel, threads, gpuInfo } = await load(instance);
      const description = describe(instance.model);
      const testTime = new Date().toISOString().replace(/\.\d+Z$/, "Z");
      if (delaySeconds > 0) Bun.sleepSync(delaySeconds * 1000);
      const samples = instance.parallel > 0 ? runParallel(model, instance, reps, !values["no-warmup"]) : runTest(model, instance, reps, !values["no-warmup"], (message) => progress(`${step}: ${message}`));
      const record: BenchRecord = {
        cpu_info: cpuInfo,
        gpu_info: gpuInfo,
        backends: backendLabel,
        model_filename: instance.model,
        model_type: description.type,
        model_size: description.bytes,
        model_n_params: description.parameters,
        n_batch: instance.batch,
        n_ubatch: instance.ubatch,
        n_threads: threads,
        type_k: instance.kvType,
        type_v: instance.kvType,
        n_gpu_layers: instance.gpuLayers,
        n_cpu_moe: instance.cpuMoe === "all" ? model.config.blockCount : instance.cpuMoe,
        n_prompt: instance.prompt,
        n_gen: instance.gen,
        n_depth: instance.depth,
        test_time: testTime,
        samples_ns: samples,
        ...(parallel.length > 0 ? { n_parallel: instance.parallel } : {}),
      };
      records.push({ instance, record });
      for (const { printer, write } of printers) write(printer.test(record));
      Bun.gc(true); // the next test's peak RSS is the engine's, not garbage this one left
    }
    for (const { printer, write } of printers) write(printer.footer());
    if (legacyJson) io.stdout(`${JSON.stringify(legacyReport(loaded!, records, reps))}\n`);
  } finally {
    loaded?.model.dispose();
  }
}

/** memra's --json report: the pp and tg tests (and --npl's) as tokens/s summaries, ttft, peak RSS. */
function legacyReport(loaded: LoadedModel, records: readonly { instance: BenchInstance; record: BenchRecord }[], reps: number) {
  const { model, placed, loadMs } = loaded;
  const of = (record: BenchRecord, tokens: number) => summarize(tokens, samplesTokensPerSecond(record));
  const pp = records.find(({ instance }) => instance.prompt > 0 && instance.gen === 0);
  const tg = records.find(({ instance }) => instance.prompt === 0 && instance.gen > 0 && instance.parallel === 0);
  const npl = records.filter(({ instance }) => instance.parallel > 0);
  const ttft: number[] = [];
  const first = records[0]!.instance;
  for (let rep = 0; rep < reps; rep++) ttft.push(timeGeneration(model, first.kvType, 1) / 1e6);
  return {
    model: first.model,
    backend: describeBackend(placed.primary),
    threads: (placed.primary as { threads?: number }).threads ?? 1,
    reps,
    load_ms: loadMs,
    ...(pp ? { pp: of(pp.record, pp.instance.prompt) } : {}),
    ...(tg ? { tg: of(tg.record, tg.instance.gen) } : {}),
    ...(npl.length ? { npl: npl.map(({ instance, record }) => ({ sequences: instance.parallel, ...of(record, instance.gen) })) } : {}),
    ttft_ms: summarize(1, ttft).median,
    peak_rss_bytes: peakRssBytes(),
    weight_bytes: model.memory.weightBytes,
  };
}

/** Nanoseconds of `count` greedy single-token forward passes in a fresh cache. */
function timeGeneration(model: Model, kvType: KVType, count: number): number {
  const cache = model.createCache(count + 1, { type: kvType });
  try {
    let token = benchTokens(1, model.vocabularySize)[0]!;
    const started = Bun.nanoseconds();
    for (let i = 0; i < count; i++) token = model.forwardGreedy([token], cache);
    return Bun.nanoseconds() - started;
  } finally {
    cache.dispose();
  }
}

/**
 * llama-bench's test loop for one instance: a warm-up (the prompt, one generated token) in an empty
 * cache, the depth filled once, then each repetition from that depth: the prompt in forward calls of
 * -b tokens, then the generated tokens one at a time (each the greedy pick of the last), timed
 * together. Returns the nanoseconds of each repetition.
 */
function runTest(model: Model, instance: BenchInstance, reps: number, warmup: boolean, progress: (message: string) => void): number[] {
  const { depth, prompt, gen, batch } = instance;
  const tokens = benchTokens(Math.max(depth + prompt, 1), model.vocabularySize);
  const cache = model.createCache(Math.max(depth + prompt + gen, 2), { type: instance.kvType });
  const runPrompt = (ids: Int32Array) => {
    for (let offset = 0; offset < ids.length; offset += batch) model.forward(ids.subarray(offset, offset + batch), cache);
  };
  const runGeneration = (count: number) => {
    let token = tokens[0]!;
    // greedy decode as `memra generate --temperature 0` runs it: the token picked where the logits are
    for (let i = 0; i < count; i++) token = model.forwardGreedy([token], cache);
  };
  try {
    if (warmup) {
      if (prompt > 0) {
        progress("warmup prompt run");
        runPrompt(tokens.subarray(depth, depth + prompt));
      }
      if (gen > 0) {
        progress("warmup generation run");
        runGeneration(1);
      }
      cache.trim(0);
    }
    if (depth > 0) {
      progress("depth run");
      runPrompt(tokens.subarray(0, depth));
    }
    const samples: number[] = [];
    for (let rep = 0; rep < reps; rep++) {
      cache.trim(depth);
      const started = Bun.nanoseconds();
      if (prompt > 0) {
        progress(`prompt run ${rep + 1}/${reps}`);
        runPrompt(tokens.subarray(depth, depth + prompt));
      }
      if (gen > 0) {
        progress(`generation run ${rep + 1}/${reps}`);
        runGeneration(gen);
      }
      samples.push(Bun.nanoseconds() - started);
    }
    return samples;
  } finally {
    cache.dispose();
  }
}

/** --npl: B sequences decoded together, `gen` batched steps of one token each (greedy picks); nanoseconds of each repetition. */
function runParallel(model: Model, instance: BenchInstance, reps: number, warmup: boolean): number[] {
  const { parallel: sequences, gen } = instance;
  const prompt = benchTokens(sequences, model.vocabularySize);
  const run = (count: number): number => {
    const pool = model.createKVPool(sequences * Math.ceil((count + 1) / 16), { type: instance.kvType, blockTokens: 16 });
    const caches = Array.from({ length: sequences }, () => pool.createSequence(count + 1));
    try {
      const picks = caches.map(() => new Int32Array(1));
      const next = caches.map((_, i) => prompt[i]!);
      const started = Bun.nanoseconds();
      for (let step = 0; step < count; step++) {
        model.transformer.forwardBatch(caches.map((cache, i) => ({ tokens: Int32Array.of(next[i]!), cache, greedy: picks[i]! })));
        picks.forEach((pick, i) => {
          next[i] = pick[0]!;
        });
      }
      return Bun.nanoseconds() - started;
    } finally {
      for (const cache of caches) cache.dispose();
      pool.dispose();
    }
  };
  if (warmup) run(Math.min(gen, 8));
  return Array.from({ length: reps }, () => run(gen));
}
