import { describe, expect, it } from "vitest";
import { createSampler } from "../sampler";
import { SeededRandom } from "../seeded-random";
import { qwen3TokenPieces } from "./__fixtures__/qwen3-token-pieces";
import { GrammarMatcher } from "./grammar-matcher";
import { toolCallGbnf } from "./json-schema-to-gbnf";
import { parseGbnf } from "./parse-gbnf";
import { type TriggeredSamplerOptions, createTriggeredSampler } from "./triggered-sampler";

const decoder = new TextDecoder();
const { trie, pieces } = qwen3TokenPieces();
const idOf = (text: string): number => {
  const bytes = new TextEncoder().encode(text);
  const id = pieces.findIndex((piece) => piece !== undefined && piece.length === bytes.length && piece.every((b, i) => b === bytes[i]));
  if (id < 0) throw new Error(`no token ${JSON.stringify(text)}`);
  return id;
};
const grammar = parseGbnf(toolCallGbnf([{ name: "add", parameters: { type: "object", properties: { a: { type: "integer", minimum: 0, maximum: 9 } }, required: ["a"] } }], { parallel: false }));

/**
 * Runs a greedy sampler over logits that favour `script`'s tokens, one per step, then random
 * logits (seeded) once the script is spent; returns the text and the sampler.
 */
function run(script: readonly number[], seed: number, steps = 200, options: TriggeredSamplerOptions = {}) {
  const matcher = GrammarMatcher.create(grammar, trie);
  const sampler = createTriggeredSampler(createSampler({ temperature: 0 }, { vocabularySize: trie.vocabularySize }), matcher, "<tool_call>", options);
  const random = new SeededRandom(seed);
  const logits = new Float32Array(trie.vocabularySize);
  const bytes: number[] = [];
  let ended = false;
  for (let step = 0; step < steps && !sampler.isFinished; step++) {
    for (let i = 0; i < logits.length; i++) logits[i] = random.nextDouble() * 4;
    if (step < script.length) logits[script[step]!] = 100;
    const { token } = sampler.sample(logits, []);
    if (trie.isEndOfGeneration(token)) {
      ended = true;
      break;
    }
    bytes.push(...trie.piece(token));
  }
  return { text: decoder.decode(Uint8Array.from(bytes)), sampler, ended };
}

describe("createTriggeredSampler (llama.cpp's lazy grammar with a word trigger)", () => {
  const hello = [idOf("Hello"), idOf(" world")];

  it("samples freely until the trigger, then only what the grammar allows, to its end", () => {
    for (let seed = 1; seed <= 5; seed++) {
      const { text, sampler } = run([...hello, idOf("<tool_call>")], seed);
      expect(sampler.triggered).toBe(true);
      expect(sampler.isFinished).toBe(true);
      expect(text.startsWith("Hello world<tool_call>\n")).toBe(true);
      const call = text.slice("Hello world".length);
      expect(call).toMatch(/^<tool_call>\n\{"name": "add", "arguments": \{.*\}\s*\}\n<\/tool_call>$/s);
      const args = JSON.parse(call.slice(call.indexOf('"arguments": ') + 13, call.lastIndexOf("}")));
      expect(Number.isInteger(args.a) && args.a >= 0 && args.a <= 9).toBe(true);
    }
  });

  it("finds a trigger spelled over several tokens", () => {
    const { text, sampler } = run([...hello, idOf("<"), idOf("tool"), idOf("_call"), idOf(">")], 7);
    expect(sampler.triggered).toBe(true);
    expect(sampler.isFinished).toBe(true);
    expect(text).toMatch(/^Hello world<tool_call>\n\{"name": "add", "arguments": /);
  });

  it("without the trigger nothing is constrained: the text is the free sampler's", () => {
    const { text, sampler } = run(hello, 3, 12);
    expect(sampler.triggered).toBe(false);
    const free = createSampler({ temperature: 0 }, { vocabularySize: trie.vocabularySize });
    const random = new SeededRandom(3);
    const logits = new Float32Array(trie.vocabularySize);
    const bytes: number[] = [];
    for (let step = 0; step < 12; step++) {
      for (let i = 0; i < logits.length; i++) logits[i] = random.nextDouble() * 4;
      if (step < hello.length) logits[hello[step]!] = 100;
      const { token } = free.sample(logits, []);
      if (trie.isEndOfGeneration(token)) break;
      bytes.push(...trie.piece(token));
    }
    expect(text).toBe(decoder.decode(Uint8Array.from(bytes)));
  });

  it("observe takes a token picked elsewhere into the output, as sample would; after the trigger it refuses", () => {
    const matcher = GrammarMatcher.create(grammar, trie);
    const sampler = createTriggeredSampler(createSampler({ temperature: 0 }, { vocabularySize: trie.vocabularySize }), matcher, "<tool_call>");
    for (const token of [...hello, idOf("<"), idOf("tool")]) sampler.observe(token);
    expect(sampler.triggered).toBe(false);
    sampler.observe(idOf("_call"));
    sampler.observe(idOf(">"));
    expect(sampler.triggered).toBe(true);
    expect(() => sampler.observe(idOf("\n"))).toThrow(/tokens must come from sample/);
  });

  it("end of generation is free before the trigger", () => {
    const eos = trie.endOfGeneration[0]!;
    const { ended, sampler } = run([...hello, eos], 4);
    expect(ended).toBe(true);
    expect(sampler.triggered).toBe(false);
  });

  describe("with a leading think block", () => {
    const think = { leadingBlock: { open: "<think>", close: "</think>" } };
    const callWithin = [idOf("<think>"), idOf("Hello"), idOf("<tool_call>"), idOf(" world"), idOf("</think>"), idOf("\n\n")];

    it("a trigger inside the block does not fire; one after it does", () => {
      const drafted = run(callWithin, 5, callWithin.length, think);
      expect(drafted.text).toBe("<think>Hello<tool_call> world</think>\n\n");
      expect(drafted.sampler.triggered).toBe(false);
      // The same script without the option fires inside the block (and cannot follow " world").
      expect(run(callWithin.slice(0, 3), 5, 3).sampler.triggered).toBe(true);
      const { text, sampler } = run([...callWithin, idOf("<tool_call>")], 5, 200, think);
      expect(sampler.triggered).toBe(true);
      expect(sampler.isFinished).toBe(true);
      expect(text).toMatch(/^<think>Hello<tool_call> world<\/think>\n\n<tool_call>\n\{"name": "add", "arguments": \{.*\}\s*\}\n<\/tool_call>$/s);
    });

    it("the close and the trigger may be split over tokens, or share one", () => {
      const split = [idOf("\n"), idOf("<think>"), idOf("a"), idOf("</"), idOf("think"), idOf(">\n\n"), idOf("<"), idOf("tool"), idOf("_call"), idOf(">")];
      const { text, sampler } = run(split, 6, 200, think);
      expect(sampler.triggered).toBe(true);
      expect(text).toMatch(/^\n<think>a<\/think>\n\n<tool_call>\n\{"name": "add"/);
    });

    it("an output that does not open the block is searched from its start", () => {
      const { text, sampler } = run([idOf("<"), idOf("tool"), idOf("_call"), idOf(">")], 8, 200, think);
      expect(sampler.triggered).toBe(true);
      expect(text).toMatch(/^<tool_call>\n/);
      // "<" could have begun "<think>": the bytes held back while deciding are searched too.
      expect(run([...hello, idOf("<tool_call>")], 9, 200, think).sampler.triggered).toBe(true);
    });
  });
});
