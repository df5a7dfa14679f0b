#!/usr/bin/env bun
/**
 * Records what ggml makes of the i-quant golden inputs (packages/gguf/src/quant/iq-golden-input.ts),
 * with node-llama-cpp 3.21.1's prebuilt libggml-base (linux-x64) called through bun:ffi:
 *   - dequantization: `ggml_get_type_traits(type)->to_float` of iqGoldenInput(type), per type the
 *     SHA-256 of the input blocks and of the float32 values → iq-dequantize-goldens.json;
 *   - quantization: `ggml_quantize_chunk(type, iqQuantizeGoldenInput(), ..., imatrix = NULL)` (what
 *     llama-quantize runs without an importance matrix), per type the SHA-256 of the input floats and
 *     of the blocks → iq-quantize-goldens.json
 * (both in packages/gguf/src/__fixtures__).
 *
 *   cd tools/llamacpp && npm ci && bun iq-goldens.ts
 */
import { CFunction, dlopen, FFIType, type Pointer, ptr, read } from "bun:ffi";
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ggmlTypeInfo } from "../../packages/gguf/src/index";
import {
  IQ_GOLDEN_BLOCKS,
  IQ_GOLDEN_TYPES,
  IQ_QUANTIZE_GOLDEN_TYPES,
  iqGoldenInput,
  iqQuantizeGoldenInput,
} from "../../packages/gguf/src/quant/iq-golden-input";

const BINS = join(import.meta.dir, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64");
const library = dlopen(join(BINS, "libggml-base.so"), {
  ggml_get_type_traits: { args: [FFIType.i32], returns: FFIType.ptr },
  ggml_quantize_chunk: { args: [FFIType.i32, FFIType.ptr, FFIType.ptr, FFIType.i64, FFIType.i64, FFIType.i64, FFIType.ptr], returns: FFIType.u64 },
});

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const goldens: Record<string, { blocks: number; input: string; values: string }> = {};
for (const type of IQ_GOLDEN_TYPES) {
  const info = ggmlTypeInfo(type)!;
  const traits = library.symbols.ggml_get_type_traits(type)!;
  // struct ggml_type_traits (ggml.h): type_name, blck_size, blck_size_interleave, type_size, is_quantized, to_float, ...
  if (Number(read.i64(traits, 8)) !== info.blockSize || Number(read.u64(traits, 24)) !== info.bytesPerBlock) throw new Error(`${info.name}: traits disagree`);
  const toFloat = CFunction({ ptr: read.ptr(traits, 40) as Pointer, args: [FFIType.ptr, FFIType.ptr, FFIType.i64], returns: FFIType.void });
  const input = iqGoldenInput(type);
  const count = IQ_GOLDEN_BLOCKS * info.blockSize;
  const out = new Float32Array(count);
  toFloat(ptr(input), ptr(out), count);
  goldens[info.name] = { blocks: IQ_GOLDEN_BLOCKS, input: sha256(input), values: sha256(new Uint8Array(out.buffer)) };
  console.log(info.name, goldens[info.name]);
}
const fixtures = join(import.meta.dir, "../../packages/gguf/src/__fixtures__");
mkdirSync(fixtures, { recursive: true });
writeFileSync(
  join(fixtures, "iq-dequantize-goldens.json"),
  `${JSON.stringify({ source: "node-llama-cpp 3.21.1 libggml-base (linux-x64), ggml_get_type_traits(type)->to_float", goldens }, null, 2)}\n`,
);

const quantized: Record<string, { values: number; input: string; blocks: string }> = {};
const values = iqQuantizeGoldenInput();
for (const type of IQ_QUANTIZE_GOLDEN_TYPES) {
  const info = ggmlTypeInfo(type)!;
  const out = new Uint8Array((values.length / info.blockSize) * info.bytesPerBlock);
  // rows of 4096 values, as a model's tensor rows would be
  const written = Number(library.symbols.ggml_quantize_chunk(type, ptr(values), ptr(out), 0, values.length / 4096, 4096, null));
  if (written !== out.length) throw new Error(`${info.name}: ggml wrote ${written} bytes, expected ${out.length}`);
  quantized[info.name] = { values: values.length, input: sha256(new Uint8Array(values.buffer)), blocks: sha256(out) };
  console.log(info.name, quantized[info.name]);
}
writeFileSync(
  join(fixtures, "iq-quantize-goldens.json"),
  `${JSON.stringify({ source: "node-llama-cpp 3.21.1 libggml-base (linux-x64), ggml_quantize_chunk(type, ..., imatrix = NULL)", quantized }, null, 2)}\n`,
);
