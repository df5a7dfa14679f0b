/**
 * Which type each tensor of a model gets when it is quantized to a llama.cpp file type: llama.cpp's
 * `llama_model_quantize` (src/llama-quant.cpp) rule for rule, for the architectures memra runs
 * (qwen3, qwen3moe), so that `quantizeModel` writes the file llama-quantize writes.
 */
import { GGML_TYPES, GGMLType, ggmlTypeInfo, ggmlTypeName, tensorByteSize } from "../ggml-type";
import type { GGUFFile, GGUFTensorInfo } from "../gguf-file";
import type { GGUFValue } from "../gguf-value";
import { type MetadataOverride, quantizeOverrideValue } from "../metadata-override";
import { canDequantize, canQuantize, requiresImportance } from "../quant";
import { GGUFSplitFile, SPLIT_KEYS } from "../split-gguf";
import { QuantizationError } from "./quantization-error";
import { type LlamaFileType, parseLlamaFileType } from "./llama-ftype";

export { QuantizationError };

/** A tensor type override: tensors whose name the pattern matches (anywhere, as std::regex_search) get `type`. */
export interface TensorTypeOverride {
  readonly pattern: string | RegExp;
  readonly type: GGMLType | string;
}

export interface QuantizationOptions {
  /** The file type: llama-quantize's name ("Q4_K_M", "q8_0", "COPY") or a llama_ftype number. */
  readonly type: string | number;
  /** Quantize tensors that are already quantized (llama-quantize --allow-requantize): they are dequantized first. */
  readonly allowRequantize?: boolean;
  /** Leave output.weight as it is (llama-quantize --leave-output-tensor). */
  readonly leaveOutputTensor?: boolean;
  /** Every quantized tensor gets the file type's default type, no mix (llama-quantize --pure). */
  readonly pure?: boolean;
  /** The type of output.weight (and of tied token embeddings) (llama-quantize --output-tensor-type). */
  readonly outputTensorType?: GGMLType | string;
  /** The type of token_embd.weight (llama-quantize --token-embedding-type). */
  readonly tokenEmbeddingType?: GGMLType | string;
  /** Per-tensor types by name pattern, the first match winning (llama-quantize --tensor-type PATTERN=TYPE). */
  readonly tensorTypes?: readonly TensorTypeOverride[];
  /** Metadata written into the output (llama-quantize --override-kv): a float as float32, an int as the uint32 of its magnitude. */
  readonly metadataOverrides?: readonly MetadataOverride[];
  /**
   * The importance matrix by weight name (llama-quantize --imatrix, as `importanceOf` reads it): for a
   * tensor of `columns` columns and `experts` matrices, `columns * experts` values. With it the
   * quantizers weight each value's error by its column's importance, and the mixes follow llama.cpp's
   * has_imatrix rules; IQ1_*, IQ2_*, IQ3_XXS and Q2_K_S tensors cannot be written without it. An empty
   * map is no importance matrix.
   */
  readonly importance?: ReadonlyMap<string, Float32Array>;
  /**
   * Layers to remove (llama-quantize --prune-layers): their `blk.N.` tensors are left out, the
   * remaining blocks renumbered from 0 in order and `{arch}.block_count` set to how many remain. The
   * mixes' per-layer rules still count against the input's block count, as llama.cpp's do; an
   * importance matrix is read by the input's tensor names. Sorted and de-duplicated here.
   */
  readonly pruneLayers?: readonly number[];
  /**
   * Write the output in the input's shards (llama-quantize --keep-split): each tensor in the shard it
   * came from, the tensors in the input's file order (shard, then offset) instead of llama.cpp's name
   * order, and split.no / split.count / split.tensors.count in every shard when there are several.
   * An input of one file gives one file, named as shard 1 of 1.
   */
  readonly keepSplit?: boolean;
  /**
   * Only planning (llama-quantize --dry-run): a tensor that would need an importance matrix there is
   * none of is reported in `needsImportance` instead of refused.
   */
  readonly dryRun?: boolean;
}

export interface PlannedTensor {
  /** The name in the output: the input's, with its block renumbered when layers are pruned. */
  readonly name: string;
  /** The input tensor it is converted from. */
  readonly sourceName: string;
  /** The output shard it is written to (0 unless `keepSplit`). */
  readonly shard: number;
  /** Innermost dimension first. */
  readonly shape: readonly number[];
  readonly from: GGMLType;
  readonly to: GGMLType;
  /** The type the rules chose did not fit the row length, and llama.cpp's fallback replaced it. */
  readonly fallbackFrom?: GGMLType;
  /** The importance of each column, per matrix (`columns * experts` values), when the tensor is converted with one. */
  readonly importance?: Float32Array;
  readonly bytesIn: number;
  readonly bytesOut: number;
}

export interface QuantizationPlan {
  readonly fileType: LlamaFileType;
  /** The value written to general.file_type. */
  readonly fileTypeId: number;
  /** In the order llama.cpp writes them: tensors outside the blocks first, then block by block, each by name. */
  readonly tensors: readonly PlannedTensor[];
  /**
   * The output file's metadata (the first shard's with `keepSplit`): the input's, then
   * general.quantization_version, general.file_type, the overrides, {arch}.block_count when layers are
   * pruned, and split.no, split.count and split.tensors.count when there are several shards.
   */
  readonly metadata: ReadonlyMap<string, GGUFValue>;
  /** Output files: the input's shard count with `keepSplit`, else 1. */
  readonly shardCount: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly elementCount: number;
  /** Tensors whose rows did not fit the chosen type (llama.cpp's "falling back" warnings). */
  readonly fallbacks: number;
  /** Converted tensors the importance matrix has no entry for (llama.cpp's "did not find weights"), when there is one. */
  readonly withoutImportance: readonly string[];
  /** Some tensor's type needs an importance matrix and none was given (only with `dryRun`: else an error). */
  readonly needsImportance: boolean;
}


/** The architectures whose llama.cpp quantization rules this module follows. */
const ARCHITECTURES = new Set(["qwen3", "qwen3moe"]);

/** GGML_QNT_VERSION */
const QUANTIZATION_VERSION = 2;

type Category = "token_embd" | "attn_q" | "attn_v" | "attn_k" | "attn_qkv" | "attn_kv_b" | "attn_output" | "ffn_up" | "ffn_gate" | "ffn_down" | "output" | "other";

/** tensor_get_category */
function categoryOf(name: string): Category {
  if (name === "output.weight") return "output";
  if (name === "token_embd.weight" || name === "per_layer_token_embd.weight") return "token_embd";
  if (name.includes("attn_qkv.weight")) return "attn_qkv";
  if (name.includes("attn_kv_b.weight")) return "attn_kv_b";
  if (name.includes("attn_v.weight")) return "attn_v";
  if (name.includes("attn_k.weight")) return "attn_k";
  if (name.includes("attn_q.weight")) return "attn_q";
  if (name.includes("attn_output.weight")) return "attn_output";
  if (name.includes("ffn_up")) return "ffn_up";
  if (name.includes("ffn_gate")) return "ffn_gate";
  if (name.includes("ffn_down")) return "ffn_down";
  return "other";
}

const isAttentionV = (c: Category) => c === "attn_v" || c === "attn_qkv" || c === "attn_kv_b";
const isQuantized = (type: GGMLType) => (ggmlTypeInfo(type)?.blockSize ?? 1) > 1;
const blockSize = (type: GGMLType) => ggmlTypeInfo(type)!.blockSize;

/** The layer of a "blk.N." tensor (sscanf "blk.%d."), else -1. */
function layerOf(name: string): number {
  const match = /^blk\.([+-]?\d+)\./.exec(name);
  return match ? Number.parseInt(match[1]!, 10) : -1;
}

const utf8 = new TextEncoder();
/** llama_model_loader's weight_name_comparer: by layer, then by name (bytewise). */
function compareWeights(a: GGUFTensorInfo, b: GGUFTensorInfo): number {
  const la = layerOf(a.name), lb = layerOf(b.name);
  if (la !== lb) return la - lb;
  const ba = utf8.encode(a.name), bb = utf8.encode(b.name);
  for (let i = 0; i < Math.min(ba.length, bb.length); i++) if (ba[i] !== bb[i]) return ba[i]! - bb[i]!;
  return ba.length - bb.length;
}

/** tensor_allows_quantization, for the tensor names a qwen3/qwen3moe file has. */
function allowsQuantization(tensor: GGUFTensorInfo, options: QuantizationOptions, onlyCopy: boolean): boolean {
  if (onlyCopy) return false;
  if (dimensionCount(tensor.shape) < 2) return false;
  const name = tensor.name;
  if (!name.endsWith("weight")) return false;
  if (name.includes("_norm.weight")) return false;
  if (options.leaveOutputTensor && name === "output.weight") return false;
  if (name.includes("ffn_gate_inp.weight")) return false;
  return true;
}

/** ggml_n_dims: the number of dimensions up to the last one above 1 (at least 1). */
function dimensionCount(shape: readonly number[]): number {
  for (let i = shape.length - 1; i >= 1; i--) if (shape[i]! > 1) return i + 1;
  return 1;
}

/** A ggml type given by id or by name in any case ("q8_0", "Q4_K"). */
export function parseTensorType(type: GGMLType | string, what: string): GGMLType {
  let id: number | undefined;
  if (typeof type === "number") id = ggmlTypeInfo(type) ? type : undefined;
  else {
    const lower = type.trim().toLowerCase();
    id = GGML_TYPES.find((t) => t.name.toLowerCase() === lower)?.type;
  }
  if (id === undefined) throw new QuantizationError(`${what}: unknown ggml type "${String(type)}"`);
  if (!canQuantize(id)) throw new QuantizationError(`${what}: memra cannot write ${ggmlTypeName(id)} tensors`);
  return id;
}

interface Hyperparameters {
  readonly layers: number;
  readonly experts: number;
  /** n_head / n_head_kv of the first layer (llama_hparams::n_gqa). */
  readonly gqa: number;
}

function hyperparameters(file: GGUFFile, architecture: string): Hyperparameters {
  const number = (key: string, fallback?: number): number => {
    const full = `${architecture}.${key}`;
    const value = file.metadata.get(full);
    if (value === undefined) {
      if (fallback !== undefined) return fallback;
      throw new QuantizationError(`${full} is missing: llama.cpp's quantization rules need it`);
    }
    if (value.type === "array") {
      const first = (value.items as ArrayLike<unknown>)[0];
      if (first === undefined) throw new QuantizationError(`${full} is an empty array`);
      if (typeof first !== "number" && typeof first !== "bigint") throw new QuantizationError(`${full} is not an array of numbers`);
      return Number(first);
    }
    if (typeof value.value === "number" || typeof value.value === "bigint") return Number(value.value);
    throw new QuantizationError(`${full} is a ${value.type}, not a number`);
  };
  const layers = number("block_count");
  const heads = number("attention.head_count");
  const kvHeads = number("attention.head_count_kv", heads);
  return { layers, experts: number("expert_count", 0), gqa: kvHeads > 0 ? Math.trunc(heads / kvHeads) : 0 };
}

/** The counters llama.cpp keeps while it walks the tensors (quantize_state_impl). */
interface State {
  readonly hp: Hyperparameters;
  readonly attentionWvCount: number;
  attentionWv: number;
  ffnDown: number;
  ffnGate: number;
  ffnUp: number;
  readonly tiedEmbeddings: boolean;
  /** has_imatrix */
  readonly hasImportance: boolean;
  fallbacks: number;
}

/** The file types whose own branch of llama_tensor_get_type_impl comes before the per-category rules. */
const LOW_BIT = new Set(["IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"]);
/** The tensor types that need an importance matrix (tensor_requires_imatrix), and q2_K in a Q2_K_S file. */
const NEEDS_IMPORTANCE = new Set<GGMLType>([GGMLType.IQ3_XXS, GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S, GGMLType.IQ1_M, GGMLType.IQ1_S]);
function tensorRequiresImportance(name: string, type: GGMLType, ftype: string): boolean {
  if (name === "token_embd.weight" || name === "per_layer_token_embd.weight" || name === "output.weight") return false;
  return NEEDS_IMPORTANCE.has(type) || (type === GGMLType.Q2_K && ftype === "Q2_K_S");
}

const useMoreBits = (layer: number, layers: number) =>
  layer < Math.trunc(layers / 8) || layer >= Math.trunc((7 * layers) / 8) || (layer - Math.trunc(layers / 8)) % 3 === 2;

/** llama_tensor_get_type_impl for the file types memra writes and a non-Falcon, non-70B model. */
function mixedType(state: State, type: GGMLType, tensor: GGUFTensorInfo, ftype: string, category: Category, outputType: GGMLType | undefined): GGMLType {
  const { hp } = state;
  const layerInfo = (counter: number): [number, number] => {
    if (Math.max(1, hp.experts) > 1) {
      const layer = layerOf(tensor.name);
      if (!/^blk\.[+-]?\d+\./.test(tensor.name)) throw new QuantizationError(`tensor ${tensor.name}: cannot tell its layer`);
      if (layer < 0 || layer >= hp.layers) throw new QuantizationError(`tensor ${tensor.name}: layer ${layer} is not in [0, ${hp.layers})`);
      return [layer, hp.layers];
    }
    return [counter, hp.layers];
  };

  if (category === "output" || (state.tiedEmbeddings && category === "token_embd")) {
    if (outputType !== undefined) return outputType;
    if (tensor.shape[0]! % blockSize(type) !== 0) return GGMLType.Q8_0;
    if (LOW_BIT.has(ftype) || ftype === "IQ3_XXS") return GGMLType.Q5_K;
    return type !== GGMLType.Q8_0 ? GGMLType.Q6_K : type;
  }
  if (category === "token_embd") {
    if (["IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"].includes(ftype)) return GGMLType.Q2_K;
    if (["IQ2_S", "IQ2_M", "IQ3_XXS"].includes(ftype)) return GGMLType.IQ3_S;
    return type;
  }
  if (LOW_BIT.has(ftype)) {
    const iq2Mix = ftype === "IQ2_S" || ftype === "IQ2_M";
    if (isAttentionV(category)) {
      state.attentionWv++;
      if (hp.gqa >= 4 || hp.experts >= 4) return GGMLType.Q4_K;
      return iq2Mix ? GGMLType.IQ3_S : GGMLType.Q2_K;
    }
    if (hp.experts === 8 && category === "attn_k") return GGMLType.Q4_K;
    if (category === "ffn_down") {
      // the counter against n_ffn_down (the layer count), not the layer of the name
      const early = state.ffnDown < Math.trunc(hp.layers / 8);
      state.ffnDown++;
      return early ? (iq2Mix ? GGMLType.IQ3_S : GGMLType.Q2_K) : type;
    }
    if (category === "attn_output") {
      if (hp.experts === 8) return GGMLType.Q5_K;
      if (ftype === "IQ1_S" || ftype === "IQ1_M") return GGMLType.IQ2_XXS;
      if (iq2Mix) return GGMLType.IQ3_S;
    }
    return type;
  }
  if (isAttentionV(category)) {
    let next = type;
    if (ftype === "Q2_K") next = hp.gqa >= 4 ? GGMLType.Q4_K : GGMLType.Q3_K;
    else if (ftype === "Q2_K_S" && hp.gqa >= 4) next = GGMLType.Q4_K;
    else if (ftype === "IQ3_XXS") next = hp.gqa >= 4 ? GGMLType.Q4_K : state.hasImportance ? GGMLType.IQ3_XXS : GGMLType.IQ3_S;
    else if ((ftype === "IQ3_XS" || ftype === "IQ3_S") && hp.gqa >= 4) next = GGMLType.Q4_K;
    else if (ftype === "IQ3_M") next = GGMLType.Q4_K;
    else if (ftype === "Q3_K_M") next = state.attentionWv < 2 ? GGMLType.Q5_K : GGMLType.Q4_K;
    else if (ftype === "Q3_K_L") next = GGMLType.Q5_K;
    else if ((ftype === "IQ4_NL" || ftype === "IQ4_XS") && hp.gqa >= 4) next = GGMLType.Q5_K;
    else if ((ftype === "Q4_K_M" || ftype === "Q5_K_M") && useMoreBits(state.attentionWv, state.attentionWvCount)) next = GGMLType.Q6_K;
    else if (ftype === "Q4_K_S" && state.attentionWv < 4) next = GGMLType.Q5_K;
    if (hp.experts === 8) next = GGMLType.Q8_0;
    state.attentionWv++;
    return next;
  }
  if (category === "attn_k") {
    if (hp.experts === 8) return GGMLType.Q8_0;
    if (ftype === "IQ3_XS") return GGMLType.IQ3_XXS;
    if (ftype === "IQ3_XXS") return GGMLType.IQ2_S;
    return type;
  }
  if (category === "attn_q") {
    if (ftype === "IQ3_XS") return GGMLType.IQ3_XXS;
    if (ftype === "IQ3_XXS") return GGMLType.IQ2_S;
    return type;
  }
  if (category === "ffn_down") {
    const [layer, layers] = layerInfo(state.ffnDown);
    let next = type;
    if (ftype === "Q2_K") next = GGMLType.Q3_K;
    else if (ftype === "Q2_K_S") {
      if (layer < Math.trunc(layers / 8)) next = GGMLType.Q4_K;
    } else if (ftype === "IQ3_XXS" && !state.hasImportance) next = layer < Math.trunc(layers / 8) ? GGMLType.Q4_K : GGMLType.Q3_K;
    else if (ftype === "Q3_K_M") next = layer < Math.trunc(layers / 16) ? GGMLType.Q5_K : GGMLType.Q4_K;
    else if (ftype === "IQ3_M" && (layer < Math.trunc(layers / 8) || (hp.experts === 8 && useMoreBits(layer, layers)))) next = GGMLType.Q4_K;
    else if (ftype === "Q3_K_L") next = GGMLType.Q5_K;
    else if (ftype === "Q4_K_M") {
      if (useMoreBits(layer, layers)) next = GGMLType.Q6_K;
    } else if (layer < Math.trunc(layers / 8) && (ftype === "IQ4_NL" || ftype === "IQ4_XS") && !state.hasImportance) next = GGMLType.Q5_K;
    else if (ftype === "Q5_K_M" && useMoreBits(layer, layers)) next = GGMLType.Q6_K;
    else if (ftype === "Q4_K_S" && layer < Math.trunc(layers / 8)) next = GGMLType.Q5_K;
    else if ((ftype === "Q4_0" || ftype === "Q5_0") && state.hasImportance && layer < Math.trunc(layers / 8)) {
      // llama.cpp's guard for the first ffn_down layers, only with an importance matrix
      next = ftype === "Q4_0" ? GGMLType.Q4_1 : GGMLType.Q5_1;
    }
    state.ffnDown++;
    return next;
  }
  if (category === "attn_output") {
    if (hp.experts === 8) {
      return ["Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S", "IQ3_M", "IQ4_XS"].includes(ftype) ? GGMLType.Q5_K : type;
    }
    if (ftype === "Q2_K") return GGMLType.Q3_K;
    if (ftype === "IQ3_XXS") return GGMLType.IQ3_S;
    if (ftype === "Q3_K_M") return GGMLType.Q4_K;
    if (ftype === "Q3_K_L") return GGMLType.Q5_K;
    if (ftype === "IQ3_M") return GGMLType.Q4_K;
    return type;
  }
  // (llama.cpp's own attn_qkv branch comes after the attn_v one, which takes attn_qkv: never reached)
  if (category === "ffn_gate" || category === "ffn_up") {
    const [layer, layers] = layerInfo(category === "ffn_gate" ? state.ffnGate : state.ffnUp);
    if (category === "ffn_gate") state.ffnGate++;
    else state.ffnUp++;
    if (ftype === "IQ3_XS" && layer >= Math.trunc(layers / 8) && layer < Math.trunc((7 * layers) / 8)) return GGMLType.IQ3_XXS;
  }
  return type;
}

/** tensor_type_fallback: a type whose block does not divide the rows becomes one whose block does. */
function fallback(state: State, tensor: GGUFTensorInfo, type: GGMLType): GGMLType {
  const columns = tensor.shape[0]!;
  if (columns % blockSize(type) === 0) return type;
  state.fallbacks++;
  const replacements: Partial<Record<GGMLType, GGMLType>> = {
    [GGMLType.Q2_K]: GGMLType.Q4_0,
    [GGMLType.Q3_K]: GGMLType.Q4_0,
    [GGMLType.Q4_K]: GGMLType.Q5_0,
    [GGMLType.Q5_K]: GGMLType.Q5_1,
    [GGMLType.Q6_K]: GGMLType.Q8_0,
    [GGMLType.IQ1_S]: GGMLType.IQ4_NL,
    [GGMLType.IQ1_M]: GGMLType.IQ4_NL,
    [GGMLType.IQ2_XXS]: GGMLType.IQ4_NL,
    [GGMLType.IQ2_XS]: GGMLType.IQ4_NL,
    [GGMLType.IQ2_S]: GGMLType.IQ4_NL,
    [GGMLType.IQ3_XXS]: GGMLType.IQ4_NL,
    [GGMLType.IQ3_S]: GGMLType.IQ4_NL,
    [GGMLType.IQ4_XS]: GGMLType.IQ4_NL,
  };
  let next = replacements[type];
  if (next === undefined) {
    if (blockSize(type) > 32) throw new QuantizationError(`tensor ${tensor.name}: no fallback type for ${ggmlTypeName(type)}`);
    next = type;
  }
  return columns % blockSize(next) === 0 ? next : GGMLType.F16;
}

/**
 * The type each tensor of `file` gets, the output metadata and the sizes, without converting
 * anything (llama-quantize --dry-run).
 *
 * @throws QuantizationError when the architecture is not qwen3/qwen3moe, a hyperparameter the rules
 *   need is missing, an override names a type memra cannot write, a tensor would need requantizing
 *   without `allowRequantize`, or a source type cannot be read.
 *   Also for an unknown file type, or one memra cannot write (ternary, FP4); when a tensor's type
 *   needs an importance matrix and there is none, or none for that tensor; when an importance entry
 *   has the wrong length for its tensor, or a value that is not finite.
 */
export function planQuantization(file: GGUFFile, options: QuantizationOptions): QuantizationPlan {
  const fileType = parseLlamaFileType(options.type);
  const architecture = file.architecture;
  if (architecture === undefined) throw new QuantizationError("general.architecture is missing");
  if (!ARCHITECTURES.has(architecture)) {
    throw new QuantizationError(`general.architecture is ${architecture}: memra quantizes qwen3 and qwen3moe models (llama.cpp's rules for those)`);
  }
  const hp = hyperparameters(file, architecture);
  const outputType = options.outputTensorType === undefined ? undefined : parseTensorType(options.outputTensorType, "output tensor type");
  const embeddingType = options.tokenEmbeddingType === undefined ? undefined : parseTensorType(options.tokenEmbeddingType, "token embedding type");
  const overrides = (options.tensorTypes ?? []).map((o, i) => {
    let pattern: RegExp;
    try {
      pattern = typeof o.pattern === "string" ? new RegExp(o.pattern) : o.pattern;
    } catch (error) {
      throw new QuantizationError(`tensor type override ${i + 1}: bad pattern "${String(o.pattern)}": ${(error as Error).message}`);
    }
    return { pattern, type: parseTensorType(o.type, `tensor type override ${JSON.stringify(String(o.pattern))}`) };
  });

  const renumbered = renumberLayers(file, hp.layers, options.pruneLayers);
  const inputs = inputOrder(file, options.keepSplit === true, renumbered?.names);
  const ordered = inputs.map((t) => t.tensor);
  let shardCount = 1;
  if (options.keepSplit) {
    // llama.cpp: as many files as the last shard any kept tensor is in, each of them holding some
    const used = new Set(inputs.map((t) => t.shard));
    shardCount = inputs.reduce((n, t) => Math.max(n, t.shard + 1), 1);
    for (let shard = 1; shard < shardCount; shard++) {
      if (!used.has(shard)) throw new QuantizationError(`keeping the split: no tensor is left in shard ${shard + 1} of ${shardCount} once the layers are pruned`);
    }
  }
  let attentionWvCount = 0;
  let tiedEmbeddings = true;
  for (const t of ordered) {
    const category = categoryOf(t.name);
    if (isAttentionV(category)) attentionWvCount++;
    if (category === "output") tiedEmbeddings = false;
  }
  const importance = options.importance !== undefined && options.importance.size > 0 ? options.importance : undefined;
  if (importance) {
    for (const [name, values] of importance) {
      const bad = values.findIndex((v) => !Number.isFinite(v));
      if (bad >= 0) throw new QuantizationError(`the importance matrix's entry ${name} has a value that is not finite (${values[bad]}) at ${bad}`);
    }
  }
  const state: State = {
    hp, attentionWvCount, attentionWv: 0, ffnDown: 0, ffnGate: 0, ffnUp: 0, tiedEmbeddings, hasImportance: importance !== undefined, fallbacks: 0,
  };
  const withoutImportance: string[] = [];
  let missingImportance = false;
  const onlyCopy = fileType.onlyCopy === true;
  const defaultType = fileType.defaultType;

  const tensors: PlannedTensor[] = [];
  let bytesIn = 0, bytesOut = 0, elementCount = 0;
  for (const { tensor, source, shard } of inputs) {
    const from = tensor.type;
    let to = from;
    let fallbackFrom: GGMLType | undefined;
    const allowed = allowsQuantization(tensor, options, onlyCopy);
    if (allowed) {
      const category = categoryOf(tensor.name);
      if (embeddingType !== undefined && category === "token_embd") to = embeddingType;
      else if (outputType !== undefined && category === "output") to = outputType;
      else {
        to = defaultType;
        if (isQuantized(defaultType)) {
          const override = overrides.find((o) => o.pattern.test(tensor.name));
          if (override) to = override.type;
          else if (!options.pure) to = mixedType(state, to, tensor, fileType.name, category, outputType);
          const chosen = to;
          to = fallback(state, tensor, to);
          if (to !== chosen) fallbackFrom = chosen;
        }
      }
    }
    if (to !== from) {
      if (isQuantized(from) && !options.allowRequantize) {
        throw new QuantizationError(`tensor ${tensor.name} is ${ggmlTypeName(from)}: requantizing is disabled (allow it with allowRequantize / --allow-requantize)`);
      }
      if (from !== GGMLType.F32 && !canDequantize(from)) {
        throw new QuantizationError(`tensor ${tensor.name}: cannot read ${ggmlTypeName(from)} to convert it`);
      }
      if (!canQuantize(to)) throw new QuantizationError(`tensor ${tensor.name}: memra cannot write ${ggmlTypeName(to)}`);
    }
    const needsImportance = allowed && tensorRequiresImportance(tensor.name, to, fileType.name);
    if (needsImportance && !importance && options.dryRun) missingImportance = true;
    else if (needsImportance && !importance) {
      throw new QuantizationError(
        `${fileType.name} needs an importance matrix: tensor ${tensor.name} would be ${ggmlTypeName(to)} (compute one with memra imatrix, pass it with --imatrix)`,
      );
    }
    let weights: Float32Array | undefined;
    if (importance && to !== from) {
      // by the input's name: a pruned model's renumbered block reads its old block's entry (remap_imatrix)
      const entry = importance.get(source.name);
      const expected = tensor.shape[0]! * (tensor.shape[2] ?? 1);
      if (entry === undefined) withoutImportance.push(tensor.name);
      else if (entry.length === expected) weights = entry;
      else if (categoryOf(tensor.name) !== "token_embd") {
        throw new QuantizationError(`the importance matrix has ${entry.length} values for ${tensor.name}, which needs ${expected} (${tensor.shape[0]} columns × ${tensor.shape[2] ?? 1} matrices)`);
      }
      if (weights === undefined && needsImportance) {
        throw new QuantizationError(`the importance matrix has no entry for ${tensor.name}, which ${fileType.name} makes ${ggmlTypeName(to)}: that type needs one`);
      }
    }
    if (to !== from && weights === undefined && requiresImportance(to) && !(options.dryRun && !importance)) {
      // e.g. a token embedding made iq2_xxs by --pure: llama.cpp's rules do not ask for an importance matrix there, and ggml aborts
      throw new QuantizationError(
        `tensor ${tensor.name} would be ${ggmlTypeName(to)}, which cannot be written without an importance matrix, and ${importance ? "the importance matrix has no entry for it" : "there is none"}`,
      );
    }
    const out = Number(tensorByteSize(to, tensor.shape) ?? Number.NaN);
    if (!Number.isFinite(out)) throw new QuantizationError(`tensor ${tensor.name}: ${tensor.shape[0]} columns do not fit ${ggmlTypeName(to)} blocks`);
    tensors.push({
      name: tensor.name, sourceName: source.name, shard, shape: tensor.shape, from, to, ...(fallbackFrom !== undefined ? { fallbackFrom } : {}), ...(weights ? { importance: weights } : {}),
      bytesIn: tensor.byteSize, bytesOut: out,
    });
    bytesIn += tensor.byteSize;
    bytesOut += out;
    elementCount += tensor.elementCount;
  }

  const fileTypeId = onlyCopy ? inputFileType(file) : fileType.id;
  const metadata = new Map(file.metadata);
  metadata.delete("general.quantization_version");
  metadata.set("general.quantization_version", { type: "uint32", value: QUANTIZATION_VERSION });
  metadata.delete("general.file_type");
  metadata.set("general.file_type", { type: "uint32", value: fileTypeId });
  for (const key of Object.values(SPLIT_KEYS)) metadata.delete(key);
  for (const override of options.metadataOverrides ?? []) {
    metadata.delete(override.key);
    metadata.set(override.key, quantizeOverrideValue(override));
  }
  if (renumbered) {
    metadata.delete(`${architecture}.block_count`);
    metadata.set(`${architecture}.block_count`, { type: "uint32", value: renumbered.blockCount });
  }
  if (shardCount > 1) {
    for (const [key, value] of splitKeys(0, shardCount, tensors.length)) {
      metadata.delete(key);
      metadata.set(key, value);
    }
  }
  return { fileType, fileTypeId, tensors, metadata, shardCount, bytesIn, bytesOut, elementCount, fallbacks: state.fallbacks, withoutImportance, needsImportance: missingImportance };
}

/** The split keys llama.cpp's quantizer writes into shard `index` of `count` (in its order). */
export function splitKeys(index: number, count: number, tensors: number): Array<[string, GGUFValue]> {
  return [
    [SPLIT_KEYS.index, { type: "uint16", value: index }],
    [SPLIT_KEYS.count, { type: "uint16", value: count }],
    [SPLIT_KEYS.tensors, { type: "int32", value: tensors }],
  ];
}

/**
 * The input's tensors in the order llama.cpp quantizes them, each under its output name: by
 * weight_name_comparer (layer, then name) of the input's names, or with `keepSplit` by shard and
 * offset in it. Pruned tensors are left out.
 */
function inputOrder(file: GGUFFile, keepSplit: boolean, names: ReadonlyMap<string, string | undefined> | undefined) {
  const shardOf = new Map<string, number>();
  if (keepSplit && file instanceof GGUFSplitFile) file.shards.forEach((shard, index) => shard.tensors.forEach((t) => shardOf.set(t.name, index)));
  const inputs = file.tensors.map((source) => ({ source, shard: shardOf.get(source.name) ?? 0 }));
  if (keepSplit) inputs.sort((a, b) => a.shard - b.shard || a.source.offset - b.source.offset);
  else inputs.sort((a, b) => compareWeights(a.source, b.source));
  const kept: Array<{ tensor: GGUFTensorInfo; source: GGUFTensorInfo; shard: number }> = [];
  for (const { source, shard } of inputs) {
    const name = names === undefined ? source.name : names.get(source.name);
    if (name !== undefined) kept.push({ tensor: name === source.name ? source : { ...source, name }, source, shard });
  }
  return kept;
}

/**
 * llama-quantize --prune-layers: the output name of each input tensor (undefined for a pruned one)
 * and the block count left, as llama.cpp's remap_layer gives them walking the tensors by
 * weight_name_comparer: blocks below the first pruned one keep their number, later kept ones are
 * numbered on from there. Undefined when nothing is pruned.
 *
 * @throws QuantizationError for a layer that is not a whole number from 0 to the block count - 1, or
 *   for pruning every layer (llama.cpp ignores the first and writes a model of no layers for the second).
 */
function renumberLayers(file: GGUFFile, layers: number, prune: readonly number[] | undefined) {
  if (prune === undefined || prune.length === 0) return undefined;
  for (const layer of prune) {
    if (!Number.isInteger(layer) || layer < 0) throw new QuantizationError(`prune layers: ${layer} is not a layer number (a whole number from 0)`);
    if (layer >= layers) throw new QuantizationError(`prune layers: the model has ${layers} layers (0 to ${layers - 1}), so there is no layer ${layer}`);
  }
  const pruned = [...new Set(prune)].sort((a, b) => a - b);
  if (pruned.length >= layers) throw new QuantizationError(`prune layers: pruning all ${layers} layers would leave no model`);
  const mapped = new Map<number, number | undefined>();
  const names = new Map<string, string | undefined>();
  let next = 0;
  for (const tensor of [...file.tensors].sort(compareWeights)) {
    const match = /blk\.(\d+)\./.exec(tensor.name);
    if (match === null) {
      names.set(tensor.name, tensor.name);
      continue;
    }
    const block = Number.parseInt(match[1]!, 10);
    if (!mapped.has(block)) {
      if (pruned.includes(block)) mapped.set(block, undefined);
      else if (block < pruned[0]!) {
        mapped.set(block, block);
        next = block + 1;
      } else mapped.set(block, next++);
    }
    const to = mapped.get(block);
    const digits = match.index + "blk.".length;
    names.set(tensor.name, to === undefined ? undefined : `${tensor.name.slice(0, digits)}${to}${tensor.name.slice(digits + match[1]!.length)}`);
  }
  return { names, blockCount: next };
}

/** llama_model_loader's ftype: general.file_type, else guessed from the most common tensor type (with the guessed flag). */
function inputFileType(file: GGUFFile): number {
  const stored = file.metadata.get("general.file_type");
  if (stored !== undefined && stored.type !== "array" && typeof stored.value === "number") return stored.value >>> 0;
  const counts = new Map<GGMLType, number>();
  let most = GGMLType.F32, mostCount = 0;
  for (const t of [...file.tensors].sort(compareWeights)) {
    const n = (counts.get(t.type) ?? 0) + 1;
    counts.set(t.type, n);
    if (n > mostCount) {
      mostCount = n;
      most = t.type;
    }
  }
  const byType: Partial<Record<GGMLType, number>> = {
    [GGMLType.F32]: 0, [GGMLType.F16]: 1, [GGMLType.BF16]: 32, [GGMLType.Q4_0]: 2, [GGMLType.Q4_1]: 3, [GGMLType.Q5_0]: 8,
    [GGMLType.Q5_1]: 9, [GGMLType.Q8_0]: 7, [GGMLType.Q2_K]: 10, [GGMLType.Q3_K]: 12, [GGMLType.Q4_K]: 15, [GGMLType.Q5_K]: 17,
    [GGMLType.Q6_K]: 18, [GGMLType.IQ4_NL]: 25, [GGMLType.IQ4_XS]: 30, [GGMLType.IQ2_XXS]: 19, [GGMLType.IQ2_XS]: 20,
    [GGMLType.IQ2_S]: 28, [GGMLType.IQ3_XXS]: 23, [GGMLType.IQ1_S]: 24, [GGMLType.IQ1_M]: 31, [GGMLType.IQ3_S]: 26,
  };
  return (byType[most] ?? 0) | 1024;
}
