import { describe, expect, it } from "vitest";
import { testRandom } from "./__fixtures__/candidates-from";
import { argmax, logSumExp } from "./log-sum-exp";

function exactLogSumExp(values: Float32Array): number {
  const max = Math.max(...values);
  let sum = 0;
  for (const value of values) sum += Math.exp(value - max);
  return max + Math.log(sum);
}

describe("logSumExp", () => {
  it("is within 3e-9 of the exact value on a vocabulary-sized input", () => {
    for (const spread of [1, 10, 40]) {
      const random = testRandom(spread);
      const values = Float32Array.from({ length: 151936 }, () => (random() - 0.5) * spread);
      const max = values[argmax(values, values.length)]!;
      expect(Math.abs(logSumExp(values, values.length, max) - exactLogSumExp(values))).toBeLessThan(3e-9);
    }
  });

  it("is exact for small hand cases and ignores -Infinity", () => {
    // log(e^0 + e^0) = ln 2; log(e^1 + e^-inf) = 1
    expect(logSumExp(new Float32Array([0, 0]), 2, 0)).toBeCloseTo(Math.LN2, 10);
    expect(logSumExp(new Float32Array([1, -Infinity]), 2, 1)).toBeCloseTo(1, 12);
    // every distance from 0 to 31 in steps of 0.01: the per-term error bound (< 4e-11 relative) holds
    for (let d = 0; d < 31; d += 0.01) {
      const values = new Float32Array([0, -d]);
      const expected = Math.log(1 + Math.exp(values[1]!));
      expect(Math.abs(logSumExp(values, 2, 0) - expected)).toBeLessThan(4e-11);
    }
  });

  it("argmax returns the first largest", () => {
    expect(argmax(new Float32Array([1, 3, 3, 2]), 4)).toBe(1);
    expect(argmax(new Float32Array([-Infinity, -Infinity]), 2)).toBe(0);
  });
});
