import { describe, expect, it } from "vitest";
import { GGUFFile } from "./gguf-file";
import type { GGUFValue } from "./gguf-value";
import { MetadataOverrideError, applyMetadataOverrides, parseMetadataOverride, quantizeOverrideValue } from "./metadata-override";

function file(entries: Array<[string, GGUFValue]>): GGUFFile {
  return new GGUFFile({ version: 3, alignment: 32, metadata: new Map(entries), tensors: [], dataOffset: 0, header: new Uint8Array(0) });
}

describe("--override-kv KEY=TYPE:VALUE", () => {
  it("parses llama.cpp's four types", () => {
    expect(parseMetadataOverride("qwen3.context_length=int:65536")).toEqual({ key: "qwen3.context_length", type: "int", value: 65536n });
    expect(parseMetadataOverride("a=int:-3")).toEqual({ key: "a", type: "int", value: -3n });
    expect(parseMetadataOverride("qwen3.rope.freq_base=float:1e6")).toEqual({ key: "qwen3.rope.freq_base", type: "float", value: 1e6 });
    expect(parseMetadataOverride("tokenizer.ggml.add_bos_token=bool:false")).toEqual({ key: "tokenizer.ggml.add_bos_token", type: "bool", value: false });
    expect(parseMetadataOverride("general.name=str:a=b:c")).toEqual({ key: "general.name", type: "str", value: "a=b:c" });
    expect(parseMetadataOverride("general.name=str:")).toEqual({ key: "general.name", type: "str", value: "" });
  });

  it("names what is wrong", () => {
    expect(() => parseMetadataOverride("no-equals")).toThrow(MetadataOverrideError);
    expect(() => parseMetadataOverride("no-equals")).toThrow(/malformed KV override "no-equals": expected KEY=TYPE:VALUE/);
    expect(() => parseMetadataOverride(`${"k".repeat(128)}=int:1`)).toThrow(/a key under 128 bytes/);
    expect(() => parseMetadataOverride("a=int:12abc")).toThrow(/"12abc" is not an integer/);
    expect(() => parseMetadataOverride("a=float:x")).toThrow(/"x" is not a number/);
    expect(() => parseMetadataOverride("a=bool:yes")).toThrow(/a bool is true or false, not "yes"/);
    expect(() => parseMetadataOverride(`a=str:${"x".repeat(128)}`)).toThrow(/cannot exceed 127 bytes/);
    expect(() => parseMetadataOverride("a=u32:1")).toThrow(/the type is int, float, bool or str, not "u32"/);
  });

  it("keeps the file's integer or float type, adds new keys, refuses another type or a value that does not fit", () => {
    const f = file([
      ["qwen3.context_length", { type: "uint32", value: 40960 }],
      ["qwen3.rope.freq_base", { type: "float32", value: 1e6 }],
      ["general.name", { type: "string", value: "x" }],
    ]);
    applyMetadataOverrides(f, ["qwen3.context_length=int:8192", "qwen3.rope.freq_base=float:10000", "new.big=int:9007199254740993", "new.flag=bool:true"].map(parseMetadataOverride));
    expect(f.metadata.get("qwen3.context_length")).toEqual({ type: "uint32", value: 8192 });
    expect(f.metadata.get("qwen3.rope.freq_base")).toEqual({ type: "float32", value: 10000 });
    expect(f.metadata.get("new.big")).toEqual({ type: "int64", value: 9007199254740993n });
    expect(f.getBoolean("new.flag")).toBe(true);
    expect(() => applyMetadataOverrides(f, [parseMetadataOverride("general.name=int:3")])).toThrow(/KV override general\.name: the file's value is a string, the override a int/);
    expect(() => applyMetadataOverrides(f, [parseMetadataOverride("qwen3.context_length=int:-1")])).toThrow(/-1 does not fit the file's uint32/);
    expect(() => applyMetadataOverrides(f, [parseMetadataOverride("qwen3.context_length=float:1.5")])).toThrow(/the file's value is a uint32, the override a float/);
  });

  it("writes into a quantized file as llama-quantize does", () => {
    expect(quantizeOverrideValue(parseMetadataOverride("a=int:-8192"))).toEqual({ type: "uint32", value: 8192 });
    expect(quantizeOverrideValue(parseMetadataOverride("a=int:4294967297"))).toEqual({ type: "uint32", value: 1 });
    expect(quantizeOverrideValue(parseMetadataOverride("a=float:0.1"))).toEqual({ type: "float32", value: 0.1 });
  });
});
