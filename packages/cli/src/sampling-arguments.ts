/**
 * llama.cpp's Mirostat and top-nσ flags, shared by generate and chat: --mirostat N (0 off, 1
 * Mirostat, 2 Mirostat 2.0), --mirostat-lr N (eta), --mirostat-ent N (tau), --top-nsigma N (also
 * spelt --top-n-sigma; <= 0 off), as llama.cpp's common/arg.cpp names them.
 */
import type { GenerateOptions } from "@memra/core";
import { CliError } from "./cli-error";

export const samplingParseOptions = {
  "top-nsigma": { type: "string" },
  "top-n-sigma": { type: "string" },
  mirostat: { type: "string" },
  "mirostat-lr": { type: "string" },
  "mirostat-ent": { type: "string" },
} as const;

/** The flags' help lines, descriptions starting at column `column` (as the command's other options). */
export function samplingOptionHelp(column: number): string {
  const lines: [string, ...string[]][] = [
    ["--top-nsigma N", "top-nσ: drop the tokens whose logit is below the largest minus N standard", "deviations of the logits (default -1 = off)"],
    ["--mirostat N", "Mirostat sampling: 0 off (default), 1 Mirostat, 2 Mirostat 2.0; as in llama.cpp", "it replaces top-k, top-p, min-p, top-nσ and the penalties (temperature stays)"],
    ["--mirostat-lr N", "Mirostat learning rate, eta (default 0.1)"],
    ["--mirostat-ent N", "Mirostat target entropy, tau (default 5)"],
  ];
  const indent = " ".repeat(column);
  return lines
    .map(([flag, first, ...rest]) => [`  ${flag}`.padEnd(column) + first, ...rest.map((line) => indent + line)].join("\n"))
    .join("\n");
}

export interface SamplingValues {
  readonly "top-nsigma"?: string | undefined;
  readonly "top-n-sigma"?: string | undefined;
  readonly mirostat?: string | undefined;
  readonly "mirostat-lr"?: string | undefined;
  readonly "mirostat-ent"?: string | undefined;
}

/** `--top-nsigma -1` as `--top-nsigma=-1` (parseArgs refuses a value starting with "-" after a space). */
export function joinNegativeSamplingValues(args: readonly string[]): string[] {
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const flag = args[i]!;
    if ((flag === "--top-nsigma" || flag === "--top-n-sigma") && /^-[\d.]/.test(args[i + 1] ?? "")) joined.push(`${flag}=${args[++i]}`);
    else joined.push(flag);
  }
  return joined;
}

function parseFlagNumber(value: string, flag: string): number {
  const parsed = Number(value);
  if (value.trim() === "" || !Number.isFinite(parsed)) throw new CliError(`${flag} must be a number, got "${value}"`);
  return parsed;
}

/** The generation options these flags set (none of them given: none). */
export function samplingOptionsOfFlags(values: SamplingValues): Pick<GenerateOptions, "topNSigma" | "mirostat"> {
  const options: Pick<GenerateOptions, "topNSigma" | "mirostat"> = {};
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
  if (Object.keys(mirostat).length > 0) options.mirostat = mirostat;
  return options;
}
