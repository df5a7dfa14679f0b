#!/usr/bin/env bun
/**
 * llama-quantize in a Bun process: llama.cpp's `llama_model_quantize` from node-llama-cpp 3.21.1's
 * prebuilt libllama (linux-x64), called through bun:ffi (node-llama-cpp has no binding for it; its
 * prebuilt packages ship no llama-quantize executable). Used by quantize-goldens.ts and, as a fresh
 * process per run, by quantize-side-by-side.ts:
 *
 *   bun tools/llamacpp/llama-quantize.ts INPUT.gguf OUTPUT.gguf TYPE [THREADS]
 *
 * prints {"seconds": ...} on its last line.
 */
import { dlopen, FFIType, ptr } from "bun:ffi";
import { join } from "node:path";

const BINS = join(import.meta.dir, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64");

export interface LlamaQuantizeOptions {
  /** llama-quantize's type name (Q4_K_M, Q8_0, COPY, ...). */
  type: string;
  threads?: number;
  allowRequantize?: boolean;
  leaveOutputTensor?: boolean;
  pure?: boolean;
  outputTensorType?: string;
  tokenEmbeddingType?: string;
  tensorTypes?: Array<{ pattern: string; type: string }>;
  /** llama-quantize --override-kv KEY=TYPE:VALUE, as memra takes them: { key, type, value }. */
  metadataOverrides?: Array<{ key: string; type: "int" | "float" | "bool" | "str"; value: string | number | boolean | bigint }>;
  /** llama-quantize --keep-split: `output` is then the shards' prefix (llama-quantize drops a .gguf suffix before it calls llama_model_quantize). */
  keepSplit?: boolean;
  /** llama-quantize --prune-layers, as its parse_layer_prune leaves the list: sorted, without duplicates. */
  pruneLayers?: number[];
  /** The importance matrix as llama-quantize hands it over (its load_imatrix: sums / counts), by weight name. */
  importance?: ReadonlyMap<string, Float32Array>;
}

/** llama_ftype (llama.h) by llama-quantize's names; COPY is ALL_F32 with only_copy. */
const FTYPES: Record<string, number> = {
  F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q8_0: 7, Q5_0: 8, Q5_1: 9, Q2_K: 10, Q3_K_S: 11, Q3_K_M: 12, Q3_K_L: 13, Q4_K_S: 14, Q4_K_M: 15,
  Q5_K_S: 16, Q5_K_M: 17, Q6_K: 18, IQ4_NL: 25, IQ3_S: 26, IQ3_M: 27, IQ4_XS: 30, BF16: 32, COPY: 0, Q3_K: 12, Q4_K: 15, Q5_K: 17,
  IQ2_XXS: 19, IQ2_XS: 20, Q2_K_S: 21, IQ3_XS: 22, IQ3_XXS: 23, IQ1_S: 24, IQ2_S: 28, IQ2_M: 29, IQ1_M: 31,
};
/** enum ggml_type of this release, for the type options. */
const GGML_TYPES: Record<string, number> = {
  f32: 0, f16: 1, q4_0: 2, q4_1: 3, q5_0: 6, q5_1: 7, q8_0: 8, q2_k: 10, q3_k: 11, q4_k: 12, q5_k: 13, q6_k: 14, iq3_s: 21, iq4_nl: 20, iq4_xs: 23, bf16: 30,
};
const GGML_TYPE_COUNT = 43;

let library: ReturnType<typeof open> | undefined;
function open() {
  return dlopen(join(BINS, "libllama.v0.4.0.so"), {
    llama_model_quantize: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.u32 },
  });
}

const cString = (s: string) => Buffer.from(`${s}\0`);
function ggmlType(name: string): number {
  const id = GGML_TYPES[name.toLowerCase()];
  if (id === undefined) throw new Error(`unknown ggml type ${name}`);
  return id;
}

/** Runs llama_model_quantize; throws when it fails. */
export function llamaQuantize(input: string, output: string, o: LlamaQuantizeOptions): void {
  const ftype = FTYPES[o.type.toUpperCase()];
  if (ftype === undefined) throw new Error(`unknown type ${o.type}`);
  // llama_model_quantize_params (llama.h of this release), 64 bytes on x86-64
  const params = new Uint8Array(64);
  const view = new DataView(params.buffer);
  const keep: Uint8Array[] = [];
  view.setInt32(0, o.threads ?? 0, true); // nthread
  view.setInt32(4, ftype, true); // ftype
  view.setInt32(8, o.outputTensorType ? ggmlType(o.outputTensorType) : GGML_TYPE_COUNT, true);
  view.setInt32(12, o.tokenEmbeddingType ? ggmlType(o.tokenEmbeddingType) : GGML_TYPE_COUNT, true);
  params[16] = o.allowRequantize ? 1 : 0;
  params[17] = o.leaveOutputTensor ? 0 : 1; // quantize_output_tensor
  params[18] = o.type.toUpperCase() === "COPY" ? 1 : 0; // only_copy
  params[19] = o.pure ? 1 : 0;
  params[20] = o.keepSplit ? 1 : 0;
  if (o.pruneLayers?.length) {
    // const int32_t * prune_layers, ended by -1
    const layers = new Int32Array([...o.pruneLayers, -1]);
    keep.push(new Uint8Array(layers.buffer));
    view.setBigUint64(48, BigInt(ptr(layers)), true);
  }
  if (o.tensorTypes?.length) {
    // llama_model_tensor_override { const char * pattern; enum ggml_type type; }, ended by a null pattern
    const table = new Uint8Array(16 * (o.tensorTypes.length + 1));
    const tv = new DataView(table.buffer);
    o.tensorTypes.forEach((t, i) => {
      const pattern = cString(t.pattern);
      keep.push(pattern);
      tv.setBigUint64(16 * i, BigInt(ptr(pattern)), true);
      tv.setInt32(16 * i + 8, ggmlType(t.type), true);
    });
    keep.push(table);
    view.setBigUint64(40, BigInt(ptr(table)), true); // tt_overrides
  }
  if (o.importance?.size) {
    // llama_model_imatrix_data { const char * name; const float * data; size_t size; }, ended by a null name
    const table = new Uint8Array(24 * (o.importance.size + 1));
    const tv = new DataView(table.buffer);
    let i = 0;
    for (const [name, values] of o.importance) {
      const text = cString(name);
      keep.push(text, new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
      tv.setBigUint64(24 * i, BigInt(ptr(text)), true);
      tv.setBigUint64(24 * i + 8, BigInt(ptr(values)), true);
      tv.setBigUint64(24 * i + 16, BigInt(values.length), true);
      i++;
    }
    keep.push(table);
    view.setBigUint64(24, BigInt(ptr(table)), true); // imatrix
  }
  if (o.metadataOverrides?.length) {
    // llama_model_kv_override { int32 tag; char key[128]; union { int64; double; bool; char[128] } } (264 bytes), ended by an empty key
    const table = new Uint8Array(264 * (o.metadataOverrides.length + 1));
    const tv = new DataView(table.buffer);
    o.metadataOverrides.forEach((kv, i) => {
      const at = 264 * i;
      tv.setInt32(at, { int: 0, float: 1, bool: 2, str: 3 }[kv.type], true);
      table.set(new TextEncoder().encode(kv.key), at + 4);
      if (kv.type === "int") tv.setBigInt64(at + 136, BigInt(kv.value as string | number | bigint), true);
      else if (kv.type === "float") tv.setFloat64(at + 136, Number(kv.value), true);
      else if (kv.type === "bool") table[at + 136] = kv.value ? 1 : 0;
      else table.set(new TextEncoder().encode(String(kv.value)), at + 136);
    });
    keep.push(table);
    view.setBigUint64(32, BigInt(ptr(table)), true); // kv_overrides
  }
  library ??= open();
  const rc = library.symbols.llama_model_quantize(ptr(cString(input)), ptr(cString(output)), ptr(params));
  if (rc !== 0) throw new Error(`llama_model_quantize ${input} -> ${output} (${o.type}) failed (${rc})`);
  keep.length = 0;
}

if (import.meta.main) {
  const [input, output, type, threads] = process.argv.slice(2);
  if (!input || !output || !type) {
    console.error("usage: bun tools/llamacpp/llama-quantize.ts INPUT.gguf OUTPUT.gguf TYPE [THREADS]");
    process.exit(2);
  }
  const started = performance.now();
  llamaQuantize(input, output, { type, ...(threads ? { threads: Number(threads) } : {}) });
  console.log(JSON.stringify({ seconds: (performance.now() - started) / 1000 }));
}
