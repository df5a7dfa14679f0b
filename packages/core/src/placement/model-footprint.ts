/**
 * What a model needs in memory, per part, without loading it: the bytes of each layer's weights
 * (its experts apart) from the GGUF tensor infos, and the widths that size its KV cache and
 * scratch buffers. Pure: a GGUF file's header is enough, or a list of tensor infos.
 */
import { type GGUFFile, type ModelConfig, TOKENIZER_KEYS, readModelConfig } from "@memra/gguf";

/** The widths a placement needs (the model's hyper-parameters, as the Transformer uses them). */
export interface ModelShape {
  readonly architecture: string;
  readonly layers: number;
  /** embedding_length */
  readonly embedding: number;
  /** heads * headDim */
  readonly queryWidth: number;
  /** kvHeads * headDim */
  readonly kvWidth: number;
  readonly vocabulary: number;
  /** Dense FFN width (0 for MoE). */
  readonly feedForwardLength: number;
  /** 0 for dense models. */
  readonly experts: number;
  readonly expertFeedForwardLength: number;
  readonly contextLength: number;
}

/**
 * Bytes of some tensors as a backend holds them: `stored` as in the file (the native backends keep
 * weights in their GGUF type), `f32` dequantized (the reference backend).
 */
export interface TensorBytes {
  readonly stored: number;
  readonly f32: number;
}

export interface LayerFootprint {
  readonly layer: number;
  /** Every tensor of the layer except the routed experts (attention, norms, router, dense FFN). */
  readonly weights: TensorBytes;
  /** ffn_gate_exps, ffn_up_exps, ffn_down_exps (zero for dense models). */
  readonly experts: TensorBytes;
}

export interface ModelFootprint {
  readonly shape: ModelShape;
  readonly layers: readonly LayerFootprint[];
  readonly tokenEmbedding: TensorBytes;
  readonly outputNorm: TensorBytes;
  /** output.weight; undefined when the LM head is the token embedding (tied). */
  readonly output: TensorBytes | undefined;
}

/** The fields of a tensor info the footprint reads (GGUFTensorInfo has them). */
export interface FootprintTensor {
  readonly name: string;
  readonly byteSize: number;
  readonly elementCount: number;
}

const ZERO: TensorBytes = { stored: 0, f32: 0 };
const LAYER_TENSOR = /^blk\.(\d+)\.(.+)$/;
const EXPERT_TENSOR = /^ffn_(gate|up|down)_exps\./;

function plus(a: TensorBytes, tensor: FootprintTensor): TensorBytes {
  return { stored: a.stored + tensor.byteSize, f32: a.f32 + tensor.elementCount * 4 };
}

/** The footprint of a model from its shape and tensor infos (tensors of unknown names count nowhere). */
export function footprintFromTensors(shape: ModelShape, tensors: readonly FootprintTensor[]): ModelFootprint {
  const weights: TensorBytes[] = Array.from({ length: shape.layers }, () => ZERO);
  const experts: TensorBytes[] = Array.from({ length: shape.layers }, () => ZERO);
  let tokenEmbedding = ZERO;
  let outputNorm = ZERO;
  let output: TensorBytes | undefined;
  for (const tensor of tensors) {
    const match = LAYER_TENSOR.exec(tensor.name);
    if (match) {
      const layer = Number(match[1]);
      if (layer >= shape.layers) continue;
      if (EXPERT_TENSOR.test(match[2]!)) experts[layer] = plus(experts[layer]!, tensor);
      else weights[layer] = plus(weights[layer]!, tensor);
    } else if (tensor.name === "token_embd.weight") {
      tokenEmbedding = plus(tokenEmbedding, tensor);
    } else if (tensor.name === "output_norm.weight") {
      outputNorm = plus(outputNorm, tensor);
    } else if (tensor.name === "output.weight") {
      output = plus(ZERO, tensor);
    }
  }
  return {
    shape,
    layers: weights.map((w, layer) => ({ layer, weights: w, experts: experts[layer]! })),
    tokenEmbedding,
    outputNorm,
    output,
  };
}

/** The shape the Transformer builds from a config (vocabulary from token_embd or the token list). */
export function modelShape(config: ModelConfig, vocabulary: number): ModelShape {
  const moe = config.architecture === "qwen3moe";
  return {
    architecture: config.architecture,
    layers: config.blockCount,
    embedding: config.embeddingLength,
    queryWidth: config.headCount * config.keyLength,
    kvWidth: config.headCountKv * config.keyLength,
    vocabulary,
    feedForwardLength: moe ? 0 : config.feedForwardLength,
    experts: moe ? config.expertCount : 0,
    expertFeedForwardLength: moe ? config.expertFeedForwardLength : 0,
    contextLength: config.contextLength,
  };
}

/** The footprint of a GGUF file, from its header alone (no tensor data is read). */
export function modelFootprint(file: GGUFFile): ModelFootprint {
  const config = readModelConfig(file);
  const vocabulary = file.tensor("token_embd.weight")?.shape[1] ?? file.getArray(TOKENIZER_KEYS.tokens)?.items.length ?? 0;
  return footprintFromTensors(modelShape(config, vocabulary), file.tensors);
}
