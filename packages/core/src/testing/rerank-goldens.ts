import { readFileSync } from "node:fs";

/** A model of tools/llamacpp/rerank-goldens.mjs's fixture: llama.cpp's tokens and scores of query–document prompts. */
export interface RerankGoldenModel {
  readonly id: string;
  readonly preset: "tiny" | "small";
  readonly options: Record<string, unknown>;
  readonly cases: readonly { readonly query: string; readonly document: string; readonly tokens: readonly number[]; readonly score: number }[];
}

/** The recorded models (packages/core/src/__fixtures__/rerank-goldens.json). */
export function loadRerankGoldens(): readonly RerankGoldenModel[] {
  return (JSON.parse(readFileSync(new URL("../__fixtures__/rerank-goldens.json", import.meta.url), "utf8")) as { models: RerankGoldenModel[] }).models;
}
