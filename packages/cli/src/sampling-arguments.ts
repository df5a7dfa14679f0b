/**
 * llama.cpp's sampling flags (common/arg.cpp's sampling group), shared by generate and chat, and by
 * serve as the defaults of requests that leave a parameter out (as llama-server's): --temp, --top-k,
 * --top-p, --min-p, --typical, the repetition penalties (--repeat-penalty, --repeat-last-n,
 * --presence-penalty, --frequency-penalty), DRY (--dry-*), XTC (--xtc-*), --top-nsigma (also spelt
 * --top-n-sigma), Mirostat (--mirostat N: 0 off, 1 Mirostat, 2 Mirostat 2.0; --mirostat-lr eta,
 * --mirostat-ent tau), --logit-bias TOKEN(+/-)BIAS, --seed and --ignore-eos. llama.cpp's other
 * spellings (--temperature, --typical-p, -s, -l) reach these through llama-arguments.ts.
 */
import type { GenerateOptions } from "@memra/core";
import { CliError } from "./cli-error";

export const samplingParseOptions = {
  temp: { type: "string" },
  "top-k": { type: "string" },
  "top-p": { type: "string" },
  "min-p": { type: "string" },
  typical: { type: "string" },
  "repeat-penalty": { type: "string" },
  "repeat-last-n": { type: "string" },
  "presence-penalty": { type: "string" },
  "frequency-penalty": { type: "string" },
  "dry-multiplier": { type: "string" },
  "dry-base": { type: "string" },
  "dry-allowed-length": { type: "string" },
  "dry-penalty-last-n": { type: "string" },
  "dry-sequence-breaker": { type: "string", multiple: true },
  "xtc-probability": { type: "string" },
  "xtc-threshold": { type: "string" },
  "top-nsigma": { type: "string" },
  "top-n-sigma": { type: "string" },
  mirostat: { type: "string" },
  "mirostat-lr": { type: "string" },
  "mirostat-ent": { type: "string" },
  "logit-bias": { type: "string", multiple: true },
  seed: { type: "string" },
  "ignore-eos": { type: "boolean", default: false },
} as const;

/** The flags' help lines, descriptions starting at column `column` (as the command's other options). */
export function samplingOptionHelp(column: number): string {
  const lines: [string, ...string[]][] = [
    ["--temp T", "temperature (default 0.8; 0 = greedy)"],
    ["--top-k K", "(default 40; 0 disables)"],
    ["--top-p P", "(default 0.95; 1 disables)"],
    ["--min-p P", "(default 0.05; 0 disables)"],
    ["--typical P", "locally typical sampling (default 1 = off)"],
    ["--repeat-penalty R", "penalise the last --repeat-last-n tokens (default 1 = off)"],
    ["--repeat-last-n N", "tokens the penalties look back on (default 64; -1 = the context, 0 = off)"],
    ["--presence-penalty P", "(default 0 = off)"],
    ["--frequency-penalty P", "(default 0 = off)"],
    ["--dry-multiplier M", "DRY repetition penalty (default 0 = off); --dry-base B (1.75),", "--dry-allowed-length N (2), --dry-penalty-last-n N (64; -1 = the context),", "--dry-sequence-breaker S (repeatable; default \\n : \" *; \"none\" for none)"],
    ["--xtc-probability P", "XTC, exclude top choices (default 0 = off); --xtc-threshold T (0.1)"],
    ["--top-nsigma N", "top-nσ: drop the tokens whose logit is below the largest minus N standard", "deviations of the logits (default -1 = off)"],
    ["--mirostat N", "Mirostat sampling: 0 off (default), 1 Mirostat, 2 Mirostat 2.0; as in llama.cpp", "it replaces top-k, top-p, min-p, top-nσ and the penalties (temperature stays)"],
    ["--mirostat-lr N", "Mirostat learning rate, eta (default 0.1)"],
    ["--mirostat-ent N", "Mirostat target entropy, tau (default 5)"],
    ["--logit-bias T+B", "add B to token T's logit (T-B subtracts; T-inf bans it); repeatable"],
    ["--seed S", "sampling seed (default: random; -1 = random)"],
    ["--ignore-eos", "go on past the end-of-generation token"],
  ];
  const indent = " ".repeat(column);
  return lines
    .map(([flag, first, ...rest]) => [`  ${flag}`.padEnd(column) + first, ...rest.map((line) => indent + line)].join("\n"))
    .join("\n");
}

export type SamplingValues = {
  readonly [K in keyof typeof samplingParseOptions]?: (typeof samplingParseOptions)[K] extends { multiple: true } ? string[] | undefined : (typeof samplingParseOptions)[K] extends { type: "boolean" } ? boolean | undefined : string | undefined;
};

function parseFlagNumber(value: string, flag: string): number {
  const parsed = Number(value);
  if (value.trim() === "" || !Number.isFinite(parsed)) throw new CliError(`${flag} must be a number, got "${value}"`);
  return parsed;
}

function parseFlagInteger(value: string, flag: string, least: number): number {
  const parsed = Number(value);
  if (value.trim() === "" || !Number.isInteger(parsed) || parsed < least) throw new CliError(`${flag} must be an integer of at least ${least}, got "${value}"`);
  return parsed;
}

/** llama.cpp's --logit-bias TOKEN_ID(+/-)BIAS, e.g. 15043+1, 15043-1, 15043-inf (common/arg.cpp's reading). */
export function parseLogitBias(entries: readonly string[]): Map<number, number> {
  const bias = new Map<number, number>();
  for (const entry of entries) {
    const match = /^\s*(\d+)\s*([+-])\s*(.+?)\s*$/.exec(entry);
    const token = match ? Number(match[1]) : Number.NaN;
    const magnitude = match ? (/^inf(inity)?$/i.test(match[3]!) ? Number.POSITIVE_INFINITY : Number(match[3])) : Number.NaN;
    if (!match || !Number.isSafeInteger(token) || Number.isNaN(magnitude) || (magnitude === Number.POSITIVE_INFINITY && match[2] === "+")) {
      throw new CliError(`--logit-bias must be TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15043+1, 15043-inf), got "${entry}"`);
    }
    bias.set(token, match[2] === "-" ? -magnitude : magnitude);
  }
  return bias;
}

type SamplingOptions = Pick<
  GenerateOptions,
  | "temperature"
  | "topK"
  | "topP"
  | "minP"
  | "typicalP"
  | "repeatPenalty"
  | "penaltyLastN"
  | "presencePenalty"
  | "frequencyPenalty"
  | "dry"
  | "xtc"
  | "topNSigma"
  | "mirostat"
  | "logitBias"
  | "seed"
  | "ignoreEos"
>;

/**
 * The generation options these flags set (none of them given: none); each bad value is named.
 * `escape`: how the DRY sequence breakers are read (generate and chat: llama.cpp's escapes).
 */
export function samplingOptionsOfFlags(values: SamplingValues, escape: (text: string) => string = (text) => text): SamplingOptions {
  const options: { -readonly [K in keyof SamplingOptions]?: SamplingOptions[K] } = {};
  const number = (name: keyof SamplingValues) => {
    const value = values[name];
    return typeof value === "string" ? parseFlagNumber(value, `--${name}`) : undefined;
  };
  const set = <K extends keyof SamplingOptions>(key: K, value: SamplingOptions[K] | undefined) => {
    if (value !== undefined) options[key] = value;
  };
  set("temperature", number("temp"));
  set("topK", number("top-k"));
  set("topP", number("top-p"));
  set("minP", number("min-p"));
  set("typicalP", number("typical"));
  set("repeatPenalty", number("repeat-penalty"));
  if (values["repeat-last-n"] !== undefined) options.penaltyLastN = parseFlagInteger(values["repeat-last-n"], "--repeat-last-n", -1);
  set("presencePenalty", number("presence-penalty"));
  set("frequencyPenalty", number("frequency-penalty"));

  const dry: { multiplier?: number; base?: number; allowedLength?: number; penaltyLastN?: number; sequenceBreakers?: string[] } = {};
  if (values["dry-multiplier"] !== undefined) dry.multiplier = number("dry-multiplier")!;
  if (values["dry-base"] !== undefined) dry.base = number("dry-base")!;
  if (values["dry-allowed-length"] !== undefined) dry.allowedLength = parseFlagInteger(values["dry-allowed-length"], "--dry-allowed-length", 0);
  if (values["dry-penalty-last-n"] !== undefined) dry.penaltyLastN = parseFlagInteger(values["dry-penalty-last-n"], "--dry-penalty-last-n", -1);
  const breakers = values["dry-sequence-breaker"];
  // llama.cpp: the first --dry-sequence-breaker replaces the defaults; "none" clears them.
  if (breakers !== undefined) dry.sequenceBreakers = breakers.includes("none") ? [] : breakers.map(escape);
  if (Object.keys(dry).length > 0) options.dry = dry as SamplingOptions["dry"];
  const xtc: { probability?: number; threshold?: number } = {};
  if (values["xtc-probability"] !== undefined) xtc.probability = number("xtc-probability")!;
  if (values["xtc-threshold"] !== undefined) xtc.threshold = number("xtc-threshold")!;
  if (Object.keys(xtc).length > 0) options.xtc = xtc as SamplingOptions["xtc"];

  if (values["top-nsigma"] !== undefined && values["top-n-sigma"] !== undefined) throw new CliError("--top-nsigma and --top-n-sigma are one option: give one");
  const sigma = values["top-nsigma"] ?? values["top-n-sigma"];
  if (sigma !== undefined) options.topNSigma = parseFlagNumber(sigma, values["top-nsigma"] !== undefined ? "--top-nsigma" : "--top-n-sigma");
  const mirostat: { mode?: 0 | 1 | 2; tau?: number; eta?: number } = {};
  if (values.mirostat !== undefined) {
    const mode = values.mirostat.trim();
    if (mode !== "0" && mode !== "1" && mode !== "2") throw new CliError(`--mirostat must be 0 (off), 1 (Mirostat) or 2 (Mirostat 2.0), got "${values.mirostat}"`);
    mirostat.mode = Number(mode) as 0 | 1 | 2;
  }
  if (values["mirostat-ent"] !== undefined) {
    const tau = parseFlagNumber(values["mirostat-ent"], "--mirostat-ent");
    if (tau <= 0) throw new CliError(`--mirostat-ent (tau) must be > 0, got ${tau}`);
    mirostat.tau = tau;
  }
  if (values["mirostat-lr"] !== undefined) {
    const eta = parseFlagNumber(values["mirostat-lr"], "--mirostat-lr");
    if (eta <= 0) throw new CliError(`--mirostat-lr (eta) must be > 0, got ${eta}`);
    mirostat.eta = eta;
  }
  if (Object.keys(mirostat).length > 0) options.mirostat = mirostat as SamplingOptions["mirostat"];
  if (values["logit-bias"] !== undefined && values["logit-bias"].length > 0) options.logitBias = parseLogitBias(values["logit-bias"]);
  if (values.seed !== undefined) {
    const seed = parseFlagNumber(values.seed, "--seed");
    // llama.cpp: -1 (LLAMA_DEFAULT_SEED) is a random seed.
    if (seed !== -1 && seed !== 0xffffffff) {
      if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new CliError(`--seed must be an integer from 0 to 4294967295 (or -1: random), got "${values.seed}"`);
      options.seed = seed;
    }
  }
  if (values["ignore-eos"]) options.ignoreEos = true;
  return options;
}
