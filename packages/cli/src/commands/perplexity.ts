import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { type KlDivergenceResult, computeKlDivergence, computePerplexity, loadModel } from "@memra/core";
import { backendOptionHelp, chooseBackend, parseBackendChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { metadataOverrideOptionHelp, metadataOverrideOptions, metadataOverrideParseOptions, parsePositiveInteger, requireModelPath } from "./model-arguments";

export const perplexityUsage = `usage: memra perplexity -m MODEL -f FILE [--ctx 512] [--kl-divergence BASE.gguf] [--json]

Perplexity over a text file as llama.cpp's perplexity tool computes it: windows of --ctx tokens,
each from an empty cache, scoring the second half of each window's predictions.

With --kl-divergence BASE.gguf, how far MODEL (a quantized file, say) is from BASE (the model it was
made from), as llama-perplexity --kl-divergence reports it: both perplexities, the KL divergence of
each scored token's next-token distributions (mean, extremes, percentiles), the change in the
probability of the actual next token, and how often the most likely token is the same. One run with
both models loaded (llama.cpp saves the base's logits to a file in a first run instead).

options:
  -t, --threads N         threads of the native CPU backend (default: one per processor)
${backendOptionHelp}
${metadataOverrideOptionHelp}

examples:
  memra perplexity -m Qwen3-0.6B-Q8_0.gguf -f wiki.test.raw --ctx 512
  memra perplexity -m Qwen3-0.6B-Q4_K_M.gguf --kl-divergence Qwen3-0.6B-F16.gguf -f wiki.test.raw`;

export async function perplexityCommand(args: string[], io: CliIO): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      model: { type: "string", short: "m" },
      file: { type: "string", short: "f" },
      ctx: { type: "string", short: "c" },
      threads: { type: "string", short: "t" },
      device: { type: "string" },
      ...metadataOverrideParseOptions,
      "kl-divergence": { type: "string" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    io.stdout(`${perplexityUsage}\n`);
    return;
  }
  const path = requireModelPath(values.model, perplexityUsage);
  if (!values.file) throw new CliError(`missing -f FILE\n${perplexityUsage}`);
  let text: string;
  try {
    text = readFileSync(values.file, "utf8");
  } catch (error) {
    throw new CliError(`cannot read ${values.file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const context = parsePositiveInteger(values.ctx, "--ctx", 512);
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  const overrides = metadataOverrideOptions(values); // MODEL's: the base stands for llama.cpp's saved logits
  const backend = await chooseBackend(threads, parseBackendChoice(values.device));
  const model = loadModel(path, { backend, ...overrides });
  const tokens = model.tokenizer.encode(text, { special: false });
  if (tokens.length < context) throw new CliError(`${values.file} has ${tokens.length} tokens, fewer than one window of --ctx ${context}`);
  const started = performance.now();
  if (values["kl-divergence"] !== undefined) {
    // both models on the one backend, one after the other per chunk
    const base = loadModel(values["kl-divergence"], { backend });
    if (base.vocabularySize !== model.vocabularySize) {
      throw new CliError(`${values["kl-divergence"]} has ${base.vocabularySize} tokens in its vocabulary and ${path} ${model.vocabularySize}: they cannot be compared`);
    }
    const result = computeKlDivergence(base, model, tokens, context);
    const seconds = (performance.now() - started) / 1000;
    if (values.json) {
      const { perToken: _, ...summary } = result;
      io.stdout(`${JSON.stringify({ ...summary, tokens: tokens.length, seconds })}\n`);
    } else io.stdout(renderKlDivergence(result, tokens.length, seconds));
    return;
  }
  const result = computePerplexity(model, tokens, context);
  const seconds = (performance.now() - started) / 1000;
  if (values.json) {
    io.stdout(`${JSON.stringify({ ...result, tokens: tokens.length, seconds })}\n`);
    return;
  }
  io.stdout(`${tokens.length} tokens, ${result.windows} windows of ${context}\n`);
  io.stdout(`${result.perWindow.map((p, i) => `[${i + 1}]${p.toFixed(4)}`).join(",")}\n`);
  io.stdout(`Final estimate: PPL = ${result.perplexity.toFixed(4)} (${result.scoredTokens} tokens scored, ${seconds.toFixed(1)} s)\n`);
}

/** llama-perplexity's --kl-divergence report. */
function renderKlDivergence(r: KlDivergenceResult, tokens: number, seconds: number): string {
  const f = (x: number, digits = 6) => x.toFixed(digits).padStart(12);
  const pct = (x: number) => `${(100 * x).toFixed(3).padStart(8)}%`;
  const lines = [
    `${tokens} tokens, ${r.windows} windows of ${r.context}, ${r.scoredTokens} tokens scored (${seconds.toFixed(1)} s)`,
    "",
    "====== Perplexity statistics ======",
    `Mean PPL(Q)                   : ${f(r.perplexity.model)}`,
    `Mean PPL(base)                : ${f(r.perplexity.base)}`,
    `Mean ln(PPL(Q)/PPL(base))     : ${f(r.perplexity.lnRatio)} ± ${r.perplexity.lnRatioStderr.toFixed(6)}`,
    `Mean PPL(Q)/PPL(base)         : ${f(Math.exp(r.perplexity.lnRatio))}`,
    "",
    "====== KL divergence statistics ======",
    `Mean    KLD: ${f(r.klDivergence.mean)} ± ${r.klDivergence.stderr.toFixed(6)}`,
    `Maximum KLD: ${f(r.klDivergence.maximum)}`,
    ...(["99.9", "99", "95", "90"] as const).map((p) => `${`${p}%`.padEnd(8)}KLD: ${f(r.klDivergence.percentiles[p])}`),
    `Median  KLD: ${f(r.klDivergence.percentiles["50"])}`,
    ...(["10", "5", "1", "0.1"] as const).map((p) => `${`${p}%`.padEnd(8)}KLD: ${f(r.klDivergence.percentiles[p])}`),
    `Minimum KLD: ${f(r.klDivergence.minimum)}`,
    "",
    "====== Token probability statistics ======",
    `Mean    Δp: ${pct(r.deltaP.mean)} ± ${(100 * r.deltaP.stderr).toFixed(3)}%`,
    `Maximum Δp: ${pct(r.deltaP.maximum)}`,
    ...(["99.9", "99", "95", "90"] as const).map((p) => `${`${p}%`.padEnd(8)}Δp: ${pct(r.deltaP.percentiles[p])}`),
    `Median  Δp: ${pct(r.deltaP.percentiles["50"])}`,
    ...(["10", "5", "1", "0.1"] as const).map((p) => `${`${p}%`.padEnd(8)}Δp: ${pct(r.deltaP.percentiles[p])}`),
    `Minimum Δp: ${pct(r.deltaP.minimum)}`,
    `RMS Δp    : ${pct(r.deltaP.rms)}`,
    `Same top p: ${pct(r.sameTop.fraction)} ± ${(100 * r.sameTop.stderr).toFixed(3)}%`,
  ];
  return `${lines.join("\n")}\n`;
}
