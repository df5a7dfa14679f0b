#!/usr/bin/env bun
/**
 * Records what ggml makes of the importance-matrix quantization golden input
 * (packages/gguf/src/quant/importance-golden-input.ts), with node-llama-cpp 3.21.1's prebuilt
 * libggml-base (linux-x64) called through bun:ffi: per type,
 * `ggml_quantize_chunk(type, rows, out, 0, nrows, n_per_row, importance)` (what llama-quantize
 * --imatrix runs for a tensor), and for the types in IMPORTANCE_GOLDEN_UNWEIGHTED_TYPES the same with
 * imatrix = NULL; the SHA-256 and size of the blocks, and of the input and importance floats
 * → packages/gguf/src/__fixtures__/imatrix-quantize-goldens.json.
 *
 *   cd tools/llamacpp && npm ci && bun imatrix-quantize-goldens.ts
 */
import { dlopen, FFIType, ptr } from "bun:ffi";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ggmlTypeInfo } from "../../packages/gguf/src/index";
import {
  IMPORTANCE_GOLDEN_ROW_LENGTH,
  IMPORTANCE_GOLDEN_ROWS,
  IMPORTANCE_GOLDEN_TYPES,
  IMPORTANCE_GOLDEN_UNWEIGHTED_TYPES,
  importanceGoldenImportance,
  importanceGoldenInput,
} from "../../packages/gguf/src/quant/importance-golden-input";

const BINS = join(import.meta.dir, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64");
const library = dlopen(join(BINS, "libggml-base.so"), {
  ggml_quantize_chunk: { args: [FFIType.i32, FFIType.ptr, FFIType.ptr, FFIType.i64, FFIType.i64, FFIType.i64, FFIType.ptr], returns: FFIType.u64 },
});

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const values = importanceGoldenInput();
const importance = importanceGoldenImportance();

function quantizeWithGgml(type: number, weights: Float32Array | null): { bytes: number; sha256: string } {
  const info = ggmlTypeInfo(type)!;
  const out = new Uint8Array((values.length / info.blockSize) * info.bytesPerBlock);
  const written = Number(
    library.symbols.ggml_quantize_chunk(type, ptr(values), ptr(out), 0, IMPORTANCE_GOLDEN_ROWS, IMPORTANCE_GOLDEN_ROW_LENGTH, weights && ptr(weights)),
  );
  if (written !== out.length) throw new Error(`${info.name}: ggml wrote ${written} bytes, expected ${out.length}`);
  return { bytes: out.length, sha256: sha256(out) };
}

const weighted: Record<string, { bytes: number; sha256: string }> = {};
for (const type of IMPORTANCE_GOLDEN_TYPES) {
  weighted[ggmlTypeInfo(type)!.name] = quantizeWithGgml(type, importance);
  console.log(ggmlTypeInfo(type)!.name, "importance", weighted[ggmlTypeInfo(type)!.name]);
}
const unweighted: Record<string, { bytes: number; sha256: string }> = {};
for (const type of IMPORTANCE_GOLDEN_UNWEIGHTED_TYPES) {
  unweighted[ggmlTypeInfo(type)!.name] = quantizeWithGgml(type, null);
  console.log(ggmlTypeInfo(type)!.name, "no importance", unweighted[ggmlTypeInfo(type)!.name]);
}
writeFileSync(
  join(import.meta.dir, "../../packages/gguf/src/__fixtures__/imatrix-quantize-goldens.json"),
  `${JSON.stringify(
    {
      source: "node-llama-cpp 3.21.1 libggml-base (linux-x64), ggml_quantize_chunk(type, values, out, 0, rows, rowLength, importance)",
      rows: IMPORTANCE_GOLDEN_ROWS,
      rowLength: IMPORTANCE_GOLDEN_ROW_LENGTH,
      input: sha256(new Uint8Array(values.buffer)),
      importance: sha256(new Uint8Array(importance.buffer)),
      weighted,
      unweighted,
    },
    null,
    2,
  )}\n`,
);
