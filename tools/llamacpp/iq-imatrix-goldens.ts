#!/usr/bin/env bun
/**
 * Records what ggml makes of the importance-matrix quantization golden input
 * (packages/gguf/src/quant/iq-golden-input.ts, iqImatrixGoldenInput), with node-llama-cpp 3.21.1's
 * prebuilt libggml-base (linux-x64) called through bun:ffi: per type, ggml_quantize_chunk(type,
 * values, out, 0, rows, rowLength, importance) (what llama-quantize runs with an imatrix; it calls
 * ggml_quantize_init itself), and for the types that accept none (iq2_s, iq1_m) also imatrix = NULL.
 * Writes the SHA-256 of the input floats, the importance and the blocks to
 * packages/gguf/src/__fixtures__/iq-imatrix-quantize-goldens.json.
 *
 * ggml's iq1 quantizers sort with qsort, whose order of equal values is the C library's: glibc's (a
 * merge sort, equal values in index order), which the prebuilt library uses on linux.
 *
 *   cd tools/llamacpp && npm ci && bun iq-imatrix-goldens.ts
 */
import { dlopen, FFIType, ptr } from "bun:ffi";
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ggmlTypeInfo } from "../../packages/gguf/src/index";
import { IQ_IMATRIX_GOLDEN_TYPES, IQ_IMATRIX_OPTIONAL_TYPES, iqImatrixGoldenInput } from "../../packages/gguf/src/quant/iq-golden-input";

const BINS = join(import.meta.dir, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64");
const library = dlopen(join(BINS, "libggml-base.so"), {
  ggml_quantize_chunk: { args: [FFIType.i32, FFIType.ptr, FFIType.ptr, FFIType.i64, FFIType.i64, FFIType.i64, FFIType.ptr], returns: FFIType.u64 },
  ggml_quantize_requires_imatrix: { args: [FFIType.i32], returns: FFIType.bool },
});

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const { values, rowLength, importance } = iqImatrixGoldenInput();
const rows = values.length / rowLength;

const quantized: Record<string, { blocks: string; blocksWithoutImportance?: string }> = {};
for (const type of IQ_IMATRIX_GOLDEN_TYPES) {
  const info = ggmlTypeInfo(type)!;
  const optional = IQ_IMATRIX_OPTIONAL_TYPES.includes(type);
  if (library.symbols.ggml_quantize_requires_imatrix(type) === optional) throw new Error(`${info.name}: ggml_quantize_requires_imatrix disagrees`);
  const run = (imatrix: Float32Array | null) => {
    const out = new Uint8Array((values.length / info.blockSize) * info.bytesPerBlock);
    const written = Number(library.symbols.ggml_quantize_chunk(type, ptr(values), ptr(out), 0, rows, rowLength, imatrix === null ? null : ptr(imatrix)));
    if (written !== out.length) throw new Error(`${info.name}: ggml wrote ${written} bytes, expected ${out.length}`);
    return sha256(out);
  };
  quantized[info.name] = { blocks: run(importance), ...(optional ? { blocksWithoutImportance: run(null) } : {}) };
  console.log(info.name, quantized[info.name]);
}

const fixtures = join(import.meta.dir, "../../packages/gguf/src/__fixtures__");
mkdirSync(fixtures, { recursive: true });
writeFileSync(
  join(fixtures, "iq-imatrix-quantize-goldens.json"),
  `${JSON.stringify(
    {
      source: "node-llama-cpp 3.21.1 libggml-base (linux-x64, glibc qsort), ggml_quantize_chunk(type, values, out, 0, rows, rowLength, importance or NULL)",
      rows,
      rowLength,
      input: sha256(new Uint8Array(values.buffer, values.byteOffset, values.byteLength)),
      importance: sha256(new Uint8Array(importance.buffer)),
      quantized,
    },
    null,
    2,
  )}\n`,
);
