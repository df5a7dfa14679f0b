import { samplingOptionsSchema } from "@memra/sampler";
import { z } from "zod";
import type { Model } from "../load-model";

/** A `lora` option: adapters by index, each with its scale. */
const loraOptionSchema = z.array(z.strictObject({ id: z.number().int("lora[].id must be an adapter's index").min(0, "lora[].id must be an adapter's index"), scale: z.number().finite("lora[].scale must be a finite number") }));

/** What `generate`, `complete` and `chat` accept, validated by zod so that a wrong option is named. */
export const generateOptionsSchema = samplingOptionsSchema.extend({
  /** Most tokens to generate (default 256). */
  maxTokens: z.number().int("maxTokens must be an integer").positive("maxTokens must be at least 1").default(256),
  /**
   * Never end at an end-of-generation token: they are banned (their logits -inf, as llama.cpp's
   * `ignore_eos` biases them), so generation runs to `maxTokens` or another limit. For benchmarks.
   */
  ignoreEos: z.boolean().default(false),
  /**
   * The fewest tokens to generate: end-of-generation tokens and `stopTokens` are banned until this
   * many are generated (vLLM's `min_tokens`). Stop strings still end generation.
   */
  minTokens: z.number().int("minTokens must be an integer").min(0, "minTokens must be at least 0").default(0),
  /** Token ids that end generation as an end-of-generation token does (vLLM's `stop_token_ids`): in `tokens`, not in the text. */
  stopTokens: z.array(z.number().int("stopTokens must hold token ids").nonnegative("stopTokens must hold token ids")).optional(),
  /**
   * A budget of wall time for decoding, from the first generated token (llama.cpp's
   * `t_max_predict_ms`): once it is spent, generation ends with finish reason "length".
   */
  maxTimeMs: z.number().positive("maxTimeMs must be positive").optional(),
  /** With `maxTimeMs`: the budget ends generation only once the output holds a newline (llama.cpp's rule for code completion). */
  maxTimeAfterNewline: z.boolean().default(false),
  /**
   * Every line after the first must be indented by at least this many spaces or tabs (llama.cpp's
   * `n_indent`, for completing code in a block): generation ends with finish reason "length" at the
   * first character of a line that is not, and the text stops before it.
   */
  minIndent: z.number().int("minIndent must be an integer").min(0, "minIndent must be at least 0").default(0),
  /** Stop strings: generation ends when the text contains one; the text returned stops before it. */
  stop: z.union([z.string().min(1, "stop strings must not be empty"), z.array(z.string().min(1, "stop strings must not be empty"))]).optional(),
  /** Parse special tokens written in a text prompt (`<|im_start|>`), as llama.cpp does. Default true. */
  special: z.boolean().default(true),
  /** Report each token's log-probability under the model (softmax of the raw logits). */
  logprobs: z.boolean().default(false),
  /** With logprobs: also the `topLogprobs` most likely tokens at each step (0 to 20). */
  topLogprobs: z.number().int("topLogprobs must be an integer").min(0).max(20, "topLogprobs must be at most 20").default(0),
  /** Stops generation, during prefill too. */
  signal: z.instanceof(AbortSignal, { message: "signal must be an AbortSignal" }).optional(),
  /**
   * Constrains the output to a schema: a zod schema (the result's `value` is zod's parsed value)
   * or a JSON schema object (`value` is the parsed JSON). Generation ends when the value is complete.
   */
  schema: z.custom<unknown>((value) => (typeof value === "object" && value !== null) || typeof value === "boolean", "schema must be a zod schema or a JSON schema object").optional(),
  /** Constrains the output to a GBNF grammar (llama.cpp's format); `value` is the text. */
  grammar: z.string().min(1, "grammar must not be empty").optional(),
  /**
   * With `grammar`: the grammar governs only from the first occurrence of this text in the output
   * on (llama.cpp's lazy grammar with a word trigger), the text before it is free, and the
   * grammar must start with it. The result's `value` is then the text, complete or not. In an
   * output that begins with a `<think>` block, the trigger is looked for only after its `</think>`
   * (as llama.cpp's trigger pattern for Qwen3 does), so that a call drafted while reasoning is not one.
   */
  grammarTrigger: z.string().min(1, "grammarTrigger must not be empty").optional(),
  /** "lazy": mask the logits only when the sampled token breaks the grammar (llama.cpp's way); "full": mask every step. */
  grammarMode: z.enum(["lazy", "full"]).default("lazy"),
  /**
   * Speculative decoding: draft tokens are guessed cheaply, then checked by the model in one
   * forward step, and kept while the model's own picks agree with them. The output is the one
   * decoding without it gives (the same sampler sees the same logits, in the same order); only the
   * number of forward steps changes. `{ method: "ngram" }` drafts by prompt lookup (the tokens that
   * followed the last occurrence of the output's last n tokens, as vLLM's ngram method and
   * llama.cpp's lookup decoding); `{ method: "draft", model }` by a smaller model with the same
   * vocabulary (llama.cpp's --model-draft).
   */
  speculative: z
    .discriminatedUnion("method", [
      z.strictObject({
        method: z.literal("ngram"),
        /** Most draft tokens per step (default 8). */
        tokens: z.number().int("speculative.tokens must be an integer").min(1, "speculative.tokens must be at least 1").max(64, "speculative.tokens must be at most 64").default(8),
        /** Shortest and longest n-gram looked up (default 2 and 4): the longest that matches wins. */
        ngramMin: z.number().int().min(1, "speculative.ngramMin must be at least 1").default(2),
        ngramMax: z.number().int().min(1, "speculative.ngramMax must be at least 1").max(16, "speculative.ngramMax must be at most 16").default(4),
      }),
      z.strictObject({
        method: z.literal("draft"),
        /** The draft model (loadModel): same vocabulary as the model it drafts for. */
        model: z.custom<Model>((value) => typeof value === "object" && value !== null && "engine" in value && "vocabularySize" in value, "speculative.model must be a loaded model"),
        /** Most draft tokens per step (default 16, llama.cpp's --draft-max). */
        tokens: z.number().int("speculative.tokens must be an integer").min(1, "speculative.tokens must be at least 1").max(64, "speculative.tokens must be at most 64").default(16),
        /** Drafting stops at a token the draft model gives less than this probability (default 0.75, llama.cpp's --draft-p-min). */
        minProbability: z.number().min(0).max(1, "speculative.minProbability must be at most 1").default(0.75),
      }),
    ])
    .refine((value) => value.method !== "ngram" || value.ngramMin <= value.ngramMax, { message: "speculative.ngramMin must not exceed speculative.ngramMax", path: ["ngramMin"] })
    .optional(),
  /**
   * The expected output, or much of it (OpenAI's predicted outputs: a file being edited, a text
   * being revised): speculative decoding drafts from it where the output follows it, by the
   * `speculative` method elsewhere. Text (tokenized without special tokens) or token ids. It
   * changes the number of forward steps, never the output.
   */
  prediction: z.union([z.string(), z.array(z.number().int().nonnegative())]).optional(),
  /**
   * The scales of the model's LoRA adapters for this generation (llama.cpp server's per-request
   * `lora`): each listed adapter (`id`: its place in loadModel's `lora`) takes its scale, the
   * others 0. Without it, the model's scales (`model.loraAdapters`). Generations with different
   * scales share batched steps; cached prefixes are shared only between equal scales.
   */
  lora: loraOptionSchema.optional(),
  /** Prompt tokens per forward step during prefill (abort is checked between steps). Default 64. */
  prefillChunkTokens: z.number().int().positive("prefillChunkTokens must be at least 1").default(64),
  /**
   * Context shift (llama.cpp's --context-shift): when the context fills, generation goes on instead
   * of being refused: the first `keep` tokens stay (-1: the whole prompt; at most the prompt), the
   * `discard` after them (default: half of those after `keep`) are forgotten, and the rest move
   * down, their cached keys rotated to their new positions (EngineSequence.shift). The context is
   * the model's, or the engine's KV pool (loadModel's kvCacheTokens, the CLI's --ctx) when smaller.
   * As in llama.cpp, the context is shifted when the next token would fill it, and the tokens kept
   * keep the keys and values computed while the discarded ones were before them. `true`: keep 0.
   * Not with speculative decoding or a prediction.
   */
  /**
   * The context of this generation (llama.cpp's per-slot n_ctx): the most tokens its sequence holds,
   * prompt and output. At most the model's context length. Default: the model's context length,
   * with `contextShift` the smaller of it and the engine's KV pool.
   */
  contextTokens: z.number().int("contextTokens must be an integer").min(2, "contextTokens must be at least 2").optional(),
  contextShift: z
    .union([
      z.boolean(),
      z.strictObject({
        keep: z.number().int("contextShift.keep must be an integer").min(-1, "contextShift.keep must be -1 (the prompt) or more").default(0),
        discard: z.number().int("contextShift.discard must be an integer").positive("contextShift.discard must be at least 1").optional(),
      }),
    ])
    .default(false),
});

export type GenerateOptions = z.input<typeof generateOptionsSchema>;
export type ResolvedGenerateOptions = z.output<typeof generateOptionsSchema>;

/** A function the model may call, as OpenAI's API describes one (rendered into the prompt by the chat template). */
const toolSchema = z.strictObject({
  type: z.literal("function", { error: 'a tool\'s type must be "function"' }),
  function: z.strictObject({
    name: z.string().regex(/^[a-zA-Z0-9_.-]{1,64}$/, "a function name is 1 to 64 letters, digits, _ . or -"),
    description: z.string().optional(),
    /** JSON schema of the arguments object. */
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
});

export const chatOptionsSchema = generateOptionsSchema.extend({
  /**
   * Qwen3's thinking mode (the template's enable_thinking). Default true, as in the template; false
   * when `toolChoice` forces a call (the answer must start with it) unless set.
   */
  enableThinking: z.boolean().optional(),
  /** Functions the model may call (names unique); its calls come back as the chat result's `toolCalls`. */
  tools: z
    .array(toolSchema)
    .superRefine((tools, context) => {
      const seen = new Set<string>();
      tools.forEach((tool, i) => {
        if (seen.has(tool.function.name)) context.addIssue({ code: "custom", path: [i, "function", "name"], message: `a second function named "${tool.function.name}"` });
        seen.add(tool.function.name);
      });
    })
    .optional(),
  /**
   * "auto" (default): the model decides; "none": no calls are taken out of the answer; "required":
   * the answer is one or more calls (a grammar enforces the names and the arguments' schemas);
   * `{ name }`: a call of that function.
   */
  toolChoice: z.union([z.enum(["auto", "none", "required"]), z.strictObject({ name: z.string() })]).default("auto"),
  /** With a forced choice: several calls may follow one another. Default true. */
  parallelToolCalls: z.boolean().default(true),
});

export type ChatOptions = z.input<typeof chatOptionsSchema>;
export type ResolvedChatOptions = z.output<typeof chatOptionsSchema>;

/**
 * The LoRA scales a `lora` option gives (listed adapters their scale, the others 0); undefined
 * without it. A malformed list or an adapter that is not loaded is an InvalidOptionError naming it.
 */
export function loraScalesOf(adapters: number, lora: readonly { readonly id: number; readonly scale: number }[] | undefined): number[] | undefined {
  if (lora === undefined) return undefined;
  const scales = new Array<number>(adapters).fill(0);
  for (const { id, scale } of parseOptions(z.object({ lora: loraOptionSchema }), { lora }).lora) {
    if (id >= adapters) throw new InvalidOptionError("lora", `lora: adapter id ${id} is not loaded (the model has ${adapters} LoRA adapter${adapters === 1 ? "" : "s"})`);
    scales[id] = scale;
  }
  return scales;
}

export class InvalidOptionError extends Error {
  override readonly name = "InvalidOptionError";
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(message);
  }
}

/** Parses options with `schema`, turning the first zod issue into an error that names the option. */
export function parseOptions<T extends z.ZodType>(schema: T, options: unknown): z.output<T> {
  const parsed = schema.safeParse(options ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const option = issue.path.map(String).join(".") || "options";
  const named = issue.message.startsWith(option) ? issue.message : `${option}: ${issue.message}`;
  const message = issue.code === "unrecognized_keys" ? `unknown option ${issue.keys.map((k) => `"${k}"`).join(", ")}` : named;
  throw new InvalidOptionError(issue.code === "unrecognized_keys" ? issue.keys.join(",") : option, message);
}
