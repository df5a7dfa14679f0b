/**
 * Dequantization throughput per ggml type. Run: `bun packages/gguf/bench/dequantize.bench.ts
 * [--elements N] [--runs N]`.
 *
 * For each type, N seeded bell-shaped values (default 2^21) are quantized once with the reference
 * quantizer (iq4_nl and iq4_xs, which have no quantizer here, get seeded random codes and sane
 * scales), then dequantized 3 times to warm up and --runs times (default 9) into one preallocated
 * output array. Prints the median time per type as MB/s of float32 output, MB/s of quantized input
 * and million elements/s, plus the reference quantizer's speed. The whole run takes under 10 s.
 * Numbers from a loaded machine vary by 2x or more between runs; compare medians of quiet runs.
 */
import { GGMLType, ggmlTypeInfo } from "../src/ggml-type";
import { dequantize, f32ToF16Bits, quantize } from "../src/quant/index";
import { seededNormalValues, seededUniform } from "../src/quant/seeded-random";

function argument(name: string, fallback: number): number {
  const index = process.argv.indexOf(name);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
}

const ELEMENTS = argument("--elements", 2 ** 21);
const RUNS = argument("--runs", 9);

const TYPES = [
  GGMLType.F32,
  GGMLType.F16,
  GGMLType.BF16,
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
  GGMLType.IQ4_NL,
  GGMLType.IQ4_XS,
];

/** Random codes with a small positive f16 scale at the start of each block (iq4_nl, iq4_xs). */
function randomBlocksWithScale(type: GGMLType, elements: number): Uint8Array {
  const info = ggmlTypeInfo(type)!;
  const bytes = new Uint8Array((elements / info.blockSize) * info.bytesPerBlock);
  const uniform = seededUniform(17);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(uniform() * 256);
  const scale = f32ToF16Bits(0.01);
  for (let offset = 0; offset < bytes.length; offset += info.bytesPerBlock) {
    bytes[offset] = scale & 0xff;
    bytes[offset + 1] = scale >>> 8;
  }
  return bytes;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const values = seededNormalValues(ELEMENTS, 1);
const out = new Float32Array(ELEMENTS);
const rows: string[][] = [];
const started = performance.now();

for (const type of TYPES) {
  const info = ggmlTypeInfo(type)!;
  const quantizeStart = performance.now();
  const bytes =
    type === GGMLType.IQ4_NL || type === GGMLType.IQ4_XS
      ? randomBlocksWithScale(type, ELEMENTS)
      : quantize(type, values);
  const quantizeSeconds = (performance.now() - quantizeStart) / 1000;
  // Warm-up: a few passes let the JIT reach its optimising tier for this kernel.
  for (let run = 0; run < 3; run++) dequantize(type, bytes, ELEMENTS, out);
  const times: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const start = performance.now();
    dequantize(type, bytes, ELEMENTS, out);
    times.push((performance.now() - start) / 1000);
  }
  const seconds = median(times);
  rows.push([
    info.name,
    (bytes.length / 2 ** 20).toFixed(1),
    ((ELEMENTS * 4) / 1e6 / seconds).toFixed(0),
    (bytes.length / 1e6 / seconds).toFixed(0),
    (ELEMENTS / 1e6 / seconds).toFixed(0),
    (seconds * 1000).toFixed(2),
    type === GGMLType.IQ4_NL || type === GGMLType.IQ4_XS ? "-" : (ELEMENTS / 1e6 / quantizeSeconds).toFixed(1),
  ]);
}

const header = ["type", "input MiB", "out MB/s", "in MB/s", "Melem/s", "median ms", "quantize Melem/s"];
const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
const line = (cells: string[]) =>
  cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join("  ");
console.log(`dequantize ${ELEMENTS} elements per type, median of ${RUNS} runs (Bun ${Bun.version}, ${process.arch})`);
console.log(line(header));
console.log(widths.map((width) => "-".repeat(width)).join("  "));
for (const row of rows) console.log(line(row));
console.log(`total ${((performance.now() - started) / 1000).toFixed(1)} s`);
