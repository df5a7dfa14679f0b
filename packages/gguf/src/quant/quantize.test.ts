import { describe, expect, it } from "vitest";
import { GGMLType, ggmlTypeInfo } from "../ggml-type";
import { dequantize } from "./dequantize";
import { F16_TO_F32, f32BitsToBf16Bits, f32BitsToF16Bits } from "./half";
import { canQuantize, quantize } from "./quantize";
import { seededNormalValues, seededUniform } from "./seeded-random";
import { UnsupportedTypeError } from "./unsupported-type-error";

const QUANTIZED_TYPES = [
  GGMLType.Q4_0,
  GGMLType.Q4_1,
  GGMLType.Q5_0,
  GGMLType.Q5_1,
  GGMLType.Q8_0,
  GGMLType.Q2_K,
  GGMLType.Q3_K,
  GGMLType.Q4_K,
  GGMLType.Q5_K,
  GGMLType.Q6_K,
];
const ALL_TYPES = [GGMLType.F32, GGMLType.F16, GGMLType.BF16, ...QUANTIZED_TYPES];

const nameOf = (type: GGMLType) => ggmlTypeInfo(type)!.name;

function roundTrip(type: GGMLType, values: Float32Array): Float32Array {
  const bytes = quantize(type, values);
  expect(bytes.length).toBe((values.length / ggmlTypeInfo(type)!.blockSize) * ggmlTypeInfo(type)!.bytesPerBlock);
  return dequantize(type, bytes, values.length);
}

/** sqrt(sum (x - y)^2 / sum x^2). */
function normalisedRmse(x: Float32Array, y: Float32Array): number {
  let error = 0;
  let power = 0;
  for (let i = 0; i < x.length; i++) {
    error += (x[i]! - y[i]!) ** 2;
    power += x[i]! ** 2;
  }
  return Math.sqrt(error / power);
}

/** Values of `count` elements from `element(i)`, as float32. */
function valuesOf(count: number, element: (i: number) => number): Float32Array {
  return Float32Array.from({ length: count }, (_, i) => element(i));
}

describe("quantize -> dequantize round trip", () => {
  // Normalised RMSE measured on these 16384 bell-shaped values (seed 11; seeds 12-13 within 1%):
  // f16 0.00021, bf16 0.00167, q8_0 0.0051, q4_0 0.082, q4_1 0.075, q5_0 0.041, q5_1 0.037,
  // q2_K 0.285, q3_K 0.146, q4_K 0.069, q5_K 0.035, q6_K 0.0172 (for true normal values, about 4%
  // higher, and 30% higher for heavy-tailed ones). The bounds leave about 20% margin.
  const bounds: [GGMLType, number][] = [
    [GGMLType.F32, 0],
    [GGMLType.F16, 0.0003],
    [GGMLType.BF16, 0.0021],
    [GGMLType.Q8_0, 0.0065],
    [GGMLType.Q4_0, 0.1],
    [GGMLType.Q4_1, 0.095],
    [GGMLType.Q5_0, 0.05],
    [GGMLType.Q5_1, 0.045],
    [GGMLType.Q2_K, 0.34],
    [GGMLType.Q3_K, 0.17],
    [GGMLType.Q4_K, 0.085],
    [GGMLType.Q5_K, 0.043],
    [GGMLType.Q6_K, 0.021],
  ];
  const values = seededNormalValues(256 * 64, 11);

  for (const [type, bound] of bounds) {
    it(`${nameOf(type)}: normalised RMSE <= ${bound}`, () => {
      const error = normalisedRmse(values, roundTrip(type, values));
      expect(error).toBeLessThanOrEqual(bound);
      if (bound > 0) expect(error).toBeGreaterThan(bound / 4); // it does quantize
    });
  }

  it("gets more precise with more bits within each family", () => {
    const error = (type: GGMLType) => normalisedRmse(values, roundTrip(type, values));
    expect(error(GGMLType.Q4_0)).toBeGreaterThan(error(GGMLType.Q5_0));
    expect(error(GGMLType.Q5_0)).toBeGreaterThan(error(GGMLType.Q8_0));
    expect(error(GGMLType.Q4_1)).toBeGreaterThan(error(GGMLType.Q5_1));
    expect(error(GGMLType.Q2_K)).toBeGreaterThan(error(GGMLType.Q3_K));
    expect(error(GGMLType.Q3_K)).toBeGreaterThan(error(GGMLType.Q4_K));
    expect(error(GGMLType.Q4_K)).toBeGreaterThan(error(GGMLType.Q5_K));
    expect(error(GGMLType.Q5_K)).toBeGreaterThan(error(GGMLType.Q6_K));
  });

  it("keeps every element within the block's step size (q8_0: half a step of amax/127)", () => {
    const y = roundTrip(GGMLType.Q8_0, values);
    let worst = 0; // largest error in units of the block's step, allowing for d's f16 rounding
    for (let block = 0; block < values.length / 32; block++) {
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(values[block * 32 + j]!));
      const step = amax / 127;
      for (let j = 0; j < 32; j++) {
        const i = block * 32 + j;
        worst = Math.max(worst, (Math.abs(values[i]! - y[i]!) - amax * 2 ** -11) / step);
      }
    }
    expect(worst).toBeLessThanOrEqual(0.5);
    expect(worst).toBeGreaterThan(0.3);
  });
});

describe("quantize exact cases", () => {
  it("all-zero blocks come back as zeros for every type", () => {
    const zeros = new Float32Array(512);
    for (const type of ALL_TYPES) {
      const y = roundTrip(type, zeros);
      expect(y.every((v) => v === 0)).toBe(true);
    }
  });

  it("constant blocks come back exactly where the format can say so", () => {
    for (const type of [GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q3_K, GGMLType.Q6_K]) {
      for (const constant of [1.25, -0.75]) {
        const y = roundTrip(type, new Float32Array(256).fill(constant));
        expect(Array.from(new Set(y)), `${nameOf(type)} ${constant}`).toEqual([constant]);
      }
    }
  });

  it("constant blocks come back within 0.5% for the k-quants with a minimum, and exactly for q8_0 at 127 * 2^-4", () => {
    for (const type of [GGMLType.Q2_K, GGMLType.Q4_K, GGMLType.Q5_K]) {
      for (const constant of [1.25, -0.75]) {
        const y = roundTrip(type, new Float32Array(256).fill(constant));
        for (const v of y) expect(Math.abs(v - constant)).toBeLessThan(Math.abs(constant) * 0.005);
      }
    }
    expect(Array.from(new Set(roundTrip(GGMLType.Q8_0, new Float32Array(64).fill(7.9375))))).toEqual([7.9375]);
  });

  it("values on a block's own grid come back exactly", () => {
    const uniform = seededUniform(1);
    const level = (count: number) => Math.floor(uniform() * count);
    const cases: [GGMLType, Float32Array][] = [
      // q8_0: k/8 with 127/8 present in each block, so d = 1/8 exactly.
      [GGMLType.Q8_0, valuesOf(1024, (i) => (i % 32 === 0 ? 127 : level(255) - 127) / 8)],
      // q4_0 / q5_0: (q - 8) * d and (q - 16) * d with the most negative level present.
      [GGMLType.Q4_0, valuesOf(1024, (i) => (i % 32 === 0 ? -8 : level(16) - 8) / 4)],
      [GGMLType.Q5_0, valuesOf(1024, (i) => (i % 32 === 0 ? -16 : level(32) - 16) / 8)],
      // q4_1 / q5_1: min + q * d with both ends present.
      [GGMLType.Q4_1, valuesOf(1024, (i) => (i % 32 === 0 ? 0 : i % 32 === 1 ? 15 : level(16)) / 4 - 1)],
      [GGMLType.Q5_1, valuesOf(1024, (i) => (i % 32 === 0 ? 0 : i % 32 === 1 ? 31 : level(32)) / 8 + 0.5)],
      // q6_K: (q - 32) * 2^-1 with -32 in every group of 16.
      [GGMLType.Q6_K, valuesOf(1024, (i) => (i % 16 === 0 ? -32 : level(64) - 32) / 2)],
    ];
    for (const [type, values] of cases) {
      expect(Array.from(roundTrip(type, values)), nameOf(type)).toEqual(Array.from(values));
    }
  });

  it("q8_0 rounds halves away from zero, as C's roundf", () => {
    // amax 127 gives d = 1, so each value is its own quant before rounding.
    const values = valuesOf(32, (i) => [127, -2.5, 2.5, -0.5, 0.5, -3.5, 3.5, -126.5][i] ?? 0);
    const quants = Array.from(new Int8Array(quantize(GGMLType.Q8_0, values).buffer, 2, 8));
    expect(quants).toEqual([127, -3, 3, -1, 1, -4, 4, -127]);
  });

  it("f16 and bf16 store each value rounded as the scalar converters do, NaN payloads included", () => {
    const bits = new Uint32Array(4096);
    const uniform = seededUniform(3);
    for (let i = 0; i < bits.length; i++) bits[i] = Math.floor(uniform() * 2 ** 32);
    bits[0] = 0x7f800001; // signalling NaN
    bits[1] = 0xffc12345; // negative quiet NaN with a payload
    const values = new Float32Array(bits.buffer);
    const f16 = new Uint16Array(quantize(GGMLType.F16, values).buffer);
    const bf16 = new Uint16Array(quantize(GGMLType.BF16, values).buffer);
    for (let i = 0; i < bits.length; i++) {
      expect(f16[i]).toBe(f32BitsToF16Bits(bits[i]!));
      expect(bf16[i]).toBe(f32BitsToBf16Bits(bits[i]!));
    }
    expect([f16[0], f16[1], bf16[0], bf16[1]]).toEqual([0x7e00, 0xfe00, 0x7fc0, 0xffc1]);
    // and dequantizing the f16 gives the nearest half of each value
    const back = dequantize(GGMLType.F16, new Uint8Array(f16.buffer), 4096);
    for (let i = 2; i < 100; i++) if (!Number.isNaN(values[i])) expect(back[i]).toBe(F16_TO_F32[f32BitsToF16Bits(bits[i]!)]);
  });

  it("reads the values from a view at any offset", () => {
    const backing = seededNormalValues(256 + 3, 8);
    const view = backing.subarray(3);
    const copy = new Float32Array(view);
    for (const type of ALL_TYPES) {
      expect(Array.from(quantize(type, view)), nameOf(type)).toEqual(Array.from(quantize(type, copy)));
    }
  });

  it("f32 stores the exact bytes", () => {
    const values = new Float32Array([1.5, -0, 3.4028234663852886e38, 1e-45]);
    expect(Array.from(quantize(GGMLType.F32, values))).toEqual(Array.from(new Uint8Array(values.buffer)));
  });
});

/**
 * 512 super-blocks. The first 256 hold varied data: block-wise scales over 2^-8..2^7, a zero block,
 * a constant block, a lone outlier, an all-positive block, a zero super-block and a super-block of
 * float32 subnormals. The next 128 hold integers in [-3, 3] and the last 128 multiples of 1/16 in
 * [0, 2]: coarse grids make exact ties, which expose any deviation in rounding or summation order.
 */
function goldenInput(): Float32Array {
  const values = new Float32Array(131072);
  values.set(seededNormalValues(65536, 2024));
  const uniform = seededUniform(7);
  for (let block = 0; block < 2048; block++) {
    const scale = 2 ** (Math.floor(uniform() * 16) - 8);
    for (let j = 0; j < 32; j++) values[block * 32 + j]! *= scale;
  }
  values.fill(0, 0, 32);
  values.fill(1.25, 32, 64);
  values.fill(0, 64, 96);
  values[70] = -3;
  for (let i = 96; i < 128; i++) values[i] = Math.abs(values[i]!) + 0.5;
  values.fill(0, 256, 512);
  for (let i = 512; i < 768; i++) values[i]! *= 2 ** -130;
  const grid = seededUniform(3);
  for (let i = 65536; i < 98304; i++) values[i] = Math.floor(grid() * 7) - 3;
  for (let i = 98304; i < 131072; i++) values[i] = Math.floor(grid() * 33) / 16;
  return values;
}

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new Uint8Array(bytes)); // a copy on a plain ArrayBuffer
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

describe("byte-identical with ggml", () => {
  // SHA-256 of the bytes ggml-base (ggml commit d99724f, x86-64 gcc -O3) produced from goldenInput()
  // with ggml_quantize_chunk (no importance matrix) and of its type traits' to_float of those bytes.
  const golden: [GGMLType, string, string][] = [
    [GGMLType.F16, "db0ed6e793069fc14928381e386209dc4b04e61bd98f5871d2a7446248c683d5", "cff8887cc0d27f9282e85cdf65c16688e4560c41b7055f7f307fa81e6f3d95ec"],
    [GGMLType.BF16, "82659c4c70217043ec400c962aa5daebdd384e1ab966c9f9324caa3ad86828a0", "30be6386cb382ba55141fda4f4c9d3e5ca9090ab4feffa32d702f9cdc060bf61"],
    [GGMLType.Q4_0, "e976a3b20e4f89a89dee5e34af19814503f9967040dd74c7d26083a7323dd96c", "d12fc4eba1c0396d276e0a0da38a02ff98864937b6fa164ea480873fd80d2a6c"],
    [GGMLType.Q4_1, "b4df7fe69d379e6aa735ac1136e4d4de85e19565d3cde5f6dc521f1440b24ba9", "e27e21915e26e2eeb7a80d79ac681416b637ba2e0456048911cfe8842881df96"],
    [GGMLType.Q5_0, "7e05cbab9866b370032d9409be47d6f657f0be30a02ad171d564f271670ab25d", "6e98c7a2c41332f435a67d9d13b093a4feb70744615a11898f0941e62f72c2e7"],
    [GGMLType.Q5_1, "1f0d2a6b8824971666a7bc98175f1f6b7d90112faa2f5e0d86805006f2176b5a", "608de13fc379c788e9b4c863314d97c3068647315b854d0b9de30dbd517f187a"],
    [GGMLType.Q8_0, "553616d31775c44c985bed95b3b16ff59422c685934e39829a6e0d58aabb1d34", "45d9dbd5e4e934e874be19b26ab8af1487c81e1ed7a60e2c0bb2a7469d4e030b"],
    [GGMLType.Q2_K, "2286ef8ba2e05a90b88413375dc6e2d69eb209183d229a9859edaf578fa13fb7", "9e51c73280df5d796432ddf20752e32cd5b88218f7250ea3c64ee787cfa3eda1"],
    [GGMLType.Q3_K, "8fd9ffef9c233b8c375664fa3032991ddbdff973b43945dc6569055aa9126a16", "27a099dec80dfd7427033423ccbb739df7bb5216f2da86e21c858f0a8f9bfa0b"],
    [GGMLType.Q4_K, "dee0780b1aec1bd1aa0ba543a874c204a66bc44a22402471419c2088cfe29588", "230e9b2fc75fc34b0d23edb959161c54f66f0b817f3386c486e10ae7c9bf0757"],
    [GGMLType.Q5_K, "62cc93e33159705b656a79e60aa7cace22c6123dd596c342883118ecbdb12c5a", "1db227641ff93883c3ad7652fdd0ebec1465da4b0522779c6fd0cacfac07edd9"],
    [GGMLType.Q6_K, "e6310c90f00e1553cabbddbe56dd1cbce52a47db0558050f5456232c41806e99", "bac053145851b552b61a3505b05cdaf9809779768432e35404a74ff97a09ce2e"],
    // from node-llama-cpp 3.21.1's prebuilt libggml-base (linux-x64) through bun:ffi: ggml_quantize_chunk's
    // quantize_iq4_nl / quantize_iq4_xs (the scale search llama-quantize runs) and the traits' to_float
    [GGMLType.IQ4_NL, "1515849cd232d770d58ef481ca8432c7656fbb0891ac4a1c477c68537c8730b1", "8b7093a8f22dc9514aa7f2245ebfc3007f4b75ab95c95cac50656a97f844d7ad"],
    [GGMLType.IQ4_XS, "4212e6cf0a8c8ae340b182f6cd2ac6118e0b4b326398a867a7ff81edc656ea45", "957b6e435a509fbf37c212f883532fd39414b2f22c8f59a5b333c1242d739345"],
  ];
  const input = goldenInput();

  it("the golden input is the one the hashes were made from", async () => {
    expect(await sha256(new Uint8Array(input.buffer))).toBe("fdedb1da95cad4428c6ee0287b15aa78c2dd7a72dcf2dd9ea438af80c8bd3b5b");
  });

  for (const [type, quantizedHash, dequantizedHash] of golden) {
    it(`${nameOf(type)}: quantize and dequantize give ggml's bytes`, async () => {
      const bytes = quantize(type, input);
      expect(await sha256(bytes)).toBe(quantizedHash);
      expect(await sha256(new Uint8Array(dequantize(type, bytes, input.length).buffer))).toBe(dequantizedHash);
    });
  }
});

describe("quantize arguments", () => {
  it("rejects a value count that is not a whole number of blocks", () => {
    expect(() => quantize(GGMLType.Q8_0, new Float32Array(33))).toThrow(RangeError);
    expect(() => quantize(GGMLType.Q4_K, new Float32Array(128))).toThrow(/128 is not a multiple of the q4_K block size 256/);
  });

  it("rejects unsupported and unknown types with the ggml type name", () => {
    expect(() => quantize(GGMLType.TQ1_0, new Float32Array(256))).toThrow(UnsupportedTypeError);
    expect(() => quantize(GGMLType.TQ1_0, new Float32Array(256))).toThrow(/quantize: ggml type tq1_0/);
    expect(() => quantize(123, new Float32Array(32))).toThrow(/unknown ggml type id 123/);
  });

  it("reports which types it supports", () => {
    for (const type of [...ALL_TYPES, GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.IQ3_S, GGMLType.IQ3_XXS, GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S, GGMLType.IQ1_S, GGMLType.IQ1_M]) {
      expect(canQuantize(type)).toBe(true);
    }
    for (const type of [GGMLType.TQ1_0, GGMLType.TQ2_0, GGMLType.Q8_1, GGMLType.Q8_K, GGMLType.I8, 99]) {
      expect(canQuantize(type)).toBe(false);
    }
  });

  it("accepts an empty array", () => {
    expect(quantize(GGMLType.Q6_K, new Float32Array(0)).length).toBe(0);
  });
});
