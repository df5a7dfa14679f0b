/**
 * `memra perplexity`'s llama-perplexity options beyond the plain run: --kl-divergence-base FILE (save
 * the base's log-probabilities, or with --kl-divergence compare a model with a saved file),
 * --ppl-stride, --ppl-output-type, -b / --batch-size and --chunks.
 */
import { type KVType, type Model, computeKlDivergenceFromBase, computeStridedPerplexity, openKlDivergenceBase, saveKlDivergenceBase } from "@memra/core";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { renderKlDivergence, renderPerplexityWindows } from "./kl-divergence-report";
import { parsePositiveInteger } from "./model-arguments";

export const perplexityModeParseOptions = {
  "kl-divergence-base": { type: "string" },
  "ppl-stride": { type: "string" },
  "ppl-output-type": { type: "string" },
  "batch-size": { type: "string", short: "b" },
  chunks: { type: "string" },
  "kv-type": { type: "string" },
} as const;

const KV_TYPES: readonly KVType[] = ["f16", "f32", "q8_0"];

export const perplexityModeOptionHelp = `  --kl-divergence-base FILE
                          without --kl-divergence: save MODEL's tokens and log-probabilities over -f
                          to FILE (llama-perplexity's format, n_vocab × 2 bytes per scored token);
                          with it: compare MODEL with FILE's base (memra's or llama.cpp's; -f and
                          --ctx come from the file)
  --kl-divergence         (no value) with --kl-divergence-base: the two-run comparison
  --ppl-stride N          strided perplexity: windows N apart, each scoring its last N predictions; a
                          window is llama-perplexity's context, --ctx + N/2 tokens rounded up to a
                          multiple of 256, evaluated min(-b, --ctx) tokens a step
  --ppl-output-type 0|1   0: [1]x,[2]y,... (default); 1: a line per window (offset, PPL, mean -ln p
                          and its error)
  -b, --batch-size N      tokens per forward step (default: the whole window)
  --chunks N              at most N windows (default: all)
  --kv-type TYPE          KV cache element type: f16 (default, as llama.cpp), f32, q8_0`;

/** The figures of the options above; `klDivergence` "" is the bare flag. */
export interface PerplexityModeValues {
  readonly "kl-divergence"?: string;
  readonly "kl-divergence-base"?: string;
  readonly "ppl-stride"?: string;
  readonly "ppl-output-type"?: string;
  readonly "batch-size"?: string;
  readonly chunks?: string;
  readonly "kv-type"?: string;
}

/**
 * `--kl-divergence` takes a base model (memra's one-run comparison) or, as in llama-perplexity, no
 * value (with --kl-divergence-base): followed by nothing or by another option, it becomes
 * `--kl-divergence=` so that parseArgs reads it as the empty string.
 */
export function normalizeKlDivergenceFlag(args: readonly string[]): string[] {
  return args.map((arg, i) => (arg === "--kl-divergence" && (i + 1 >= args.length || args[i + 1]!.startsWith("-")) ? "--kl-divergence=" : arg));
}

export interface PerplexityModeOptions {
  readonly chunks: number | undefined;
  readonly batchSize: number | undefined;
  readonly outputType: 0 | 1;
  readonly stride: number | undefined;
  /** The saved base to compare with (--kl-divergence-base FILE --kl-divergence). */
  readonly compareWithBase: string | undefined;
  /** Where to save the base (--kl-divergence-base FILE alone). */
  readonly saveBase: string | undefined;
  readonly kvType: KVType;
}

export function parsePerplexityModeOptions(values: PerplexityModeValues): PerplexityModeOptions {
  const outputType = values["ppl-output-type"] ?? "0";
  if (outputType !== "0" && outputType !== "1") throw new CliError(`--ppl-output-type must be 0 or 1, got "${outputType}"`);
  const base = values["kl-divergence-base"];
  const flag = values["kl-divergence"] === "";
  if (flag && base === undefined) throw new CliError("--kl-divergence without a value compares with a saved base: give --kl-divergence-base FILE (or --kl-divergence BASE.gguf for one run with both models)");
  if (base !== undefined && values["kl-divergence"] !== undefined && !flag) throw new CliError("--kl-divergence BASE.gguf and --kl-divergence-base FILE are two ways of giving the base: use one");
  const stride = values["ppl-stride"] === undefined ? undefined : parsePositiveInteger(values["ppl-stride"], "--ppl-stride", 1);
  if (stride !== undefined && (base !== undefined || values["kl-divergence"] !== undefined)) throw new CliError("--ppl-stride computes a strided perplexity only: it cannot be combined with --kl-divergence or --kl-divergence-base");
  const kvType = (values["kv-type"] ?? "f16") as KVType;
  if (!KV_TYPES.includes(kvType)) throw new CliError(`--kv-type must be one of ${KV_TYPES.join(", ")}, got "${values["kv-type"]}"`);
  return {
    kvType,
    chunks: values.chunks === undefined ? undefined : parsePositiveInteger(values.chunks, "--chunks", 1),
    batchSize: values["batch-size"] === undefined ? undefined : parsePositiveInteger(values["batch-size"], "--batch-size", 1),
    outputType: outputType === "1" ? 1 : 0,
    stride,
    compareWithBase: flag ? base : undefined,
    saveBase: flag ? undefined : base,
  };
}

/** llama-perplexity -m MODEL --kl-divergence-base FILE --kl-divergence: the tokens and windows are the file's. */
export function klDivergenceFromBaseCommand(model: Model, options: PerplexityModeOptions, json: boolean, io: CliIO): void {
  using base = openKlDivergenceBase(options.compareWithBase!);
  if (base.vocabularySize !== model.vocabularySize) {
    throw new CliError(`${base.path} was saved from a model with ${base.vocabularySize} tokens in its vocabulary, the model has ${model.vocabularySize}: they cannot be compared`);
  }
  const started = performance.now();
  const result = computeKlDivergenceFromBase(model, base, { chunks: options.chunks, batchSize: options.batchSize });
  const seconds = (performance.now() - started) / 1000;
  const tokens = base.tokens.length;
  if (json) {
    const { perToken: _, ...summary } = result;
    io.stdout(`${JSON.stringify({ ...summary, base: base.path, tokens, seconds })}\n`);
  } else io.stdout(renderKlDivergence(result, tokens, seconds));
}

/** llama-perplexity -m BASE -f TEXT --kl-divergence-base FILE: the perplexity, the base saved as it goes. */
export function saveKlDivergenceBaseCommand(model: Model, tokens: readonly number[], context: number, options: PerplexityModeOptions, json: boolean, io: CliIO): void {
  const started = performance.now();
  const result = rangeErrorsAsCliErrors(() => saveKlDivergenceBase(model, tokens, context, options.saveBase!, { chunks: options.chunks, batchSize: options.batchSize }));
  const seconds = (performance.now() - started) / 1000;
  if (json) {
    io.stdout(`${JSON.stringify({ ...result, klDivergenceBase: options.saveBase, tokens: tokens.length, seconds })}\n`);
    return;
  }
  io.stdout(`${tokens.length} tokens, ${result.windows} windows of ${context}, saving log-probabilities to ${options.saveBase}\n`);
  io.stdout(renderPerplexityWindows(result, options.outputType));
  io.stdout(`Final estimate: PPL = ${result.perplexity.toFixed(4)} +/- ${result.uncertainty.toFixed(5)} (${result.scoredTokens} tokens scored, ${seconds.toFixed(1)} s)\n`);
}

/** llama-perplexity --ppl-stride N. */
/**
 * The window llama-perplexity's --ppl-stride computes over: its context, --ctx widened by half the
 * stride and rounded up to a multiple of 256 as llama.cpp rounds a context, evaluated min(-b, --ctx)
 * tokens a step (-b 2048 unless given). (llama-perplexity splits its context into -b / --ctx
 * sequences first, which leaves each too short for the window: with -b larger than --ctx, its
 * default, its strided mode fails; memra computes what it computes with -b at most --ctx.)
 */
export function llamaStridedWindow(context: number, stride: number, batchSize: number | undefined): { window: number; batchSize: number } {
  const window = Math.ceil((context + Math.floor(stride / 2)) / 256) * 256;
  return { window, batchSize: Math.min(batchSize ?? 2048, context) };
}

export function stridedPerplexityCommand(model: Model, tokens: readonly number[], context: number, options: PerplexityModeOptions, json: boolean, io: CliIO): void {
  const started = performance.now();
  const stride = options.stride!;
  const llama = llamaStridedWindow(context, stride, options.batchSize);
  const widened = llama.window - Math.floor(stride / 2);
  const result = rangeErrorsAsCliErrors(() => computeStridedPerplexity(model, tokens, widened, stride, { chunks: options.chunks, batchSize: llama.batchSize }));
  const seconds = (performance.now() - started) / 1000;
  if (json) {
    io.stdout(`${JSON.stringify({ ...result, tokens: tokens.length, seconds })}\n`);
    return;
  }
  const how = `--ctx ${context} + ${stride} / 2${llama.window !== context + Math.floor(stride / 2) ? ", rounded up to a multiple of 256" : ""}, as llama-perplexity`;
  io.stdout(`${tokens.length} tokens, ${result.windows} windows of ${result.context} (${how}) starting ${result.stride} apart\n`);
  io.stdout(renderPerplexityWindows(result, options.outputType, result.stride));
  io.stdout(`Final estimate: PPL = ${result.perplexity.toFixed(4)} +/- ${result.uncertainty.toFixed(5)} (${result.scoredTokens} tokens scored, ${seconds.toFixed(1)} s)\n`);
}

function rangeErrorsAsCliErrors<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (error instanceof RangeError) throw new CliError(error.message);
    throw error;
  }
}
