import { type GGUFFile, GGUFError, TOKENIZER_KEYS, architectureKey, ARCHITECTURE_KEYS, dequantize } from "@memra/gguf";
import { z } from "zod";
import { activationRoundingFor, roundActivations } from "../activation-rounding";
import { InvalidOptionError } from "./generation-options";

/** The classification head's tensor: llama.cpp's `cls_out` ([hidden, labels]). */
export const CLASSIFIER_TENSOR = "cls.output.weight";
/** Its bias, where a converter wrote one. */
export const CLASSIFIER_BIAS_TENSOR = "cls.output.bias";

export const rankOptionsSchema = z.object({
  /**
   * The prompt with `{query}` and `{document}` in it. Default: the GGUF's
   * `tokenizer.chat_template.rerank` (llama.cpp's converter writes Qwen3-Reranker's).
   */
  template: z.string().optional(),
  /** Keep the best `topN` documents only (after sorting by score). Default: all. */
  topN: z.number().int().positive("topN must be at least 1").optional(),
});

export type RankOptions = z.input<typeof rankOptionsSchema>;

/** One document's relevance: its index among the documents given, and its score in [0, 1]. */
export interface RankedDocument {
  readonly index: number;
  readonly score: number;
  /** Tokens the query and this document took with the template. */
  readonly tokens: number;
}

/**
 * A reranker's classification head (Qwen3-Reranker as llama.cpp converts it: pooling_type rank and
 * `cls.output.weight`, whose rows are the LM head's "yes" and "no" rows). A score is what
 * llama.cpp's rank pooling gives for Qwen3: the last token's hidden state after the final norm,
 * times the head (plus its bias), softmax over the labels, the first label's probability.
 */
export class ClassifierHead {
  private readonly rounded: Float32Array;

  private constructor(
    /** [labels, hidden], row-major: one row per label. */
    private readonly weights: Float32Array,
    private readonly bias: Float32Array | undefined,
    private readonly rounding: ReturnType<typeof activationRoundingFor>,
    readonly hidden: number,
    readonly labels: readonly string[],
  ) {
    this.rounded = new Float32Array(hidden);
  }

  /** The head of a GGUF, or undefined when it has none. Throws GGUFError for a head of the wrong shape. */
  static fromGGUF(file: GGUFFile, hidden: number): ClassifierHead | undefined {
    const tensor = file.tensor(CLASSIFIER_TENSOR);
    if (!tensor) return undefined;
    const [columns, rows = 1, ...rest] = tensor.shape;
    if (columns !== hidden || rest.some((size) => size !== 1) || rows < 1) {
      throw new GGUFError(`tensor "${CLASSIFIER_TENSOR}"`, 0, `shape [${tensor.shape.join(", ")}] is not [${hidden}, labels]`);
    }
    const weights = dequantize(tensor.type, file.tensorData(tensor), columns * rows);
    const biasTensor = file.tensor(CLASSIFIER_BIAS_TENSOR);
    let bias: Float32Array | undefined;
    if (biasTensor) {
      if (biasTensor.shape[0] !== rows) throw new GGUFError(`tensor "${CLASSIFIER_BIAS_TENSOR}"`, 0, `has ${biasTensor.shape[0]} values for ${rows} labels`);
      bias = dequantize(biasTensor.type, file.tensorData(biasTensor), rows);
    }
    const architecture = file.architecture ?? "";
    const named = file.getArray(architectureKey(ARCHITECTURE_KEYS.classifierOutputLabels, architecture))?.items;
    const labels = Array.from({ length: rows }, (_, i) => (Array.isArray(named) && typeof named[i] === "string" ? (named[i] as string) : `LABEL_${i}`));
    return new ClassifierHead(weights, bias, activationRoundingFor(tensor.type), hidden, labels);
  }

  /** The labels' probabilities for one hidden row (after the final norm). */
  probabilities(hidden: Float32Array): Float64Array {
    // The activations as ggml's matmul sees them for the head's weight type.
    roundActivations(this.rounding, hidden, 0, this.hidden, this.rounded);
    const logits = new Float64Array(this.labels.length);
    for (let label = 0; label < logits.length; label++) {
      let sum = 0;
      const offset = label * this.hidden;
      for (let i = 0; i < this.hidden; i++) sum += this.weights[offset + i]! * this.rounded[i]!;
      logits[label] = Math.fround(sum) + (this.bias?.[label] ?? 0);
    }
    let most = Number.NEGATIVE_INFINITY;
    for (const logit of logits) most = Math.max(most, logit);
    let total = 0;
    for (let label = 0; label < logits.length; label++) {
      logits[label] = Math.exp(logits[label]! - most);
      total += logits[label]!;
    }
    for (let label = 0; label < logits.length; label++) logits[label] = logits[label]! / total;
    return logits;
  }

  /** The relevance score: the first label's probability ("yes" for Qwen3-Reranker). */
  score(hidden: Float32Array): number {
    return this.probabilities(hidden)[0]!;
  }
}

/** The GGUF's rerank prompt (`tokenizer.chat_template.rerank`), if it has one. */
export function rerankTemplateOf(file: GGUFFile): string | undefined {
  return file.getString(TOKENIZER_KEYS.rerankChatTemplate);
}

/** Throws InvalidOptionError unless the template has both placeholders. */
export function checkRerankTemplate(template: string): void {
  for (const placeholder of ["{query}", "{document}"]) {
    if (!template.includes(placeholder)) throw new InvalidOptionError("template", `a rerank template needs ${placeholder}; got ${JSON.stringify(template.slice(0, 80))}`);
  }
}

/**
 * The prompt text of one query–document pair: the template with `{query}` and `{document}`
 * replaced, as llama.cpp's server and Qwen3-Reranker's own code format it (the whole text is then
 * tokenized at once, special tokens parsed).
 */
export function rerankPrompt(template: string, query: string, document: string): string {
  // A function replacer, so that "$&" and friends in the texts stay as they are.
  return template.replaceAll("{query}", () => query).replaceAll("{document}", () => document);
}

/**
 * How many leading tokens every prompt shares, leaving each at least its last token of its own
 * (whose hidden row gives its score); 0 for fewer than two prompts.
 */
export function sharedPrefixLength(prompts: readonly (readonly number[])[]): number {
  let shared = prompts.length < 2 ? 0 : Math.min(...prompts.map((tokens) => tokens.length)) - 1;
  for (const tokens of prompts) {
    let same = 0;
    while (same < shared && tokens[same] === prompts[0]![same]) same++;
    shared = same;
  }
  return shared;
}

/** The documents best first (ties in their given order), `topN` of them when given. */
export function rankedDocuments(prompts: readonly (readonly number[])[], scores: readonly number[], topN: number | undefined): RankedDocument[] {
  const ranked = prompts.map((tokens, index) => ({ index, score: scores[index]!, tokens: tokens.length }));
  ranked.sort((a, b) => b.score - a.score || a.index - b.index);
  return topN === undefined ? ranked : ranked.slice(0, topN);
}
