import { z } from "zod";
import type { LogitBias } from "./logit-bias";

/** llama.cpp's default DRY sequence breakers (`common_params_sampling::dry_sequence_breakers`). */
export const DEFAULT_DRY_SEQUENCE_BREAKERS: readonly string[] = ["\n", ":", '"', "*"];

const MAX_SEED = 0xffffffff;

const number = (name: string) => z.number({ error: `${name} must be a finite number` });
const integer = (name: string) => number(name).int(`${name} must be an integer`);
const atLeast = (name: string, minimum: number) => number(name).min(minimum, `${name} must be >= ${minimum}`);
const between = (name: string, minimum: number, maximum: number) =>
  number(name).min(minimum, `${name} must be between ${minimum} and ${maximum}`).max(maximum, `${name} must be between ${minimum} and ${maximum}`);

const logitBiasSchema = z
  .custom<LogitBias>((value) => value instanceof Map || (typeof value === "object" && value !== null && !Array.isArray(value)), {
    error: "logitBias must be a Map or an object from token id to bias",
  })
  .superRefine((bias, context) => {
    const entries: [unknown, unknown][] = bias instanceof Map ? [...bias] : Object.entries(bias);
    for (const [key, value] of entries) {
      const token = typeof key === "string" && /^\d+$/.test(key) ? Number(key) : key;
      if (typeof token !== "number" || !Number.isSafeInteger(token) || token < 0) {
        context.addIssue({ code: "custom", message: `logitBias key ${JSON.stringify(String(key))} is not a token id (a non-negative integer)` });
      } else if (typeof value !== "number" || Number.isNaN(value) || value === Infinity) {
        context.addIssue({ code: "custom", path: [String(token)], message: `logitBias[${token}] must be a finite number or -Infinity` });
      }
    }
  });

/**
 * Sampling options, validated; every error message names the option ("temperature must be >= 0").
 * Defaults are llama.cpp's (`common_params_sampling`) except `minKeep` (1 here, 0 there; the two
 * behave the same). Unknown keys are rejected.
 */
export const samplingOptionsSchema = z.strictObject({
  /** Divides the logits; 0 = greedy (the most likely token). Default 0.8. */
  temperature: atLeast("temperature", 0).default(0.8),
  /** Keep the k most likely tokens; <= 0 disables. Default 40. */
  topK: integer("topK").default(40),
  /** Keep the most likely tokens whose probabilities sum to at least p; 1 disables. Default 0.95. */
  topP: between("topP", 0, 1).default(0.95),
  /** Keep tokens at least p times as likely as the most likely; 0 disables. Default 0.05. */
  minP: between("minP", 0, 1).default(0.05),
  /** Locally typical sampling; 1 disables. Default 1. */
  typicalP: between("typicalP", 0, 1).default(1),
  /** Divide (positive) or multiply (negative) the logits of recently seen tokens; 1 disables. Default 1. */
  repeatPenalty: number("repeatPenalty").positive("repeatPenalty must be > 0").default(1),
  /** Subtracted from the logit of a recently seen token. Default 0. */
  presencePenalty: number("presencePenalty").default(0),
  /** Subtracted once per recent occurrence of a token. Default 0. */
  frequencyPenalty: number("frequencyPenalty").default(0),
  /** How many recent tokens the three penalties look at; -1 = the whole history, 0 disables. Default 64. */
  penaltyLastN: integer("penaltyLastN").min(-1, "penaltyLastN must be >= -1").default(64),
  /** DRY repetition penalty (off unless multiplier > 0). */
  dry: z
    .strictObject({
      /** Default 0 (off). */
      multiplier: atLeast("dry.multiplier", 0).default(0),
      /** Below 1 disables. Default 1.75. */
      base: atLeast("dry.base", 0).default(1.75),
      /** Default 2. */
      allowedLength: integer("dry.allowedLength").min(0, "dry.allowedLength must be >= 0").default(2),
      /** -1 = the whole history, 0 disables. Default 64 (llama.cpp's common_params_sampling.dry_penalty_last_n). */
      penaltyLastN: integer("dry.penaltyLastN").min(-1, "dry.penaltyLastN must be >= -1").default(64),
      /** Default ["\n", ":", "\"", "*"]. */
      sequenceBreakers: z
        .array(z.string({ error: "dry.sequenceBreakers must be strings" }).min(1, "dry.sequenceBreakers must not contain an empty string"), {
          error: "dry.sequenceBreakers must be an array of strings",
        })
        .default(() => [...DEFAULT_DRY_SEQUENCE_BREAKERS]),
    })
    .prefault({}),
  /** XTC, "exclude top choices" (off unless probability > 0). */
  xtc: z
    .strictObject({
      /** Chance per token that XTC acts. Default 0 (off). */
      probability: between("xtc.probability", 0, 1).default(0),
      /** Tokens at least this likely are removed (but the least likely of them); > 0.5 disables. Default 0.1. */
      threshold: between("xtc.threshold", 0, 1).default(0.1),
    })
    .prefault({}),
  /**
   * Top-nσ: tokens whose logit is below the largest minus n standard deviations of the logits are
   * dropped (before top-k, as in llama.cpp's default chain); <= 0 disables. Default -1 (off).
   */
  topNSigma: number("topNSigma").default(-1),
  /**
   * Mirostat (off unless mode is 1 or 2): a sampler that steers the surprise (−log2 p) of each
   * picked token toward `tau`. As in llama.cpp, it then replaces the chain after logit bias and
   * temperature: penalties, DRY, top-nσ, top-k, typical, top-p, min-p and XTC are not applied.
   */
  mirostat: z
    .strictObject({
      /** 0 off (default), 1 Mirostat, 2 Mirostat 2.0. */
      mode: z.union([z.literal(0), z.literal(1), z.literal(2)], { error: "mirostat.mode must be 0 (off), 1 (Mirostat) or 2 (Mirostat 2.0)" }).default(0),
      /** Target surprise (entropy) in bits per token, > 0. Default 5. */
      tau: number("mirostat.tau").positive("mirostat.tau must be > 0").default(5),
      /** Learning rate of the threshold, > 0. Default 0.1. */
      eta: number("mirostat.eta").positive("mirostat.eta must be > 0").default(0.1),
    })
    .prefault({}),
  /** Token id → added to its logit before anything else; -Infinity bans the token. */
  logitBias: logitBiasSchema.optional(),
  /** Seed of the random draws, an integer in [0, 2^32); default: a random one, reported back. */
  seed: integer("seed").min(0, `seed must be an integer in [0, ${MAX_SEED}]`).max(MAX_SEED, `seed must be an integer in [0, ${MAX_SEED}]`).optional(),
  /** Truncating samplers keep at least this many tokens. Default 1. */
  minKeep: integer("minKeep").min(0, "minKeep must be >= 0").default(1),
});

/** The options as a caller writes them (everything optional). */
export type SamplingOptions = z.input<typeof samplingOptionsSchema>;
/** The options with defaults filled in. */
export type ResolvedSamplingOptions = z.output<typeof samplingOptionsSchema>;
