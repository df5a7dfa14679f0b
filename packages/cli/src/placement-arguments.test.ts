import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import { loraOrderOf, loraParseOptions, parseLoraArguments } from "./placement-arguments";

function adapters(args: string[]) {
  const { values, tokens } = parseArgs({ args, options: loraParseOptions, tokens: true });
  return parseLoraArguments({ ...values, loraOrder: loraOrderOf(tokens) });
}

describe("--lora and --lora-scaled", () => {
  it("number the adapters in command-line order, as llama.cpp does", () => {
    expect(adapters(["--lora-scaled", "b.gguf:0.5", "--lora", "a.gguf", "--lora=c.gguf", "--lora-scaled=d.gguf:2"])).toEqual([
      { path: "b.gguf", scale: 0.5 },
      { path: "a.gguf" },
      { path: "c.gguf" },
      { path: "d.gguf", scale: 2 },
    ]);
    expect(adapters(["--lora", "a.gguf", "--lora-init-without-apply", "--lora-scaled", "b.gguf:3"])).toEqual([
      { path: "a.gguf", scale: 0 },
      { path: "b.gguf", scale: 0 },
    ]);
    expect(adapters([])).toBeUndefined();
    // Without the order (a caller that did not ask parseArgs for tokens): --lora's first.
    expect(parseLoraArguments({ lora: ["a.gguf"], "lora-scaled": ["b.gguf:1"] })).toEqual([{ path: "a.gguf" }, { path: "b.gguf", scale: 1 }]);
  });
});
