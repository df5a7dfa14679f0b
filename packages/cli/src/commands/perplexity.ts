import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { computePerplexity, loadModel } from "@memra/core";
import { backendOptionHelp, chooseBackend, parseBackendChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { parsePositiveInteger, requireModelPath } from "./model-arguments";

export const perplexityUsage = `usage: memra perplexity -m MODEL -f FILE [--ctx 512] [--json]

Perplexity over a text file as llama.cpp's perplexity tool computes it: windows of --ctx tokens,
each from an empty cache, scoring the second half of each window's predictions.

options:
  -t, --threads N         threads of the native CPU backend (default: one per processor)
${backendOptionHelp}

examples:
  memra perplexity -m Qwen3-0.6B-Q8_0.gguf -f wiki.test.raw --ctx 512`;

export async function perplexityCommand(args: string[], io: CliIO): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      model: { type: "string", short: "m" },
      file: { type: "string", short: "f" },
      ctx: { type: "string", short: "c" },
      threads: { type: "string", short: "t" },
      device: { type: "string" },
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
  const model = loadModel(path, { backend: await chooseBackend(threads, parseBackendChoice(values.device)) });
  const tokens = model.tokenizer.encode(text, { special: false });
  if (tokens.length < context) throw new CliError(`${values.file} has ${tokens.length} tokens, fewer than one window of --ctx ${context}`);
  const started = performance.now();
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
