import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { llamaArguments } from "../llama-arguments";
import { computeKlDivergence, computePerplexity, loadModel } from "@memra/core";
import { backendOptionHelp, chooseBackend, parseBackendChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { renderKlDivergence, renderPerplexityWindows } from "./kl-divergence-report";
import { metadataOverrideOptionHelp, metadataOverrideOptions, metadataOverrideParseOptions, parsePositiveInteger, requireModelPath } from "./model-arguments";
import {
  klDivergenceFromBaseCommand,
  normalizeKlDivergenceFlag,
  parsePerplexityModeOptions,
  perplexityModeOptionHelp,
  perplexityModeParseOptions,
  saveKlDivergenceBaseCommand,
  stridedPerplexityCommand,
} from "./perplexity-kld-base";
import { perplexityTaskKind, perplexityTaskOptionHelp, perplexityTaskParseOptions, perplexityTasksCommand } from "./perplexity-tasks";

export const perplexityUsage = `usage: memra perplexity -m MODEL -f FILE [--ctx 512] [--chunks N] [-b N] [--ppl-stride N] [--ppl-output-type 0|1] [--json]
       memra perplexity -m MODEL -f FILE [--ctx 512] --kl-divergence BASE.gguf [--json]
       memra perplexity -m BASE -f FILE [--ctx 512] --kl-divergence-base FILE.kld
       memra perplexity -m MODEL --kl-divergence-base FILE.kld --kl-divergence [--json]
       memra perplexity -m MODEL -f FILE --hellaswag|--winogrande|--multiple-choice [--...-tasks N] [--ctx 512] [--json]

Perplexity over a text file as llama.cpp's perplexity tool computes it: windows of --ctx tokens,
each from an empty cache, scoring the second half of each window's predictions.

With --kl-divergence BASE.gguf, how far MODEL (a quantized file, say) is from BASE (the model it was
made from), as llama-perplexity --kl-divergence reports it: both perplexities, the KL divergence of
each scored token's next-token distributions (mean, extremes, percentiles), the change in the
probability of the actual next token, and how often the most likely token is the same. One run with
both models loaded. Or in two runs, as llama.cpp does (a base and a quantized model often do not fit
in memory together): --kl-divergence-base FILE.kld with the base saves its log-probabilities (16 bits
each) in llama-perplexity's format, and --kl-divergence-base FILE.kld --kl-divergence with the other
model compares it with them. Each tool reads the other's files.

With --hellaswag, --winogrande or --multiple-choice, llama-perplexity's task scores over -f in its
data formats: the same tasks picked (its seeded random order), tokenized and scored the same way
(each answer's mean log-probability per token after the tokens all answers share, the first best
answer picked), printed as it prints them: the running accuracy after each task, then the final
score ± its error. A task's tokens must fit in 4 × --ctx, as in llama-perplexity.

options:
${perplexityModeOptionHelp}
${perplexityTaskOptionHelp}
  -t, --threads N         threads of the native CPU backend (default: one per processor)
${backendOptionHelp}
${metadataOverrideOptionHelp}

llama-perplexity's flags work too (-ngl, -fa, -ctk/-ctv, --ctx-size, --batch-size, --save-all-
logits, ...): each is memra's option of the same meaning, is accepted with a notice when it changes
nothing here, or is refused with the reason.

examples:
  memra perplexity -m Qwen3-0.6B-Q8_0.gguf -f wiki.test.raw --ctx 512
  memra perplexity -m Qwen3-0.6B-Q4_K_M.gguf --kl-divergence Qwen3-0.6B-F16.gguf -f wiki.test.raw
  memra perplexity -m Qwen3-0.6B-F16.gguf -f wiki.test.raw --kl-divergence-base f16.kld
  memra perplexity -m Qwen3-0.6B-Q4_K_M.gguf --kl-divergence-base f16.kld --kl-divergence
  memra perplexity -m Qwen3-0.6B-Q8_0.gguf -f hellaswag_val_full.txt --hellaswag --hellaswag-tasks 400
  memra perplexity -m Qwen3-0.6B-Q8_0.gguf -f winogrande-debiased-eval.csv --winogrande
  memra perplexity -m Qwen3-0.6B-Q8_0.gguf -f arc-challenge-validation.bin --multiple-choice`;

/** memra perplexity's options (parseArgs specs). */
export const perplexityParseOptions = {
  model: { type: "string", short: "m" },
  file: { type: "string", short: "f" },
  ctx: { type: "string", short: "c" },
  threads: { type: "string", short: "t" },
  device: { type: "string" },
  ...metadataOverrideParseOptions,
  "kl-divergence": { type: "string" },
  ...perplexityModeParseOptions,
  ...perplexityTaskParseOptions,
  json: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const;

export async function perplexityCommand(args: string[], io: CliIO): Promise<void> {
  const notices: string[] = [];
  const { values } = parseArgs({
    args: llamaArguments("perplexity", normalizeKlDivergenceFlag(args), perplexityParseOptions, (message) => notices.push(message)),
    options: perplexityParseOptions,
  });
  for (const message of notices) io.stderr(`${message}\n`);
  if (values.help) {
    io.stdout(`${perplexityUsage}\n`);
    return;
  }
  const path = requireModelPath(values.model, perplexityUsage);
  const modes = parsePerplexityModeOptions(values);
  if (modes.compareWithBase !== undefined) {
    const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
    const backend = await chooseBackend(threads, parseBackendChoice(values.device));
    klDivergenceFromBaseCommand(loadModel(path, { backend, kvType: modes.kvType, ...metadataOverrideOptions(values) }), modes, values.json, io);
    return;
  }
  if (!values.file) throw new CliError(`missing -f FILE\n${perplexityUsage}`);
  const task = perplexityTaskKind(values);
  if (task !== undefined) {
    if (values["kl-divergence"] !== undefined || modes.saveBase !== undefined || modes.stride !== undefined) throw new CliError(`--${task} takes neither --kl-divergence, --kl-divergence-base nor --ppl-stride`);
    return perplexityTasksCommand(task, { ...values, file: values.file }, path, modes.kvType, io);
  }
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
  const model = loadModel(path, { backend, kvType: modes.kvType, ...overrides });
  const tokens = model.tokenizer.encode(text, { special: false });
  if (modes.stride !== undefined) return stridedPerplexityCommand(model, tokens, context, modes, values.json, io);
  if (tokens.length < context) throw new CliError(`${values.file} has ${tokens.length} tokens, fewer than one window of --ctx ${context}`);
  if (modes.saveBase !== undefined) return saveKlDivergenceBaseCommand(model, tokens, context, modes, values.json, io);
  const started = performance.now();
  if (values["kl-divergence"] !== undefined) {
    // both models on the one backend, one after the other per chunk
    const base = loadModel(values["kl-divergence"], { backend, kvType: modes.kvType });
    if (base.vocabularySize !== model.vocabularySize) {
      throw new CliError(`${values["kl-divergence"]} has ${base.vocabularySize} tokens in its vocabulary and ${path} ${model.vocabularySize}: they cannot be compared`);
    }
    const result = computeKlDivergence(base, model, tokens, context, { chunks: modes.chunks, batchSize: modes.batchSize });
    const seconds = (performance.now() - started) / 1000;
    if (values.json) {
      const { perToken: _, ...summary } = result;
      io.stdout(`${JSON.stringify({ ...summary, tokens: tokens.length, seconds })}\n`);
    } else io.stdout(renderKlDivergence(result, tokens.length, seconds));
    return;
  }
  const result = computePerplexity(model, tokens, context, { chunks: modes.chunks, batchSize: modes.batchSize });
  const seconds = (performance.now() - started) / 1000;
  if (values.json) {
    io.stdout(`${JSON.stringify({ ...result, tokens: tokens.length, seconds })}\n`);
    return;
  }
  io.stdout(`${tokens.length} tokens, ${result.windows} windows of ${context}\n`);
  io.stdout(renderPerplexityWindows(result, modes.outputType));
  io.stdout(`Final estimate: PPL = ${result.perplexity.toFixed(4)} +/- ${result.uncertainty.toFixed(5)} (${result.scoredTokens} tokens scored, ${seconds.toFixed(1)} s)\n`);
}
