/**
 * The OpenAI request bodies `memra serve` accepts, validated with zod. Fields the server does not
 * implement but that clients send by default are accepted and ignored (`n` must be 1); a wrong
 * type or range is a 400 naming the field.
 */
import { z } from "zod";

const stop = z.union([z.string().min(1), z.array(z.string().min(1)).max(4)]).nullish();

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
  n: z.literal(1).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  user: z.string().optional(),
  /** {type: "text" | "json_object" | "json_schema", ...}: checked by @memra/sampler's constraintFromResponseFormat. */
  response_format: z.unknown().optional(),
};

const contentPart = z.object({ type: z.literal("text"), text: z.string() });

export const chatMessageSchema = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(contentPart)]).nullish(),
  name: z.string().optional(),
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
});

export const completionRequestSchema = z.object({
  ...sampling,
  prompt: z.union([z.string(), z.array(z.string()).length(1), z.array(z.number().int().nonnegative()).min(1)]),
  /** Legacy completions: the number of top log-probabilities per token (0 to 5). */
  logprobs: z.number().int().min(0).max(5).nullish(),
  echo: z.literal(false).nullish(),
});

export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;
export type CompletionRequest = z.infer<typeof completionRequestSchema>;
export type ChatMessageInput = z.infer<typeof chatMessageSchema>;

/** The first zod issue as an OpenAI-style message and the parameter it names. */
export function describeIssue(error: z.ZodError): { message: string; param: string | null } {
  const issue = error.issues[0]!;
  const param = issue.path.length > 0 ? issue.path.map(String).join(".") : null;
  return { message: param ? `${param}: ${issue.message}` : issue.message, param };
}
