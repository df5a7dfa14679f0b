import { describe, expect, it } from "vitest";
import { ReasoningSplitter, type ReasoningSplitterOptions, splitReasoning } from "./reasoning-splitter";

/** Streams `chunks` through a splitter and joins what comes out. */
function stream(chunks: string[], options: ReasoningSplitterOptions = {}) {
  const splitter = new ReasoningSplitter(options);
  let reasoning = "";
  let content = "";
  for (const chunk of [...chunks.map((c) => splitter.push(c)), splitter.flush()]) {
    reasoning += chunk.reasoning;
    content += chunk.content;
  }
  return { reasoning, content };
}

const OUTPUTS = [
  "<think>\nLet me think.\nStep 2.\n</think>\n\nThe answer is 4.",
  "<think>\n\n</think>\n\nDirect answer.",
  "No reasoning here, <think> later is content </think>.",
  "  \n<think>x</think>y",
  "<think>\nunterminated reasoning </thi",
  "<thinking>is not the tag</thinking>",
  "<think>a</think>\n\n<think>b</think>",
  "<thi",
  "",
  "<think>\n\nnewlines\n\n\ninside\n\n</think>\n\n\nanswer\n",
];

describe("splitReasoning", () => {
  it("separates the think block from the answer, dropping the newlines around the tags", () => {
    expect(splitReasoning(OUTPUTS[0] ?? "")).toEqual({ reasoning: "Let me think.\nStep 2.", content: "The answer is 4." });
    expect(splitReasoning(OUTPUTS[1] ?? "")).toEqual({ reasoning: "", content: "Direct answer." });
    expect(splitReasoning(OUTPUTS[9] ?? "")).toEqual({ reasoning: "newlines\n\n\ninside", content: "answer\n" });
  });

  it("recognises the block only at the start of the output", () => {
    expect(splitReasoning(OUTPUTS[2] ?? "")).toEqual({ reasoning: "", content: OUTPUTS[2] });
    expect(splitReasoning(OUTPUTS[3] ?? "")).toEqual({ reasoning: "x", content: "y" });
    expect(splitReasoning(OUTPUTS[5] ?? "")).toEqual({ reasoning: "", content: OUTPUTS[5] });
    expect(splitReasoning(OUTPUTS[6] ?? "")).toEqual({ reasoning: "a", content: "<think>b</think>" });
    expect(splitReasoning("<thi")).toEqual({ reasoning: "", content: "<thi" });
  });

  it("keeps an unterminated block as reasoning", () => {
    expect(splitReasoning(OUTPUTS[4] ?? "")).toEqual({ reasoning: "unterminated reasoning </thi", content: "" });
  });

  it("starts inside the block when the prompt ended with the open tag", () => {
    expect(splitReasoning("\nthinking\n</think>\n\nanswer", { startInReasoning: true })).toEqual({ reasoning: "thinking", content: "answer" });
  });

  it("supports other tags", () => {
    expect(splitReasoning("[R]why[/R]what", { openTag: "[R]", closeTag: "[/R]" })).toEqual({ reasoning: "why", content: "what" });
  });
});

describe("ReasoningSplitter", () => {
  it.each(OUTPUTS.map((text) => ({ text })))("gives the same split for every way of cutting $text into 1, 2 or 3 chunks", ({ text }) => {
    const whole = splitReasoning(text);
    expect(stream([text])).toEqual(whole);
    for (let i = 0; i <= text.length; i++) {
      expect(stream([text.slice(0, i), text.slice(i)])).toEqual(whole);
      for (let j = i; j <= text.length; j++) expect(stream([text.slice(0, i), text.slice(i, j), text.slice(j)])).toEqual(whole);
    }
    expect(stream(Array.from(text))).toEqual(whole);
  });

  it("emits reasoning while it streams, holding back only what may be the close tag", () => {
    const splitter = new ReasoningSplitter();
    expect(splitter.push("<think>\nabc")).toEqual({ reasoning: "abc", content: "" });
    expect(splitter.push("def</th")).toEqual({ reasoning: "def", content: "" });
    expect(splitter.push("ink>\n\nans")).toEqual({ reasoning: "", content: "ans" });
    expect(splitter.push("wer")).toEqual({ reasoning: "", content: "wer" });
  });
});
