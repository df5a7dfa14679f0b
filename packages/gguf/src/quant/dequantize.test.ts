import { describe, expect, it } from "vitest";
import { GGMLType } from "../ggml-type";
import { canDequantize, dequantize } from "./dequantize";
import { UnsupportedTypeError } from "./unsupported-type-error";
import { seededUniform } from "./seeded-random";

// Each test builds blocks byte by byte from the layout in ggml-common.h and computes the expected
// floats from the format's formula directly, element by element. Scales are chosen as powers of two
// (or small multiples) so that the formula is exact in doubles and no rounding order is involved,
// except in the test that pins down ggml's float operation order.

const HALF_ONE_QUARTER = 0x3400; // 0.25
const HALF_ONE_HALF = 0x3800; // 0.5
const HALF_ONE = 0x3c00; // 1
const HALF_TWO = 0x4000; // 2
const HALF_MINUS_ONE = 0xbc00; // -1
const HALF_ONE_EIGHTH = 0x3000; // 0.125

/** Little-endian byte writer for hand-built blocks. */
class BlockWriter {
  readonly bytes: Uint8Array;
  private offset = 0;
  constructor(size: number) {
    this.bytes = new Uint8Array(size);
  }
  u8(...values: number[]): this {
    for (const value of values) this.bytes[this.offset++] = value & 0xff;
    return this;
  }
  u16(value: number): this {
    return this.u8(value, value >>> 8);
  }
  u32(value: number): this {
    return this.u8(value, value >>> 8, value >>> 16, value >>> 24);
  }
  done(): Uint8Array {
    expect(this.offset).toBe(this.bytes.length);
    return this.bytes;
  }
}

function randomBytes(count: number, seed: number): number[] {
  const uniform = seededUniform(seed);
  return Array.from({ length: count }, () => Math.floor(uniform() * 256));
}

function expectSameFloats(actual: Float32Array, expected: number[]): void {
  expect(actual.length).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) {
    if (!Object.is(actual[i], Math.fround(expected[i]!))) {
      throw new Error(`element ${i}: got ${actual[i]}, expected ${expected[i]}`);
    }
  }
}

const bit = (byte: number, index: number) => (byte >> index) & 1;
const signed8 = (byte: number) => (byte >= 128 ? byte - 256 : byte);

/** The 12-byte k-quant scale block for eight 6-bit scales and mins, packed as get_scale_min_k4 reads them. */
function packScalesAndMins(scales: number[], mins: number[]): number[] {
  const packed = new Array<number>(12).fill(0);
  for (let j = 0; j < 8; j++) {
    if (j < 4) {
      packed[j] = scales[j]!;
      packed[j + 4] = mins[j]!;
    } else {
      packed[j + 4] = (scales[j]! & 15) | ((mins[j]! & 15) << 4);
      packed[j - 4]! |= (scales[j]! >> 4) << 6;
      packed[j]! |= (mins[j]! >> 4) << 6;
    }
  }
  return packed;
}

const IQ4_LEVELS = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

describe("dequantize plain types", () => {
  it("f32 copies the bytes exactly, NaN payloads included, from an unaligned view", () => {
    const words = [0x3fc00000, 0xc0000000, 0x7fc12345, 0x80000000, 0x00000001];
    const raw = new BlockWriter(21).u8(0xee);
    for (const word of words) raw.u32(word);
    const out = dequantize(GGMLType.F32, raw.done().subarray(1), 5);
    expect(Array.from(new Uint32Array(out.buffer))).toEqual(words);
  });

  it("f16 converts each half", () => {
    const halves = [HALF_ONE, 0xc000, 0x0001, 0x7c00, 0x7bff, 0x8000, 0x3555];
    const raw = new BlockWriter(14);
    for (const h of halves) raw.u16(h);
    expectSameFloats(dequantize(GGMLType.F16, raw.done(), 7), [1, -2, 2 ** -24, Infinity, 65504, -0, 0.333251953125]);
  });

  it("f16 and bf16 read the same from aligned and unaligned views", () => {
    const bytes = new Uint8Array(randomBytes(2 * 1000 + 1, 3));
    for (const type of [GGMLType.F16, GGMLType.BF16]) {
      const aligned = new Uint8Array(bytes.subarray(1)); // copy: offset 0
      const a = new Uint32Array(dequantize(type, aligned, 1000).buffer);
      const b = new Uint32Array(dequantize(type, bytes.subarray(1), 1000).buffer);
      expect(Array.from(b)).toEqual(Array.from(a));
    }
  });

  it("bf16 puts the 16 bits at the top of a float32", () => {
    const raw = new BlockWriter(8).u16(0x3f80).u16(0xc040).u16(0x7f80).u16(0x0001);
    expectSameFloats(dequantize(GGMLType.BF16, raw.done(), 4), [1, -3, Infinity, 2 ** -133]);
  });

  it("f64, i8, i16 and i32 convert to the nearest float", () => {
    const f64 = new Uint8Array(new Float64Array([0.1, -2.5, 1e300]).buffer);
    expectSameFloats(dequantize(GGMLType.F64, f64, 3), [0.1, -2.5, Infinity]);
    expectSameFloats(dequantize(GGMLType.I8, new Uint8Array([0, 127, 128, 255]), 4), [0, 127, -128, -1]);
    const i16 = new BlockWriter(6).u16(0x7fff).u16(0x8000).u16(0xfffe).done();
    expectSameFloats(dequantize(GGMLType.I16, i16, 3), [32767, -32768, -2]);
    const i32 = new BlockWriter(12).u32(16777217).u32(0x80000000).u32(0xfffffff9).done();
    expectSameFloats(dequantize(GGMLType.I32, i32, 3), [16777216, -2147483648, -7]);
  });
});

describe("dequantize 32-element blocks", () => {
  it("q4_0: (nibble - 8) * d, low nibbles are elements 0-15", () => {
    const qs = Array.from({ length: 16 }, (_, j) => j | ((15 - j) << 4));
    const block = new BlockWriter(18).u16(HALF_ONE_HALF).u8(...qs).done();
    const expected = [...qs.map((b) => ((b & 15) - 8) * 0.5), ...qs.map((b) => ((b >> 4) - 8) * 0.5)];
    expectSameFloats(dequantize(GGMLType.Q4_0, block, 32), expected);
  });

  it("q4_1: nibble * d + m", () => {
    const qs = randomBytes(16, 41);
    const block = new BlockWriter(20).u16(HALF_ONE_QUARTER).u16(HALF_MINUS_ONE).u8(...qs).done();
    const expected = [...qs.map((b) => (b & 15) * 0.25 - 1), ...qs.map((b) => (b >> 4) * 0.25 - 1)];
    expectSameFloats(dequantize(GGMLType.Q4_1, block, 32), expected);
  });

  it("q5_0: (nibble + 16 * bit j of qh - 16) * d", () => {
    const qs = randomBytes(16, 50);
    const qh = 0xa5c3f00f;
    const block = new BlockWriter(22).u16(HALF_ONE_HALF).u32(qh).u8(...qs).done();
    const expected: number[] = [];
    for (let i = 0; i < 32; i++) {
      const nibble = i < 16 ? qs[i]! & 15 : qs[i - 16]! >> 4;
      expected.push((nibble + 16 * ((qh >>> i) & 1) - 16) * 0.5);
    }
    expectSameFloats(dequantize(GGMLType.Q5_0, block, 32), expected);
  });

  it("q5_1: (nibble + 16 * bit j of qh) * d + m", () => {
    const qs = randomBytes(16, 51);
    const qh = 0x5a3c0ff0;
    const block = new BlockWriter(24).u16(HALF_ONE_EIGHTH).u16(HALF_TWO).u32(qh).u8(...qs).done();
    const expected: number[] = [];
    for (let i = 0; i < 32; i++) {
      const nibble = i < 16 ? qs[i]! & 15 : qs[i - 16]! >> 4;
      expected.push((nibble + 16 * ((qh >>> i) & 1)) * 0.125 + 2);
    }
    expectSameFloats(dequantize(GGMLType.Q5_1, block, 32), expected);
  });

  it("q8_0: int8 * d, two blocks in a row", () => {
    const first = Array.from({ length: 32 }, (_, j) => (j * 8 + 128) & 0xff); // -128, -120, ..., 120
    const second = randomBytes(32, 80);
    const blocks = new BlockWriter(68).u16(HALF_ONE_HALF).u8(...first).u16(HALF_MINUS_ONE).u8(...second).done();
    const expected = [...first.map((b) => signed8(b) * 0.5), ...second.map((b) => -signed8(b))];
    expect(expected[0]).toBe(-64);
    expectSameFloats(dequantize(GGMLType.Q8_0, blocks, 64), expected);
  });

  it("iq4_nl: d * level[code] from the non-linear table", () => {
    const qs = Array.from({ length: 16 }, (_, j) => j | ((15 - j) << 4));
    const block = new BlockWriter(18).u16(HALF_ONE_HALF).u8(...qs).done();
    const expected = [...qs.map((b) => IQ4_LEVELS[b & 15]! * 0.5), ...qs.map((b) => IQ4_LEVELS[b >> 4]! * 0.5)];
    expectSameFloats(dequantize(GGMLType.IQ4_NL, block, 32), expected);
  });
});

describe("dequantize 256-element super-blocks", () => {
  it("q2_K: d * scale * q - dmin * min, per 16 elements", () => {
    const scales = randomBytes(16, 20); // low nibble scale, high nibble min
    const qs = randomBytes(64, 21);
    const block = new BlockWriter(84).u8(...scales).u8(...qs).u16(HALF_ONE_HALF).u16(HALF_ONE_QUARTER).done();
    const expected: number[] = [];
    for (let i = 0; i < 256; i++) {
      // 128-element halves; within a half, 2-bit plane (i % 128) / 32 of byte 32 * half + i % 32.
      const half = Math.floor(i / 128);
      const plane = Math.floor((i % 128) / 32);
      const q = (qs[32 * half + (i % 32)]! >> (2 * plane)) & 3;
      const scale = scales[Math.floor(i / 16)]!;
      expected.push(0.5 * (scale & 15) * q - 0.25 * (scale >> 4));
    }
    expectSameFloats(dequantize(GGMLType.Q2_K, block, 256), expected);
  });

  it("q3_K: d * (scale - 32) * (low 2 bits - 4 unless the hmask bit is set)", () => {
    const chosenScales = Array.from({ length: 16 }, (_, j) => (j * 13 + 5) % 64); // 6-bit, stored + 32
    const packed = new Array<number>(12).fill(0);
    for (let j = 0; j < 16; j++) {
      const s = chosenScales[j]!;
      if (j < 8) packed[j]! |= s & 15;
      else packed[j - 8]! |= (s & 15) << 4;
      packed[8 + (j % 4)]! |= (s >> 4) << (2 * Math.floor(j / 4));
    }
    const hmask = randomBytes(32, 30);
    const qs = randomBytes(64, 31);
    const block = new BlockWriter(110).u8(...hmask).u8(...qs).u8(...packed).u16(HALF_ONE_QUARTER).done();
    const expected: number[] = [];
    for (let i = 0; i < 256; i++) {
      const half = Math.floor(i / 128);
      const plane = Math.floor((i % 128) / 32);
      const low = (qs[32 * half + (i % 32)]! >> (2 * plane)) & 3;
      const high = bit(hmask[i % 32]!, 4 * half + plane);
      expected.push(0.25 * (chosenScales[Math.floor(i / 16)]! - 32) * (low - (high ? 0 : 4)));
    }
    expectSameFloats(dequantize(GGMLType.Q3_K, block, 256), expected);
  });

  it("q4_K: d * scale * q - dmin * min, per 32 elements, scales from get_scale_min_k4", () => {
    const scales = [1, 63, 17, 40, 33, 2, 62, 48];
    const mins = [0, 5, 63, 32, 16, 47, 1, 60];
    const qs = randomBytes(128, 40);
    const block = new BlockWriter(144)
      .u16(HALF_ONE_QUARTER)
      .u16(HALF_ONE_HALF)
      .u8(...packScalesAndMins(scales, mins))
      .u8(...qs)
      .done();
    const expected: number[] = [];
    for (let i = 0; i < 256; i++) {
      // 64 elements per 32 bytes: low nibbles, then high nibbles.
      const byte = qs[32 * Math.floor(i / 64) + (i % 32)]!;
      const q = i % 64 < 32 ? byte & 15 : byte >> 4;
      const sub = Math.floor(i / 32);
      expected.push(0.25 * scales[sub]! * q - 0.5 * mins[sub]!);
    }
    expectSameFloats(dequantize(GGMLType.Q4_K, block, 256), expected);
  });

  it("q5_K: as q4_K with a fifth bit from qh bit (element / 32)", () => {
    const scales = [7, 0, 63, 21, 36, 44, 9, 58];
    const mins = [63, 12, 0, 30, 41, 2, 55, 19];
    const qh = randomBytes(32, 50);
    const qs = randomBytes(128, 51);
    const block = new BlockWriter(176)
      .u16(HALF_ONE_EIGHTH)
      .u16(HALF_ONE)
      .u8(...packScalesAndMins(scales, mins))
      .u8(...qh)
      .u8(...qs)
      .done();
    const expected: number[] = [];
    for (let i = 0; i < 256; i++) {
      const byte = qs[32 * Math.floor(i / 64) + (i % 32)]!;
      const low = i % 64 < 32 ? byte & 15 : byte >> 4;
      const sub = Math.floor(i / 32);
      const q = low + 16 * bit(qh[i % 32]!, sub);
      expected.push(0.125 * scales[sub]! * q - mins[sub]!);
    }
    expectSameFloats(dequantize(GGMLType.Q5_K, block, 256), expected);
  });

  it("q6_K: d * int8 scale * (6-bit q - 32), per 16 elements", () => {
    const ql = randomBytes(128, 60);
    const qh = randomBytes(64, 61);
    const scales = [127, 128, 255, 1, 0, 64, 200, 17, 99, 180, 3, 250, 33, 77, 140, 5]; // as int8
    const block = new BlockWriter(210).u8(...ql).u8(...qh).u8(...scales).u16(HALF_ONE_QUARTER).done();
    const expected: number[] = [];
    for (let i = 0; i < 256; i++) {
      // Per 128-element half: 64 ql bytes (quarters 0,1 in low nibbles, 2,3 in high) and 32 qh bytes.
      const half = Math.floor(i / 128);
      const quarter = Math.floor((i % 128) / 32);
      const l = i % 32;
      const lowByte = ql[64 * half + 32 * (quarter % 2) + l]!;
      const low = quarter < 2 ? lowByte & 15 : lowByte >> 4;
      const high = (qh[32 * half + l]! >> (2 * quarter)) & 3;
      expected.push(0.25 * signed8(scales[Math.floor(i / 16)]!) * ((low | (high << 4)) - 32));
    }
    expectSameFloats(dequantize(GGMLType.Q6_K, block, 256), expected);
  });

  it("iq4_xs: d * (6-bit scale - 32) * level[code], per 32 elements", () => {
    const chosenScales = [0, 63, 32, 31, 1, 45, 20, 60];
    let scalesHigh = 0;
    const scalesLow = [0, 0, 0, 0];
    for (let ib = 0; ib < 8; ib++) {
      scalesLow[ib >> 1]! |= (chosenScales[ib]! & 15) << (4 * (ib & 1));
      scalesHigh |= (chosenScales[ib]! >> 4) << (2 * ib);
    }
    const qs = randomBytes(128, 70);
    const block = new BlockWriter(136).u16(HALF_ONE_HALF).u16(scalesHigh).u8(...scalesLow).u8(...qs).done();
    const expected: number[] = [];
    for (let i = 0; i < 256; i++) {
      const sub = Math.floor(i / 32);
      const byte = qs[16 * sub + (i % 16)]!;
      const code = i % 32 < 16 ? byte & 15 : byte >> 4;
      expected.push(0.5 * (chosenScales[sub]! - 32) * IQ4_LEVELS[code]!);
    }
    expectSameFloats(dequantize(GGMLType.IQ4_XS, block, 256), expected);
  });

  it("rounds the difference d*scale*q - dmin*min once to float32 (the products are exact)", () => {
    // f16 scales with full 11-bit mantissas: d*scale (17 bits) and d*scale*q (22 bits) are exact in
    // float32, so only the subtraction rounds; ggml's float order and a fused multiply-add agree here.
    const d = 0x3555; // 0.333251953125
    const dmin = 0x1155; // 1365 * 2^-21, far below d so that the difference needs more than 24 bits
    const scales = [63, 61, 59, 57, 55, 53, 51, 49];
    const mins = [47, 45, 43, 41, 39, 37, 35, 33];
    const qs = randomBytes(128, 90);
    const block = new BlockWriter(144).u16(d).u16(dmin).u8(...packScalesAndMins(scales, mins)).u8(...qs).done();
    const out = dequantize(GGMLType.Q4_K, block, 256);
    let rounded = 0;
    for (let i = 0; i < 256; i++) {
      const byte = qs[32 * Math.floor(i / 64) + (i % 32)]!;
      const q = i % 64 < 32 ? byte & 15 : byte >> 4;
      const sub = Math.floor(i / 32);
      const exact = 0.333251953125 * scales[sub]! * q - 1365 * 2 ** -21 * mins[sub]!;
      expect(out[i]).toBe(Math.fround(exact));
      if (Math.fround(exact) !== exact) rounded++;
    }
    expect(rounded).toBeGreaterThan(100); // the data does exercise the rounding
  });
});

describe("dequantize arguments", () => {
  it("writes into a given output array and returns it", () => {
    const out = new Float32Array(40).fill(7);
    const block = new BlockWriter(34).u16(HALF_ONE).u8(...Array.from({ length: 32 }, (_, j) => j)).done();
    const result = dequantize(GGMLType.Q8_0, block, 32, out);
    expect(result).toBe(out);
    expect(out[31]).toBe(31);
    expect(out[32]).toBe(7);
  });

  it("writes into an output view at a non-zero offset", () => {
    const backing = new Float32Array(10).fill(-1);
    const view = backing.subarray(3, 7);
    dequantize(GGMLType.F16, new BlockWriter(8).u16(HALF_ONE).u16(HALF_TWO).u16(0x7c01).u16(0x8000).done(), 4, view);
    expect(Array.from(backing.subarray(0, 5))).toEqual([-1, -1, -1, 1, 2]);
    expect(new Uint32Array(backing.buffer)[5]).toBe(0x7fc02000);
    expect(Object.is(backing[6], -0)).toBe(true);
    expect(backing[7]).toBe(-1);
  });

  it("ignores bytes beyond the requested elements and accepts zero elements", () => {
    const bytes = new BlockWriter(36).u16(HALF_ONE).u8(...new Array<number>(32).fill(1)).u8(9, 9).done();
    expect(dequantize(GGMLType.Q8_0, bytes, 32).length).toBe(32);
    expect(dequantize(GGMLType.Q4_K, new Uint8Array(0), 0).length).toBe(0);
  });

  it("rejects a buffer shorter than the elements need, naming the sizes", () => {
    expect(() => dequantize(GGMLType.Q4_K, new Uint8Array(143), 256)).toThrow(RangeError);
    expect(() => dequantize(GGMLType.Q4_K, new Uint8Array(287), 512)).toThrow(/512 q4_K elements need 288 bytes, but data has 287/);
    expect(() => dequantize(GGMLType.F32, new Uint8Array(7), 2)).toThrow(RangeError);
  });

  it("rejects an element count that is not a whole number of blocks", () => {
    expect(() => dequantize(GGMLType.Q8_0, new Uint8Array(100), 33)).toThrow(RangeError);
    expect(() => dequantize(GGMLType.Q6_K, new Uint8Array(1000), 128)).toThrow(/128 is not a multiple of the q6_K block size 256/);
    expect(() => dequantize(GGMLType.F32, new Uint8Array(100), -4)).toThrow(RangeError);
    expect(() => dequantize(GGMLType.F32, new Uint8Array(100), 1.5)).toThrow(RangeError);
  });

  it("rejects an output array that is too short", () => {
    expect(() => dequantize(GGMLType.F32, new Uint8Array(16), 4, new Float32Array(3))).toThrow(RangeError);
  });

  it("rejects unsupported and unknown types with the ggml type name", () => {
    expect(() => dequantize(GGMLType.TQ1_0, new Uint8Array(54), 256)).toThrow(UnsupportedTypeError);
    expect(() => dequantize(GGMLType.TQ1_0, new Uint8Array(54), 256)).toThrow(/tq1_0/);
    expect(() => dequantize(GGMLType.Q8_1, new Uint8Array(36), 32)).toThrow(/q8_1/);
    expect(() => dequantize(99, new Uint8Array(4), 1)).toThrow(/unknown ggml type id 99/);
    const error = (() => {
      try {
        dequantize(GGMLType.TQ2_0, new Uint8Array(66), 256);
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(UnsupportedTypeError);
    expect((error as UnsupportedTypeError).type).toBe(GGMLType.TQ2_0);
  });

  it("reports which types it supports", () => {
    const supported = [
      GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.F64, GGMLType.I8, GGMLType.I16, GGMLType.I32,
      GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0, GGMLType.Q2_K, GGMLType.Q3_K,
      GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.IQ2_XXS, GGMLType.IQ2_XS,
      GGMLType.IQ2_S, GGMLType.IQ3_XXS, GGMLType.IQ3_S, GGMLType.IQ1_S, GGMLType.IQ1_M,
    ];
    for (const type of supported) expect(canDequantize(type)).toBe(true);
    for (const type of [GGMLType.Q8_1, GGMLType.Q8_K, GGMLType.TQ1_0, GGMLType.TQ2_0, GGMLType.I64, GGMLType.MXFP4, 99]) {
      expect(canDequantize(type)).toBe(false);
    }
  });
});
