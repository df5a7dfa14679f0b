/**
 * The OpenAI request bodies `memra serve` accepts, validated with zod. Fields the server does not
 * implement but that clients send by default are accepted and ignored; a wrong
 * type or range is a 400 naming the field.
 */
import { z } from "zod";

const stop = z.union([z.string().min(1), z.array(z.string().min(1)).max(4)]).nullish();

const bias = z.union([z.number().min(-100).max(100), z.literal(false)]);

const contentPart = z.object({ type: z.literal("text"), text: z.string() });

const loraScale = z.object({ id: z.number().int().min(0), scale: z.number() });

/** POST /lora-adapters (llama.cpp server's): every adapter's scale for requests without `lora`; unlisted adapters 0. */
export const loraAdaptersRequestSchema = z.array(loraScale, { error: 'the body must be an array of {"id": number, "scale": number}' });

const sampling = {
  model: z.string().optional(),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  seed: z.number().int().nullish(),
  stop,
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  /** Choices, each its own generation (batched together); seed i + seed for the i-th when a seed is given. */
  n: z.number().int().min(1).max(16, "n is at most 16").nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  user: z.string().optional(),
  /** Token id (as a string key, or [id, bias] pairs as llama.cpp takes them) → added to its logit; false bans it. */
  logit_bias: z.union([z.record(z.string(), bias), z.array(z.tuple([z.number().int().nonnegative(), bias]))]).nullish(),
  // Not OpenAI's, but llama.cpp's server and vLLM take them, and clients send them.
  /** Keep the k most likely tokens; 0 or -1 (vLLM) disables. */
  top_k: z.number().int().min(-1).nullish(),
  min_p: z.number().min(0).max(1).nullish(),
  typical_p: z.number().gt(0).max(1).nullish(),
  /** llama.cpp's name; vLLM's is repetition_penalty. */
  repeat_penalty: z.number().positive().nullish(),
  repetition_penalty: z.number().positive().nullish(),
  /** How many recent tokens the penalties look at (-1: all of them). */
  repeat_last_n: z.number().int().min(-1).nullish(),
  xtc_probability: z.number().min(0).max(1).nullish(),
  xtc_threshold: z.number().min(0).max(1).nullish(),
  dry_multiplier: z.number().min(0).nullish(),
  dry_base: z.number().min(0).nullish(),
  dry_allowed_length: z.number().int().min(0).nullish(),
  dry_penalty_last_n: z.number().int().min(-1).nullish(),
  dry_sequence_breakers: z.array(z.string().min(1)).nullish(),
  /** llama.cpp's top-nσ: tokens below the largest logit minus n standard deviations are dropped (<= 0, the default -1: off). */
  top_n_sigma: z.number().nullish(),
  /** llama.cpp's Mirostat: 0 off, 1 Mirostat, 2 Mirostat 2.0 (it then replaces top-k, top-p, min-p, typical, XTC, DRY and the penalties). */
  mirostat: z.union([z.literal(0), z.literal(1), z.literal(2)], { error: "mirostat must be 0 (off), 1 (Mirostat) or 2 (Mirostat 2.0)" }).nullish(),
  /** Mirostat's target entropy (bits per token), > 0; default 5. */
  mirostat_tau: z.number().gt(0, "mirostat_tau must be > 0").nullish(),
  /** Mirostat's learning rate, > 0; default 0.1. */
  mirostat_eta: z.number().gt(0, "mirostat_eta must be > 0").nullish(),
  /** {type: "text" | "json_object" | "json_schema", ...}: checked by @memra/sampler's constraintFromResponseFormat. */
  response_format: z.unknown().optional(),
  /** OpenAI's predicted outputs: the expected output, which speculative decoding drafts from. */
  prediction: z.object({ type: z.literal("content"), content: z.union([z.string(), z.array(contentPart)]) }).nullish(),
  /** llama.cpp server's: most draft tokens per step (0: no speculative decoding for this request). */
  "speculative.n_max": z.number().int().min(0).max(64).nullish(),
  /** llama.cpp server's: the draft model's least probability to draft on. */
  "speculative.p_min": z.number().min(0).max(1).nullish(),
  /** llama.cpp's and vLLM's: never end at an end-of-generation token (for benchmarks). */
  ignore_eos: z.boolean().nullish(),
  /** vLLM's: the fewest tokens generated before end of generation or a stop token may end the output. */
  min_tokens: z.number().int().min(0).nullish(),
  /** vLLM's: token ids that end generation (in the tokens, not in the text). */
  stop_token_ids: z.array(z.number().int().nonnegative()).nullish(),
  /** llama.cpp's: a budget of decoding time in ms, which ends generation once the output holds a newline (0 or less: none). */
  t_max_predict_ms: z.number().nullish(),
  /** llama.cpp's: the least indentation of every line after the first (code completion). */
  n_indent: z.number().int().min(0).nullish(),
  /** vLLM's: each prompt token's logprob and rank, with this many most likely tokens at each position (0 to 20). */
  prompt_logprobs: z.number().int().min(0).max(20).nullish(),
  /** llama.cpp server's: the LoRA adapters' scales for this request (`id` as GET /lora-adapters lists them); unlisted adapters 0. */
  lora: z.array(loraScale).nullish(),
};

const toolCall = z.object({
  id: z.string().optional(),
  type: z.literal("function").optional(),
  function: z.object({ name: z.string().min(1), arguments: z.union([z.string(), z.record(z.string(), z.unknown())]) }),
});

export const chatMessageSchema = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(contentPart)]).nullish(),
  name: z.string().optional(),
  /** An assistant turn's calls (its content may then be null). */
  tool_calls: z.array(toolCall).nullish(),
  /** A tool turn: the call it answers. */
  tool_call_id: z.string().nullish(),
  reasoning_content: z.string().nullish(),
});

/** A function the model may call; checked further by @memra/core's chat options. */
const tool = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string(),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
  }),
});

export const chatCompletionRequestSchema = z.object({
  ...sampling,
  messages: z.array(chatMessageSchema).min(1, "messages must hold at least one message"),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  /** Qwen3's thinking mode (chat template enable_thinking); llama.cpp's name for it. */
  chat_template_kwargs: z.object({ enable_thinking: z.boolean().optional() }).nullish(),
  /**
   * llama.cpp server's option: "deepseek" (default) puts a leading <think>...</think> block in
   * message.reasoning_content (delta.reasoning_content when streaming) and the rest in content;
   * "none" leaves the raw text in content.
   */
  reasoning_format: z.enum(["deepseek", "none"]).nullish(),
  tools: z.array(tool).nullish(),
  tool_choice: z.union([z.enum(["none", "auto", "required"]), z.object({ type: z.literal("function"), function: z.object({ name: z.string() }) })]).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  /** The API's old names for tools: refused with a message rather than ignored. */
  functions: z.unknown().refine((value) => value === undefined, "functions is deprecated in OpenAI's API and not supported: give tools").optional(),
  function_call: z.unknown().refine((value) => value === undefined, "function_call is deprecated in OpenAI's API and not supported: give tool_choice").optional(),
});

export const completionRequestSchema = z.object({
  ...sampling,
  prompt: z.union([z.string(), z.array(z.string()).length(1), z.array(z.number().int().nonnegative()).min(1)]),
  /** Legacy completions: the number of top log-probabilities per token (0 to 5). */
  logprobs: z.number().int().min(0).max(5).nullish(),
  /** The prompt before the completion in `text`, and with `logprobs` its tokens' log-probabilities first (evaluation harnesses score texts so). */
  echo: z.boolean().nullish(),
  /** With `echo`, 0 is allowed: the prompt alone, scored. */
  max_tokens: z.number().int().min(0).nullish(),
  /** OpenAI's insertion: the text after the completion; the prompt is then llama.cpp's fill-in-the-middle one (prompt before, suffix after). */
  suffix: z.string().nullish(),
});

/**
 * POST /completion: llama.cpp server's own completion endpoint (its field names and defaults: what
 * a request leaves out keeps the sampler's defaults, llama.cpp's). Fields it has that memra does
 * not need are accepted and ignored (cache_prompt: prefix caching is always on). `id_slot` picks the
 * slot the request runs in (see slots.ts; -1: any). With --context-shift, `n_keep` (-1: the prompt)
 * and `n_discard` (0: half) say how the context shifts when it fills.
 */
export const nativeCompletionRequestSchema = z.object({
  ...sampling,
  temperature: z.number().min(0).nullish(),
  prompt: z.union([z.string(), z.array(z.number().int().nonnegative()).min(1)]),
  /** Most tokens to generate; -1 (default): until the context is full. */
  n_predict: z.number().int().min(-1).nullish(),
  /** The most probable tokens with their log-probabilities at each step (completion_probabilities). */
  n_probs: z.number().int().min(0).max(20).nullish(),
  grammar: z.string().min(1).nullish(),
  json_schema: z.record(z.string(), z.unknown()).nullish(),
  /** Also the generated token ids (tokens). */
  return_tokens: z.boolean().nullish(),
  cache_prompt: z.boolean().nullish(),
  id_slot: z.number().int().nullish(),
  n_keep: z.number().int().min(-1, "n_keep must be -1 (the prompt) or more").nullish(),
  n_discard: z.number().int().min(0, "n_discard must be 0 (half) or more").nullish(),
});

/**
 * POST /infill: llama.cpp server's fill-in-the-middle completion, its /completion's fields with
 * the text around the gap (`input_prefix`, `input_suffix`), other files for context
 * (`input_extra`) and the text the middle starts with (`prompt`).
 */
export const infillRequestSchema = nativeCompletionRequestSchema.omit({ prompt: true }).extend({
  input_prefix: z.string({ error: "input_prefix is required: the text before the gap" }),
  input_suffix: z.string({ error: "input_suffix is required: the text after the gap (may be empty)" }),
  input_extra: z
    .array(
      z.object({
        filename: z.string({ error: 'an input_extra chunk\'s "filename" must be a string' }).optional(),
        text: z.string({ error: 'an input_extra chunk must hold a "text" string' }),
      }),
      { error: 'input_extra must be an array of {"filename": string, "text": string}' },
    )
    .nullish(),
  prompt: z.string({ error: "prompt must be a string" }).nullish(),
});

/**
 * POST /tokenize, in llama.cpp server's form (`content`, `add_special`, `parse_special`,
 * `with_pieces`) and vLLM's (`prompt` and `add_special_tokens`, or chat `messages` with
 * `add_generation_prompt`, `return_token_strs`).
 */
export const tokenizeRequestSchema = z
  .object({
    model: z.string().optional(),
    content: z.string().optional(),
    prompt: z.string().optional(),
    messages: z.array(chatMessageSchema).min(1, "messages must hold at least one message").optional(),
    add_special: z.boolean().nullish(),
    add_special_tokens: z.boolean().nullish(),
    parse_special: z.boolean().nullish(),
    with_pieces: z.boolean().nullish(),
    return_token_strs: z.boolean().nullish(),
    add_generation_prompt: z.boolean().nullish(),
    chat_template_kwargs: z.object({ enable_thinking: z.boolean().optional() }).nullish(),
    tools: z.array(tool).nullish(),
  })
  .refine((body) => [body.content, body.prompt, body.messages].filter((value) => value !== undefined).length === 1, {
    message: "give exactly one of content (llama.cpp), prompt or messages (vLLM)",
    path: ["content"],
  });

/** POST /apply-template (llama.cpp server's): chat messages rendered with the chat template, as a chat completion's prompt. */
export const applyTemplateRequestSchema = z.object({
  model: z.string().optional(),
  messages: z.array(chatMessageSchema).min(1, "messages must hold at least one message"),
  tools: z.array(tool).nullish(),
  add_generation_prompt: z.boolean().nullish(),
  chat_template_kwargs: z.object({ enable_thinking: z.boolean().optional() }).nullish(),
});

/** POST /detokenize: llama.cpp's and vLLM's (`tokens`). */
export const detokenizeRequestSchema = z.object({
  model: z.string().optional(),
  tokens: z.array(z.number().int().nonnegative()),
});

/** POST /v1/embeddings: OpenAI's (input: a text, texts, tokens or token lists), llama.cpp's `content` too. */
export const embeddingRequestSchema = z
  .object({
    model: z.string().optional(),
    input: z
      .union([
        z.string(),
        z.array(z.string()).min(1, "input must hold at least one text"),
        z.array(z.number().int().nonnegative()).min(1, "input must hold at least one token"),
        z.array(z.array(z.number().int().nonnegative()).min(1, "a token list must not be empty")).min(1, "input must hold at least one token list"),
      ])
      .optional(),
    content: z.union([z.string(), z.array(z.string()).min(1)]).optional(),
    encoding_format: z.enum(["float", "base64"]).nullish(),
    dimensions: z.number().int().positive().nullish(),
    user: z.string().optional(),
  })
  .refine((body) => (body.input === undefined) !== (body.content === undefined), { message: "give input (or llama.cpp's content), not both", path: ["input"] });

/** POST /v1/rerank (llama.cpp's server, Jina's, Cohere's and vLLM's form): a query and the documents to score against it. */
export const rerankRequestSchema = z.object({
  model: z.string().optional(),
  query: z.string(),
  documents: z.array(z.union([z.string(), z.object({ text: z.string() })])),
  top_n: z.number().int().positive().nullish(),
  /** Each result carries its document's text (Jina, Cohere, vLLM). */
  return_documents: z.boolean().optional(),
});

export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;
export type RerankRequest = z.infer<typeof rerankRequestSchema>;
export type EmbeddingRequest = z.infer<typeof embeddingRequestSchema>;
export type TokenizeRequest = z.infer<typeof tokenizeRequestSchema>;
export type CompletionRequest = z.infer<typeof completionRequestSchema>;
export type NativeCompletionRequest = z.infer<typeof nativeCompletionRequestSchema>;
export type InfillRequest = z.infer<typeof infillRequestSchema>;
export type ChatMessageInput = z.infer<typeof chatMessageSchema>;

/** The first zod issue as an OpenAI-style message and the parameter it names. */
export function describeIssue(error: z.ZodError): { message: string; param: string | null } {
  const issue = error.issues[0]!;
  const param = issue.path.length > 0 ? issue.path.map(String).join(".") : null;
  return { message: param ? `${param}: ${issue.message}` : issue.message, param };
}

/** POST /slots/ID?action=save|restore: llama.cpp server's body. */
export const slotActionSchema = z.object({ filename: z.string().optional() });
