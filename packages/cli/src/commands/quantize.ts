import { basename, dirname, join } from "node:path";
import { parseArgs } from "node:util";
import {
  LLAMA_FILE_TYPES,
  type PlannedTensor,
  type QuantizationOptions,
  type QuantizationPlan,
  type RowDequantizer,
  type RowQuantizer,
  ggmlTypeName,
  importanceOf,
  openGGUFModel,
  parseMetadataOverride,
  parseLlamaFileType,
  planQuantization,
  quantizationImportance,
  quantizeModel,
  readImatrix,
} from "@memra/gguf";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";

export const quantizeUsage = `usage: memra quantize [options] MODEL.gguf [OUTPUT.gguf] TYPE [THREADS]

Rewrites a model with its weights quantized, as llama-quantize does: the same tensor types (llama.cpp's
mixes: Q4_K_M gives some attn_v and ffn_down tensors q6_K, the output q6_K, ...) and the same bytes, so
the file is llama-quantize's byte for byte. Without OUTPUT it is written beside MODEL as
ggml-model-TYPE.gguf. A split model is read from its first shard (MODEL-00001-of-0000N.gguf) and
written as one file, or with --keep-split in the same shards. Tensors are converted in slabs: a model
larger than memory can be quantized. The files appear under their names only once all are complete.

types: ${LLAMA_FILE_TYPES.map((t) => t.name).join(", ")}, COPY (copy every tensor unchanged);
       Q3_K, Q4_K and Q5_K are the _M mixes; a llama_ftype number works too.
       ${LLAMA_FILE_TYPES.filter((t) => t.needsImportance).map((t) => t.name).join(", ")} need an importance matrix (--imatrix).

options:
  --allow-requantize            quantize tensors that are already quantized (they are dequantized first)
  --leave-output-tensor         leave output.weight as it is
  --pure                        every quantized tensor gets TYPE's own type, no mix
  --output-tensor-type T        the type of output.weight (and of tied token embeddings), e.g. q8_0
  --token-embedding-type T      the type of token_embd.weight
  --tensor-type PATTERN=T       tensors whose name matches the regular expression get T (repeatable;
                                the first match wins), e.g. --tensor-type "attn_v=q8_0"
  --override-kv KEY=TYPE:VALUE  write this metadata value (TYPE int, float, bool or str; repeatable)
  --imatrix FILE                weight each value's rounding error by its column's importance, from
                                FILE (memra imatrix's or llama-imatrix's, GGUF or the legacy .dat)
  --include-weights NAME        use the importance only for tensors whose name contains NAME (repeatable)
  --exclude-weights NAME        do not use it for tensors whose name contains NAME (repeatable)
  --prune-layers L0,L1,...      leave out these layers (blocks), renumber the rest and write the new
                                block count (the mix's per-layer rules still count the model's layers)
  --keep-split                  write a split model in its shards: OUTPUT-00001-of-0000N.gguf, ... (a
                                trailing .gguf of OUTPUT is dropped); a model of one file gives
                                OUTPUT-00001-of-00001.gguf, as llama-quantize does
  --dry-run                     print the types and sizes without writing anything
  -t, --threads N               threads for the k-quant quantizers (default: all; also the THREADS argument)
  --json                        print a JSON summary instead of the tensor table

examples:
  memra quantize Qwen3-8B-F16.gguf Qwen3-8B-Q4_K_M.gguf Q4_K_M
  memra quantize Qwen3-0.6B-BF16.gguf q8_0 2
  memra quantize --allow-requantize Qwen3-8B-Q8_0.gguf Qwen3-8B-Q4_K_M.gguf Q4_K_M
  memra quantize --dry-run Qwen3-8B-F16.gguf Q3_K_M
  memra quantize --keep-split Qwen3-32B-BF16-00001-of-00002.gguf Qwen3-32B-Q4_K_M.gguf Q4_K_M
  memra quantize --prune-layers 20,21 Qwen3-0.6B-F16.gguf Qwen3-0.6B-pruned-Q8_0.gguf Q8_0
  memra imatrix -m Qwen3-8B-F16.gguf -f calibration.txt -o imatrix.gguf
  memra quantize --imatrix imatrix.gguf Qwen3-8B-F16.gguf Qwen3-8B-IQ2_M.gguf IQ2_M`;

export async function quantizeCommand(args: string[], io: CliIO): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      "allow-requantize": { type: "boolean", default: false },
      "leave-output-tensor": { type: "boolean", default: false },
      pure: { type: "boolean", default: false },
      "output-tensor-type": { type: "string" },
      "token-embedding-type": { type: "string" },
      "tensor-type": { type: "string", multiple: true, default: [] },
      "override-kv": { type: "string", multiple: true, default: [] },
      imatrix: { type: "string" },
      "include-weights": { type: "string", multiple: true, default: [] },
      "exclude-weights": { type: "string", multiple: true, default: [] },
      "prune-layers": { type: "string", multiple: true, default: [] },
      "keep-split": { type: "boolean", default: false },
      "dry-run": { type: "boolean", default: false },
      threads: { type: "string", short: "t" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    io.stdout(`${quantizeUsage}\n`);
    return;
  }
  const { input, output, type, threads } = parsePositionals(positionals);
  const threadCount = parseThreads(values.threads ?? threads);
  if (values.imatrix === undefined && (values["include-weights"].length > 0 || values["exclude-weights"].length > 0)) {
    throw new CliError("--include-weights and --exclude-weights select entries of an importance matrix: give it with --imatrix FILE");
  }
  const imatrix =
    values.imatrix === undefined
      ? undefined
      : (() => {
          const read = readImatrix(values.imatrix);
          return quantizationImportance(
            importanceOf(read),
            { file: values.imatrix, datasets: read.datasets, chunkCount: read.chunkCount },
            { include: values["include-weights"], exclude: values["exclude-weights"] },
          );
        })();
  if (imatrix && imatrix.importance.size === 0 && !values.json) io.stderr(`memra quantize: no entry of ${values.imatrix} is selected: quantizing without an importance matrix\n`);
  const options: QuantizationOptions = {
    type,
    allowRequantize: values["allow-requantize"],
    leaveOutputTensor: values["leave-output-tensor"],
    pure: values.pure,
    keepSplit: values["keep-split"],
    ...(values["prune-layers"].length > 0 ? { pruneLayers: values["prune-layers"].flatMap(parsePruneLayers) } : {}),
    ...(values["output-tensor-type"] !== undefined ? { outputTensorType: values["output-tensor-type"] } : {}),
    ...(values["token-embedding-type"] !== undefined ? { tokenEmbeddingType: values["token-embedding-type"] } : {}),
    metadataOverrides: [...values["override-kv"].map(parseMetadataOverride), ...(imatrix?.metadata ?? [])],
    ...(imatrix && imatrix.importance.size > 0 ? { importance: imatrix.importance } : {}),
    tensorTypes: values["tensor-type"].map((spec) => {
      const at = spec.lastIndexOf("=");
      if (at <= 0 || at === spec.length - 1) throw new CliError(`--tensor-type takes PATTERN=TYPE, got "${spec}"`);
      return { pattern: spec.slice(0, at), type: spec.slice(at + 1) };
    }),
  };

  const file = openGGUFModel(input);
  if (values["dry-run"]) {
    const plan = planQuantization(file, { ...options, dryRun: true });
    if (values.json) io.stdout(`${JSON.stringify(summary(plan, undefined))}\n`);
    else {
      plan.tensors.forEach((t, i) => io.stdout(tensorLine(t, i, plan.tensors.length)));
      io.stdout(totals(plan));
    }
    if (plan.needsImportance) io.stderr(`memra quantize: ${plan.fileType.name} will need an importance matrix (--imatrix) to be written\n`);
    return;
  }

  // with --keep-split the name is the shards' prefix (llama-quantize adds no .gguf to its default one)
  const target = output ?? join(dirname(input), `ggml-model-${canonicalName(type)}${values["keep-split"] ? "" : ".gguf"}`);
  let quantizer: RowQuantizer | undefined;
  let dequantizer: RowDequantizer | undefined;
  let dispose = () => {};
  try {
    const { createNativeQuantizer } = await import("@memra/cpu-ffi");
    const native = createNativeQuantizer(threadCount);
    quantizer = native.quantizer;
    dequantizer = native.dequantizer;
    dispose = () => native.dispose();
  } catch (error) {
    // Without the native library every type is converted in TypeScript (k-quants ~20x slower).
    if (!values.json) io.stderr(`memra quantize: k-quants in TypeScript (${(error as Error).message.split("\n")[0]})\n`);
  }
  try {
    const report = await quantizeModel(file, target, {
      ...options,
      ...(quantizer ? { quantizer } : {}),
      ...(dequantizer ? { dequantizer } : {}),
      onTensor: values.json ? undefined : ({ index, count, tensor }) => io.stdout(tensorLine(tensor, index, count)),
    });
    const paths = report.paths.length > 1 ? { paths: report.paths } : {};
    if (values.json) io.stdout(`${JSON.stringify({ ...summary(report, report.path), ...paths, seconds: round(report.seconds, 3) })}\n`);
    else {
      const written = report.paths.length > 1 ? `${report.paths.length} files, ${report.paths[0]} to ${basename(report.paths.at(-1)!)}` : report.path;
      io.stdout(`${totals(report)}wrote ${written} (${mib(report.fileBytes)} MiB) in ${report.seconds.toFixed(1)} s\n`);
    }
  } finally {
    dispose();
  }
}

/** llama-quantize's parse_layer_prune: comma-separated layer numbers (sorted and de-duplicated later). */
function parsePruneLayers(spec: string): number[] {
  return spec.split(",").map((word) => {
    if (!/^\d+$/.test(word.trim())) throw new CliError(`--prune-layers takes layer numbers separated by commas, e.g. 20,21; got "${word}" in "${spec}"`);
    return Number.parseInt(word, 10);
  });
}

function parsePositionals(positionals: string[]): { input: string; output?: string; type: string; threads?: string } {
  const [input, second, third, fourth, ...rest] = positionals;
  if (input === undefined || second === undefined) throw new CliError(`quantize takes MODEL.gguf [OUTPUT.gguf] TYPE [THREADS]\n${quantizeUsage}`);
  // as llama-quantize: the word after the model is the type when it names one, else the output file
  if (isFileType(second)) {
    if (fourth !== undefined || rest.length > 0) throw new CliError(`quantize: unexpected arguments after the thread count: ${[fourth, ...rest].join(" ")}`);
    return { input, type: second, ...(third !== undefined ? { threads: third } : {}) };
  }
  // throws: names the unknown type (the word after the model when nothing follows it) and lists the known ones
  if (third === undefined) throw parseError(second);
  parseLlamaFileType(third);
  if (rest.length > 0) throw new CliError(`quantize: unexpected arguments after the thread count: ${rest.join(" ")}`);
  return { input, output: second, type: third, ...(fourth !== undefined ? { threads: fourth } : {}) };
}

function parseError(word: string): Error {
  try {
    parseLlamaFileType(word);
  } catch (error) {
    return error as Error;
  }
  return new CliError(`quantize: no TYPE given\n${quantizeUsage}`);
}

function isFileType(word: string): boolean {
  try {
    parseLlamaFileType(word);
    return true;
  } catch (error) {
    // a known llama.cpp type memra cannot write is still the type argument: report why
    if (error instanceof Error && /is not supported/.test(error.message)) throw error;
    return false;
  }
}

function canonicalName(type: string): string {
  return /^\d+$/.test(type) ? parseLlamaFileType(type).name : type.toUpperCase();
}

function parseThreads(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1024) throw new CliError(`the thread count must be a whole number from 1 to 1024, got "${value}"`);
  return n;
}

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(2);
const round = (x: number, digits: number) => Number(x.toFixed(digits));

function tensorLine(t: PlannedTensor, index: number, count: number): string {
  const width = String(count).length;
  const shape = `[${t.shape.join(", ")}]`;
  const conversion = t.from === t.to ? `${ggmlTypeName(t.from)}, copied` : `${ggmlTypeName(t.from)} -> ${ggmlTypeName(t.to)}`;
  const fallback = t.fallbackFrom !== undefined ? ` (${ggmlTypeName(t.fallbackFrom)} does not fit ${t.shape[0]} columns)` : "";
  return `[${String(index + 1).padStart(width)}/${count}] ${t.name.padEnd(32)} ${shape.padEnd(20)} ${conversion.padEnd(16)} ${mib(t.bytesIn).padStart(9)} MiB -> ${mib(t.bytesOut).padStart(9)} MiB${fallback}\n`;
}

function totals(plan: QuantizationPlan): string {
  const bpw = (bytes: number) => ((bytes * 8) / plan.elementCount).toFixed(2);
  const fallbacks = plan.fallbacks > 0 ? `${plan.fallbacks} of ${plan.tensors.length} tensors fell back to a type that fits their rows\n` : "";
  const weighted = plan.tensors.filter((t) => t.importance !== undefined).length;
  const importance =
    weighted > 0 || plan.withoutImportance.length > 0
      ? `${weighted} tensors quantized with the importance matrix${plan.withoutImportance.length > 0 ? `; none in it for ${plan.withoutImportance.join(", ")}` : ""}\n`
      : "";
  return `${fallbacks}${importance}model size: ${mib(plan.bytesIn)} MiB (${bpw(plan.bytesIn)} BPW)\nquant size: ${mib(plan.bytesOut)} MiB (${bpw(plan.bytesOut)} BPW), ${plan.fileType.name}\n`;
}

function summary(plan: QuantizationPlan, path: string | undefined) {
  const types: Record<string, number> = {};
  for (const t of plan.tensors) types[ggmlTypeName(t.to)] = (types[ggmlTypeName(t.to)] ?? 0) + 1;
  return {
    ...(path !== undefined ? { path, file: basename(path) } : {}),
    type: plan.fileType.name,
    file_type: plan.fileTypeId,
    tensors: plan.tensors.length,
    tensor_types: types,
    fallbacks: plan.fallbacks,
    with_importance: plan.tensors.filter((t) => t.importance !== undefined).length,
    without_importance: plan.withoutImportance,
    bytes_in: plan.bytesIn,
    bytes_out: plan.bytesOut,
    bits_per_weight: round((plan.bytesOut * 8) / plan.elementCount, 4),
  };
}
