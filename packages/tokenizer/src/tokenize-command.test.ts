import { describe, expect, it } from "vitest";
import { byteChar, toyVocabulary } from "./__fixtures__/toy-vocabulary";
import { TokenType } from "./token-attributes";
import { runTokenizeCommand } from "./tokenize-command";
import { Tokenizer } from "./tokenizer";

const tokenizer = Tokenizer.fromVocabulary(
  toyVocabulary({ merges: ["h i", `${byteChar(0x20)} hi`], specials: [{ text: "<|im_end|>", type: TokenType.CONTROL }] }),
);
const HI = 256;
const SPACE_HI = 257;
const IM_END = 258;

async function run(options: Parameters<typeof runTokenizeCommand>[1], lines?: string[]): Promise<string> {
  let out = "";
  await runTokenizeCommand(tokenizer, options, { write: (text) => (out += text), ...(lines ? { lines } : {}) });
  return out;
}

describe("runTokenizeCommand (memra tokenize)", () => {
  it("prints one `id -> 'piece'` line per token, parsing special tokens by default", async () => {
    expect(await run({ text: "hi hi<|im_end|>" })).toBe(`   ${HI} -> 'hi'\n   ${SPACE_HI} -> ' hi'\n   ${IM_END} -> '<|im_end|>'\n`);
  });

  it("--no-special tokenizes special tokens as text", async () => {
    expect(await run({ text: "<|im_end|>", special: false, json: true })).not.toContain(String(IM_END));
  });

  it("--json prints the ids as JSON", async () => {
    expect(await run({ text: "hi hi", json: true })).toBe(`{"ids":[${HI},${SPACE_HI}]}\n`);
  });

  it("--jsonl prints one JSON line per JSON string line, skipping blank lines", async () => {
    expect(await run({ jsonl: true }, ['"hi"', "", '" hi<|im_end|>"'])).toBe(`{"ids":[${HI}]}\n{"ids":[${SPACE_HI},${IM_END}]}\n`);
  });

  it("names the bad input", async () => {
    await expect(run({})).rejects.toThrow(/--text: missing/);
    await expect(run({ jsonl: true }, ["hi"])).rejects.toThrow(/line 1 is not JSON/);
    await expect(run({ jsonl: true }, ["42"])).rejects.toThrow(/line 1 is not a JSON string/);
    await expect(run({ jsonl: true })).rejects.toThrow(/no input lines/);
  });
});
