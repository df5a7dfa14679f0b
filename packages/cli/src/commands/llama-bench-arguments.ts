/**
 * llama-bench's command-line habits for `memra bench`: its multi-letter single-dash flags (-pg, -ctk,
 * -ngl, ...) turned into the long options parseArgs knows, `--n_prompt` spelt `--n-prompt`, its
 * integer lists and ranges (`first-last`, `first-last+step`, `first-last*mult`), and a named refusal
 * of its flags that memra has nothing to map to.
 */
import { CliError } from "../cli-error";

/** llama-bench's single-dash flags of more than one letter, as memra bench's long options. */
const LONG_FLAGS: Readonly<Record<string, string>> = {
  "-pg": "--pg",
  "-ctk": "--cache-type-k",
  "-ctv": "--cache-type-v",
  "-ub": "--ubatch-size",
  "-oe": "--output-err",
  "-ngl": "--n-gpu-layers",
  "-ncmoe": "--n-cpu-moe",
};

/** llama-bench's flags memra cannot honour, and why. */
const UNSUPPORTED: readonly (readonly [readonly string[], string])[] = [
  [["-fa", "--flash-attn"], "memra has one attention path; there is no flash-attention switch"],
  [
    ["-mmp", "--mmap", "-lm", "--load-mode", "-dio", "--direct-io", "-lzm", "--lazy-mode"],
    "memra maps the GGUF and copies the weights to the backend; there is no load mode to choose",
  ],
  [["-nkvo", "--no-kv-offload"], "each layer's KV cache lives on that layer's backend"],
  [["-sm", "--split-mode", "-mg", "--main-gpu", "-ts", "--tensor-split"], "layers are split across GPUs in proportion to --gpu-mem"],
  [["-ot", "--override-tensor"], "there is no per-tensor placement; -ncmoe / --cpu-moe keeps experts in RAM"],
  [["-embd", "--embeddings"], "bench measures generation; `memra embed` computes embeddings"],
  [["-nopo", "--no-op-offload", "--no-host"], "memra has no equivalent"],
  [["-C", "--cpu-mask", "--cpu-strict", "--poll", "--numa", "--prio"], "memra's CPU thread pool has no affinity, polling or priority settings"],
  [["-dev", "--list-devices"], "choose the backend with --device auto|cuda|cpu|reference"],
  [["-rpc", "--rpc"], "memra has no RPC backend"],
  [["-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hft", "--hf-token", "--offline"], "give a local GGUF file with -m"],
  [["-fitt", "--fit-target", "-fitc", "--fit-ctx"], "memra fits layers to free memory itself (--gpu-layers auto, --gpu-mem)"],
];

/**
 * The arguments with llama-bench's spellings turned into memra bench's: `-pg 512,128` → `--pg=512,128`
 * (the value joined, so that `-ngl -1` is not read as a flag), `--n_prompt` → `--n-prompt`.
 *
 * @throws CliError naming a llama-bench flag memra cannot honour, and why.
 */
export function llamaBenchArguments(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") {
      out.push(...args.slice(i));
      break;
    }
    const [flag, inline] = arg.startsWith("--") ? splitInline(arg) : [arg, undefined];
    const refusal = UNSUPPORTED.find(([flags]) => flags.includes(flag));
    if (refusal) throw new CliError(`llama-bench's ${flag} is not supported: ${refusal[1]}`);
    const long = LONG_FLAGS[flag];
    if (long !== undefined) {
      const value = args[i + 1];
      if (value === undefined) throw new CliError(`${flag} needs a value`);
      out.push(`${long}=${value}`);
      i++;
    } else if (flag === "--n-gpu-layers" && inline === undefined && /^-\d+$/.test(args[i + 1] ?? "")) {
      out.push(`${flag}=${args[i + 1]}`); // -1 is a value here, not a flag
      i++;
    } else if (flag.startsWith("--")) out.push(inline === undefined ? flag : `${flag}=${inline}`);
    else out.push(arg);
  }
  return out;
}

/** "--n_prompt=16" → ["--n-prompt", "16"] (llama-bench replaces _ by - in long flags). */
function splitInline(arg: string): [string, string | undefined] {
  const equals = arg.indexOf("=");
  const name = (equals < 0 ? arg : arg.slice(0, equals)).replaceAll("_", "-");
  return [name, equals < 0 ? undefined : arg.slice(equals + 1)];
}

/**
 * llama-bench's parse_int_range: comma-separated items, each `N`, `first-last` (step 1),
 * `first-last+step` or `first-last*mult`, e.g. "128,256" or "64-512*2" → 64, 128, 256, 512.
 *
 * @throws CliError naming the option and the text when it is not that form or a range does not grow.
 */
export function parseIntegerRange(text: string, name: string, allowNegative = false): number[] {
  const pattern = allowNegative ? /^(-?\d+)(?:-(\d+)(?:([+*])(\d+))?)?$/ : /^(\d+)(?:-(\d+)(?:([+*])(\d+))?)?$/;
  const form = `a${allowNegative ? "n" : " non-negative"} integer, a comma-separated list or a range (first-last, first-last+step, first-last*mult)`;
  const values: number[] = [];
  for (const item of text.split(",")) {
    const match = pattern.exec(item.trim());
    if (!match) throw new CliError(`${name} must be ${form}, got "${text}"`);
    const first = Number(match[1]);
    const last = match[2] === undefined ? first : Number(match[2]);
    const step = match[4] === undefined ? 1 : Number(match[4]);
    for (let value = first; value <= last; ) {
      values.push(value);
      const next = match[3] === "*" ? value * step : value + step;
      if (next <= value) throw new CliError(`${name}: the range "${item}" does not grow`);
      value = next;
    }
  }
  return values;
}
