import { describe, expect, it } from "vitest";
import { JsonSchemaError } from "./grammar-error";
import { toolCallGbnf } from "./json-schema-to-gbnf";
import { grammarMatches } from "./__fixtures__/grammar-matches";

const accepts = grammarMatches;

const weather = {
  name: "get_weather",
  parameters: {
    type: "object",
    properties: { city: { type: "string" }, unit: { enum: ["C", "F"] } },
    required: ["city"],
    $defs: { unused: { type: "string" } },
  },
};
const search = { name: "search", parameters: { type: "object", properties: { query: { $ref: "#/$defs/q" } }, required: ["query"], $defs: { q: { type: "string", maxLength: 8 } } } };
const block = (json: string) => `<tool_call>\n${json}\n</tool_call>`;

describe("toolCallGbnf: answers that are only tool calls, Qwen3's format", () => {
  it("accepts the calls Qwen3's template writes, one or (parallel) several", () => {
    const gbnf = toolCallGbnf([weather, search]);
    expect(accepts(gbnf, block('{"name": "get_weather", "arguments": {"city": "Paris"}}'))).toBe(true);
    expect(accepts(gbnf, block('{"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}'))).toBe(true);
    expect(accepts(gbnf, block('{"name": "search", "arguments": {"query": "cats"}}'))).toBe(true);
    const two = `${block('{"name": "search", "arguments": {"query": "a"}}')}\n${block('{"name": "get_weather", "arguments": {"city": "b"}}')}`;
    expect(accepts(gbnf, two)).toBe(true);
    expect(accepts(toolCallGbnf([weather, search], { parallel: false }), two)).toBe(false);
    expect(accepts(toolCallGbnf([weather, search], { parallel: false }), block('{"name": "search", "arguments": {"query": "a"}}'))).toBe(true);
  });

  it("refuses other names, missing or wrong arguments, and text around the calls", () => {
    const gbnf = toolCallGbnf([weather, search]);
    for (const text of [
      block('{"name": "get_time", "arguments": {}}'),
      block('{"name": "get_weather"}'),
      block('{"name": "get_weather", "arguments": {}}'),
      block('{"name": "get_weather", "arguments": {"city": 3}}'),
      block('{"name": "get_weather", "arguments": {"city": "x", "unit": "K"}}'),
      block('{"name": "search", "arguments": {"query": "far too long"}}'),
      block('{"arguments": {"query": "a"}, "name": "search"}'),
      `Sure. ${block('{"name": "search", "arguments": {"query": "a"}}')}`,
      `${block('{"name": "search", "arguments": {"query": "a"}}')} done`,
      "",
    ]) {
      expect(accepts(gbnf, text), text).toBe(false);
    }
  });

  it("each tool's $ref resolves in its own parameters; no parameters means any object", () => {
    // Both tools define a $defs entry; the rules must not collide.
    const other = { name: "other", parameters: { type: "object", properties: { query: { $ref: "#/$defs/q" } }, required: ["query"], $defs: { q: { type: "integer" } } } };
    const gbnf = toolCallGbnf([search, other, { name: "free" }]);
    expect(accepts(gbnf, block('{"name": "search", "arguments": {"query": "x"}}'))).toBe(true);
    expect(accepts(gbnf, block('{"name": "search", "arguments": {"query": 1}}'))).toBe(false);
    expect(accepts(gbnf, block('{"name": "other", "arguments": {"query": 1}}'))).toBe(true);
    expect(accepts(gbnf, block('{"name": "other", "arguments": {"query": "x"}}'))).toBe(false);
    expect(accepts(gbnf, block('{"name": "free", "arguments": {"anything": [1, {"b": null}]}}'))).toBe(true);
    expect(accepts(gbnf, block('{"name": "free", "arguments": [1]}'))).toBe(false);
  });

  it("a schema it cannot enforce is an error pointing into that tool", () => {
    const bad = { name: "bad", parameters: { type: "object", properties: { id: { type: "string", pattern: "^(?![0-9])[a-z]+$" } } } };
    expect(() => toolCallGbnf([weather, bad])).toThrow(JsonSchemaError);
    expect(() => toolCallGbnf([weather, bad])).toThrow("/tools/1/function/parameters/properties/id/pattern");
    expect(() => toolCallGbnf([])).toThrow(JsonSchemaError);
  });
});
