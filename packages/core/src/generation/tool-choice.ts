import { JsonSchemaError, toolCallGbnf } from "@memra/sampler";
import type { ChatToolDefinition } from "@memra/tokenizer";
import { InvalidOptionError, type ResolvedChatOptions } from "./generation-options";

/** How a chat turn handles `tools`: what the template renders, the grammar a forced choice needs, whether calls are parsed. */
export interface ToolTurn {
  /** The template's enable_thinking. */
  readonly enableThinking: boolean;
  /** Tools for the template (undefined: none). */
  readonly tools: readonly ChatToolDefinition[] | undefined;
  /** GBNF of the calls: the whole answer for a forced choice, from `grammarTrigger` on for "auto"; undefined for "none". */
  readonly grammar: string | undefined;
  /** "auto": the text that starts a call and so the grammar (llama.cpp's lazy grammar); undefined otherwise. */
  readonly grammarTrigger: string | undefined;
  /** Whether tool calls are taken out of the answer. */
  readonly parseCalls: boolean;
}

/**
 * The tool handling of chat options. A forced choice ("required", or `{ name }`) constrains the
 * whole answer to calls with llama.cpp's grammar for Qwen3's format, so it cannot go with
 * `schema` or `grammar`; thinking is then off unless `enableThinking` says otherwise.
 */
export function toolTurn(options: Pick<ResolvedChatOptions, "tools" | "toolChoice" | "parallelToolCalls" | "enableThinking" | "schema" | "grammar">): ToolTurn {
  const tools = options.tools !== undefined && options.tools.length > 0 ? options.tools : undefined;
  const choice = options.toolChoice;
  if (!tools) {
    if (choice !== "auto" && choice !== "none") throw new InvalidOptionError("toolChoice", `toolChoice ${JSON.stringify(choice)} needs tools`);
    return { enableThinking: options.enableThinking ?? true, tools: undefined, grammar: undefined, grammarTrigger: undefined, parseCalls: false };
  }
  if (choice === "none") return { enableThinking: options.enableThinking ?? true, tools, grammar: undefined, grammarTrigger: undefined, parseCalls: false };
  if (choice === "auto") {
    // The model writes what it likes; a call it starts must be well formed (names, arguments'
    // schemas), as llama.cpp's lazy grammar makes it. With a grammar or schema of the caller's, no call grammar.
    if (options.schema !== undefined || options.grammar !== undefined) return { enableThinking: options.enableThinking ?? true, tools, grammar: undefined, grammarTrigger: undefined, parseCalls: true };
    return { enableThinking: options.enableThinking ?? true, tools, grammar: callGrammar(tools, tools, options.parallelToolCalls), grammarTrigger: TOOL_CALL_OPEN, parseCalls: true };
  }
  let forced = tools;
  if (typeof choice === "object") {
    forced = tools.filter((tool) => tool.function.name === choice.name);
    if (forced.length === 0) throw new InvalidOptionError("toolChoice", `toolChoice names "${choice.name}", which is not among the tools (${tools.map((tool) => tool.function.name).join(", ")})`);
  }
  if (options.schema !== undefined || options.grammar !== undefined) throw new InvalidOptionError("toolChoice", `a forced toolChoice constrains the answer itself: give it without ${options.schema !== undefined ? "schema" : "grammar"}`);
  const grammar = callGrammar(tools, forced, typeof choice === "object" ? false : options.parallelToolCalls);
  return { enableThinking: options.enableThinking ?? false, tools, grammar, grammarTrigger: undefined, parseCalls: true };
}

/** Qwen3's (Hermes 2 Pro's) opening of a call. */
const TOOL_CALL_OPEN = "<tool_call>";

/** The calls grammar of `forced` (some of `tools`); an unsupported schema is an error pointing into `tools`. */
function callGrammar(tools: readonly ChatToolDefinition[], forced: readonly ChatToolDefinition[], parallel: boolean): string {
  try {
    return toolCallGbnf(
      forced.map((tool) => ({ name: tool.function.name, parameters: tool.function.parameters })),
      { parallel, openTag: TOOL_CALL_OPEN },
    );
  } catch (error) {
    if (error instanceof JsonSchemaError) {
      const index = tools.indexOf(forced[Number(/^\/tools\/(\d+)/.exec(error.pointer)?.[1] ?? 0)]!);
      const pointer = error.pointer.replace(/^\/tools\/\d+/, `/tools/${index}`);
      throw new InvalidOptionError("tools", `tools: ${error.reason} (at ${pointer})`);
    }
    throw error;
  }
}

/** Generation options with the turn's call grammar (and its trigger), when it has one. */
export function withToolGrammar<Options extends object>(options: Options, turn: ToolTurn | undefined): Options {
  return turn?.grammar === undefined ? options : { ...options, grammar: turn.grammar, grammarTrigger: turn.grammarTrigger };
}

let callCounter = 0;

/** An id for a tool call, as OpenAI's `call_...` (unique within the process, random across them). */
export function toolCallId(): string {
  callCounter = (callCounter + 1) % 0x100000;
  const random = crypto.getRandomValues(new Uint32Array(3));
  return `call_${[...random].map((word) => word.toString(36).padStart(7, "0")).join("")}${callCounter.toString(36)}`;
}
