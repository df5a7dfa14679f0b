import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GGMLType } from "./ggml-type";
import { GGUFError } from "./gguf-error";
import { type GGUFValue, ggufValue } from "./gguf-value";
import { readGGUF } from "./read-gguf";
import { writeGGUF, writeGGUFFile } from "./write-gguf";

function sampleMetadata(): Map<string, GGUFValue> {
  return new Map<string, GGUFValue>([
    ["general.architecture", ggufValue.string("qwen3")],
    ["test.uint8", ggufValue.uint8(255)],
    ["test.int8", ggufValue.int8(-128)],
    ["test.uint16", ggufValue.uint16(65535)],
    ["test.int16", ggufValue.int16(-32768)],
    ["test.uint32", ggufValue.uint32(4294967295)],
    ["test.int32", ggufValue.int32(-2147483648)],
    ["test.float32", ggufValue.float32(Math.fround(3.14159))],
    ["test.bool.true", ggufValue.bool(true)],
    ["test.bool.false", ggufValue.bool(false)],
    ["test.string", ggufValue.string("héllo, 世界 🙂")],
    ["test.string.empty", ggufValue.string("")],
    ["test.uint64", ggufValue.uint64(18446744073709551615n)],
    ["test.int64", ggufValue.int64(-9223372036854775808n)],
    ["test.float64", ggufValue.float64(-1e300)],
    ["test.array.uint8", ggufValue.array("uint8", Uint8Array.of(0, 1, 255))],
    ["test.array.int8", ggufValue.array("int8", Int8Array.of(-128, 0, 127))],
    ["test.array.uint16", ggufValue.array("uint16", Uint16Array.of(1, 65535))],
    ["test.array.int16", ggufValue.array("int16", Int16Array.of(-32768, 32767))],
    ["test.array.uint32", ggufValue.array("uint32", Uint32Array.of(7, 4294967295))],
    ["test.array.int32", ggufValue.array("int32", Int32Array.of(-5, 5))],
    ["test.array.float32", ggufValue.array("float32", Float32Array.of(0.5, -0))],
    ["test.array.float64", ggufValue.array("float64", Float64Array.of(Math.PI))],
    ["test.array.uint64", ggufValue.array("uint64", BigUint64Array.of(0n, 2n ** 64n - 1n))],
    ["test.array.int64", ggufValue.array("int64", BigInt64Array.of(-(2n ** 63n), 42n))],
    ["test.array.bool", ggufValue.array("bool", [true, false, true])],
    ["test.array.string", ggufValue.stringArray(["a", "", "Ġthe", "<|im_end|>"])],
    ["test.array.empty", ggufValue.array("int32", new Int32Array(0))],
    [
      "test.array.nested",
      ggufValue.array("array", [
        ggufValue.array("int32", Int32Array.of(1, 2)),
        ggufValue.array("array", [ggufValue.stringArray(["deep"])]),
      ]),
    ],
  ]);
}

function f32Bytes(values: number[]): Uint8Array {
  return new Uint8Array(Float32Array.from(values).buffer);
}

describe("GGUF writer and reader", () => {
  it("round-trips every metadata value type, including arrays of arrays", () => {
    const metadata = sampleMetadata();
    const file = readGGUF(writeGGUF({ metadata }));
    expect(file.version).toBe(3);
    expect(file.alignment).toBe(32);
    expect([...file.metadata.keys()]).toEqual([...metadata.keys()]);
    for (const [key, value] of metadata) expect(file.metadata.get(key), key).toEqual(value);
    expect(file.getNumber("test.uint32")).toBe(4294967295);
    expect(file.getString("test.string")).toBe("héllo, 世界 🙂");
    expect(file.getBoolean("test.bool.true")).toBe(true);
    expect(() => file.getNumber("test.uint64")).toThrow(GGUFError);
    expect(() => file.getString("test.uint8")).toThrow(/expected a string, found uint8/);
  });

  it("round-trips tensors of several types with alignment padding and zero-copy data", () => {
    const q8 = new Uint8Array(34 * 2).map((_, i) => (i * 37) & 0xff);
    const tensors = [
      { name: "a.weight", type: GGMLType.F32, shape: [3, 2], data: f32Bytes([1, 2, 3, 4, 5, 6]) },
      { name: "b.weight", type: GGMLType.Q8_0, shape: [64], data: q8 },
      { name: "c.bias", type: GGMLType.F16, shape: [5], data: new Uint8Array(10).fill(0x3c) },
    ];
    const metadata = new Map<string, GGUFValue>([["general.alignment", ggufValue.uint32(64)]]);
    const bytes = writeGGUF({ metadata, tensors });
    const file = readGGUF(bytes);
    expect(file.alignment).toBe(64);
    expect(file.dataOffset % 64).toBe(0);
    expect(file.tensors.map((t) => [t.name, t.type, t.shape, t.offset, t.byteSize])).toEqual([
      ["a.weight", GGMLType.F32, [3, 2], 0, 24],
      ["b.weight", GGMLType.Q8_0, [64], 64, 68],
      ["c.bias", GGMLType.F16, [5], 192, 10],
    ]);
    for (const t of tensors) {
      const data = file.tensorData(t.name);
      expect(data).toEqual(t.data);
      expect(data.buffer).toBe(bytes.buffer);
    }
    expect(writeGGUF({ metadata: file.metadata, tensors: file.tensors.map((t) => ({ ...t, data: file.tensorData(t) })) })).toEqual(bytes);
  });

  it("writes version 2 when asked and reads it back", () => {
    const file = readGGUF(writeGGUF({ version: 2, metadata: { "general.name": ggufValue.string("v2") } }));
    expect(file.version).toBe(2);
    expect(file.getString("general.name")).toBe("v2");
  });

  it("refuses to write tensors whose data does not match type and shape", () => {
    expect(() => writeGGUF({ metadata: {}, tensors: [{ name: "x", type: GGMLType.F32, shape: [4], data: new Uint8Array(12) }] })).toThrow(
      /12 bytes of data given, its type and shape need 16/,
    );
    expect(() => writeGGUF({ metadata: {}, tensors: [{ name: "x", type: GGMLType.Q4_0, shape: [16], data: new Uint8Array(9) }] })).toThrow(
      /not a multiple of the q4_0 block size 32/,
    );
  });

  it("writes a tensor given in pieces, in memory and to a file, and refuses pieces that do not add up", async () => {
    const bytes = Uint8Array.from({ length: 64 }, (_, i) => i);
    const pieces = () => [bytes.subarray(0, 10), bytes.subarray(10, 40), bytes.subarray(40)];
    const whole = writeGGUF({ metadata: {}, tensors: [{ name: "x", type: GGMLType.F32, shape: [16], data: bytes }] });
    expect(writeGGUF({ metadata: {}, tensors: [{ name: "x", type: GGMLType.F32, shape: [16], data: pieces }] })).toEqual(whole);
    const path = join(mkdtempSync(join(tmpdir(), "memra-gguf-pieces-")), "pieces.gguf");
    await writeGGUFFile(path, { metadata: {}, tensors: [{ name: "x", type: GGMLType.F32, shape: [16], data: pieces }] });
    expect(new Uint8Array(readFileSync(path))).toEqual(whole);
    expect(() => writeGGUF({ metadata: {}, tensors: [{ name: "x", type: GGMLType.F32, shape: [16], data: () => [bytes, bytes.subarray(0, 4)] }] })).toThrow(
      /tensor "x": at least 68 bytes of data given, its type and shape need 64/,
    );
    expect(() => writeGGUF({ metadata: {}, tensors: [{ name: "x", type: GGMLType.F32, shape: [16], data: () => [bytes.subarray(0, 60)] }] })).toThrow(
      /tensor "x": 60 bytes of data given, its type and shape need 64/,
    );
  });

  it("produces the JSON shape of memra inspect", () => {
    const file = readGGUF(
      writeGGUF({
        metadata: { "general.architecture": ggufValue.string("qwen3"), "x.big": ggufValue.uint64(2n ** 60n) },
        tensors: [{ name: "t", type: GGMLType.Q4_K, shape: [256, 2], data: new Uint8Array(288) }],
      }),
    );
    expect(JSON.parse(JSON.stringify(file.toJSON()))).toEqual({
      version: 3,
      alignment: 32,
      metadata: { "general.architecture": "qwen3", "x.big": "1152921504606846976" },
      tensors: [{ name: "t", type: "q4_K", shape: [256, 2], offset: 0 }],
    });
  });
});
