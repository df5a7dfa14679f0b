import { describe, expect, it } from "vitest";
import { ToolCallSplitter, parseToolCalls } from "./tool-calls";

const call = (name: string, args: unknown) => `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;

/** Feeds `text` in the given pieces; returns everything the splitter gave. */
function streamed(pieces: readonly string[]) {
  const splitter = new ToolCallSplitter();
  let content = "";
  const toolCalls = [];
  for (const piece of pieces) {
    const part = splitter.push(piece);
    content += part.content;
    toolCalls.push(...part.toolCalls);
  }
  const last = splitter.flush();
  return { content: content + last.content, toolCalls: [...toolCalls, ...last.toolCalls] };
}

/** A seeded split of `text` into pieces of 1 to 7 characters. */
function pieces(text: string, seed: number): string[] {
  let state = seed >>> 0;
  const out: string[] = [];
  for (let i = 0; i < text.length; ) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    const length = 1 + (state % 7);
    out.push(text.slice(i, i + length));
    i += length;
  }
  return out;
}

describe("parseToolCalls (Qwen3 / Hermes 2 Pro tool calls)", () => {
  it("takes out one call as Qwen3's template writes it", () => {
    expect(parseToolCalls(call("get_weather", { city: "Paris", days: [1, 2] }))).toEqual({
      content: "",
      toolCalls: [{ name: "get_weather", arguments: '{"city":"Paris","days":[1,2]}' }],
    });
  });

  it("keeps content before, between and after calls; whitespace next to a call is dropped", () => {
    const text = `Let me check.\n\n${call("a", { x: 1 })}\n${call("b", {})}\nDone.`;
    expect(parseToolCalls(text)).toEqual({
      content: "Let me check.\n\nDone.",
      toolCalls: [
        { name: "a", arguments: '{"x":1}' },
        { name: "b", arguments: "{}" },
      ],
    });
    expect(parseToolCalls(`${call("a", {})}\n\n`).content).toBe("");
    expect(parseToolCalls(`  \n${call("a", {})}`).content).toBe("");
  });

  it("arguments given as a JSON string stay as written; missing arguments are {}", () => {
    expect(parseToolCalls('<tool_call>{"name": "f", "arguments": "{\\"q\\": 1}"}</tool_call>').toolCalls).toEqual([{ name: "f", arguments: '{"q": 1}' }]);
    expect(parseToolCalls('<tool_call>{"name": "f"}</tool_call>').toolCalls).toEqual([{ name: "f", arguments: "{}" }]);
  });

  it("a block that is not a call stays in the content as written", () => {
    for (const block of [
      "<tool_call>not json</tool_call>",
      '<tool_call>{"arguments": {}}</tool_call>',
      '<tool_call>{"name": 3, "arguments": {}}</tool_call>',
      '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',
      '<tool_call>["f"]</tool_call>',
      '<tool_call>{"name": "", "arguments": {}}</tool_call>',
    ]) {
      expect(parseToolCalls(`x ${block} y`)).toEqual({ content: `x ${block} y`, toolCalls: [] });
    }
  });

  it("a call the output ends inside, or half an open tag, is content", () => {
    expect(parseToolCalls('Sure <tool_call>{"name": "f", "argu')).toEqual({ content: 'Sure <tool_call>{"name": "f", "argu', toolCalls: [] });
    expect(parseToolCalls("Sure <tool_")).toEqual({ content: "Sure <tool_", toolCalls: [] });
    expect(parseToolCalls(`${call("a", {})} <tool_call>{`)).toEqual({ content: "<tool_call>{", toolCalls: [{ name: "a", arguments: "{}" }] });
  });

  it("text without calls comes back unchanged", () => {
    for (const text of ["", "plain", "  spaced  \n", "a < b and <tool> and </tool_call>", "<tool_call", "x\n\n"]) {
      expect(parseToolCalls(text)).toEqual({ content: text, toolCalls: [] });
    }
  });

  it("streamed in pieces split anywhere, it gives what the whole text gives, content never early", () => {
    const texts = [
      `Let me check.\n\n${call("a", { x: "<tool_call>" })}\n${call("b", {})}\nDone.`,
      `${call("weather", { city: "Zürich" })}`,
      "a < b <tool_call>not a call</tool_call> trailing  ",
      `x ${call("f", {})} y ${call("g", { n: null })}  z <tool_call>{"name"`,
    ];
    for (const text of texts) {
      const whole = parseToolCalls(text);
      for (let seed = 1; seed <= 40; seed++) expect(streamed(pieces(text, seed))).toEqual(whole);
      expect(streamed([...text])).toEqual(whole);
    }
    // Content is held back only while it may be the start of a call.
    const splitter = new ToolCallSplitter();
    expect(splitter.push("Hello <tool").content).toBe("Hello");
    expect(splitter.push("_call>").content).toBe("");
    const done = splitter.push('{"name": "f", "arguments": {}}</tool_call>');
    expect(done.toolCalls).toEqual([{ name: "f", arguments: "{}" }]);
    expect(splitter.push(" then").content).toBe(" then");
  });
});
