import type { Tokenizer } from "@memra/tokenizer";
import { z } from "zod";

/** What is around the gap a fill-in-the-middle completion fills. */
export interface InfillInput {
  /** The text before the gap. */
  readonly prefix: string;
  /** The text after it (may be empty). */
  readonly suffix: string;
  /**
   * Other files for context, put before the prefix (repository-level FIM): each after the
   * separator token and its name ("tmp" when not given), where the vocabulary has one.
   */
  readonly extra?: readonly { readonly filename?: string; readonly text: string }[];
  /** Text the middle starts with: it follows the prefix (llama.cpp's `prompt` of /infill). */
  readonly prompt?: string;
}

export const infillInputSchema = z.strictObject({
  prefix: z.string({ error: "prefix must be a string" }),
  suffix: z.string({ error: "suffix must be a string" }),
  extra: z.array(z.strictObject({ filename: z.string({ error: "extra[].filename must be a string" }).optional(), text: z.string({ error: "extra[].text must be a string" }) })).optional(),
  prompt: z.string({ error: "prompt must be a string" }).optional(),
});

/** How much of the input the prompt keeps (llama.cpp's server: its n_batch, n_ctx and n_predict). */
export interface InfillLayout {
  /** Tokens of one batch: the prefix keeps its last 3/4 of them, the suffix with the prompt its first 1/4 (llama.cpp's n_batch, default 2048). */
  readonly batchTokens: number;
  /** The context: the extra files fill what the batch and twice `predictTokens` leave of it. */
  readonly contextTokens: number;
  /** Tokens to generate (-1: unknown, as llama.cpp's server default). */
  readonly predictTokens: number;
  /** Suffix before prefix (llama.cpp's --spm-infill); default false, prefix first. */
  readonly suffixFirst?: boolean;
}

/** The default batch of llama.cpp's server (n_batch), which its FIM layout divides. */
export const DEFAULT_INFILL_BATCH_TOKENS = 2048;

/** The vocabulary has no fill-in-the-middle tokens (llama.cpp answers 501 "Infill is not supported by this model"). */
export class InfillUnsupportedError extends Error {
  override readonly name = "InfillUnsupportedError";
}

/**
 * The prompt of a fill-in-the-middle completion, as llama.cpp's server builds it for /infill
 * (format_infill, the repository-level pattern of Qwen2.5-Coder's report):
 *
 *     [FIM_REP]myproject\n [FIM_SEP]name0\n text0 … [FIM_SEP]filename\n
 *     [FIM_PRE]prefix prompt [FIM_SUF]suffix [FIM_MID]
 *
 * The prefix keeps its last 3/4 of a batch, the suffix its first batch/4 - (2 + prompt tokens),
 * and the extra context its last (context - batch - 2 * predict) tokens. Texts are tokenized
 * without special tokens, the prompt with them. Without a repository or separator token, the
 * header is left out and extra files are separated by "\n\n--- snippet ---\n\n".
 */
export function infillPromptTokens(tokenizer: Tokenizer, input: InfillInput, layout: InfillLayout): number[] {
  const fim = tokenizer.fillInMiddleTokens;
  const missing = [fim.prefix === undefined ? "prefix" : "", fim.suffix === undefined ? "suffix" : "", fim.middle === undefined ? "middle" : ""].filter(Boolean);
  if (missing.length > 0) throw new InfillUnsupportedError(`infill is not supported by this model: its vocabulary has no fill-in-the-middle ${missing.join(", ")} token`);
  const text = (value: string) => tokenizer.encode(value, { special: false, addBos: false, addEos: false });
  const prefix = text(input.prefix);
  const suffix = text(input.suffix);
  const prompt = input.prompt ? tokenizer.encode(input.prompt, { special: true, addBos: false, addEos: false }) : [];

  const extra: number[] = [];
  if (fim.repository !== undefined) extra.push(fim.repository, ...text("myproject\n"));
  for (const chunk of input.extra ?? []) {
    if (fim.separator !== undefined) extra.push(fim.separator, ...text(`${chunk.filename ?? "tmp"}\n`));
    else extra.push(...text("\n\n--- snippet ---\n\n"));
    extra.push(...text(chunk.text));
  }
  if (fim.separator !== undefined) extra.push(fim.separator, ...text("filename\n"));

  const batch = layout.batchTokens;
  const prefixTake = Math.min(prefix.length, 3 * Math.floor(batch / 4));
  const suffixTake = Math.min(suffix.length, Math.max(0, Math.floor(batch / 4) - (2 + prompt.length)));
  const extraTake = Math.min(Math.max(0, layout.contextTokens - batch - 2 * layout.predictTokens), extra.length);

  const head = [fim.prefix!, ...prefix.slice(prefix.length - prefixTake), ...prompt];
  const tail = [fim.suffix!, ...suffix.slice(0, suffixTake)];
  const [first, second] = layout.suffixFirst ? [tail, head] : [head, tail];
  const bos = tokenizer.addBos && tokenizer.bosTokenId !== undefined ? [tokenizer.bosTokenId] : [];
  return [...extra.slice(extra.length - extraTake), ...bos, ...first, ...second, fim.middle!];
}
