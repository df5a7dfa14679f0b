import { parseArgs } from "node:util";
import { runTokenizeCommand } from "@memra/tokenizer";
import type { CliIO } from "../cli-io";
import { loadTokenizer, requireModelPath } from "./model-arguments";

export const tokenizeUsage = `usage: memra tokenize -m MODEL (--text TEXT | --jsonl) [--no-special] [--json]

Prints the token ids of TEXT (with pieces, one per line), or {"ids": [...]} with --json.
--jsonl reads one JSON-encoded string per line of standard input and prints one {"ids": [...]}
line for each, loading the model once. Special tokens (<|im_start|>, ...) are parsed unless
--no-special.

examples:
  memra tokenize -m Qwen3-0.6B-Q8_0.gguf --text "Hello, world!"
  echo '"<|im_start|>user"' | memra tokenize -m Qwen3-0.6B-Q8_0.gguf --jsonl`;

export async function tokenizeCommand(args: string[], io: CliIO): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      model: { type: "string", short: "m" },
      text: { type: "string" },
      "no-special": { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      jsonl: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    io.stdout(`${tokenizeUsage}\n`);
    return;
  }
  const tokenizer = loadTokenizer(requireModelPath(values.model, tokenizeUsage));
  await runTokenizeCommand(
    tokenizer,
    {
      ...(values.text === undefined ? {} : { text: values.text }),
      special: !values["no-special"],
      json: values.json,
      jsonl: values.jsonl,
    },
    { write: io.stdout, lines: io.stdinLines() },
  );
}
