#!/usr/bin/env bun
/**
 * llama-quantize's output files for synthetic models, as golden fixtures for `memra quantize`:
 * llama.cpp's `llama_model_quantize` (libllama of node-llama-cpp 3.21.1's prebuilt linux-x64
 * binaries, called through bun:ffi: node-llama-cpp has no binding for it) quantizes seeded synthetic
 * models to every file type memra writes, and the SHA-256 of each output file and of each of its
 * tensors' bytes, with the tensor's type, are recorded.
 *
 *   bun tools/llamacpp/quantize-goldens.ts        (from the repository root, after npm ci in tools/llamacpp)
 *
 * Writes packages/cli/src/__fixtures__/quantize-goldens.json.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ggmlTypeName, openGGUF } from "../../packages/gguf/src/index";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "../../packages/synthetic/src/index";
import { type LlamaQuantizeOptions, llamaQuantize } from "./llama-quantize";

const ROOT = join(import.meta.dir, "..", "..");
const OUT = join(ROOT, "packages/cli/src/__fixtures__/quantize-goldens.json");

/** The models: small enough to quantize in well under a second each, shaped to reach llama.cpp's rules. */
const MODELS: Record<string, { preset: PresetName; options: Partial<SyntheticModelOptions> }> = {
  // 8 layers (use_more_bits picks layers 0, 3, 6, 7), GQA 4 (Q2_K's attn_v), tied embeddings
  dense: { preset: "small", options: { weightType: "f16", layers: 8, kvHeads: 1, vocabulary: 1024 } },
  // an output.weight of its own, GQA 2, f32 weights
  untied: { preset: "small", options: { weightType: "f32", layers: 4, ffn: 768, tiedEmbeddings: false, vocabulary: 1024 } },
  // rows of 64 and 128 values: k-quants fall back to 32-value types, the output to q8_0
  tiny: { preset: "tiny", options: { weightType: "f32", vocabulary: 1024 } },
  // 8 experts: llama.cpp's n_expert == 8 rules (attn_v and attn_k q8_0, attn_output q5_K)
  moe8: { preset: "tiny-moe", options: { weightType: "f16", layers: 4, hidden: 256, headDim: 64, kvHeads: 1, expertFfn: 256, vocabulary: 1024 } },
  // already quantized: requantizing
  "dense-q8_0": { preset: "small", options: { weightType: "q8_0", layers: 4, vocabulary: 1024 } },
  // i-quant weights (random blocks): requantizing from a type only dequantization knows
  "dense-iq2_xxs": { preset: "small", options: { weightType: "iq2_xxs", layers: 4, vocabulary: 1024 } },
};

interface Case {
  model: string;
  type: string;
  options?: Omit<LlamaQuantizeOptions, "type" | "threads">;
}

const ALL = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_M"];
const MIXES = ["Q4_0", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_M"];
const CASES: Case[] = [
  ...ALL.map((type) => ({ model: "dense", type })),
  { model: "dense", type: "COPY" },
  ...MIXES.map((type) => ({ model: "untied", type })),
  ...MIXES.map((type) => ({ model: "tiny", type })),
  ...MIXES.map((type) => ({ model: "moe8", type })),
  { model: "dense-q8_0", type: "Q4_K_M", options: { allowRequantize: true } },
  { model: "dense-q8_0", type: "F16", options: { allowRequantize: true } },
  { model: "dense-iq2_xxs", type: "Q4_K_M", options: { allowRequantize: true } },
  { model: "dense-iq2_xxs", type: "IQ3_S", options: { allowRequantize: true } },
  { model: "untied", type: "Q4_K_M", options: { leaveOutputTensor: true } },
  { model: "untied", type: "Q4_K_M", options: { pure: true } },
  { model: "untied", type: "Q5_K_M", options: { outputTensorType: "q8_0", tokenEmbeddingType: "q4_0" } },
  { model: "dense", type: "Q4_K_M", options: { outputTensorType: "q5_K" } },
  { model: "dense", type: "F16", options: { tokenEmbeddingType: "q8_0" } },
  { model: "dense", type: "Q4_K_M", options: { tensorTypes: [{ pattern: "attn_q", type: "q8_0" }, { pattern: "blk\\.[0-3]\\.ffn_down", type: "q5_0" }] } },
  { model: "tiny", type: "Q4_K_M", options: { tensorTypes: [{ pattern: "ffn_up", type: "q6_K" }] } },
  {
    model: "dense",
    type: "Q8_0",
    options: {
      metadataOverrides: [
        { key: "qwen3.context_length", type: "int", value: "-8192" },
        { key: "qwen3.rope.freq_base", type: "float", value: 500000.5 },
        { key: "tokenizer.ggml.add_bos_token", type: "bool", value: true },
        { key: "general.name", type: "str", value: "overridden" },
        { key: "memra.new_key", type: "int", value: "7" },
      ],
    },
  },
];

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const work = mkdtempSync(join(tmpdir(), "memra-quantize-goldens-"));
const inputs: Record<string, string> = {};
for (const [id, m] of Object.entries(MODELS)) inputs[id] = await syntheticModelFile(resolveOptions(m.preset, m.options));

const recorded = [];
for (const c of CASES) {
  const output = join(work, "out.gguf");
  llamaQuantize(inputs[c.model]!, output, { type: c.type, threads: 2, ...c.options });
  const file = openGGUF(output);
  const fileType = file.getNumber("general.file_type");
  recorded.push({
    ...c,
    fileType,
    bytes: file.bytes.byteLength,
    sha256: sha256(readFileSync(output)),
    tensors: file.tensors.map((t) => `${t.name} ${ggmlTypeName(t.type)} ${sha256(file.tensorData(t)).slice(0, 16)}`),
  });
  rmSync(output);
  console.error(`${c.model} ${c.type}${c.options ? ` ${JSON.stringify(c.options)}` : ""}: ${file.tensors.length} tensors`);
}
rmSync(work, { recursive: true, force: true });

writeFileSync(
  OUT,
  `${JSON.stringify(
    {
      reference: "llama.cpp's llama_model_quantize, node-llama-cpp 3.21.1 prebuilt linux-x64 (tools/llamacpp/quantize-goldens.ts)",
      models: Object.fromEntries(Object.entries(MODELS).map(([id, m]) => [id, { preset: m.preset, options: m.options }])),
      cases: recorded,
    },
    null,
    1,
  )}\n`,
);
console.error(`wrote ${OUT}: ${recorded.length} cases`);
