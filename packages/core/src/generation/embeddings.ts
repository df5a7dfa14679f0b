import { z } from "zod";
import { InvalidOptionError } from "./generation-options";

/**
 * How the hidden states of an input's tokens become one vector: the last token's (Qwen3-Embedding,
 * llama.cpp's pooling "last"), or their mean (llama.cpp's "mean").
 */
export type Pooling = "last" | "mean";

export const embedOptionsSchema = z.object({
  /** Default: the model's (its GGUF's pooling_type), else "last". */
  pooling: z.enum(["last", "mean"]).optional(),
  /** Scale to unit length (L2), as llama.cpp's server and OpenAI's API give embeddings. Default true. */
  normalize: z.boolean().default(true),
  /**
   * Keep the first `dimensions` components (then normalize): Matryoshka truncation, which
   * Qwen3-Embedding is trained for, and OpenAI's `dimensions`. Default: all of them.
   */
  dimensions: z.number().int().positive("dimensions must be at least 1").optional(),
  /** Parse special tokens such as `<|im_start|>` in the text. Default false, as llama.cpp's embedding context. */
  special: z.boolean().default(false),
});

export type EmbedOptions = z.input<typeof embedOptionsSchema>;

/** The pooling named by llama_pooling_type (a GGUF's `{arch}.pooling_type`); undefined for none or one we do not do. */
export function poolingOfGGUF(type: number | undefined): Pooling | undefined {
  return type === 1 ? "mean" : type === 3 ? "last" : undefined;
}

/**
 * One vector from the hidden rows ([rows, width], all of the input's tokens for mean, its last
 * for last pooling): pooled (the mean in double precision), truncated, then normalized.
 */
export function poolEmbedding(hidden: Float32Array, width: number, pooling: Pooling, normalize: boolean, dimensions: number | undefined): Float32Array {
  const rows = hidden.length / width;
  const size = Math.min(width, dimensions ?? width);
  const out = new Float32Array(size);
  if (pooling === "last") out.set(hidden.subarray((rows - 1) * width, (rows - 1) * width + size));
  else {
    for (let c = 0; c < size; c++) {
      let sum = 0;
      for (let r = 0; r < rows; r++) sum += hidden[r * width + c]!;
      out[c] = sum / rows;
    }
  }
  if (normalize) {
    let norm = 0;
    for (let c = 0; c < size; c++) norm += out[c]! * out[c]!;
    norm = Math.sqrt(norm);
    if (norm > 0) for (let c = 0; c < size; c++) out[c] = out[c]! / norm;
  }
  return out;
}

export function checkDimensions(dimensions: number | undefined, width: number): void {
  if (dimensions !== undefined && dimensions > width) throw new InvalidOptionError("dimensions", `dimensions is ${dimensions}, but the model's embeddings have ${width}`);
}
