import type { Tokenizer } from "./tokenizer";
import { TokenizerError } from "./tokenizer-error";

export interface TokenizeCommandOptions {
  /** The text to tokenize (`--text`); required unless `jsonl`. */
  readonly text?: string;
  /** Parse special tokens such as `<|im_start|>` (default true; `--no-special` sets false). */
  readonly special?: boolean;
  /** Add BOS as the model asks (default: the vocabulary's `add_bos_token`). */
  readonly addBos?: boolean;
  /** Print `{"ids": [...]}` instead of one `id -> 'piece'` line per token. */
  readonly json?: boolean;
  /** Read one JSON-encoded string per input line; print one `{"ids": [...]}` line for each. */
  readonly jsonl?: boolean;
}

export interface TokenizeCommandIO {
  /** Writes output text (already newline-terminated). */
  readonly write: (text: string) => void;
  /** The input lines, for `jsonl` (e.g. stdin split at "\n"). */
  readonly lines?: AsyncIterable<string> | Iterable<string>;
}

/**
 * `memra tokenize`: prints the tokens of `--text`, or of every JSON string line of stdin with
 * `--jsonl`. Text mode prints one line per token like llama.cpp's `llama-tokenize`:
 * `151644 -> '<|im_start|>'`.
 */
export async function runTokenizeCommand(tokenizer: Tokenizer, options: TokenizeCommandOptions, io: TokenizeCommandIO): Promise<void> {
  const encodeOptions = {
    special: options.special ?? true,
    ...(options.addBos === undefined ? {} : { addBos: options.addBos }),
  };
  if (options.jsonl) {
    if (!io.lines) throw new TokenizerError("--jsonl: no input lines");
    let lineNumber = 0;
    for await (const line of io.lines) {
      lineNumber++;
      if (line.trim() === "") continue;
      let text: unknown;
      try {
        text = JSON.parse(line);
      } catch (error) {
        throw new TokenizerError(`--jsonl: line ${lineNumber} is not JSON: ${(error as Error).message}`);
      }
      if (typeof text !== "string") throw new TokenizerError(`--jsonl: line ${lineNumber} is not a JSON string`);
      io.write(`${JSON.stringify({ ids: tokenizer.encode(text, encodeOptions) })}\n`);
    }
    return;
  }
  if (options.text === undefined) throw new TokenizerError("--text: missing (or use --jsonl)");
  const ids = tokenizer.encode(options.text, encodeOptions);
  if (options.json) {
    io.write(`${JSON.stringify({ ids })}\n`);
    return;
  }
  let out = "";
  for (const id of ids) out += `${String(id).padStart(6)} -> '${tokenizer.decode([id], { special: true, cleanUpSpaces: false })}'\n`;
  io.write(out);
}
