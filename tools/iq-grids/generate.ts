#!/usr/bin/env bun
/**
 * Writes the lookup tables of ggml's i-quant formats (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s,
 * iq3_xxs, iq3_s) into Memra's sources, from ggml's ggml-common.h:
 *
 *   bun tools/iq-grids/generate.ts /path/to/llama.cpp/ggml/src/ggml-common.h
 *
 * The grids are part of the file format (a weight's bits index them), so they are data to copy,
 * not code: every reader of these types needs exactly ggml's values. One run writes both copies,
 *   native/common/iq-grids.h            C tables for the CPU library and the CUDA kernels
 *   packages/gguf/src/quant/iq-grids.ts the same bytes for the TypeScript dequantizers
 * and @memra/gguf's iq-grids.test.ts checks that the two agree. llama.cpp's source is in
 * node-llama-cpp's package (tools/llamacpp/node_modules/node-llama-cpp/llama/gitRelease.bundle:
 * `git clone` it).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

interface Table {
  readonly name: string;
  readonly bits: 8 | 32 | 64;
  readonly size: number;
  readonly comment: string;
}

const TABLES: readonly Table[] = [
  { name: "ksigns_iq2xs", bits: 8, size: 128, comment: "7 sign bits -> 8 (the 8th makes the count of negatives even)" },
  { name: "iq2xxs_grid", bits: 64, size: 256, comment: "iq2_xxs: 8 magnitudes (8, 25, 43) per entry" },
  { name: "iq2xs_grid", bits: 64, size: 512, comment: "iq2_xs: 8 magnitudes (8, 25, 43) per entry" },
  { name: "iq2s_grid", bits: 64, size: 1024, comment: "iq2_s: 8 magnitudes (8, 25, 43) per entry" },
  { name: "iq3xxs_grid", bits: 32, size: 256, comment: "iq3_xxs: 4 magnitudes (4 ... 62) per entry" },
  { name: "iq3s_grid", bits: 32, size: 512, comment: "iq3_s: 4 magnitudes (1 ... 15) per entry" },
  { name: "iq1s_grid", bits: 64, size: 2048, comment: "iq1_s, iq1_m: 8 values in {-1, 0, 1} (int8) per entry" },
];

function readTable(source: string, table: Table): bigint[] {
  const start = source.indexOf(`GGML_TABLE_BEGIN(uint${table.bits}_t, ${table.name},`);
  if (start < 0) throw new Error(`${table.name} not found`);
  const end = source.indexOf("GGML_TABLE_END()", start);
  const body = source.slice(source.indexOf("\n", start), end).replace(/\/\/.*$/gm, "");
  const values = body.split(",").map((s) => s.trim()).filter((s) => s.length > 0).map((s) => BigInt(s));
  if (values.length !== table.size) throw new Error(`${table.name}: ${values.length} values, expected ${table.size}`);
  return values;
}

function hex(value: bigint, bits: number): string {
  return value.toString(16).padStart(bits / 4, "0");
}

const path = process.argv[2];
if (path === undefined) {
  console.error("usage: bun tools/iq-grids/generate.ts ggml/src/ggml-common.h");
  process.exit(1);
}
const source = readFileSync(path, "utf8");
const tables = TABLES.map((table) => ({ table, values: readTable(source, table) }));

const c: string[] = [
  "/*",
  " * Lookup tables of ggml's i-quant weight formats, copied from ggml-common.h by",
  " * tools/iq-grids/generate.ts (do not edit: run it again). Part of the file format: a weight's",
  " * bits index these grids, so every reader needs exactly these values.",
  " *",
  " * Define MEMRA_IQ_TABLE before including to place the tables (CUDA: `static __device__ const`).",
  " */",
  "#ifndef MEMRA_IQ_GRIDS_H",
  "#define MEMRA_IQ_GRIDS_H",
  "",
  "#include <stdint.h>",
  "",
  "#ifndef MEMRA_IQ_TABLE",
  "#define MEMRA_IQ_TABLE static const",
  "#endif",
  "",
  "/* iq1_s / iq1_m: value = scale * (grid + delta), delta = +-1/8 */",
  "#define MEMRA_IQ1_DELTA 0.125f",
];
for (const { table, values } of tables) {
  const perLine = table.bits === 8 ? 16 : table.bits === 32 ? 8 : 4;
  c.push("", `/* ${table.comment} */`, `MEMRA_IQ_TABLE uint${table.bits}_t memra_${table.name}[${table.size}] = {`);
  for (let i = 0; i < values.length; i += perLine) {
    const line = values.slice(i, i + perLine).map((v) => (table.bits === 8 ? String(v).padStart(3) : `0x${hex(v, table.bits)}`));
    c.push(`    ${line.join(", ")},`);
  }
  c.push("};");
}
c.push("", "#endif", "");
writeFileSync(join(ROOT, "native", "common", "iq-grids.h"), c.join("\n"));

const ts: string[] = [
  "/**",
  " * Lookup tables of ggml's i-quant weight formats, copied from ggml-common.h by",
  " * tools/iq-grids/generate.ts (do not edit: run it again), as the bytes ggml's tables hold in",
  " * memory (little-endian): entry k of a 64-bit grid is bytes 8k .. 8k + 7, value j its byte j.",
  " * native/common/iq-grids.h holds the same tables for the native code.",
  " */",
  "",
  "function bytes(hexWords: string, wordBytes: number): Uint8Array {",
  "  const words = hexWords.split(/\\s+/).filter((word) => word.length > 0);",
  "  const out = new Uint8Array(words.length * wordBytes);",
  "  for (let i = 0; i < words.length; i++) {",
  "    const word = words[i]!;",
  "    for (let b = 0; b < wordBytes; b++) out[i * wordBytes + b] = Number.parseInt(word.slice(word.length - 2 * b - 2, word.length - 2 * b), 16);",
  "  }",
  "  return out;",
  "}",
  "",
  "/** iq1_s / iq1_m: value = scale · (grid + delta), delta = ±1/8. */",
  "export const IQ1_DELTA = 0.125;",
];
const tsName = (name: string) => name.replace(/_grid$/, "_GRID").replace(/^ksigns_iq2xs$/, "KSIGNS_IQ2XS").toUpperCase();
for (const { table, values } of tables) {
  const perLine = table.bits === 8 ? 32 : table.bits === 32 ? 12 : 8;
  const lines: string[] = [];
  for (let i = 0; i < values.length; i += perLine) lines.push(`  ${values.slice(i, i + perLine).map((v) => hex(v, table.bits)).join(" ")}`);
  const view = table.name === "iq1s_grid" ? "new Int8Array(bytes(" : "bytes(";
  const close = table.name === "iq1s_grid" ? ").buffer)" : ")";
  ts.push("", `/** ${table.comment}: ${table.size} entries of ${table.bits / 8} byte${table.bits === 8 ? "" : "s"}. */`, `export const ${tsName(table.name)} = ${view}\``, ...lines, `\`, ${table.bits / 8}${close};`);
}
ts.push("");
writeFileSync(join(ROOT, "packages", "gguf", "src", "quant", "iq-grids.ts"), ts.join("\n"));
console.log(`wrote native/common/iq-grids.h and packages/gguf/src/quant/iq-grids.ts (${tables.length} tables)`);
