import { parseArgs } from "node:util";
import { llamaArguments } from "../llama-arguments";
import { loadModel } from "@memra/core";
import { backendOptionHelp, chooseBackend, parseBackendChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { jsonStringLines, metadataOverrideOptionHelp, metadataOverrideOptions, metadataOverrideParseOptions, parsePositiveInteger, requireModelPath } from "./model-arguments";

export const embedUsage = `usage: memra embed -m MODEL (--text TEXT ... | --jsonl) [--pooling last|mean] [--dimensions N] [--no-normalize]

Prints the embedding of each text (llama.cpp's llama-embedding): the hidden state after the final
norm, pooled as the model's GGUF says (Qwen3-Embedding: the last token) or as --pooling says,
normalized to unit length unless --no-normalize. One JSON array per text, one per line; --jsonl
reads one JSON-encoded string per line of standard input, loading the model once.

options:
  --text TEXT             a text (repeat for several)
  --dimensions N          keep the first N components (Matryoshka truncation), then normalize
  -t, --threads N         threads of the native CPU backend (default: one per processor)
${backendOptionHelp}
${metadataOverrideOptionHelp}

llama-embedding's flags work too (-p and -f split at --embd-separator, --embd-normalize 2|-1, -ngl,
-c, ...): each is memra's option of the same meaning, is accepted with a notice when it changes
nothing here, or is refused with the reason.

examples:
  memra embed -m Qwen3-Embedding-0.6B-Q8_0.gguf --text "What is the capital of France?"
  printf '"a"\\n"b"\\n' | memra embed -m Qwen3-Embedding-0.6B-Q8_0.gguf --jsonl --dimensions 256`;

/** memra embed's options (parseArgs specs). */
export const embedParseOptions = {
  model: { type: "string", short: "m" },
  text: { type: "string", multiple: true },
  jsonl: { type: "boolean", default: false },
  pooling: { type: "string" },
  dimensions: { type: "string" },
  "no-normalize": { type: "boolean", default: false },
  threads: { type: "string", short: "t" },
  device: { type: "string" },
  ...metadataOverrideParseOptions,
  help: { type: "boolean", short: "h", default: false },
} as const;

export async function embedCommand(args: string[], io: CliIO): Promise<void> {
  const notices: string[] = [];
  const { values } = parseArgs({
    args: llamaArguments("embedding", args, embedParseOptions, (message) => notices.push(message)),
    options: embedParseOptions,
  });
  for (const message of notices) io.stderr(`${message}\n`);
  if (values.help) {
    io.stdout(`${embedUsage}\n`);
    return;
  }
  const path = requireModelPath(values.model, embedUsage);
  if ((values.text === undefined) === !values.jsonl) throw new CliError(`give --text (one or more) or --jsonl\n${embedUsage}`);
  if (values.pooling !== undefined && values.pooling !== "last" && values.pooling !== "mean") throw new CliError(`--pooling must be last or mean, got "${values.pooling}"`);
  const dimensions = values.dimensions === undefined ? undefined : parsePositiveInteger(values.dimensions, "--dimensions", 1);
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  const overrides = metadataOverrideOptions(values);
  const model = loadModel(path, { backend: await chooseBackend(threads, parseBackendChoice(values.device)), ...overrides });
  const options = {
    ...(values.pooling === undefined ? {} : { pooling: values.pooling as "last" | "mean" }),
    ...(dimensions === undefined ? {} : { dimensions }),
    normalize: !values["no-normalize"],
  };
  const print = (text: string) => io.stdout(`${JSON.stringify(Array.from(model.embed(text, options)))}\n`);
  try {
    if (values.text) for (const text of values.text) print(text);
    else for await (const text of jsonStringLines(io)) print(text);
  } finally {
    model.dispose();
  }
}
