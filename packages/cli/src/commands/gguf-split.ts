import { parseArgs } from "node:util";
import { ggmlTypeName, mergeGGUF, openGGUF, planSplit, splitGGUF } from "@memra/gguf";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";

export const ggufSplitUsage = `usage: memra gguf-split [--split] [--split-max-tensors N | --split-max-size N(M|G)] [--no-tensor-first-split] [--dry-run] MODEL.gguf OUT_PREFIX
       memra gguf-split --merge FIRST-00001-of-0000N.gguf OUT.gguf

Splits a model into shards OUT_PREFIX-00001-of-0000N.gguf ... as llama.cpp's gguf-split does (the
first shard holds the metadata; each has split.no, split.count and split.tensors.count), or merges
the shards of a split model into one file. memra (and llama.cpp) load a split model from its first
shard. Every file is written under a temporary name and renamed when complete.

options:
  --split                      split (the default)
  --merge                      merge the shards of the model whose first shard is given
  --split-max-tensors N        tensors per shard (default 128)
  --split-max-size N(M|G)      tensor bytes per shard, in megabytes or gigabytes (10^6, 10^9)
  --no-tensor-first-split      the first shard holds the metadata alone
  --dry-run                    print the shards without writing them

examples:
  memra gguf-split --split-max-size 4G Qwen3-32B-Q8_0.gguf Qwen3-32B-Q8_0
  memra gguf-split --merge Qwen3-32B-Q8_0-00001-of-00009.gguf Qwen3-32B-Q8_0.gguf`;

export async function ggufSplitCommand(args: string[], io: CliIO): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      split: { type: "boolean", default: false },
      merge: { type: "boolean", default: false },
      "split-max-tensors": { type: "string" },
      "split-max-size": { type: "string" },
      "no-tensor-first-split": { type: "boolean", default: false },
      "dry-run": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    io.stdout(`${ggufSplitUsage}\n`);
    return;
  }
  if (values.split && values.merge) throw new CliError("--split and --merge exclude each other");
  if (positionals.length !== 2) throw new CliError(`gguf-split takes an input and an output, got ${positionals.length} arguments\n${ggufSplitUsage}`);
  const [input, output] = positionals as [string, string];

  if (values.merge) {
    if (values["split-max-tensors"] !== undefined || values["split-max-size"] !== undefined) throw new CliError("--split-max-tensors and --split-max-size are for --split");
    if (values["dry-run"]) throw new CliError("--dry-run is for --split");
    const model = await mergeGGUF(input, output);
    io.stdout(`merged ${model.paths.length} shards, ${model.tensors.length} tensors, into ${output}\n`);
    return;
  }

  if (values["split-max-tensors"] !== undefined && values["split-max-size"] !== undefined) throw new CliError("give --split-max-tensors or --split-max-size, not both");
  const options = {
    ...(values["split-max-size"] !== undefined ? { maxBytes: parseSize(values["split-max-size"]) } : { maxTensors: parseCount(values["split-max-tensors"] ?? "128") }),
    noTensorFirstSplit: values["no-tensor-first-split"],
  };
  const file = openGGUF(input);
  const plan = values["dry-run"] ? planSplit(file, output, options) : await splitGGUF(file, output, options);
  for (const shard of plan.shards) {
    const types = new Set(shard.tensors.map((name) => ggmlTypeName(file.tensor(name)!.type)));
    io.stdout(`${shard.path}: ${shard.tensors.length} tensors, ${(shard.bytes / 1e6).toFixed(2)} MB${types.size > 0 ? ` (${[...types].join(", ")})` : ""}\n`);
  }
  io.stdout(`${values["dry-run"] ? "would write" : "wrote"} ${plan.shards.length} shards, ${file.tensors.length} tensors\n`);
}

/** gguf-split's N(M|G): megabytes or gigabytes (powers of ten). */
function parseSize(text: string): number {
  const match = /^(\d+)([MG])$/.exec(text.trim());
  if (!match) throw new CliError(`--split-max-size takes a whole number with M or G (megabytes, gigabytes), got "${text}"`);
  const n = Number(match[1]);
  if (n <= 0) throw new CliError(`--split-max-size must be positive, got "${text}"`);
  return n * (match[2] === "M" ? 1e6 : 1e9);
}

function parseCount(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new CliError(`--split-max-tensors must be a whole number of at least 1, got "${text}"`);
  return n;
}
