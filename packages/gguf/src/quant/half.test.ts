import { describe, expect, it } from "vitest";
import {
  F16_TO_F32,
  F16_TO_F32_BITS,
  bf16BitsToF32,
  bitsToF32,
  f16BitsToF32,
  f32BitsToBf16Bits,
  f32BitsToF16Bits,
  f32ToBf16Bits,
  f32ToBits,
  f32ToF16Bits,
  roundToF16,
} from "./half";
import { seededUniform } from "./seeded-random";

/** The value of a half bit pattern by the binary16 definition, in doubles. */
function halfValueByDefinition(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const mantissa = h & 0x3ff;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

const isHalfNaN = (h: number) => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;

/** Bits of Math.f16round's result, via the engine's own Float16Array: an independent f16 rounding. */
const engineHalf = new Float16Array(1);
const engineHalfBits = new Uint16Array(engineHalf.buffer);
function engineF16Bits(value: number): number {
  engineHalf[0] = value;
  return engineHalfBits[0]!;
}

describe("f16 -> f32", () => {
  it("matches the binary16 definition for all 65536 bit patterns (NaNs stay NaN)", () => {
    let checked = 0;
    for (let h = 0; h < 65536; h++) {
      const expected = halfValueByDefinition(h);
      if (Number.isNaN(expected)) {
        expect(Number.isNaN(F16_TO_F32[h])).toBe(true);
      } else {
        expect(Object.is(F16_TO_F32[h], expected)).toBe(true);
        checked++;
      }
    }
    expect(checked).toBe(65536 - 2 * 1023);
  });

  it("makes NaNs quiet with the payload shifted up by 13 bits, as ggml does on x86", () => {
    expect(F16_TO_F32_BITS[0x7c01]).toBe(0x7fc02000);
    expect(F16_TO_F32_BITS[0x7e00]).toBe(0x7fc00000);
    expect(F16_TO_F32_BITS[0xfdff]).toBe(0xffffe000);
    expect(f16BitsToF32(0x7c00)).toBe(Infinity);
    expect(f16BitsToF32(0xfc00)).toBe(-Infinity);
  });
});

describe("f32 -> f16", () => {
  it("round-trips every non-NaN half bit pattern exactly", () => {
    for (let h = 0; h < 65536; h++) {
      if (isHalfNaN(h)) continue;
      if (f32ToF16Bits(F16_TO_F32[h]!) !== h) throw new Error(`half 0x${h.toString(16)} did not round-trip`);
    }
  });

  it("rounds to nearest, ties to even", () => {
    expect(f32ToF16Bits(1 + 2 ** -11)).toBe(0x3c00); // tie between 0x3c00 and 0x3c01: even
    expect(f32ToF16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie between 0x3c01 and 0x3c02: even
    expect(f32ToF16Bits(1 + 2 ** -11 + 2 ** -20)).toBe(0x3c01); // just above the tie
    expect(f32ToF16Bits(-(1 + 2 ** -11 - 2 ** -20))).toBe(0xbc00); // just below the tie
    expect(f32ToF16Bits(2049)).toBe(0x6800); // 2048 | 2050: tie, even
    expect(f32ToF16Bits(2051)).toBe(0x6802);
  });

  it("rounds into and out of the subnormal range", () => {
    expect(f32ToF16Bits(2 ** -24)).toBe(0x0001);
    expect(f32ToF16Bits(2 ** -25)).toBe(0x0000); // tie between 0 and the smallest subnormal
    expect(f32ToF16Bits(2 ** -25 + 2 ** -40)).toBe(0x0001);
    expect(f32ToF16Bits(3 * 2 ** -25)).toBe(0x0002); // 1.5 ulp: tie, even
    expect(f32ToF16Bits(-5 * 2 ** -25)).toBe(0x8002); // 2.5 ulp: tie, even
    expect(f32ToF16Bits(1023.5 * 2 ** -24)).toBe(0x0400); // up into the smallest normal
    expect(f32ToF16Bits(2 ** -30)).toBe(0x0000);
    expect(f32ToF16Bits(-(2 ** -30))).toBe(0x8000);
    expect(f32ToF16Bits(1e-45)).toBe(0x0000); // an f32 subnormal
  });

  it("overflows to infinity from 65520 (the tie above 65504) and keeps signed zero and infinities", () => {
    expect(f32ToF16Bits(65504)).toBe(0x7bff);
    expect(f32ToF16Bits(65519.99)).toBe(0x7bff);
    expect(f32ToF16Bits(65520)).toBe(0x7c00);
    expect(f32ToF16Bits(-1e10)).toBe(0xfc00);
    expect(f32ToF16Bits(Infinity)).toBe(0x7c00);
    expect(f32ToF16Bits(-Infinity)).toBe(0xfc00);
    expect(f32ToF16Bits(-0)).toBe(0x8000);
    expect(f32ToF16Bits(0)).toBe(0x0000);
  });

  it("turns every NaN into sign | 0x7e00, dropping the payload as ggml does", () => {
    expect(f32ToF16Bits(NaN)).toBe(0x7e00);
    // Bit-level entry points: a JS NaN value need not keep its sign or payload.
    expect(f32BitsToF16Bits(0x7f800001)).toBe(0x7e00);
    expect(f32BitsToF16Bits(0xffc12345)).toBe(0xfe00);
  });

  it("agrees with the engine's own f16 rounding on random floats and on every midpoint between halves", () => {
    const uniform = seededUniform(99);
    const check = (value: number) => {
      const mine = f32ToF16Bits(value);
      const engine = engineF16Bits(Math.fround(value));
      if (mine !== engine) throw new Error(`${value}: 0x${mine.toString(16)} != 0x${engine.toString(16)}`);
    };
    for (let i = 0; i < 200_000; i++) {
      const bits = Math.floor(uniform() * 2 ** 32);
      if ((bits & 0x7fffffff) > 0x7f800000) continue;
      check(bitsToF32(bits));
    }
    for (let h = 0; h < 0x7c00; h++) {
      const low = F16_TO_F32[h]!;
      const high = h === 0x7bff ? 65536 : F16_TO_F32[h + 1]!;
      const middle = (low + high) / 2; // exact in f32
      for (const value of [middle, bitsToF32(f32ToBits(middle) + 1), bitsToF32(f32ToBits(middle) - 1)]) {
        check(value);
        check(-value);
      }
    }
  });

  it("roundToF16 returns the value of the nearest half", () => {
    expect(roundToF16(0.1)).toBe(0.0999755859375);
    expect(roundToF16(70000)).toBe(Infinity);
  });
});

describe("bf16", () => {
  it("round-trips every non-NaN bf16 bit pattern exactly", () => {
    for (let h = 0; h < 65536; h++) {
      if ((h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0) continue;
      if (f32ToBf16Bits(bf16BitsToF32(h)) !== h) throw new Error(`bf16 0x${h.toString(16)} did not round-trip`);
    }
  });

  it("reads bf16 as the top half of a float32", () => {
    expect(bf16BitsToF32(0x3f80)).toBe(1);
    expect(bf16BitsToF32(0xc040)).toBe(-3);
    expect(bf16BitsToF32(0x0001)).toBe(2 ** -133);
    expect(bf16BitsToF32(0xff80)).toBe(-Infinity);
  });

  it("rounds to nearest, ties to even, including the carry to infinity", () => {
    expect(f32ToBf16Bits(1 + 2 ** -8)).toBe(0x3f80); // tie: even
    expect(f32ToBf16Bits(1 + 3 * 2 ** -8)).toBe(0x3f82); // tie: even
    expect(f32ToBf16Bits(1 + 2 ** -8 + 2 ** -20)).toBe(0x3f81);
    expect(f32ToBf16Bits(-(1 + 2 ** -8 - 2 ** -20))).toBe(0xbf80);
    expect(f32ToBf16Bits(bitsToF32(0x7f7fffff))).toBe(0x7f80); // FLT_MAX rounds up to infinity
    expect(f32ToBf16Bits(bitsToF32(0x00008000))).toBe(0x0000); // subnormal tie: even
    expect(f32ToBf16Bits(bitsToF32(0x00018000))).toBe(0x0002); // subnormal tie: even
    expect(f32ToBf16Bits(-0)).toBe(0x8000);
  });

  it("agrees with nearest-even chosen by comparing candidates, on random floats", () => {
    const uniform = seededUniform(5);
    for (let i = 0; i < 200_000; i++) {
      const bits = Math.floor(uniform() * 2 ** 32);
      if ((bits & 0x7fffffff) >= 0x7f800000) continue;
      const value = bitsToF32(bits);
      const truncated = bits >>> 16;
      const below = bf16BitsToF32(truncated);
      const above = (truncated & 0x7fff) === 0x7f7f ? Math.sign(value) * 2 ** 128 : bf16BitsToF32(truncated + 1);
      const distanceBelow = Math.abs(value - below);
      const distanceAbove = Math.abs(above - value);
      const expected =
        distanceBelow < distanceAbove || (distanceBelow === distanceAbove && (truncated & 1) === 0)
          ? truncated
          : truncated + 1;
      const mine = f32ToBf16Bits(value);
      if (mine !== expected) throw new Error(`0x${bits.toString(16)}: 0x${mine.toString(16)} != 0x${expected.toString(16)}`);
    }
  });

  it("keeps the top 16 bits of a NaN and forces it quiet with bit 6, as ggml does", () => {
    expect(f32BitsToBf16Bits(0x7f800001)).toBe(0x7fc0);
    expect(f32BitsToBf16Bits(0x7f810000)).toBe(0x7fc1);
    expect(f32BitsToBf16Bits(0xffc12345)).toBe(0xffc1);
    expect(f32BitsToBf16Bits(0xff800001)).toBe(0xffc0);
  });
});
