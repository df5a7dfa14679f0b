import { Template } from "@huggingface/jinja";

export interface ChatToolCall {
  readonly id?: string;
  readonly type?: "function";
  readonly function: {
    readonly name: string;
    /** An object, or the JSON text of one (rendered as given). */
    readonly arguments: string | Record<string, unknown>;
  };
}

export interface ChatMessage {
  readonly role: "system" | "user" | "assistant" | "tool";
  readonly content: string;
  /** An assistant's reasoning, rendered inside `<think>` by templates that support it (Qwen3). */
  readonly reasoning_content?: string;
  readonly tool_calls?: readonly ChatToolCall[];
  readonly tool_call_id?: string;
  readonly name?: string;
}

/** A tool as the OpenAI API describes one; rendered with `tojson` by templates. */
export interface ChatToolDefinition {
  readonly type: "function";
  readonly function: {
    readonly name: string;
    readonly description?: string;
    readonly parameters?: Record<string, unknown>;
  };
}

export interface ChatTemplateOptions {
  /** End with the opening of an assistant turn, for generation. Default true. */
  readonly addGenerationPrompt?: boolean;
  /** Qwen3: false adds an empty `<think>` block so the model answers directly. Unset: the template's default. */
  readonly enableThinking?: boolean;
  readonly tools?: readonly ChatToolDefinition[];
  /** More template variables (they override the ones above). */
  readonly extraContext?: Readonly<Record<string, unknown>>;
}

/** ChatML, which llama.cpp uses when a model has no template of its own. */
export const CHATML_TEMPLATE =
  "{%- for message in messages %}" +
  "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}" +
  "{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/**
 * A parsed chat template (Jinja, rendered with @huggingface/jinja the way transformers'
 * `apply_chat_template` renders it: trim_blocks and lstrip_blocks on, `tojson` like Python's
 * `json.dumps(ensure_ascii=False)`).
 */
export class ChatTemplate {
  readonly source: string;
  private readonly template: Template;
  private readonly specialTokens: Record<string, string>;

  constructor(source: string, specialTokens: { readonly bosToken?: string | undefined; readonly eosToken?: string | undefined } = {}) {
    this.source = source;
    this.template = new Template(source);
    this.specialTokens = {};
    if (specialTokens.bosToken !== undefined) this.specialTokens.bos_token = specialTokens.bosToken;
    if (specialTokens.eosToken !== undefined) this.specialTokens.eos_token = specialTokens.eosToken;
  }

  render(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    const context: Record<string, unknown> = {
      ...this.specialTokens,
      messages,
      add_generation_prompt: options.addGenerationPrompt ?? true,
    };
    if (options.tools !== undefined && options.tools.length > 0) context.tools = options.tools;
    if (options.enableThinking !== undefined) context.enable_thinking = options.enableThinking;
    Object.assign(context, options.extraContext);
    return this.template.render(context);
  }
}
