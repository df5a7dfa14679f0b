import { readFileSync } from "node:fs";

/** A model of tools/llamacpp/embedding-goldens.mjs's fixture: llama.cpp's raw embeddings of its texts. */
export interface EmbeddingGoldenModel {
  readonly id: string;
  readonly preset: "tiny";
  readonly options: Record<string, unknown>;
  readonly cases: readonly { readonly text: string; readonly tokens: number; readonly embedding: readonly number[] }[];
}

/** The recorded models (packages/core/src/__fixtures__/embedding-goldens.json). */
export function loadEmbeddingGoldens(): readonly EmbeddingGoldenModel[] {
  return (JSON.parse(readFileSync(new URL("../__fixtures__/embedding-goldens.json", import.meta.url), "utf8")) as { models: EmbeddingGoldenModel[] }).models;
}

/** Cosine similarity of two vectors, in double precision. */
export function cosineSimilarity(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(na * nb);
}
