#!/usr/bin/env bun
/**
 * llama-quantize's output files for synthetic models, as golden fixtures for `memra quantize`:
 * llama.cpp's `llama_model_quantize` (libllama of node-llama-cpp 3.21.1's prebuilt linux-x64
 * binaries, called through bun:ffi: node-llama-cpp has no binding for it) quantizes seeded synthetic
 * models to every file type memra writes, and the SHA-256 of each output file and of each of its
 * tensors' bytes, with the tensor's type, are recorded. Cases with `imatrix` are quantized with
 * @memra/synthetic's syntheticImatrix for the model, written as imatrix.gguf and handed over as
 * llama-quantize --imatrix imatrix.gguf does (its load_imatrix normalisation, its
 * --include-weights / --exclude-weights, its quantize.imatrix.* metadata after the user's).
 *
 * Cases with `input.splitMaxTensors` quantize the model split as gguf-split --split-max-tensors N
 * splits it (@memra/gguf's splitGGUF, checked against gguf-split by split-goldens.mjs), given by its
 * first shard; with --keep-split their output is several files, each recorded in `files`.
 *
 *   bun tools/llamacpp/quantize-goldens.ts             (from the repository root, after npm ci in tools/llamacpp)
 *   bun tools/llamacpp/quantize-goldens.ts --missing   (records only the cases the fixture lacks, keeps the rest as they are)
 *
 * Writes packages/cli/src/__fixtures__/quantize-goldens.json.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { ggmlTypeName, importanceOf, openGGUF, quantizationImportance, readImatrix, splitGGUF, writeImatrix } from "../../packages/gguf/src/index";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticImatrix, syntheticModelFile } from "../../packages/synthetic/src/index";
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
  // the golden suite's dense-f32 and moe-f32, for llama-imatrix's own files of them (packages/core/src/__fixtures__/imatrix)
  "suite-dense": { preset: "small", options: { weightType: "f32" } },
  "suite-moe": { preset: "small", options: { architecture: "qwen3moe", weightType: "f32", ffn: 0, experts: 8, expertsUsed: 2, expertFfn: 256 } },
};

interface Case {
  model: string;
  type: string;
  /** the model split into shards of N tensors (gguf-split --split-max-tensors N), quantized from its first shard */
  input?: { splitMaxTensors: number };
  /** imatrix.file: an imatrix file of the repository (llama-imatrix's) instead of the model's syntheticImatrix */
  options?: Omit<LlamaQuantizeOptions, "type" | "threads" | "importance"> & { imatrix?: { include?: string[]; exclude?: string[]; file?: string } };
}

const ALL = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_M"];
const MIXES = ["Q4_0", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_M"];
/** The file types that need an importance matrix, and the others as they change with one. */
const LOW_BIT = ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M", "IQ3_XXS", "IQ3_XS", "Q2_K_S"];
const WEIGHTED = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_M", "F16"];
const imatrix = { imatrix: {} };
const CASES: Case[] = [
  ...LOW_BIT.map((type) => ({ model: "dense", type, options: imatrix })),
  ...LOW_BIT.map((type) => ({ model: "untied", type, options: imatrix })),
  ...WEIGHTED.map((type) => ({ model: "dense", type, options: imatrix })),
  ...["IQ2_XXS", "IQ2_M", "IQ1_M", "IQ3_XXS", "Q4_K_M", "IQ4_XS"].map((type) => ({ model: "moe8", type, options: imatrix })),
  ...["IQ2_XS", "IQ3_XS", "Q4_K_M"].map((type) => ({ model: "tiny", type, options: imatrix })),
  { model: "dense", type: "Q4_K_M", options: { imatrix: { exclude: ["ffn_down", "attn_v"] } } },
  { model: "dense", type: "IQ4_XS", options: { imatrix: { include: ["attn"] } } },
  // (with --pure alone, token_embd.weight would be iq2_xxs without importance: ggml aborts; memra refuses)
  { model: "untied", type: "IQ2_XXS", options: { imatrix: {}, pure: true, outputTensorType: "q8_0", tokenEmbeddingType: "q4_K" } },
  { model: "dense-q8_0", type: "IQ2_M", options: { imatrix: {}, allowRequantize: true } },
  { model: "suite-dense", type: "IQ2_XXS", options: { imatrix: { file: "packages/core/src/__fixtures__/imatrix/dense-f32-c64.gguf" } } },
  { model: "suite-dense", type: "Q4_K_M", options: { imatrix: { file: "packages/core/src/__fixtures__/imatrix/dense-f32-c64.gguf" } } },
  { model: "suite-moe", type: "IQ1_M", options: { imatrix: { file: "packages/core/src/__fixtures__/imatrix/moe-f32-c64.gguf" } } },
  { model: "dense", type: "Q4_K_M", options: { imatrix: {}, metadataOverrides: [{ key: "general.name", type: "str", value: "with importance" }] } },
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
  // --keep-split: a split input written in its shards (in its file order), or as one file without it
  ...["Q4_K_M", "Q8_0"].flatMap((type) => [
    { model: "dense", type, input: { splitMaxTensors: 25 } },
    { model: "dense", type, input: { splitMaxTensors: 25 }, options: { keepSplit: true } },
  ]),
  { model: "moe8", type: "Q4_K_M", input: { splitMaxTensors: 20 }, options: { keepSplit: true } },
  // an input of one file: one file named as shard 1 of 1, its tensors in file order
  { model: "dense", type: "Q4_K_M", options: { keepSplit: true } },
  // --prune-layers: blocks renumbered, block_count rewritten; the per-layer rules still count 8 layers
  { model: "dense", type: "Q4_K_M", options: { pruneLayers: [2, 5] } },
  { model: "dense", type: "Q3_K_M", options: { pruneLayers: [0, 7] } },
  { model: "dense", type: "Q4_K_M", options: { imatrix: {}, pruneLayers: [0, 3] } },
  { model: "dense", type: "IQ2_XXS", options: { imatrix: {}, pruneLayers: [1] } },
  { model: "dense", type: "Q4_K_M", input: { splitMaxTensors: 25 }, options: { keepSplit: true, pruneLayers: [2, 5] } },
  // MoE: the layer of the (renumbered) name against the input's block count
  { model: "moe8", type: "Q4_K_M", options: { pruneLayers: [0] } },
  { model: "moe8", type: "IQ3_M", options: { pruneLayers: [1, 2] } },
  { model: "suite-dense", type: "Q4_K_M", options: { imatrix: { file: "packages/core/src/__fixtures__/imatrix/dense-f32-c64.gguf" }, pruneLayers: [0] } },
  { model: "suite-moe", type: "Q4_K_M", options: { imatrix: { file: "packages/core/src/__fixtures__/imatrix/moe-f32-c64.gguf" }, pruneLayers: [0] } },
  { model: "suite-moe", type: "IQ1_M", options: { imatrix: { file: "packages/core/src/__fixtures__/imatrix/moe-f32-c64.gguf" }, pruneLayers: [0] } },
];

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const work = mkdtempSync(join(tmpdir(), "memra-quantize-goldens-"));
const inputs: Record<string, string> = {};
for (const [id, m] of Object.entries(MODELS)) inputs[id] = await syntheticModelFile(resolveOptions(m.preset, m.options));

/** A case's identity in the fixture: what it quantizes and how. */
const key = (c: Case) => JSON.stringify([c.model, c.type, c.input, c.options]);
const previous = new Map<string, unknown>();
if (process.argv.includes("--missing") && existsSync(OUT)) {
  for (const c of JSON.parse(readFileSync(OUT, "utf8")).cases as Case[]) previous.set(key(c), c);
}
const splitInputs = new Map<string, string>();
/** The model split as gguf-split --split-max-tensors N splits it: the path of its first shard. */
async function splitInput(model: string, maxTensors: number): Promise<string> {
  const id = `${model}-${maxTensors}`;
  if (!splitInputs.has(id)) {
    const folder = mkdtempSync(join(work, `split-${id}-`));
    const plan = await splitGGUF(openGGUF(inputs[model]!), join(folder, "model"), { maxTensors });
    splitInputs.set(id, plan.shards[0]!.path);
  }
  return splitInputs.get(id)!;
}
const describe = (path: string) => {
  const file = openGGUF(path);
  return {
    fileType: file.getNumber("general.file_type"),
    bytes: file.fileBytes,
    sha256: sha256(readFileSync(path)),
    tensors: file.tensors.map((t) => `${t.name} ${ggmlTypeName(t.type)} ${sha256(file.tensorData(t)).slice(0, 16)}`),
  };
};

const recorded = [];
let kept = 0;
for (const c of CASES) {
  if (previous.has(key(c))) {
    recorded.push(previous.get(key(c)));
    kept++;
    continue;
  }
  const output = join(work, "out.gguf");
  const input = c.input ? await splitInput(c.model, c.input.splitMaxTensors) : inputs[c.model]!;
  const { imatrix: selection, ...options } = c.options ?? {};
  let importance: Partial<LlamaQuantizeOptions> = {};
  if (selection) {
    // llama-quantize --imatrix NAME, run in the folder that holds it
    let path = join(work, "imatrix.gguf");
    if (selection.file) path = join(ROOT, selection.file);
    else writeImatrix(path, syntheticImatrix(openGGUF(inputs[c.model]!)));
    const read = readImatrix(path);
    const chosen = quantizationImportance(importanceOf(read), { file: basename(path), datasets: read.datasets, chunkCount: read.chunkCount }, selection);
    importance = {
      importance: chosen.importance,
      metadataOverrides: [
        ...(options.metadataOverrides ?? []),
        ...chosen.metadata.map((m) => ({ key: m.key, type: m.type, value: m.value as string | bigint })),
      ],
    };
  }
  if (options.keepSplit) {
    // llama-quantize --keep-split IN OUT.gguf: the shards OUT-0000i-of-0000n.gguf
    const folder = mkdtempSync(join(work, "keep-split-"));
    llamaQuantize(input, join(folder, "out"), { type: c.type, threads: 2, ...options, ...importance });
    const names = readdirSync(folder).sort();
    const files = names.map((name) => ({ name: name.slice("out".length), ...describe(join(folder, name)) }));
    recorded.push({ ...c, fileType: files[0]!.fileType, files: files.map(({ fileType: _, ...f }) => f) });
    rmSync(folder, { recursive: true });
    console.error(`${c.model} ${c.type} ${JSON.stringify(c.input ?? {})} ${JSON.stringify(c.options)}: ${names.join(", ")}`);
    continue;
  }
  llamaQuantize(input, output, { type: c.type, threads: 2, ...options, ...importance });
  const described = describe(output);
  recorded.push({ ...c, ...described });
  rmSync(output);
  console.error(`${c.model} ${c.type}${c.input ? ` ${JSON.stringify(c.input)}` : ""}${c.options ? ` ${JSON.stringify(c.options)}` : ""}: ${described.tensors.length} tensors`);
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
console.error(`wrote ${OUT}: ${recorded.length} cases (${recorded.length - kept} recorded now)`);
