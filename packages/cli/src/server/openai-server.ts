/**
 * An OpenAI-compatible HTTP server over one Model (Bun.serve): /v1/chat/completions and
 * /v1/completions (streamed as server-sent events or whole), /v1/models, /health and /metrics, and
 * /v1/embeddings, /v1/rerank, and llama.cpp's and vLLM's /tokenize and /detokenize.
 * Every request is one sequence of the model's engine, so concurrent requests decode together in
 * batched steps (continuous batching). A client that disconnects aborts its sequence, which frees
 * its KV blocks. A bad request is a 400 with an OpenAI-style error body; nothing a client sends
 * can take the server down.
 */
import { type ChatMessage, ReasoningSplitter, ToolCallSplitter, parseToolCalls, splitReasoning } from "@memra/tokenizer";
import {
  type GenerateOptions,
  type GenerationChunk,
  type GenerationResult,
  type GenerationStream,
  GrammarError,
  GrammarSyntaxError,
  DEFAULT_INFILL_BATCH_TOKENS,
  InfillUnsupportedError,
  InvalidOptionError,
  JsonSchemaError,
  type Model,
  StructuredOutputError,
  type ToolTurn,
  chatOptionsSchema,
  parseOptions,
  rankedDocuments,
  rerankPrompt,
  toolCallId,
  toolTurn,
  infillPromptTokens,
} from "@memra/core";
import { timingSafeEqual } from "node:crypto";
import type { z } from "zod";
import { constraintFromResponseFormat, samplingOptionsSchema } from "@memra/sampler";
import { ServerMetrics } from "./server-metrics";
import { RequestError } from "./request-error";
import { ServerSlots, type Slot } from "./slots";
import { ResponseBuilder, ResponseStore, type ResponsesRequest, chatBodyOfResponses, inputItems, inputItemsQuerySchema, listInputItems, outputAsInput, responsesRequestSchema } from "./responses-api";
import { MessageBuilder, type MessagesRequest, chatBodyOfMessages, countTokensRequestSchema, messagesRequestSchema } from "./anthropic-api";

/** What answerAs feeds an API's response builder. */
interface AnswerBuilder {
  start(): void;
  reasoning(piece: string): void;
  text(piece: string): void;
  toolCall(call: { readonly id: string; readonly name: string; readonly arguments: string }): void;
}
import {
  type ChatCompletionRequest,
  type ChatMessageInput,
  type CompletionRequest,
  type EmbeddingRequest,
  type RerankRequest,
  type TokenizeRequest,
  chatCompletionRequestSchema,
  completionRequestSchema,
  describeIssue,
  detokenizeRequestSchema,
  embeddingRequestSchema,
  type InfillRequest,
  type NativeCompletionRequest,
  applyTemplateRequestSchema,
  infillRequestSchema,
  loraAdaptersRequestSchema,
  nativeCompletionRequestSchema,
  slotActionSchema,
  rerankRequestSchema,
  tokenizeRequestSchema,
} from "./openai-schemas";

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

export interface OpenAIServerOptions {
  readonly model: Model;
  /** The id /v1/models reports (the file name). */
  readonly modelId: string;
  readonly hostname?: string;
  /** 0 picks a free port. */
  readonly port?: number;
  /** Most tokens one request may hold (prompt and completion). */
  readonly contextLength: number;
  /** Speculative decoding for every request (memra serve's --model-draft / --lookup); a request's prediction drafts too. */
  readonly speculative?: GenerateOptions["speculative"];
  /** Largest request body accepted, bytes. Default 4 MiB. */
  readonly maxBodyBytes?: number;
  /**
   * Keys a request must carry (`Authorization: Bearer KEY` or `X-Api-Key: KEY`, as llama.cpp's
   * --api-key and vLLM's take them); none: no authentication. /health and /v1/models stay open.
   */
  readonly apiKeys?: readonly string[];
  /**
   * LoRA adapters served as models of their own (vLLM's --lora-modules): a request whose `model`
   * is one of these names runs with that adapter at scale 1 and the others at 0 (unless it gives
   * `lora`); /v1/models lists them with the base model as their parent. Name → adapter id.
   */
  readonly loraModules?: ReadonlyMap<string, number>;
  /** The directory of POST /slots/ID?action=save|restore files (llama.cpp's --slot-save-path); undefined: those actions are refused. */
  readonly slotSavePath?: string;
  /**
   * Context shift (llama.cpp's --context-shift): a request's max_tokens / n_predict may reach past
   * its context, which then shifts (keeping /completion's `n_keep` tokens, discarding `n_discard`
   * or half of the rest) instead of being refused. Not with speculative decoding.
   */
  readonly contextShift?: boolean;
  /**
   * What a request that leaves a field out gets (llama-server's command-line defaults): sampling
   * options (`samplingDefaults`, beneath each request's own), the most tokens it generates
   * (`maxTokens`, at most what the context leaves), whether the chat template thinks
   * (`enableThinking`) and whether reasoning goes to reasoning_content (`reasoningFormat`).
   */
  readonly defaults?: ServerDefaults;
}

/** Routes open without an API key (llama.cpp server's public endpoints). */
const PUBLIC_PATHS = new Set(["/health", "/v1/health", "/models", "/v1/models"]);

/** Whether `given` is one of `keys`, compared in constant time. */
export interface ServerDefaults {
  readonly sampling?: Partial<GenerateOptions>;
  readonly maxTokens?: number;
  readonly enableThinking?: boolean;
  readonly reasoningFormat?: "none" | "deepseek" | "deepseek-legacy" | "auto";
}

function keyMatches(given: string, keys: readonly Buffer[]): boolean {
  const candidate = Buffer.from(given);
  let found = false;
  for (const key of keys) if (key.length === candidate.length && timingSafeEqual(key, candidate)) found = true;
  return found;
}

export interface OpenAIServer {
  readonly url: string;
  readonly port: number;
  readonly metrics: ServerMetrics;
  /** Stops accepting connections and aborts running requests. */
  stop(): Promise<void>;
}


const json = (body: unknown, status = 200) => Response.json(body, { status, headers: { "access-control-allow-origin": "*" } });

/** An OpenAI-style error body; for Anthropic's API (`anthropic`) with its `type: "error"` around it too. */
function errorResponse(error: unknown, anthropic = false): Response {
  const wrap = (body: { error: Record<string, unknown> }) => (anthropic ? { type: "error", ...body } : body);
  if (error instanceof RequestError) return json(wrap({ error: { message: error.message, type: error.type, param: error.param, code: null } }), error.status);
  const message = error instanceof Error ? error.message : String(error);
  return json(wrap({ error: { message, type: anthropic ? "api_error" : "server_error", param: null, code: null } }), 500);
}

/** One request turned into what the model runs: prompt tokens and generation options. */
interface PreparedRequest {
  readonly promptTokens: number[];
  /** The model the answer names: the LoRA module the request named, else the served model. */
  readonly model: string;
  /** Completions with `echo`: the prompt as text, which the answer's text starts with. */
  readonly echo?: string;
  /** Completions with `echo` and max_tokens 0: nothing is generated. */
  readonly promptOnly?: boolean;
  /** vLLM's prompt_logprobs: most likely tokens per prompt position (the prompt is scored when given). */
  readonly promptLogprobs?: number;
  readonly options: GenerateOptions;
  /** Choices to generate (n). */
  readonly choices: number;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  readonly logprobs: boolean;
  readonly topLogprobs: number;
  /** Chat: reasoning (<think>...</think>) goes to reasoning_content. */
  readonly splitReasoning: boolean;
  /** Chat with tools: <tool_call> blocks become tool_calls. */
  readonly parseToolCalls: boolean;
}

type SamplingFields = Pick<
  ChatCompletionRequest,
  | "logit_bias"
  | "presence_penalty"
  | "frequency_penalty"
  | "top_k"
  | "min_p"
  | "typical_p"
  | "repeat_penalty"
  | "repetition_penalty"
  | "repeat_last_n"
  | "xtc_probability"
  | "xtc_threshold"
  | "dry_multiplier"
  | "dry_base"
  | "dry_allowed_length"
  | "dry_penalty_last_n"
  | "dry_sequence_breakers"
  | "top_n_sigma"
  | "mirostat"
  | "mirostat_tau"
  | "mirostat_eta"
>;

/**
 * The sampler options a request sets (what it leaves out keeps the sampler's defaults, which are
 * llama.cpp's). A logit_bias key that is not a token id of this model is a 400 naming it.
 */
export function samplingOptionsOf(body: SamplingFields, vocabularySize: number): Partial<GenerateOptions> {
  const given = <T>(value: T | null | undefined): value is T => value !== undefined && value !== null;
  const options: Record<string, unknown> = {};
  if (given(body.logit_bias)) {
    const entries: [string | number, number | false][] = Array.isArray(body.logit_bias) ? body.logit_bias : Object.entries(body.logit_bias);
    const logitBias = new Map<number, number>();
    for (const [key, bias] of entries) {
      const token = typeof key === "number" ? key : /^\d+$/.test(key) ? Number(key) : Number.NaN;
      if (!Number.isSafeInteger(token)) throw new RequestError(400, `logit_bias: key ${JSON.stringify(key)} is not a token id (token ids as strings, e.g. {"1234": -100})`, "logit_bias");
      if (token >= vocabularySize) throw new RequestError(400, `logit_bias: token id ${token} is outside the vocabulary (0..${vocabularySize - 1})`, "logit_bias");
      logitBias.set(token, bias === false ? -Infinity : bias);
    }
    if (logitBias.size > 0) options.logitBias = logitBias;
  }
  if (given(body.presence_penalty)) options.presencePenalty = body.presence_penalty;
  if (given(body.frequency_penalty)) options.frequencyPenalty = body.frequency_penalty;
  if (given(body.repeat_penalty) && given(body.repetition_penalty) && body.repeat_penalty !== body.repetition_penalty) {
    throw new RequestError(400, `repeat_penalty (${body.repeat_penalty}) and repetition_penalty (${body.repetition_penalty}) are two names of one option: give one`, "repetition_penalty");
  }
  const repeat = body.repeat_penalty ?? body.repetition_penalty;
  if (given(repeat)) options.repeatPenalty = repeat;
  if (given(body.repeat_last_n)) options.penaltyLastN = body.repeat_last_n;
  if (given(body.top_k)) options.topK = Math.max(0, body.top_k);
  if (given(body.min_p)) options.minP = body.min_p;
  if (given(body.typical_p)) options.typicalP = body.typical_p;
  const xtc: Record<string, number> = {};
  if (given(body.xtc_probability)) xtc.probability = body.xtc_probability;
  if (given(body.xtc_threshold)) xtc.threshold = body.xtc_threshold;
  if (Object.keys(xtc).length > 0) options.xtc = xtc;
  const dry: Record<string, unknown> = {};
  if (given(body.dry_multiplier)) dry.multiplier = body.dry_multiplier;
  if (given(body.dry_base)) dry.base = body.dry_base;
  if (given(body.dry_allowed_length)) dry.allowedLength = body.dry_allowed_length;
  if (given(body.dry_penalty_last_n)) dry.penaltyLastN = body.dry_penalty_last_n;
  if (given(body.dry_sequence_breakers)) dry.sequenceBreakers = body.dry_sequence_breakers;
  if (Object.keys(dry).length > 0) options.dry = dry;
  if (given(body.top_n_sigma)) options.topNSigma = body.top_n_sigma;
  const mirostat: Record<string, number> = {};
  if (given(body.mirostat)) mirostat.mode = body.mirostat;
  if (given(body.mirostat_tau)) mirostat.tau = body.mirostat_tau;
  if (given(body.mirostat_eta)) mirostat.eta = body.mirostat_eta;
  if (Object.keys(mirostat).length > 0) options.mirostat = mirostat;
  return options as Partial<GenerateOptions>;
}

type LimitFields = Pick<ChatCompletionRequest, "ignore_eos" | "min_tokens" | "stop_token_ids" | "t_max_predict_ms" | "n_indent" | "lora">;

/**
 * The generation limits a request sets: llama.cpp's ignore_eos, t_max_predict_ms and n_indent,
 * vLLM's ignore_eos, min_tokens and stop_token_ids. A stop token outside the vocabulary, or
 * min_tokens above the tokens the request may generate, is a 400 naming the field.
 */
export function limitOptionsOf(body: LimitFields, vocabularySize: number, maxTokens: number, loraAdapters = 0): Partial<GenerateOptions> {
  const options: Partial<Record<keyof GenerateOptions, unknown>> = {};
  if (body.lora) {
    const unknown = body.lora.find((entry) => entry.id >= loraAdapters);
    if (unknown) throw new RequestError(400, `lora: adapter id ${unknown.id} is not loaded (the server has ${loraAdapters} LoRA adapter${loraAdapters === 1 ? "" : "s"}; GET /lora-adapters lists them)`, "lora");
    options.lora = body.lora;
  }
  if (body.ignore_eos) options.ignoreEos = true;
  if (body.min_tokens !== undefined && body.min_tokens !== null && body.min_tokens > 0) {
    if (body.min_tokens > maxTokens) throw new RequestError(400, `min_tokens (${body.min_tokens}) exceeds the ${maxTokens} tokens this request may generate`, "min_tokens");
    options.minTokens = body.min_tokens;
  }
  if (body.stop_token_ids && body.stop_token_ids.length > 0) {
    const outside = body.stop_token_ids.find((token) => token >= vocabularySize);
    if (outside !== undefined) throw new RequestError(400, `stop_token_ids: token id ${outside} is outside the vocabulary (0..${vocabularySize - 1})`, "stop_token_ids");
    options.stopTokens = body.stop_token_ids;
  }
  if (body.t_max_predict_ms !== undefined && body.t_max_predict_ms !== null && body.t_max_predict_ms > 0) {
    options.maxTimeMs = body.t_max_predict_ms;
    options.maxTimeAfterNewline = true;
  }
  if (body.n_indent) options.minIndent = body.n_indent;
  return options as Partial<GenerateOptions>;
}

export function startOpenAIServer(options: OpenAIServerOptions): OpenAIServer {
  const { model, modelId, contextLength } = options;
  const shifting = options.contextShift === true;
  const metrics = new ServerMetrics(model);
  const maxBodyBytes = options.maxBodyBytes ?? 4 * 1024 * 1024;
  const running = new Set<AbortController>();
  const created = Math.floor(Date.now() / 1000);
  let nextId = 0;
  const slots = new ServerSlots(model, contextLength, options.slotSavePath);
  const defaults = options.defaults ?? {};
  const samplingDefaults = defaults.sampling ?? {};
  /**
   * The sampler options a request sets (samplingOptionsOf) over the server's defaults: a request
   * giving one field of DRY, XTC or Mirostat keeps the server's others, as llama-server reads each
   * field over its own default.
   */
  const requestSampling = (body: SamplingFields, vocabularySize: number): Partial<GenerateOptions> => {
    const own = samplingOptionsOf(body, vocabularySize) as Record<string, unknown>;
    for (const group of ["dry", "xtc", "mirostat"] as const) {
      const fallback = samplingDefaults[group];
      if (own[group] !== undefined && fallback !== undefined) own[group] = { ...fallback, ...(own[group] as object) };
    }
    return own as Partial<GenerateOptions>;
  };
  /** A request's most tokens when it names none: the server's default, within `room`. */
  const defaultMaxTokens = (room: number) => (defaults.maxTokens === undefined ? room : Math.min(defaults.maxTokens, room));
  const responseStore = new ResponseStore();

  const readBody = async <T extends z.ZodType>(request: Request, schema: T): Promise<z.output<T>> => {
    const length = Number(request.headers.get("content-length") ?? 0);
    if (length > maxBodyBytes) throw new RequestError(413, `request body of ${length} bytes exceeds ${maxBodyBytes}`);
    const text = await request.text();
    if (text.length > maxBodyBytes) throw new RequestError(413, `request body exceeds ${maxBodyBytes} bytes`);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new RequestError(400, "the request body is not valid JSON");
    }
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      const { message, param } = describeIssue(parsed.error);
      throw new RequestError(400, message, param);
    }
    return parsed.data;
  };

  const loraModules = options.loraModules ?? new Map<string, number>();
  for (const [name, id] of loraModules) {
    if (id >= model.loraAdapters.length) throw new RangeError(`LoRA module "${name}" names adapter ${id}; the model has ${model.loraAdapters.length}`);
  }
  /** The request with its model's adapter as `lora` when `model` names a LoRA module and the request gives no `lora` of its own. */
  const withModuleLora = <T extends { readonly model?: string | undefined; readonly lora?: LimitFields["lora"] }>(body: T): T => {
    const id = body.model === undefined ? undefined : loraModules.get(body.model);
    return id === undefined || body.lora ? body : { ...body, lora: [{ id, scale: 1 }] };
  };

  /** Tokens of the prompt, and max_tokens fitted to the context (an error when nothing fits). */
  const prepare = (promptTokens: number[], body: ChatCompletionRequest | CompletionRequest, logprobs: boolean, topLogprobs: number, tools?: ToolTurn): PreparedRequest => {
    if (promptTokens.length >= contextLength) {
      throw new RequestError(400, `the prompt has ${promptTokens.length} tokens, the context holds ${contextLength}`, "messages", "invalid_request_error");
    }
    const room = contextLength - promptTokens.length;
    const asked = body.max_completion_tokens ?? body.max_tokens ?? undefined;
    if (asked !== undefined && asked > room && !shifting) {
      throw new RequestError(400, `max_tokens is ${asked}, but only ${room} tokens fit after the ${promptTokens.length}-token prompt (context ${contextLength})`, "max_tokens");
    }
    // response_format: the JSON schema becomes a grammar the sampler follows (a bad one is a 400)
    let grammar = tools?.grammar;
    if (grammar === undefined && body.response_format !== undefined && body.response_format !== null) {
      try {
        grammar = constraintFromResponseFormat(body.response_format)?.gbnf;
      } catch (error) {
        throw new RequestError(400, (error as Error).message, "response_format");
      }
    }
    const generateOptions: GenerateOptions = {
      ...samplingDefaults,
      maxTokens: asked ?? defaultMaxTokens(room),
      ...limitOptionsOf(withModuleLora(body), model.vocabularySize, asked ?? defaultMaxTokens(room), model.loraAdapters.length),
      ...(grammar === undefined ? {} : { grammar }),
      ...(tools?.grammarTrigger === undefined || grammar !== tools.grammar ? {} : { grammarTrigger: tools.grammarTrigger }),
      temperature: body.temperature ?? samplingDefaults.temperature ?? 1,
      topP: body.top_p ?? samplingDefaults.topP ?? 1,
      ...requestSampling(body, model.vocabularySize),
      ...(body.seed === undefined || body.seed === null ? {} : { seed: body.seed >>> 0 }),
      ...(body.stop ? { stop: body.stop } : {}),
      logprobs,
      topLogprobs,
      ...speculativeOf(body),
      ...(shifting ? { contextTokens: contextLength, contextShift: true } : {}),
    };
    return {
      promptTokens,
      model: body.model !== undefined && loraModules.has(body.model) ? body.model : modelId,
      ...(body.prompt_logprobs === undefined || body.prompt_logprobs === null ? {} : { promptLogprobs: body.prompt_logprobs }),
      options: generateOptions,
      choices: body.n ?? 1,
      stream: body.stream ?? false,
      includeUsage: body.stream_options?.include_usage ?? false,
      logprobs,
      topLogprobs,
      splitReasoning: "messages" in body && ((body as ChatCompletionRequest).reasoning_format ?? defaults.reasoningFormat) !== "none",
      parseToolCalls: tools?.parseCalls ?? false,
    };
  };

  /** The request's speculative decoding: the server's, as llama.cpp's speculative.* fields adjust it, and its prediction. */
  const speculativeOf = (body: ChatCompletionRequest | CompletionRequest): Pick<GenerateOptions, "speculative" | "prediction"> => {
    const most = body["speculative.n_max"] ?? undefined;
    const minProbability = body["speculative.p_min"] ?? undefined;
    const prediction = body.prediction ? (typeof body.prediction.content === "string" ? body.prediction.content : body.prediction.content.map((part) => part.text).join("")) : undefined;
    if (most === 0) return {};
    const configured = options.speculative;
    const speculative = !configured
      ? undefined
      : configured.method === "draft"
        ? { ...configured, ...(most === undefined ? {} : { tokens: most }), ...(minProbability === undefined ? {} : { minProbability }) }
        : { ...configured, ...(most === undefined ? {} : { tokens: most }) };
    // A prediction alone drafts up to speculative.n_max tokens per step, as a lookup would.
    const alone = !speculative && prediction && most !== undefined ? { method: "ngram" as const, tokens: most } : undefined;
    return { ...(speculative || alone ? { speculative: speculative ?? alone } : {}), ...(prediction ? { prediction } : {}) };
  };

  const messageText = (message: ChatMessageInput): string =>
    typeof message.content === "string" ? message.content : (message.content ?? []).map((part) => part.text).join("");

  const chatMessagesOf = (input: readonly ChatMessageInput[]): ChatMessage[] =>
    input.map((message) => ({
      role: message.role === "developer" ? "system" : message.role,
      content: messageText(message),
      ...(message.tool_calls && message.tool_calls.length > 0
        ? { tool_calls: message.tool_calls.map((call) => ({ ...(call.id ? { id: call.id } : {}), type: "function" as const, function: call.function })) }
        : {}),
      ...(message.tool_call_id ? { tool_call_id: message.tool_call_id } : {}),
      ...(message.name ? { name: message.name } : {}),
      ...(message.reasoning_content ? { reasoning_content: message.reasoning_content } : {}),
    }));

  const chatRequest = (body: ChatCompletionRequest): PreparedRequest => {
    const messages = chatMessagesOf(body.messages);
    // With a response_format the answer must start as JSON, so thinking is off unless asked for.
    const structured = body.response_format !== undefined && body.response_format !== null && (body.response_format as { type?: unknown }).type !== "text";
    const responseFormat = structured ? "response_format" : undefined;
    const tools = toolsOf(body, responseFormat, body.chat_template_kwargs?.enable_thinking ?? (structured ? false : defaults.enableThinking));
    const enableThinking = tools.enableThinking;
    let text: string;
    try {
      text = model.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, enableThinking, ...(tools.tools ? { tools: tools.tools } : {}) });
    } catch (error) {
      throw new RequestError(400, `the chat template failed on these messages: ${(error as Error).message}`, "messages");
    }
    const logprobs = body.logprobs ?? false;
    if (!logprobs && (body.top_logprobs ?? 0) > 0) throw new RequestError(400, "top_logprobs needs logprobs: true", "top_logprobs");
    return prepare(model.tokenizer.encode(text, { special: true }), body, logprobs, body.top_logprobs ?? 0, tools);
  };

  /** A request's tools as the chat template and core's options take them (null fields left out). */
  const toolDefinitionsOf = (tools: NonNullable<ChatCompletionRequest["tools"]>) =>
    tools.map(({ type, function: { name, description, parameters } }) => ({ type, function: { name, ...(description ? { description } : {}), ...(parameters ? { parameters } : {}) } }));

  /** The request's tools through core's chat options (a bad one is a 400 naming the field). */
  const toolsOf = (body: ChatCompletionRequest, responseFormat: string | undefined, enableThinking: boolean | undefined): ToolTurn => {
    const choice = body.tool_choice ?? "auto";
    if (responseFormat && (choice === "required" || typeof choice === "object") && body.tools && body.tools.length > 0) {
      throw new RequestError(400, "a forced tool_choice constrains the answer itself: give it without response_format", "tool_choice");
    }
    const options = {
      ...(body.tools
        ? {
            tools: toolDefinitionsOf(body.tools),
          }
        : {}),
      toolChoice: typeof choice === "string" ? choice : { name: choice.function.name },
      parallelToolCalls: body.parallel_tool_calls ?? true,
      ...(enableThinking === undefined ? {} : { enableThinking }),
    };
    try {
      // response_format's grammar, when there is one, takes the place of the calls' grammar in "auto"
      return toolTurn({ ...parseOptions(chatOptionsSchema, options), grammar: responseFormat });
    } catch (error) {
      if (error instanceof InvalidOptionError) {
        const param = error.option === "toolChoice" ? "tool_choice" : error.option.startsWith("tools") ? error.option : "tools";
        throw new RequestError(400, error.message.replace(/toolChoice/g, "tool_choice"), param);
      }
      throw error;
    }
  };

  const completionRequest = (body: CompletionRequest): PreparedRequest => {
    const prompt = body.prompt;
    let tokens: number[];
    if (body.suffix !== undefined && body.suffix !== null) {
      // insertion: the text between the prompt and the suffix, asked as /infill asks it
      if (typeof prompt !== "string" && typeof prompt[0] !== "string") throw new RequestError(400, "suffix needs a text prompt (the text before the insertion)", "suffix");
      if (body.echo) throw new RequestError(400, "echo and suffix cannot be combined", "echo");
      try {
        tokens = infillPromptTokens(model.tokenizer, { prefix: typeof prompt === "string" ? prompt : (prompt[0] as string), suffix: body.suffix }, { batchTokens: DEFAULT_INFILL_BATCH_TOKENS, contextTokens: contextLength, predictTokens: -1 });
      } catch (error) {
        if (error instanceof InfillUnsupportedError) throw new RequestError(400, `suffix: ${error.message}`, "suffix");
        throw error;
      }
    } else if (typeof prompt === "string") tokens = model.tokenizer.encode(prompt, { special: true });
    else if (typeof prompt[0] === "string") tokens = model.tokenizer.encode(prompt[0], { special: true });
    else tokens = prompt as number[];
    if (tokens.length === 0) throw new RequestError(400, "the prompt is empty", "prompt");
    const vocabulary = model.vocabularySize;
    const bad = tokens.find((token) => token >= vocabulary);
    if (bad !== undefined) throw new RequestError(400, `token id ${bad} is outside the vocabulary (0..${vocabulary - 1})`, "prompt");
    const logprobs = body.logprobs !== undefined && body.logprobs !== null;
    if (body.max_tokens === 0 && !body.echo) throw new RequestError(400, "max_tokens 0 asks for no tokens: give echo: true to score the prompt alone", "max_tokens");
    const promptOnly = body.max_tokens === 0;
    const prepared = prepare(tokens, promptOnly ? { ...body, max_tokens: 1 } : body, logprobs, body.logprobs ?? 0);
    if (!body.echo) return prepared;
    const echo = typeof prompt === "string" ? prompt : typeof prompt[0] === "string" ? prompt[0] : model.tokenizer.decode(tokens, { special: true });
    return { ...prepared, echo, promptOnly };
  };

  /** Ends a request once: its controller off the running set, the disconnect listener off, the metrics counted. */
  const finisher = (controller: AbortController, request: Request, onDisconnect: () => void, endpoint: "completion" | "responses" | "messages", slot: Slot, promptTokens: readonly number[]) => {
    let finished = false;
    return (result: GenerationResult | undefined, status: string) => {
      if (finished) return;
      finished = true;
      running.delete(controller);
      request.signal.removeEventListener("abort", onDisconnect);
      slots.release(slot, result && [...promptTokens, ...result.tokens]);
      metrics.requestFinished(endpoint, status, result?.usage.completionTokens ?? 0);
    };
  };

  /**
   * A chat answer as another API's response (OpenAI's Responses API, Anthropic's Messages API):
   * the generation of a prepared chat request, its reasoning, text and tool calls fed to the API's
   * builder as they stream in; the whole response, or the builder's events as server-sent events
   * (`event:` and `data:` lines).
   */
  const answerAs = async <Builder extends AnswerBuilder>(
    prepared: PreparedRequest,
    request: Request,
    api: {
      readonly endpoint: "responses" | "messages";
      readonly builder: (emit?: (event: Record<string, unknown>) => void) => Builder;
      readonly finish: (builder: Builder, result: GenerationResult) => Record<string, unknown>;
      readonly error: (message: string) => Record<string, unknown>;
    },
  ): Promise<Response> => {
    const controller = new AbortController();
    running.add(controller);
    const onDisconnect = () => controller.abort();
    request.signal.addEventListener("abort", onDisconnect);
    const stream = model.generate(prepared.promptTokens, { ...prepared.options, signal: controller.signal });
    metrics.requestStarted(prepared.promptTokens.length);
    const done = finisher(controller, request, onDisconnect, api.endpoint, slots.acquire(undefined, prepared.promptTokens.length, prepared.options.lora), prepared.promptTokens);
    /** Feeds the answer into the builder as it streams: reasoning apart, tool calls taken out. */
    const build = async (builder: Builder): Promise<GenerationResult> => {
      const splitter = prepared.splitReasoning ? new ReasoningSplitter() : undefined;
      const toolSplitter = prepared.parseToolCalls ? new ToolCallSplitter() : undefined;
      const answer = (content: string, last: boolean) => {
        const split = toolSplitter ? (last ? mergeSplits(toolSplitter.push(content), toolSplitter.flush()) : toolSplitter.push(content)) : { content, toolCalls: [] };
        builder.text(split.content);
        for (const call of split.toolCalls) builder.toolCall({ id: toolCallId(), name: call.name, arguments: call.arguments });
      };
      try {
        for await (const chunk of stream) {
          if (controller.signal.aborted) break;
          const part = splitter ? splitter.push(chunk.text) : { reasoning: "", content: chunk.text };
          builder.reasoning(part.reasoning);
          answer(part.content, false);
        }
      } catch (error) {
        if (!(error instanceof StructuredOutputError && error.result)) throw error;
      }
      const rest = splitter ? splitter.flush() : { reasoning: "", content: "" };
      builder.reasoning(rest.reasoning);
      answer(rest.content, true);
      return resultOf(stream);
    };
    if (!prepared.stream) {
      try {
        const builder = api.builder();
        const result = await build(builder);
        done(result, result.finishReason === "abort" ? "aborted" : "ok");
        if (result.finishReason === "abort") return new Response(null, { status: 499 });
        return json(api.finish(builder, result));
      } catch (error) {
        done(undefined, "error");
        throw error;
      }
    }
    const encoder = new TextEncoder();
    const events = new ReadableStream<Uint8Array>({
      async start(sink) {
        const emit = (event: Record<string, unknown>) => {
          if (!controller.signal.aborted) sink.enqueue(encoder.encode(`event: ${event.type as string}\ndata: ${JSON.stringify(event)}\n\n`));
        };
        const builder = api.builder(emit);
        try {
          builder.start();
          const result = await build(builder);
          done(result, result.finishReason === "abort" ? "aborted" : "ok");
          if (result.finishReason !== "abort") api.finish(builder, result);
          sink.close();
        } catch (error) {
          done(undefined, controller.signal.aborted ? "aborted" : "error");
          if (controller.signal.aborted) return;
          try {
            emit(api.error(error instanceof Error ? error.message : String(error)));
            sink.close();
          } catch {
            // the client is gone
          }
        }
      },
      cancel() {
        controller.abort();
      },
    });
    return new Response(events, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive", "access-control-allow-origin": "*" } });
  };

  /** A chat request made from another API's request, its chat field names renamed to the API's in a 400. */
  const preparedFrom = (chat: ChatCompletionRequest, renames: readonly [RegExp, string][]): PreparedRequest => {
    try {
      return chatRequest(chat);
    } catch (error) {
      if (error instanceof RequestError && error.param !== null) {
        let param = error.param;
        let message = error.message;
        for (const [from, to] of renames) {
          param = param.replace(from, to);
          message = message.replace(new RegExp(from.source.replace(/^\^/, ""), "g"), to);
        }
        throw new RequestError(error.status, message, param, error.type);
      }
      throw error;
    }
  };

  /**
   * POST /v1/responses: OpenAI's Responses API over a chat completion (responses-api.ts). The
   * answer's reasoning, text and tool calls become `reasoning`, `message` and `function_call`
   * items, in the order the model writes them; streamed as the API's typed events.
   */
  const responses = async (body: ResponsesRequest, request: Request): Promise<Response> => {
    const previousId = body.previous_response_id ?? undefined;
    const previous = previousId === undefined ? undefined : responseStore.get(previousId);
    if (previousId !== undefined && !previous) {
      throw new RequestError(404, `previous response ${previousId} not found (memra serve keeps the last ${responseStore.capacity} stored responses, in memory)`, "previous_response_id", "not_found_error");
    }
    const conversation = [...(previous?.conversation ?? []), ...inputItems(body)];
    const store = body.store !== false;
    const prepared = preparedFrom(chatBodyOfResponses(body, previous?.conversation), [
      [/^messages/, "input"],
      [/^response_format/, "text.format"],
      [/^max_tokens/, "max_output_tokens"],
    ]);
    const base = {
      id: `resp_${Date.now().toString(36)}${(nextId++).toString(36)}${Math.random().toString(36).slice(2, 8)}`,
      object: "response",
      created_at: Math.floor(Date.now() / 1000),
      model: prepared.model,
      instructions: body.instructions ?? null,
      max_output_tokens: body.max_output_tokens ?? null,
      temperature: body.temperature ?? 1,
      top_p: body.top_p ?? 1,
      tools: body.tools ?? [],
      tool_choice: body.tool_choice ?? "auto",
      parallel_tool_calls: body.parallel_tool_calls ?? true,
      text: body.text ?? { format: { type: "text" } },
      reasoning: body.reasoning ?? null,
      previous_response_id: previousId ?? null,
      store,
      truncation: "disabled",
      metadata: body.metadata ?? {},
      error: null,
      incomplete_details: null,
      usage: null,
    };
    return answerAs(prepared, request, {
      endpoint: "responses",
      builder: (emit) => new ResponseBuilder(base, emit),
      finish: (builder, result) => {
        const response = builder.finish(result.finishReason, {
          input_tokens: result.usage.promptTokens,
          input_tokens_details: { cached_tokens: result.usage.cachedPromptTokens },
          output_tokens: result.usage.completionTokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: result.usage.promptTokens + result.usage.completionTokens,
        });
        if (store) responseStore.put(base.id, response, [...conversation, ...outputAsInput(builder.output)], inputItems(body));
        return response;
      },
      error: (message) => ({ type: "error", code: "server_error", message, param: null }),
    });
  };

  /**
   * POST /v1/messages: Anthropic's Messages API over a chat completion (anthropic-api.ts), as
   * llama.cpp's server answers it: `thinking`, `text` and `tool_use` content blocks, streamed as
   * the API's events.
   */
  const messagesApi = async (body: MessagesRequest, request: Request): Promise<Response> => {
    const prepared = preparedFrom(chatBodyOfMessages(body), [
      [/^response_format/, "output_format"],
      [/^tool_choice/, "tool_choice"],
    ]);
    const base = { id: `msg_${Date.now().toString(36)}${(nextId++).toString(36)}${Math.random().toString(36).slice(2, 8)}`, model: prepared.model, inputTokens: prepared.promptTokens.length };
    return answerAs(prepared, request, {
      endpoint: "messages",
      builder: (emit) => new MessageBuilder(base, emit),
      finish: (builder, result) => builder.finish(result.finishReason, result.stop, result.usage.completionTokens, result.usage.cachedPromptTokens),
      error: (message) => ({ type: "error", error: { type: "api_error", message } }),
    });
  };

  /**
   * The legacy `logprobs` of an echoed prompt (the first token has none: null, as OpenAI's API
   * gives it), scored through the engine (Model.promptLogprobs).
   */
  const echoLogprobs = async (prepared: PreparedRequest, signal: AbortSignal) => {
    const scored = await model.promptLogprobs(prepared.promptTokens, { topLogprobs: prepared.topLogprobs, signal, ...(prepared.options.lora ? { lora: prepared.options.lora } : {}) });
    let offset = 0;
    const textOffset: number[] = [];
    const pieces = prepared.promptTokens.map((token) => {
      textOffset.push(offset);
      const piece = model.tokenizer.decode([token], { special: true });
      offset += piece.length;
      return piece;
    });
    return {
      tokens: pieces,
      token_logprobs: scored.logprobs,
      top_logprobs: scored.topLogprobs.map((tops) => (tops === null ? null : Object.fromEntries(tops.slice(0, prepared.topLogprobs).map((top) => [tokenText(top.id), top.logprob])))),
      text_offset: textOffset,
    };
  };

  /**
   * vLLM's prompt_logprobs: null for the first token, then per position a map from token id to
   * { logprob, rank, decoded_token } holding the prompt's token and the `promptLogprobs` most likely.
   */
  const vllmPromptLogprobs = async (prepared: PreparedRequest, signal: AbortSignal) => {
    const count = prepared.promptLogprobs!;
    const scored = await model.promptLogprobs(prepared.promptTokens, { topLogprobs: count, signal, ...(prepared.options.lora ? { lora: prepared.options.lora } : {}) });
    return prepared.promptTokens.map((token, i) => {
      if (i === 0) return null;
      const entries: [string, { logprob: number; rank: number; decoded_token: string }][] = [[String(token), { logprob: scored.logprobs[i]!, rank: scored.ranks[i]!, decoded_token: tokenText(token) }]];
      scored.topLogprobs[i]!.forEach((top, k) => {
        if (top.id !== token) entries.push([String(top.id), { logprob: top.logprob, rank: k + 1, decoded_token: tokenText(top.id) }]);
      });
      return Object.fromEntries(entries);
    });
  };

  /** A completion's logprobs after an echoed prompt's: one list, the completion's text offsets after the prompt's text. */
  const joinLogprobs = (echoed: Awaited<ReturnType<typeof echoLogprobs>>, promptText: string, completion: ReturnType<typeof completionLogprobs>) => ({
    tokens: [...echoed.tokens, ...completion.tokens],
    token_logprobs: [...echoed.token_logprobs, ...completion.token_logprobs],
    top_logprobs: [...echoed.top_logprobs, ...completion.top_logprobs],
    text_offset: [...echoed.text_offset, ...completion.text_offset.map((offset) => offset + promptText.length)],
  });

  /** The prompt text of chat messages: the chat template applied (a failure is a 400 naming messages). */
  const templatePrompt = (messages: readonly ChatMessageInput[], tools: ChatCompletionRequest["tools"], addGenerationPrompt: boolean, enableThinking: boolean): string => {
    const definitions = tools ? toolDefinitionsOf(tools) : undefined;
    try {
      return model.tokenizer.applyChatTemplate(chatMessagesOf(messages), { addGenerationPrompt, enableThinking, ...(definitions ? { tools: definitions } : {}) });
    } catch (error) {
      throw new RequestError(400, `the chat template failed on these messages: ${(error as Error).message}`, "messages");
    }
  };

  /** POST /tokenize: llama.cpp's answer (`tokens`, with pieces when asked) and vLLM's (`count`, `max_model_len`, `token_strs`). */
  const tokenize = (body: TokenizeRequest): Response => {
    const tokenizer = model.tokenizer;
    let tokens: number[];
    if (body.messages !== undefined) {
      const text = templatePrompt(body.messages, body.tools, body.add_generation_prompt ?? true, body.chat_template_kwargs?.enable_thinking ?? defaults.enableThinking ?? true);
      tokens = tokenizer.encode(text, { special: true, addBos: false });
    } else {
      // llama.cpp: add_special (default false), parse_special (default true); vLLM: add_special_tokens (default true).
      const addSpecial = body.add_special ?? body.add_special_tokens ?? body.prompt !== undefined;
      tokens = tokenizer.encode((body.content ?? body.prompt)!, { special: body.parse_special ?? true, ...(addSpecial ? {} : { addBos: false }) });
    }
    const pieceOf = (id: number) => {
      const bytes = tokenizer.tokenPiece(id, { special: true });
      try {
        return strictUtf8.decode(bytes);
      } catch {
        return Array.from(bytes); // not whole UTF-8 characters: the bytes, as llama.cpp gives them
      }
    };
    return json({
      tokens: body.with_pieces ? tokens.map((id) => ({ id, piece: pieceOf(id) })) : tokens,
      count: tokens.length,
      max_model_len: contextLength,
      ...(body.return_token_strs ? { token_strs: tokens.map((id) => tokenizer.decode([id], { special: true })) } : {}),
    });
  };

  /**
   * POST /v1/embeddings: one vector per input, pooled as the model says and normalized (OpenAI's and
   * llama.cpp's server's answer). The inputs are sequences of the engine, evaluated together and
   * beside running generations; a client that disconnects stops them.
   */
  const embeddings = async (body: EmbeddingRequest, signal: AbortSignal): Promise<Response> => {
    const input = body.input ?? body.content!;
    const inputs: (string | number[])[] = typeof input === "string" ? [input] : typeof input[0] === "number" ? [input as number[]] : (input as (string | number[])[]);
    const width = model.transformer.dimensions.embedding;
    if (body.dimensions !== undefined && body.dimensions !== null && body.dimensions > width) {
      throw new RequestError(400, `dimensions is ${body.dimensions}, but the model's embeddings have ${width}`, "dimensions");
    }
    const vocabulary = model.vocabularySize;
    const tokenLists = inputs.map((item, index) => {
      const tokens = typeof item === "string" ? model.tokenizer.encode(item) : item;
      const where = inputs.length === 1 && typeof input === "string" ? "input" : `input.${index}`;
      if (tokens.length === 0) throw new RequestError(400, `${where} has no tokens`, where);
      if (tokens.length > contextLength) throw new RequestError(400, `${where} has ${tokens.length} tokens, the context holds ${contextLength}`, where);
      const bad = tokens.find((token) => token >= vocabulary);
      if (bad !== undefined) throw new RequestError(400, `${where}: token id ${bad} is outside the vocabulary (0..${vocabulary - 1})`, where);
      return tokens;
    });
    const base64 = body.encoding_format === "base64";
    const promptTokens = tokenLists.reduce((sum, tokens) => sum + tokens.length, 0);
    const vectors = await Promise.all(tokenLists.map((tokens) => model.embedAsync(tokens, { ...(body.dimensions ? { dimensions: body.dimensions } : {}), signal })));
    const data = vectors.map((vector, index) => ({ object: "embedding", index, embedding: base64 ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString("base64") : Array.from(vector) }));
    return json({ object: "list", data, model: modelId, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens } });
  };

  /**
   * POST /v1/rerank (and /rerank, /v1/reranking, /reranking as llama.cpp's server names them): each
   * document's relevance to the query from a reranker (Qwen3-Reranker), best first, `top_n` of them.
   * The documents are sequences of the engine (see Model.rankPromptsAsync), as embeddings are.
   */
  const rerank = async (body: RerankRequest, signal: AbortSignal): Promise<Response> => {
    if (!model.classifier) throw new RequestError(400, "the model is not a reranker (it has no cls.output.weight head, which llama.cpp's converter writes for Qwen3-Reranker)", null);
    const template = model.rerankTemplate;
    if (template === undefined) throw new RequestError(400, "the model has no rerank prompt (tokenizer.chat_template.rerank)", null);
    const texts = body.documents.map((document) => (typeof document === "string" ? document : document.text));
    const tokenLists = texts.map((text, index) => {
      const tokens = model.tokenizer.encode(rerankPrompt(template, body.query, text), { special: true });
      if (tokens.length > contextLength) throw new RequestError(400, `documents.${index}: the query and the document take ${tokens.length} tokens, the context holds ${contextLength}`, `documents.${index}`);
      return tokens;
    });
    const scores = await model.rankPromptsAsync(tokenLists, signal);
    const promptTokens = tokenLists.reduce((sum, tokens) => sum + tokens.length, 0);
    const results = rankedDocuments(tokenLists, scores, body.top_n ?? undefined).map(({ index, score }) => ({ index, relevance_score: score, ...(body.return_documents ? { document: { text: texts[index]! } } : {}) }));
    return json({ id: `rerank-${crypto.randomUUID()}`, object: "list", model: modelId, results, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens } });
  };

  /** POST /detokenize: the text of the tokens, special ones included (llama.cpp's `content`, vLLM's `prompt`). */
  const detokenize = (body: z.output<typeof detokenizeRequestSchema>): Response => {
    const vocabulary = model.vocabularySize;
    const bad = body.tokens.findIndex((token) => token >= vocabulary || token >= model.tokenizer.vocabularySize);
    if (bad >= 0) throw new RequestError(400, `tokens[${bad}] = ${body.tokens[bad]} is outside the vocabulary (0..${model.tokenizer.vocabularySize - 1})`, `tokens.${bad}`);
    const text = model.tokenizer.decode(body.tokens, { special: true });
    return json({ content: text, prompt: text });
  };

  const tokenText = (id: number) => model.tokenizer.decode([id]);
  const bytesOf = (text: string) => Array.from(new TextEncoder().encode(text));

  const chatLogprobs = (chunk: GenerationChunk, topLogprobs: number) =>
    chunk.token === undefined || chunk.logprob === undefined
      ? null
      : {
          content: [
            {
              token: tokenText(chunk.token),
              logprob: chunk.logprob,
              bytes: bytesOf(tokenText(chunk.token)),
              top_logprobs: (chunk.topLogprobs ?? []).slice(0, topLogprobs).map((top) => ({ token: tokenText(top.id), logprob: top.logprob, bytes: bytesOf(tokenText(top.id)) })),
            },
          ],
        };

  const completionLogprobs = (chunks: readonly GenerationChunk[], topLogprobs: number) => {
    const withToken = chunks.filter((chunk) => chunk.token !== undefined && chunk.logprob !== undefined);
    let offset = 0;
    const textOffset: number[] = [];
    for (const chunk of withToken) {
      textOffset.push(offset);
      offset += tokenText(chunk.token!).length;
    }
    return {
      tokens: withToken.map((chunk) => tokenText(chunk.token!)),
      token_logprobs: withToken.map((chunk) => chunk.logprob!),
      top_logprobs: withToken.map((chunk) => Object.fromEntries((chunk.topLogprobs ?? []).slice(0, topLogprobs).map((top) => [tokenText(top.id), top.logprob]))),
      text_offset: textOffset,
    };
  };

  /** The assistant message of a chat answer: a leading <think> block as reasoning_content (llama.cpp's "deepseek" format). */
  const assistantMessage = (text: string, split: boolean, toolCalls: boolean) => {
    const { reasoning, content: answer } = split ? splitReasoning(text) : { reasoning: "", content: text };
    const message: Record<string, unknown> = { role: "assistant", content: answer };
    if (reasoning !== "") message.reasoning_content = reasoning;
    if (toolCalls) {
      const parsed = parseToolCalls(answer);
      if (parsed.toolCalls.length > 0) {
        message.content = parsed.content.trim() === "" ? null : parsed.content;
        message.tool_calls = parsed.toolCalls.map((call) => ({ id: toolCallId(), type: "function", function: { name: call.name, arguments: call.arguments } }));
      }
    }
    return message;
  };

  /** Usage of a request's choices: the prompt once (as OpenAI counts it), the completions summed. */
  const usageOf = (results: readonly GenerationResult[]) => {
    const completion = results.reduce((sum, result) => sum + result.usage.completionTokens, 0);
    const speculated = results.filter((result) => result.speculative);
    const accepted = speculated.reduce((sum, result) => sum + result.speculative!.accepted, 0);
    const drafted = speculated.reduce((sum, result) => sum + result.speculative!.drafted, 0);
    return {
      prompt_tokens: results[0]!.usage.promptTokens,
      completion_tokens: completion,
      total_tokens: results[0]!.usage.promptTokens + completion,
      prompt_tokens_details: { cached_tokens: results[0]!.usage.cachedPromptTokens },
      // OpenAI's fields for predicted outputs: draft tokens (from a prediction or a drafter) kept and not.
      ...(speculated.length > 0 ? { completion_tokens_details: { accepted_prediction_tokens: accepted, rejected_prediction_tokens: drafted - accepted } } : {}),
    };
  };

  const finishReason = (result: GenerationResult, toolCalls = false) => (result.finishReason === "length" ? "length" : toolCalls ? "tool_calls" : "stop");

  /**
   * The result of a generation, also when a constrained one (response_format, a forced
   * tool_choice) was cut off by max_tokens: that is finish_reason "length", as OpenAI's API gives it.
   */
  const resultOf = async (stream: { readonly result: Promise<GenerationResult> }): Promise<GenerationResult> => {
    try {
      return await stream.result;
    } catch (error) {
      if (error instanceof StructuredOutputError && error.result) return error.result;
      throw error;
    }
  };

  /**
   * POST /completion, llama.cpp server's own endpoint: `content`, `stop`, `stop_type`,
   * `stopping_word`, `tokens_predicted`, `tokens_evaluated`, `timings` (with `draft_n` and
   * `draft_n_accepted` under speculative decoding), `completion_probabilities` with `n_probs`;
   * streamed as events of `{ content, stop: false }` and a last one with `stop: true` and the rest.
   */
  const nativeCompletion = async (body: NativeCompletionRequest, request: Request): Promise<Response> => {
    let promptTokens: number[];
    if (typeof body.prompt === "string") promptTokens = model.tokenizer.encode(body.prompt, { special: true });
    else promptTokens = body.prompt;
    return llamaCompletion(promptTokens, body, request);
  };

  /**
   * POST /infill, llama.cpp server's fill-in-the-middle completion: the prompt llama.cpp builds
   * (core's infillPromptTokens, with its server's batch of 2,048 tokens, this server's context and
   * no n_predict of its own), then /completion's generation and answer. A model whose vocabulary
   * has no FIM tokens answers 501, as llama.cpp's does.
   */
  const infill = async (body: InfillRequest, request: Request): Promise<Response> => {
    let promptTokens: number[];
    try {
      promptTokens = infillPromptTokens(
        model.tokenizer,
        { prefix: body.input_prefix, suffix: body.input_suffix, extra: (body.input_extra ?? []).map((chunk) => ({ text: chunk.text, ...(chunk.filename === undefined ? {} : { filename: chunk.filename }) })), ...(body.prompt ? { prompt: body.prompt } : {}) },
        { batchTokens: DEFAULT_INFILL_BATCH_TOKENS, contextTokens: contextLength, predictTokens: -1 },
      );
    } catch (error) {
      if (error instanceof InfillUnsupportedError) throw new RequestError(501, error.message, null, "not_supported_error");
      throw error;
    }
    return llamaCompletion(promptTokens, body, request);
  };

  /** /completion's and /infill's generation and answer (llama.cpp server's form) for prompt tokens. */
  const llamaCompletion = async (promptTokens: number[], body: Omit<NativeCompletionRequest, "prompt">, request: Request): Promise<Response> => {
    if (promptTokens.length === 0) throw new RequestError(400, "the prompt is empty", "prompt");
    const vocabulary = model.vocabularySize;
    const bad = promptTokens.find((token) => token >= vocabulary);
    if (bad !== undefined) throw new RequestError(400, `token id ${bad} is outside the vocabulary (0..${vocabulary - 1})`, "prompt");
    if (promptTokens.length >= contextLength) throw new RequestError(400, `the prompt has ${promptTokens.length} tokens, the context holds ${contextLength}`, "prompt");
    if (body.grammar && body.json_schema) throw new RequestError(400, "give grammar or json_schema, not both", "grammar");
    const slotId = body.id_slot ?? -1;
    if (slotId !== -1) slots.slot(slotId);
    const room = contextLength - promptTokens.length;
    const asked = body.n_predict ?? -1;
    const probabilities = body.n_probs ?? 0;
    const given = <T>(value: T | null | undefined): value is T => value !== undefined && value !== null;
    // With context shift a request may ask for more than the context holds (-1 still fills it once).
    const maxTokens = asked < 0 ? defaultMaxTokens(room) : shifting ? Math.max(asked, 1) : Math.min(Math.max(asked, 1), room);
    const options: GenerateOptions = {
      ...samplingDefaults,
      maxTokens,
      ...limitOptionsOf(withModuleLora(body), vocabulary, maxTokens, model.loraAdapters.length),
      ...requestSampling(body, vocabulary),
      ...(given(body.temperature) ? { temperature: body.temperature } : {}),
      ...(given(body.top_p) ? { topP: body.top_p } : {}),
      ...(given(body.seed) && body.seed !== -1 ? { seed: body.seed >>> 0 } : {}),
      ...(body.stop ? { stop: body.stop } : {}),
      ...(body.grammar ? { grammar: body.grammar } : {}),
      ...(body.json_schema ? { schema: body.json_schema } : {}),
      logprobs: probabilities > 0,
      topLogprobs: probabilities,
      ...speculativeOf(body as unknown as CompletionRequest),
      ...(shifting ? { contextTokens: contextLength, contextShift: { keep: body.n_keep ?? 0, ...(given(body.n_discard) && body.n_discard > 0 ? { discard: body.n_discard } : {}) } } : {}),
    };
    if (asked === 0) throw new RequestError(400, "n_predict 0 asks for no tokens (memra serve does not evaluate a prompt alone)", "n_predict");
    const controller = new AbortController();
    running.add(controller);
    const onDisconnect = () => controller.abort();
    request.signal.addEventListener("abort", onDisconnect);
    let stream: GenerationStream;
    try {
      stream = model.generate(promptTokens, { ...options, signal: controller.signal });
    } catch (error) {
      running.delete(controller);
      request.signal.removeEventListener("abort", onDisconnect);
      if (error instanceof InvalidOptionError || error instanceof JsonSchemaError || error instanceof GrammarError || error instanceof GrammarSyntaxError) {
        throw new RequestError(400, (error as Error).message, body.json_schema ? "json_schema" : body.grammar ? "grammar" : null);
      }
      throw error;
    }
    // A request naming a busy slot waits for it (llama.cpp defers it); one that leaves first ends there.
    const slot = await slots.acquireIdle(slotId, promptTokens.length, options.lora, controller.signal);
    if (!slot) {
      running.delete(controller);
      request.signal.removeEventListener("abort", onDisconnect);
      void stream.result; // runs the generation to its abort: its sequence is released
      return new Response(null, { status: 499 });
    }
    metrics.requestStarted(promptTokens.length);
    const done = finisher(controller, request, onDisconnect, "completion", slot, promptTokens);
    const probabilitiesOf = (chunk: GenerationChunk) => ({
      id: chunk.token!,
      token: tokenText(chunk.token!),
      logprob: chunk.logprob!,
      bytes: bytesOf(tokenText(chunk.token!)),
      top_logprobs: (chunk.topLogprobs ?? []).map((top) => ({ id: top.id, token: tokenText(top.id), logprob: top.logprob, bytes: bytesOf(tokenText(top.id)) })),
    });
    const final = (result: GenerationResult, chunks: readonly GenerationChunk[] | undefined) => {
      const evaluated = result.usage.promptTokens - result.usage.cachedPromptTokens;
      const t = result.timings;
      const eog = result.finishReason === "stop" && result.stop === undefined;
      return {
        content: chunks ? result.text : "",
        tokens: body.return_tokens ? [...result.tokens] : [],
        id_slot: slot.id,
        stop: true,
        model: modelId,
        tokens_predicted: result.usage.completionTokens,
        tokens_evaluated: result.usage.promptTokens,
        tokens_cached: result.usage.promptTokens + result.usage.completionTokens - 1,
        truncated: result.contextShift !== undefined,
        has_new_line: result.text.includes("\n"),
        stop_type: result.finishReason === "length" ? "limit" : result.finishReason === "abort" ? "none" : eog ? "eos" : "word",
        stopping_word: result.stop ?? "",
        generation_settings: { n_predict: asked, seed: result.seed, temperature: options.temperature ?? 0.8, n_probs: probabilities, stream: body.stream ?? false },
        timings: {
          prompt_n: evaluated,
          prompt_ms: t.prefillMs,
          prompt_per_token_ms: evaluated > 0 ? t.prefillMs / evaluated : 0,
          prompt_per_second: t.prefillTokensPerSecond,
          predicted_n: result.usage.completionTokens,
          predicted_ms: t.decodeMs,
          predicted_per_token_ms: result.usage.completionTokens > 1 ? t.decodeMs / (result.usage.completionTokens - 1) : 0,
          predicted_per_second: t.decodeTokensPerSecond,
          ...(result.speculative ? { draft_n: result.speculative.drafted, draft_n_accepted: result.speculative.accepted } : {}),
        },
        ...(probabilities > 0 && chunks ? { completion_probabilities: chunks.filter((chunk) => chunk.token !== undefined && chunk.logprob !== undefined).map(probabilitiesOf) } : {}),
      };
    };
    if (!body.stream) {
      try {
        const chunks: GenerationChunk[] = [];
        try {
          for await (const chunk of stream) chunks.push(chunk);
        } catch (error) {
          if (!(error instanceof StructuredOutputError && error.result)) throw error;
        }
        const result = await resultOf(stream);
        done(result, result.finishReason === "abort" ? "aborted" : "ok");
        if (result.finishReason === "abort" && request.signal.aborted) return new Response(null, { status: 499 });
        return json(final(result, chunks));
      } catch (error) {
        done(undefined, "error");
        throw error;
      }
    }
    const encoder = new TextEncoder();
    const event = (data: unknown) => encoder.encode(`data: ${JSON.stringify(data)}\n\n`);
    const events = new ReadableStream<Uint8Array>({
      async start(sink) {
        try {
          try {
            for await (const chunk of stream) {
              if (controller.signal.aborted) break;
              if (chunk.text === "" && chunk.token === undefined) continue;
              sink.enqueue(
                event({
                  content: chunk.text,
                  tokens: body.return_tokens && chunk.token !== undefined ? [chunk.token] : [],
                  stop: false,
                  id_slot: slot.id,
                  ...(probabilities > 0 && chunk.token !== undefined && chunk.logprob !== undefined ? { completion_probabilities: [probabilitiesOf(chunk)] } : {}),
                }),
              );
            }
          } catch (error) {
            if (!(error instanceof StructuredOutputError && error.result)) throw error;
          }
          const result = await resultOf(stream);
          done(result, result.finishReason === "abort" ? "aborted" : "ok");
          if (!controller.signal.aborted) sink.enqueue(event(final(result, undefined)));
          sink.close();
        } catch (error) {
          done(undefined, controller.signal.aborted ? "aborted" : "error");
          if (controller.signal.aborted) return;
          try {
            sink.enqueue(event({ error: { message: error instanceof Error ? error.message : String(error), type: "server_error" } }));
            sink.close();
          } catch {
            // the client is gone
          }
        }
      },
      cancel() {
        controller.abort();
      },
    });
    return new Response(events, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive", "access-control-allow-origin": "*" } });
  };

  /** GET /props: llama.cpp server's description of itself, as its web UI and clients read it. */
  const props = (): Response =>
    json({
      default_generation_settings: { n_ctx: contextLength, params: defaultSamplingParams(defaults) },
      total_slots: model.engine.maxSequences,
      model_path: modelId,
      chat_template: model.tokenizer.vocabulary.chatTemplate ?? "",
      modalities: { vision: false, audio: false },
      build_info: "memra",
      ...(options.speculative ? { speculative: options.speculative.method } : {}),
    });

  /** Runs one request's choices (batched together), whole or streamed, aborting them when the client goes away. */
  const run = async (kind: "chat" | "completion", prepared: PreparedRequest, request: Request): Promise<Response> => {
    const id = `${kind === "chat" ? "chatcmpl" : "cmpl"}-${Date.now().toString(36)}${(nextId++).toString(36)}`;
    const object = kind === "chat" ? "chat.completion" : "text_completion";
    const controller = new AbortController();
    running.add(controller);
    let clientGone = false;
    const onDisconnect = () => {
      clientGone = true;
      controller.abort();
    };
    request.signal.addEventListener("abort", onDisconnect);
    // echo: the prompt's text first, and with logprobs its tokens' (scored before the completion's).
    const echo = prepared.echo;
    // The prompt's scores (echo with logprobs, vLLM's prompt_logprobs), before the generation.
    let echoed: Awaited<ReturnType<typeof echoLogprobs>> | undefined;
    let promptLogprobs: Awaited<ReturnType<typeof vllmPromptLogprobs>> | undefined;
    try {
      if (echo !== undefined && prepared.logprobs) echoed = await echoLogprobs(prepared, controller.signal);
      if (prepared.promptLogprobs !== undefined) promptLogprobs = await vllmPromptLogprobs(prepared, controller.signal);
    } catch (error) {
      running.delete(controller);
      request.signal.removeEventListener("abort", onDisconnect);
      if (controller.signal.aborted) return new Response(null, { status: 499 });
      throw error;
    }
    /** vLLM's: completions carry prompt_logprobs in each choice, chat in the answer. */
    const choicePromptLogprobs = kind === "completion" && promptLogprobs ? { prompt_logprobs: promptLogprobs } : {};
    const answerPromptLogprobs = kind === "chat" && promptLogprobs ? { prompt_logprobs: promptLogprobs } : {};
    if (prepared.promptOnly) {
      running.delete(controller);
      request.signal.removeEventListener("abort", onDisconnect);
      const choices = Array.from({ length: prepared.choices }, (_, index) => ({ index, text: echo, finish_reason: "length", logprobs: echoed ?? null, ...choicePromptLogprobs }));
      const usage = { prompt_tokens: prepared.promptTokens.length, completion_tokens: 0, total_tokens: prepared.promptTokens.length };
      if (!prepared.stream) return json({ id, object, created: Math.floor(Date.now() / 1000), model: prepared.model, choices, usage });
      const lines = choices.map((choice) => `data: ${JSON.stringify({ id, object, created: Math.floor(Date.now() / 1000), model: prepared.model, choices: [choice] })}\n\n`);
      if (prepared.includeUsage) lines.push(`data: ${JSON.stringify({ id, object, created: Math.floor(Date.now() / 1000), model: prepared.model, choices: [], usage })}\n\n`);
      return new Response(`${lines.join("")}data: [DONE]\n\n`, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache", "access-control-allow-origin": "*" } });
    }
    // Choice i samples with seed + i when a seed is given (its own random draws otherwise).
    const seed = prepared.options.seed;
    const streams = Array.from({ length: prepared.choices }, (_, index) =>
      model.generate(prepared.promptTokens, { ...prepared.options, ...(seed === undefined ? {} : { seed: (seed + index) >>> 0 }), signal: controller.signal }),
    );
    metrics.requestStarted(prepared.promptTokens.length);
    const slot = slots.acquire(undefined, prepared.promptTokens.length, prepared.options.lora);
    let finished = false;
    const done = (results: readonly GenerationResult[] | undefined, status: string) => {
      if (finished) return;
      finished = true;
      running.delete(controller);
      request.signal.removeEventListener("abort", onDisconnect);
      slots.release(slot, results && [...prepared.promptTokens, ...results[0]!.tokens]);
      metrics.requestFinished(kind, status, results?.reduce((sum, result) => sum + result.usage.completionTokens, 0) ?? 0);
    };
    // The other choices start once the first has its first token: its prompt is in the prefix
    // cache by then, so they reuse its full blocks instead of each evaluating the prompt again.
    let firstTokenReady!: () => void;
    const firstToken = new Promise<void>((resolve) => {
      firstTokenReady = resolve;
    });
    /** The stream of choice `index` as `one` reads it: the first choice marks its first chunk, the others wait for it. */
    const ordered = (stream: GenerationStream, index: number): GenerationStream => {
      if (prepared.choices === 1) return stream;
      return {
        get result() {
          return stream.result;
        },
        async *[Symbol.asyncIterator]() {
          try {
            if (index > 0) await firstToken;
            for await (const chunk of stream) {
              if (index === 0) firstTokenReady();
              yield chunk;
            }
          } finally {
            if (index === 0) firstTokenReady();
          }
        },
      };
    };
    /** All choices, each by `one`; the first failure aborts the others. */
    const all = <T>(one: (stream: GenerationStream, index: number) => Promise<T>): Promise<T[]> =>
      Promise.all(
        streams.map((stream, index) =>
          one(ordered(stream, index), index).catch((error: unknown) => {
            controller.abort();
            throw error;
          }),
        ),
      );

    if (!prepared.stream) {
      try {
        const outcomes = await all(async (stream) => {
          const chunks: GenerationChunk[] = [];
          try {
            for await (const chunk of stream) chunks.push(chunk);
          } catch (error) {
            if (!(error instanceof StructuredOutputError && error.result)) throw error;
          }
          return { chunks, result: await resultOf(stream) };
        });
        const results = outcomes.map((outcome) => outcome.result);
        const aborted = results.some((result) => result.finishReason === "abort");
        done(results, aborted ? "aborted" : "ok");
        if (aborted) return new Response(null, { status: 499 });
        const choices = outcomes.map(({ chunks, result }, index) => {
          if (kind === "completion") {
            const logprobs = prepared.logprobs ? completionLogprobs(chunks, prepared.topLogprobs) : null;
            return { index, text: (echo ?? "") + result.text, finish_reason: finishReason(result), logprobs: echoed && logprobs ? joinLogprobs(echoed, echo!, logprobs) : logprobs, ...choicePromptLogprobs };
          }
          const message = assistantMessage(result.text, prepared.splitReasoning, prepared.parseToolCalls);
          return {
            index,
            message,
            finish_reason: finishReason(result, message.tool_calls !== undefined),
            logprobs: prepared.logprobs ? { content: chunks.flatMap((chunk) => chatLogprobs(chunk, prepared.topLogprobs)?.content ?? []) } : null,
          };
        });
        return json({ id, object, created: Math.floor(Date.now() / 1000), model: prepared.model, choices, usage: usageOf(results), ...answerPromptLogprobs });
      } catch (error) {
        done(undefined, "error");
        return errorResponse(error);
      }
    }

    const encoder = new TextEncoder();
    const chunkObject = kind === "chat" ? "chat.completion.chunk" : "text_completion";
    const event = (data: unknown) => encoder.encode(`data: ${JSON.stringify(data)}\n\n`);
    const body = new ReadableStream<Uint8Array>({
      async start(sink) {
        const now = () => Math.floor(Date.now() / 1000);
        const send = (choice: Record<string, unknown>) => sink.enqueue(event({ id, object: chunkObject, created: now(), model: prepared.model, choices: [choice] }));
        /** Streams one choice's chunks (each event carries its index) and its finish; resolves with its result. */
        const streamChoice = async (stream: GenerationStream, index: number): Promise<GenerationResult> => {
          if (kind === "chat") {
            if (promptLogprobs) sink.enqueue(event({ id, object: chunkObject, created: now(), model: prepared.model, choices: [{ index, delta: { role: "assistant", content: "" }, finish_reason: null, logprobs: null }], prompt_logprobs: promptLogprobs }));
            else send({ index, delta: { role: "assistant", content: "" }, finish_reason: null, logprobs: null });
          } else if (echo !== undefined || promptLogprobs) send({ index, text: echo ?? "", finish_reason: null, logprobs: echoed ?? null, ...choicePromptLogprobs });
          const splitter = kind === "chat" && prepared.splitReasoning ? new ReasoningSplitter() : undefined;
          const toolSplitter = kind === "chat" && prepared.parseToolCalls ? new ToolCallSplitter() : undefined;
          let toolCalls = 0;
          /** Chat deltas for a piece of text: reasoning, content and tool calls apart (logprobs on the first). */
          const sendChat = (reasoning: string, answer: string, logprobs: unknown) => {
            const split = toolSplitter ? toolSplitter.push(answer) : { content: answer, toolCalls: [] };
            const content = split.content;
            if (reasoning !== "") send({ index, delta: { reasoning_content: reasoning }, finish_reason: null, logprobs });
            if (content !== "" || (reasoning === "" && logprobs !== null)) send({ index, delta: { content }, finish_reason: null, logprobs: reasoning === "" ? logprobs : null });
            for (const call of split.toolCalls) {
              const delta = { tool_calls: [{ index: toolCalls++, id: toolCallId(), type: "function", function: { name: call.name, arguments: call.arguments } }] };
              send({ index, delta, finish_reason: null, logprobs: null });
            }
          };
          try {
            for await (const chunk of stream) {
              if (controller.signal.aborted) break;
              if (chunk.text === "" && chunk.logprob === undefined) continue;
              if (kind === "chat") {
                const logprobs = prepared.logprobs ? chatLogprobs(chunk, prepared.topLogprobs) : null;
                const part = splitter ? splitter.push(chunk.text) : { reasoning: "", content: chunk.text };
                sendChat(part.reasoning, part.content, logprobs);
              } else send({ index, text: chunk.text, finish_reason: null, logprobs: prepared.logprobs ? completionLogprobs([chunk], prepared.topLogprobs) : null });
            }
          } catch (error) {
            if (!(error instanceof StructuredOutputError && error.result)) throw error;
          }
          if (kind === "chat" && !controller.signal.aborted) {
            const rest = splitter ? splitter.flush() : { reasoning: "", content: "" };
            sendChat(rest.reasoning, rest.content, null);
            const last = toolSplitter?.flush();
            if (last && last.content !== "") send({ index, delta: { content: last.content }, finish_reason: null, logprobs: null });
          }
          const result = await resultOf(stream);
          if (result.finishReason === "abort" || controller.signal.aborted) return result;
          if (kind === "chat") send({ index, delta: {}, finish_reason: finishReason(result, toolCalls > 0), logprobs: null });
          else send({ index, text: "", finish_reason: finishReason(result), logprobs: null });
          return result;
        };
        try {
          const results = await all(streamChoice);
          const aborted = controller.signal.aborted || results.some((result) => result.finishReason === "abort");
          done(results, aborted ? "aborted" : "ok");
          if (aborted) {
            sink.close();
            return;
          }
          if (prepared.includeUsage) sink.enqueue(event({ id, object: chunkObject, created: now(), model: prepared.model, choices: [], usage: usageOf(results) }));
          sink.enqueue(encoder.encode("data: [DONE]\n\n"));
          sink.close();
        } catch (error) {
          done(undefined, clientGone ? "aborted" : "error");
          if (clientGone) return;
          try {
            sink.enqueue(event({ error: { message: error instanceof Error ? error.message : String(error), type: "server_error", param: null, code: null } }));
            sink.close();
          } catch {
            // the client is gone
          }
        }
      },
      cancel() {
        onDisconnect();
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive", "access-control-allow-origin": "*" } });
  };

  const apiKeys = (options.apiKeys ?? []).map((key) => Buffer.from(key));
  if (apiKeys.some((key) => key.length === 0)) throw new RangeError("an API key must not be empty");
  /** The request's API key, when the server has keys: from Authorization: Bearer or X-Api-Key. */
  const authorized = (request: Request, path: string): boolean => {
    if (apiKeys.length === 0 || PUBLIC_PATHS.has(path)) return true;
    const bearer = /^Bearer\s+(.+)$/i.exec(request.headers.get("authorization") ?? "")?.[1]?.trim();
    const given = bearer ?? request.headers.get("x-api-key") ?? undefined;
    return given !== undefined && keyMatches(given, apiKeys);
  };

  const server = Bun.serve({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 8080,
    idleTimeout: 0, // a long generation may send nothing for a while (a long prefill)
    async fetch(request) {
      const url = new URL(request.url);
      try {
        if (request.method === "OPTIONS") {
          return new Response(null, { headers: { "access-control-allow-origin": "*", "access-control-allow-headers": "*", "access-control-allow-methods": "GET, POST, DELETE, OPTIONS" } });
        }
        const path = url.pathname.replace(/\/+$/, "");
        if (!authorized(request, path)) {
          metrics.requestRejected(url.pathname, 401);
          return json({ error: { message: "invalid or missing API key (Authorization: Bearer KEY)", type: "authentication_error", param: null, code: 401 } }, 401);
        }
        const route = `${request.method} ${path}`;
        switch (route) {
          case "GET /health":
          case "GET /v1/health":
            return json({ status: "ok" });
          case "GET /metrics":
            return new Response(metrics.render(), { headers: { "content-type": "text/plain; version=0.0.4" } });
          case "GET /v1/models":
          case "GET /models":
            return json({
              object: "list",
              data: [
                { id: modelId, object: "model", created, owned_by: "memra" },
                ...[...loraModules].map(([name, id]) => ({ id: name, object: "model", created, owned_by: "memra", root: model.loraAdapters[id]!.path, parent: modelId })),
              ],
            });
          case "POST /v1/chat/completions":
          case "POST /chat/completions":
            return await run("chat", chatRequest(await readBody(request, chatCompletionRequestSchema)), request);
          case "POST /v1/completions":
          case "POST /completions":
            return await run("completion", completionRequest(await readBody(request, completionRequestSchema)), request);
          case "POST /completion":
            return await nativeCompletion(await readBody(request, nativeCompletionRequestSchema), request);
          case "POST /v1/responses":
            return await responses(await readBody(request, responsesRequestSchema), request);
          case "POST /v1/messages":
            return await messagesApi(await readBody(request, messagesRequestSchema), request);
          case "POST /v1/messages/count_tokens": {
            const prepared = preparedFrom(chatBodyOfMessages(await readBody(request, countTokensRequestSchema)), []);
            return json({ input_tokens: prepared.promptTokens.length });
          }
          case "POST /infill":
            return await infill(await readBody(request, infillRequestSchema), request);
          case "GET /lora-adapters":
            return json(model.loraAdapters.map(({ id, path, scale }) => ({ id, path, scale })));
          case "POST /lora-adapters": {
            const scales = await readBody(request, loraAdaptersRequestSchema);
            const unknown = scales.find((entry) => entry.id >= model.loraAdapters.length);
            if (unknown) throw new RequestError(400, `adapter id ${unknown.id} is not loaded (the server has ${model.loraAdapters.length} LoRA adapters)`, "id");
            model.setLoraScales(scales);
            return json({ success: true });
          }
          case "GET /props":
            return props();
          case "GET /slots":
            if (url.searchParams.get("fail_on_no_slot") === "1" && !slots.anyIdle) throw new RequestError(503, "no slot is idle", null, "unavailable_error");
            return json(slots.describe());
          case "POST /v1/embeddings":
          case "POST /embeddings":
            return await embeddings(await readBody(request, embeddingRequestSchema), request.signal);
          case "POST /v1/rerank":
          case "POST /rerank":
          case "POST /v1/reranking":
          case "POST /reranking":
            return await rerank(await readBody(request, rerankRequestSchema), request.signal);
          case "POST /tokenize":
            return tokenize(await readBody(request, tokenizeRequestSchema));
          case "POST /detokenize":
            return detokenize(await readBody(request, detokenizeRequestSchema));
          case "POST /apply-template": {
            const body = await readBody(request, applyTemplateRequestSchema);
            return json({ prompt: templatePrompt(body.messages, body.tools, body.add_generation_prompt ?? true, body.chat_template_kwargs?.enable_thinking ?? defaults.enableThinking ?? true) });
          }
          default:
            if (/^\/v1\/responses\/[^/]+\/input_items$/.test(path) && request.method === "GET") {
              const id = decodeURIComponent(path.slice("/v1/responses/".length, -"/input_items".length));
              const stored = responseStore.get(id);
              if (!stored) throw new RequestError(404, `response ${id} not found (memra serve keeps the last ${responseStore.capacity} stored responses, in memory)`, "response_id", "not_found_error");
              const query = inputItemsQuerySchema.safeParse(Object.fromEntries(url.searchParams));
              if (!query.success) throw new RequestError(400, query.error.issues[0]!.message, String(query.error.issues[0]!.path[0] ?? "query"));
              return json(listInputItems(id, stored.input, query.data));
            }
            if (/^\/v1\/responses\/[^/]+$/.test(path) && (request.method === "GET" || request.method === "DELETE")) {
              const id = decodeURIComponent(path.slice("/v1/responses/".length));
              const stored = responseStore.get(id);
              if (!stored) throw new RequestError(404, `response ${id} not found (memra serve keeps the last ${responseStore.capacity} stored responses, in memory)`, "response_id", "not_found_error");
              if (request.method === "GET") return json(stored.response);
              responseStore.delete(id);
              return json({ id, object: "response", deleted: true });
            }
            if (request.method === "POST" && /^\/slots\/[^/]+$/.test(path)) {
              const id = Number(path.slice("/slots/".length));
              const body = request.headers.get("content-length") === "0" || url.searchParams.get("action") === "erase" ? {} : await readBody(request, slotActionSchema);
              return json(await slots.action(id, url.searchParams.get("action"), body));
            }
            if (["/health", "/v1/health", "/models", "/chat/completions", "/metrics", "/props", "/slots", "/completion", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens", "/infill", "/lora-adapters", "/completions", "/v1/models", "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/embeddings", "/v1/rerank", "/rerank", "/v1/reranking", "/reranking", "/tokenize", "/detokenize", "/apply-template"].includes(url.pathname)) {
              throw new RequestError(405, `${request.method} is not allowed on ${url.pathname}`);
            }
            throw new RequestError(404, `no route ${request.method} ${url.pathname}`, null, "not_found_error");
        }
      } catch (error) {
        if (error instanceof RequestError) metrics.requestRejected(url.pathname, error.status);
        return errorResponse(error, url.pathname.startsWith("/v1/messages"));
      }
    },
    error(error) {
      return errorResponse(error);
    },
  });

  return {
    url: `http://${server.hostname}:${server.port}`,
    port: server.port ?? 0,
    metrics,
    async stop() {
      for (const controller of running) controller.abort();
      await server.stop(true);
    },
  };
}

/** Two pieces of a tool-call split, one after the other. */
function mergeSplits(first: { content: string; toolCalls: readonly { name: string; arguments: string }[] }, second: { content: string; toolCalls?: readonly { name: string; arguments: string }[] }) {
  return { content: first.content + second.content, toolCalls: [...first.toolCalls, ...(second.toolCalls ?? [])] };
}

/**
 * The sampler's defaults under llama.cpp server's names (its /props `default_generation_settings.params`):
 * what a request that sets none of them gets.
 */
/** /props's default_generation_settings.params: the sampler's defaults (llama.cpp's) under the server's own (ServerDefaults). */
function defaultSamplingParams(defaults: ServerDefaults): Record<string, unknown> {
  const { ignoreEos: _ignoreEos, ...sampling } = (defaults.sampling ?? {}) as Record<string, unknown>;
  const d = samplingOptionsSchema.parse(sampling);
  return {
    n_predict: defaults.maxTokens ?? -1,
    temperature: d.temperature,
    top_k: d.topK,
    top_p: d.topP,
    min_p: d.minP,
    typical_p: d.typicalP,
    top_n_sigma: d.topNSigma,
    xtc_probability: d.xtc.probability,
    xtc_threshold: d.xtc.threshold,
    repeat_last_n: d.penaltyLastN,
    repeat_penalty: d.repeatPenalty,
    presence_penalty: d.presencePenalty,
    frequency_penalty: d.frequencyPenalty,
    dry_multiplier: d.dry.multiplier,
    dry_base: d.dry.base,
    dry_allowed_length: d.dry.allowedLength,
    dry_penalty_last_n: d.dry.penaltyLastN,
    dry_sequence_breakers: d.dry.sequenceBreakers,
    mirostat: d.mirostat.mode,
    mirostat_tau: d.mirostat.tau,
    mirostat_eta: d.mirostat.eta,
    min_keep: d.minKeep,
  };
}
