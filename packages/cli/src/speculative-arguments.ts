/**
 * Speculative decoding's options, shared by generate, chat and serve: llama.cpp's --model-draft,
 * --draft-max and --draft-p-min, and --lookup for prompt lookup (drafts copied from earlier text).
 */
import { type GenerateOptions, InvalidOptionError, type Model, checkDraftModel, loadModel } from "@memra/core";
import { CliError } from "./cli-error";
import { parsePositiveInteger } from "./commands/model-arguments";
import { type PlacementValues, placeModel } from "./placement-arguments";

export const speculativeParseOptions = {
  "model-draft": { type: "string" },
  lookup: { type: "boolean", default: false },
  "draft-max": { type: "string" },
  "draft-p-min": { type: "string" },
} as const;

export const speculativeOptionHelp = `  --model-draft FILE       speculative decoding with a smaller draft model of the same vocabulary
  --lookup                 speculative decoding by prompt lookup (drafts copied from earlier text)
  --draft-max N            most draft tokens per step (default 16 with a draft model, 8 with --lookup)
  --draft-p-min P          the draft model's least probability to draft on (default 0.75)`;

export interface SpeculativeValues extends PlacementValues {
  readonly "model-draft"?: string | undefined;
  readonly lookup?: boolean | undefined;
  readonly "draft-max"?: string | undefined;
  readonly "draft-p-min"?: string | undefined;
}

export interface SpeculativeChoice {
  /** The generation option, or undefined without speculative decoding. */
  readonly speculative: GenerateOptions["speculative"];
  /** The draft model, which the command disposes. */
  readonly draft: Model | undefined;
}

/**
 * The speculative option of the flags, with the draft model loaded on the same device choice as
 * `model` and checked against its vocabulary (`contextTokens` of KV cache for each of `sequences` sequences). Checks the numbers
 * before anything loads.
 */
export async function loadSpeculative(
  model: Model,
  values: SpeculativeValues,
  threads: number | undefined,
  request: { readonly contextTokens: number; readonly sequences?: number },
  notice: (message: string) => void,
): Promise<SpeculativeChoice> {
  const path = values["model-draft"];
  if (path !== undefined && values.lookup) throw new CliError("give --model-draft or --lookup, not both");
  if (path === undefined && !values.lookup) {
    for (const flag of ["draft-max", "draft-p-min"] as const) {
      if (values[flag] !== undefined) throw new CliError(`--${flag} needs --model-draft or --lookup`);
    }
    return { speculative: undefined, draft: undefined };
  }
  const tokens = values["draft-max"] === undefined ? undefined : parsePositiveInteger(values["draft-max"], "--draft-max", 1);
  if (tokens !== undefined && tokens > 64) throw new CliError(`--draft-max must be at most 64, got ${tokens}`);
  if (path === undefined) {
    if (values["draft-p-min"] !== undefined) throw new CliError("--draft-p-min needs --model-draft (--lookup drafts without probabilities)");
    return { speculative: { method: "ngram", ...(tokens === undefined ? {} : { tokens }) }, draft: undefined };
  }
  const minProbability = values["draft-p-min"] === undefined ? undefined : Number(values["draft-p-min"]);
  if (minProbability !== undefined && !(minProbability >= 0 && minProbability <= 1)) throw new CliError(`--draft-p-min must be a number from 0 to 1, got "${values["draft-p-min"]}"`);
  const sequences = request.sequences ?? 1;
  const placed = await placeModel(path, { device: values.device, ctx: String(request.contextTokens) }, threads, { sequences }, notice);
  const draft = loadModel(path, { ...placed.load, kvCacheTokens: sequences * placed.contextTokens, maxSequences: sequences });
  try {
    checkDraftModel(model, draft);
  } catch (error) {
    draft.dispose();
    if (error instanceof InvalidOptionError) throw new CliError(`--model-draft "${path}": ${error.message.replace(/^speculative\.model('s)?/, (_, s) => (s ? "its" : "it"))}`);
    throw error;
  }
  return {
    speculative: { method: "draft", model: draft, ...(tokens === undefined ? {} : { tokens }), ...(minProbability === undefined ? {} : { minProbability }) },
    draft,
  };
}
