export interface ReasoningSplit {
  /** Text inside the reasoning block, without its tags and surrounding newlines. */
  readonly reasoning: string;
  /** The answer: everything outside the reasoning block. */
  readonly content: string;
}

export interface ReasoningSplitterOptions {
  readonly openTag?: string;
  readonly closeTag?: string;
  /**
   * The generation starts inside the reasoning block (the prompt already ended with the open tag),
   * so only the close tag is looked for.
   */
  readonly startInReasoning?: boolean;
}

type State = "start" | "reasoning" | "afterReasoning" | "content";

/**
 * Separates a model's `<think>…</think>` reasoning from its answer while the text streams in, in
 * chunks that may split the tags anywhere. A reasoning block is recognised only at the start of the
 * output (after optional whitespace); newlines just inside the tags and just after the close tag are
 * dropped, as Qwen3's chat template drops them. Later tags are ordinary content.
 */
export class ReasoningSplitter {
  private readonly openTag: string;
  private readonly closeTag: string;
  private state: State;
  private pending = "";
  private reasoningStarted = false;

  constructor(options: ReasoningSplitterOptions = {}) {
    this.openTag = options.openTag ?? "<think>";
    this.closeTag = options.closeTag ?? "</think>";
    this.state = options.startInReasoning ? "reasoning" : "start";
  }

  /** Feeds a chunk; returns the reasoning and content that are now certain. */
  push(chunk: string): ReasoningSplit {
    this.pending += chunk;
    let reasoning = "";
    let content = "";
    for (;;) {
      if (this.state === "start") {
        const trimmed = this.pending.trimStart();
        if (trimmed.startsWith(this.openTag)) {
          this.pending = trimmed.slice(this.openTag.length);
          this.state = "reasoning";
          continue;
        }
        if (this.openTag.startsWith(trimmed)) break; // maybe the open tag, wait for more
        this.state = "content";
        continue;
      }
      if (this.state === "reasoning") {
        if (!this.reasoningStarted) {
          this.pending = stripLeadingNewlines(this.pending);
          if (this.pending === "") break;
          this.reasoningStarted = true;
        }
        const close = this.pending.indexOf(this.closeTag);
        if (close >= 0) {
          reasoning += stripTrailingNewlines(this.pending.slice(0, close));
          this.pending = this.pending.slice(close + this.closeTag.length);
          this.state = "afterReasoning";
          continue;
        }
        // Hold back what may be the start of the close tag, and newlines that may precede it.
        let keep = this.pending.length - partialTagLength(this.pending, this.closeTag);
        while (keep > 0 && this.pending.charCodeAt(keep - 1) === 0x0a) keep--;
        reasoning += this.pending.slice(0, keep);
        this.pending = this.pending.slice(keep);
        break;
      }
      if (this.state === "afterReasoning") {
        this.pending = stripLeadingNewlines(this.pending);
        if (this.pending === "") break;
        this.state = "content";
        continue;
      }
      content += this.pending;
      this.pending = "";
      break;
    }
    return { reasoning, content };
  }

  /** Ends the stream: text still held back comes out (an unterminated block is reasoning). */
  flush(): ReasoningSplit {
    const rest = this.pending;
    this.pending = "";
    if (this.state === "reasoning") return { reasoning: rest, content: "" };
    if (this.state === "afterReasoning") return { reasoning: "", content: "" };
    return { reasoning: "", content: rest };
  }
}

/** Splits a complete output into reasoning and answer (same rules as the streaming splitter). */
export function splitReasoning(text: string, options: ReasoningSplitterOptions = {}): ReasoningSplit {
  const splitter = new ReasoningSplitter(options);
  const first = splitter.push(text);
  const last = splitter.flush();
  return { reasoning: first.reasoning + last.reasoning, content: first.content + last.content };
}

function stripLeadingNewlines(text: string): string {
  let start = 0;
  while (start < text.length && text.charCodeAt(start) === 0x0a) start++;
  return text.slice(start);
}

function stripTrailingNewlines(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0x0a) end--;
  return text.slice(0, end);
}

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
function partialTagLength(text: string, tag: string): number {
  for (let length = Math.min(tag.length - 1, text.length); length > 0; length--) {
    if (text.endsWith(tag.slice(0, length))) return length;
  }
  return 0;
}
