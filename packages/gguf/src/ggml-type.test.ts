import { describe, expect, it } from "vitest";
import { GGML_TYPES, GGMLType, ggmlTypeFromName, ggmlTypeInfo, ggmlTypeName, tensorByteSize } from "./ggml-type";

describe("ggml type table", () => {
  // Sizes follow from the block structs: e.g. q4_K = 2 f16 scales (4) + 12 packed scales + 128 nibble bytes.
  const expected: Record<string, [number, number]> = {
    f32: [1, 4], f16: [1, 2], bf16: [1, 2], f64: [1, 8], i8: [1, 1], i16: [1, 2], i32: [1, 4], i64: [1, 8],
    q4_0: [32, 2 + 16], q4_1: [32, 4 + 16], q5_0: [32, 2 + 4 + 16], q5_1: [32, 4 + 4 + 16],
    q8_0: [32, 2 + 32], q8_1: [32, 4 + 32],
    q2_K: [256, 16 + 64 + 4], q3_K: [256, 32 + 64 + 12 + 2], q4_K: [256, 4 + 12 + 128],
    q5_K: [256, 4 + 12 + 32 + 128], q6_K: [256, 128 + 64 + 16 + 2], q8_K: [256, 4 + 256 + 32],
    iq2_xxs: [256, 2 + 64], iq2_xs: [256, 2 + 64 + 8], iq3_xxs: [256, 2 + 96], iq1_s: [256, 2 + 32 + 16],
    iq4_nl: [32, 2 + 16], iq3_s: [256, 2 + 64 + 8 + 32 + 4], iq2_s: [256, 2 + 64 + 8 + 8],
    iq4_xs: [256, 2 + 2 + 4 + 128], iq1_m: [256, 32 + 16 + 8], tq1_0: [256, 48 + 4 + 2], tq2_0: [256, 64 + 2],
    mxfp4: [32, 1 + 16], nvfp4: [64, 4 + 32], q1_0: [128, 2 + 16], q2_0: [64, 2 + 16],
  };

  it("has every type of today's ggml with the block size and bytes of its block struct", () => {
    expect(GGML_TYPES.map((t) => t.name).sort()).toEqual(Object.keys(expected).sort());
    for (const entry of GGML_TYPES) {
      expect([entry.blockSize, entry.bytesPerBlock], entry.name).toEqual(expected[entry.name]);
      expect(ggmlTypeFromName(entry.name)).toBe(entry.type);
      expect(ggmlTypeName(entry.type)).toBe(entry.name);
    }
  });

  it("rejects the ids ggml removed", () => {
    for (const id of [4, 5, 31, 32, 33, 36, 37, 38, 43, -1]) expect(ggmlTypeInfo(id)).toBeUndefined();
  });

  it("computes tensor sizes and refuses partial blocks", () => {
    expect(tensorByteSize(GGMLType.Q4_K, [1024, 3072])).toBe(3072n * 4n * 144n);
    expect(tensorByteSize(GGMLType.F32, [7, 3, 2])).toBe(168n);
    expect(tensorByteSize(GGMLType.Q8_0, [48, 2])).toBeUndefined();
  });
});
