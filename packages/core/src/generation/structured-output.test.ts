import { GrammarSyntaxError, JsonSchemaError } from "@memra/sampler";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { type Model, loadModel } from "../load-model";
import { InvalidOptionError } from "./generation-options";
import { StructuredOutputError } from "./output-constraint";

let model: Model;

beforeAll(async () => {
  model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
});

const Person = z.object({
  name: z.string().min(1).max(10),
  age: z.number().int().min(0).max(120),
  role: z.enum(["admin", "user"]).optional(),
  tags: z.array(z.string().max(4)).max(3),
  manager: z.object({ name: z.string().max(6) }).nullable(),
});

describe("model.complete / model.generate with a schema", () => {
  it("gives a value that zod validates, for many seeds at temperature 1 (random weights), lazy and full", async () => {
    for (let seed = 1; seed <= 10; seed++) {
      const result = await model.complete("Describe a person as JSON:", {
        schema: Person,
        temperature: 1,
        topK: 0,
        topP: 1,
        minP: 0,
        seed,
        maxTokens: 400,
        grammarMode: seed % 2 === 0 ? "full" : "lazy",
      });
      // Typed by the schema: no cast needed.
      const age: number = result.value.age;
      expect(Number.isInteger(age)).toBe(true);
      expect(Person.parse(JSON.parse(result.text))).toEqual(result.value);
      expect(result.finishReason).toBe("stop");
    }
  }, 120_000);

  it("streams text that adds up to the result, and ends as soon as the value is complete", async () => {
    const stream = model.generate("Answer:", { schema: z.object({ ok: z.boolean() }), seed: 3, temperature: 1, maxTokens: 100 });
    let text = "";
    for await (const chunk of stream) text += chunk.text;
    const result = await stream.result;
    expect(result.text).toBe(text);
    expect(typeof result.value.ok).toBe("boolean");
    expect(result.finishReason).toBe("stop");
    expect(result.tokens.length).toBeLessThan(100);
  });

  it("takes a JSON schema object and returns the parsed JSON", async () => {
    const schema = { type: "array", items: { type: "integer", minimum: 0, maximum: 99 }, minItems: 2, maxItems: 4 };
    for (let seed = 1; seed <= 4; seed++) {
      const result = await model.complete("Numbers:", { schema, seed, temperature: 1, maxTokens: 200 });
      const value = result.value as number[];
      expect(value.length).toBeGreaterThanOrEqual(2);
      expect(value.length).toBeLessThanOrEqual(4);
      for (const n of value) expect(Number.isInteger(n) && n >= 0 && n <= 99).toBe(true);
    }
  });

  it("follows a GBNF grammar, the value being the text", async () => {
    const grammar = 'root ::= "move: " [a-h] [1-8] ("x" [a-h] [1-8])?';
    for (let seed = 1; seed <= 4; seed++) {
      const result = await model.complete("Chess", { grammar, seed, temperature: 1, maxTokens: 40 });
      expect(result.text).toMatch(/^move: [a-h][1-8](x[a-h][1-8])?$/);
      expect(result.value).toBe(result.text);
    }
  });

  it("fails with a clear error when generation stops before the value is complete", async () => {
    const promise = model.complete("x", { schema: z.object({ text: z.string().min(50) }), seed: 1, temperature: 1, maxTokens: 3 });
    await expect(promise).rejects.toThrow(StructuredOutputError);
    await expect(promise).rejects.toThrow(/generation ended \(length\) before the output was complete/);
  });

  it("rejects bad schemas, bad grammars and conflicting options before generating", async () => {
    expect(() => model.generate("x", { schema: z.object({ when: z.date() }) })).toThrow(JsonSchemaError);
    expect(() => model.generate("x", { grammar: 'root ::= "a' })).toThrow(GrammarSyntaxError);
    expect(() => model.generate("x", { grammar: 'root ::= "a"', schema: { type: "string" } })).toThrow(InvalidOptionError);
    expect(() => model.generate("x", { schema: 42 as unknown as object })).toThrow(/schema must be a zod schema or a JSON schema object/);
  });
});
