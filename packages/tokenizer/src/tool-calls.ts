/** A function call the model wrote: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`. */
export interface ParsedToolCall {
  readonly name: string;
  /** The arguments as JSON text (an object's JSON, or the string the model gave), as OpenAI's API carries them. */
  readonly arguments: string;
}

export interface ToolCallSplit {
  /** Text outside the tool calls. */
  readonly content: string;
  /** Tool calls completed in this piece, in order. */
  readonly toolCalls: readonly ParsedToolCall[];
}

export interface ToolCallSplitterOptions {
  readonly openTag?: string;
  readonly closeTag?: string;
}

/**
 * Takes the tool calls out of a model's answer while it streams in, in chunks that may split the
 * tags anywhere. This is Qwen3's format (Hermes 2 Pro's, which Qwen's chat template asks for):
 * each call is `<tool_call>` + a JSON object with a string `name` and an `arguments` object (or
 * string) + `</tool_call>`, anywhere in the answer. Whitespace between content and a call, and
 * between calls, is dropped, as llama.cpp drops it. A block that is not such a call (bad JSON, no
 * name) stays in the content as written; so does a block the stream ends inside.
 */
export class ToolCallSplitter {
  private readonly openTag: string;
  private readonly closeTag: string;
  private pending = "";
  private inside = false;
  /** Whitespace after the content so far: dropped if a call follows, content if more content does. */
  private heldSpace = "";
  /** What separated the content before the calls since the last content from them. */
  private separator = "";
  private afterCall = false;
  private contentSeen = false;

  constructor(options: ToolCallSplitterOptions = {}) {
    this.openTag = options.openTag ?? "<tool_call>";
    this.closeTag = options.closeTag ?? "</tool_call>";
  }

  /** Feeds a chunk; returns the content that is now certain and the calls completed. */
  push(chunk: string): ToolCallSplit {
    this.pending += chunk;
    let content = "";
    const toolCalls: ParsedToolCall[] = [];
    for (;;) {
      if (this.inside) {
        const close = this.pending.indexOf(this.closeTag, this.openTag.length);
        if (close < 0) break;
        const block = this.pending.slice(0, close + this.closeTag.length);
        this.pending = this.pending.slice(close + this.closeTag.length);
        this.inside = false;
        const call = parseCall(block.slice(this.openTag.length, close));
        if (call) {
          toolCalls.push(call);
          if (!this.afterCall) this.separator = this.heldSpace;
          this.heldSpace = "";
          this.afterCall = true;
        } else {
          content += this.resume() + block;
        }
        continue;
      }
      const open = this.pending.indexOf(this.openTag);
      const end = open >= 0 ? open : this.pending.length - partialTagLength(this.pending, this.openTag);
      const text = this.pending.slice(0, end);
      this.pending = this.pending.slice(end);
      const trimmed = this.afterCall ? text.trim() : text.trimEnd();
      if (trimmed !== "") {
        content += this.resume() + trimmed;
        this.heldSpace = text.slice(text.trimEnd().length);
      } else if (!this.afterCall) {
        this.heldSpace += text;
      }
      if (open < 0) break;
      this.inside = true;
    }
    return { content, toolCalls };
  }

  /** Ends the stream: what is still held back is content (an unterminated block as written). */
  flush(): ToolCallSplit {
    const rest = this.pending;
    const inside = this.inside;
    this.pending = "";
    this.inside = false;
    if (!inside && (this.afterCall ? rest.trim() : rest) === "") {
      const space = this.afterCall ? "" : this.heldSpace;
      this.heldSpace = "";
      return { content: space, toolCalls: [] };
    }
    return { content: this.resume() + (this.afterCall && !inside ? rest.trim() : rest), toolCalls: [] };
  }

  /** What goes before content that follows: the held whitespace, or after calls the separator. */
  private resume(): string {
    const before = this.afterCall ? (this.contentSeen ? this.separator : "") : this.heldSpace;
    this.heldSpace = "";
    this.separator = "";
    this.afterCall = false;
    this.contentSeen = true;
    return before;
  }
}

/** Splits a complete answer into content and tool calls (same rules as the streaming splitter). */
export function parseToolCalls(text: string, options: ToolCallSplitterOptions = {}): ToolCallSplit {
  const splitter = new ToolCallSplitter(options);
  const first = splitter.push(text);
  const last = splitter.flush();
  return { content: first.content + last.content, toolCalls: [...first.toolCalls, ...last.toolCalls] };
}

function parseCall(body: string): ParsedToolCall | undefined {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const { name, arguments: args } = value as { name?: unknown; arguments?: unknown };
  if (typeof name !== "string" || name === "") return undefined;
  if (args === undefined) return { name, arguments: "{}" };
  if (typeof args === "string") return { name, arguments: args };
  if (typeof args !== "object" || args === null || Array.isArray(args)) return undefined;
  return { name, arguments: JSON.stringify(args) };
}

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
function partialTagLength(text: string, tag: string): number {
  for (let length = Math.min(tag.length - 1, text.length); length > 0; length--) {
    if (text.endsWith(tag.slice(0, length))) return length;
  }
  return 0;
}
