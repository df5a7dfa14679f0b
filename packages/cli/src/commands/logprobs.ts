import { parseArgs } from "node:util";
import { computeLogprobs, loadModel } from "@memra/core";
import { backendOptionHelp, chooseBackend, parseBackendChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { metadataOverrideOptionHelp, metadataOverrideOptions, metadataOverrideParseOptions, parsePositiveInteger, parseTokenList, requireModelPath } from "./model-arguments";

export const logprobsUsage = `usage: memra logprobs -m MODEL (--tokens 1,2,3 | --text TEXT) [--top K] [--json]

One prefill over the whole sequence; for each position i, the top-K (default 5) next-token
log-probabilities after tokens 0..i. --text is tokenized with special tokens parsed.
--json prints {"tokens": [...], "positions": [{"top": [{"id": n, "logprob": x}, ...]}, ...]}.

options:
  -t, --threads N         threads of the native CPU backend (default: one per processor)
${backendOptionHelp}
${metadataOverrideOptionHelp}

examples:
  memra logprobs -m Qwen3-0.6B-Q8_0.gguf --text "The capital of France is" --top 3
  memra logprobs -m Qwen3-0.6B-Q8_0.gguf --tokens 785,6722,315 --json`;

export async function logprobsCommand(args: string[], io: CliIO): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      model: { type: "string", short: "m" },
      tokens: { type: "string" },
      text: { type: "string" },
      top: { type: "string" },
      threads: { type: "string", short: "t" },
      device: { type: "string" },
      ...metadataOverrideParseOptions,
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    io.stdout(`${logprobsUsage}\n`);
    return;
  }
  const path = requireModelPath(values.model, logprobsUsage);
  if ((values.tokens === undefined) === (values.text === undefined)) throw new CliError(`give exactly one of --tokens and --text\n${logprobsUsage}`);
  const topK = parsePositiveInteger(values.top, "--top", 5);
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  const overrides = metadataOverrideOptions(values);
  const model = loadModel(path, { backend: await chooseBackend(threads, parseBackendChoice(values.device)), ...overrides });
  const tokens = values.tokens !== undefined ? parseTokenList(values.tokens) : model.tokenizer.encode(values.text!, { special: true });
  if (tokens.length === 0) throw new CliError("the text has no tokens");
  const result = computeLogprobs(model, tokens, topK);
  if (values.json) {
    io.stdout(`${JSON.stringify(result)}\n`);
    return;
  }
  const tokenizer = model.tokenizer;
  const show = (id: number) => JSON.stringify(tokenizer.decode([id], { special: true }));
  result.positions.forEach((position, i) => {
    const top = position.top.map((t) => `${t.id} ${show(t.id)} ${t.logprob.toFixed(4)}`).join(" | ");
    io.stdout(`${String(i).padStart(4)} ${String(tokens[i]).padStart(6)} ${show(tokens[i]!).padEnd(16)} → ${top}\n`);
  });
}
