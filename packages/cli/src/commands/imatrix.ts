import { existsSync, readFileSync, renameSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { llamaArguments } from "../llama-arguments";
import { type KVType, computeImatrix } from "@memra/core";
import { type GGUFTensorInfo, type Imatrix, ImatrixError, checkImatrixModel, combineImatrices, imatrixStatistics, openGGUFModel, readImatrix, writeImatrix, writeLegacyImatrix } from "@memra/gguf";
import { backendOptionHelp, chooseBackend, describeBackend, parseBackendChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { formatImatrixStatistics } from "./imatrix-statistics-text";
import { metadataOverrideOptionHelp, metadataOverrideOptions, metadataOverrideParseOptions, parsePositiveInteger, requireModelPath } from "./model-arguments";

export const imatrixUsage = `usage: memra imatrix -m MODEL -f TEXT [-o imatrix.gguf] [-c 512] [--chunks N] [--process-output]
       memra imatrix --in-file FILE[,FILE...] [-m MODEL] [-f TEXT] [-o imatrix.gguf] [--output-format gguf|dat]
       memra imatrix --in-file FILE --show-statistics
An importance matrix for quantizing to low-bit types, as llama.cpp's llama-imatrix computes it and in
its GGUF file format (what \`llama-quantize --imatrix\` reads): for every weight matrix, the sum of the
squares of each input column's activations over the calibration text, and the tokens counted.
The text is cut into chunks of -c tokens (at least two chunks' worth needed), each evaluated from an
empty KV cache; dense matmuls of fewer than 16 rows are not counted, routed experts always are (per
expert). The perplexity of the second half of each chunk is printed as it goes.
With --in-file, existing imatrix files (GGUF or legacy .dat) are added together first, as llama-imatrix
loads them (sums and counts per tensor and expert; a .dat file's values scaled back by -c; datasets
listed in order; the chunk count is the largest count over -c); with -f computing continues on top of
them, without -f they are only combined and written. With -m they must be that model's.
options:
  -o, --output FILE       where to write the imatrix (default imatrix.gguf)
  --output-format FORMAT  gguf (default, whatever the name of -o) or dat (llama.cpp's legacy format)
  --in-file FILE[,FILE]   imatrix files to start from (comma-separated, or the option repeated)
  --show-statistics       print llama-imatrix's per-tensor statistics of the --in-file data and exit
  -c, --ctx-size N        tokens per chunk (default 512; also the chunk size of combined files)
  --chunks N              at most N chunks (default: all of the text)
  --chunk, --from-chunk N skip the first N chunks of the text
  --output-frequency N    rewrite the output every N chunks as it goes, so that a run cut short keeps
                          what it collected (default 10, as llama-imatrix; 0: only at the end)
  --save-frequency N      also write a copy, <output>.at_<chunk>, every N chunks (counting --in-file's)
  --process-output        also collect output.weight (the LM head; not a tied one)
  --parse-special         parse special tokens such as <|im_start|> in the text
  -b, --batch-size N      tokens evaluated together, several chunks as sequences (default 2048)
  --ubatch-size N         rows of one forward step (default 512)
  --kv-type TYPE          KV cache element type: f16 (default, as llama.cpp), f32, q8_0
  -t, --threads N         threads of the native CPU backend (default: one per processor)
${backendOptionHelp}
${metadataOverrideOptionHelp}
llama-imatrix's flags work too (-ofreq, --output-file, -ngl, -fa, --ctx-size, -ub, ...): each is
memra's option of the same meaning, is accepted with a notice when it changes nothing here, or is
refused with the reason.

examples:
  memra imatrix -m Qwen3-0.6B-F16.gguf -f calibration.txt -o imatrix.gguf
  memra imatrix -m Qwen3-30B-A3B-Q8_0.gguf -f calibration.txt --chunks 100 -c 512
  memra imatrix --in-file wiki.gguf,code.gguf -o combined.gguf
  memra imatrix --in-file imatrix.gguf --show-statistics
  memra quantize --imatrix imatrix.gguf Qwen3-0.6B-F16.gguf Qwen3-0.6B-IQ3_S.gguf IQ3_S`;

const KV_TYPES: readonly KVType[] = ["f16", "f32", "q8_0"];
const OUTPUT_FORMATS = ["gguf", "dat"] as const;
type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** memra imatrix's options (parseArgs specs). */
export const imatrixParseOptions = {
  model: { type: "string", short: "m" },
  file: { type: "string", short: "f" },
  output: { type: "string", short: "o", default: "imatrix.gguf" },
  "output-format": { type: "string" },
  "in-file": { type: "string", multiple: true },
  "show-statistics": { type: "boolean", default: false },
  "ctx-size": { type: "string", short: "c" },
  chunks: { type: "string" },
  chunk: { type: "string" },
  "from-chunk": { type: "string" },
  "save-frequency": { type: "string" },
  "output-frequency": { type: "string" },
  "process-output": { type: "boolean", default: false },
  "parse-special": { type: "boolean", default: false },
  "batch-size": { type: "string", short: "b" },
  "ubatch-size": { type: "string" },
  "kv-type": { type: "string", default: "f16" },
  threads: { type: "string", short: "t" },
  device: { type: "string" },
  ...metadataOverrideParseOptions,
  help: { type: "boolean", short: "h", default: false },
} as const;

export async function imatrixCommand(args: string[], io: CliIO): Promise<void> {
  const notices: string[] = [];
  const { values } = parseArgs({
    args: llamaArguments("imatrix", args, imatrixParseOptions, (message) => notices.push(message)),
    options: imatrixParseOptions,
  });
  for (const message of notices) io.stderr(`${message}\n`);
  if (values.help) {
    io.stdout(`${imatrixUsage}\n`);
    return;
  }
  // llama-imatrix takes --in-file as comma-separated values (and checks each opens as it parses)
  const inFiles = (values["in-file"] ?? []).flatMap((value) => value.split(",")).filter((file) => file !== "");
  for (const file of inFiles) if (!existsSync(file)) throw new CliError(`cannot open --in-file ${file}: no such file`);
  const contextSize = parsePositiveInteger(values["ctx-size"], "--ctx-size", 512);

  if (values["show-statistics"]) {
    if (inFiles.length === 0) throw new CliError("--show-statistics needs an imatrix file: --in-file FILE");
    const statistics = imatrixStatistics(loadInFiles(inFiles, contextSize, undefined));
    for (const skipped of statistics.skipped) io.stderr(`warning: no statistics for ${skipped}\n`);
    if (statistics.tensors.length === 0) throw new CliError(`cannot compute statistics for ${inFiles.join(",")}: no tensor has data`);
    io.stdout(formatImatrixStatistics(statistics, inFiles.join(",")));
    return;
  }

  const format = values["output-format"] ?? "gguf";
  if (!OUTPUT_FORMATS.includes(format as OutputFormat)) throw new CliError(`--output-format must be one of ${OUTPUT_FORMATS.join(", ")}, got "${format}"`);
  const output = values.output;
  const folder = dirname(resolve(output));
  if (!existsSync(folder) || !statSync(folder).isDirectory()) throw new CliError(`cannot write ${output}: no folder ${folder}`);
  // llama-imatrix warns only when the format was not asked for
  if (values["output-format"] === undefined && !output.endsWith(".gguf")) io.stderr(`note: ${output} is written in the GGUF imatrix format (llama-imatrix's default), whatever its name; --output-format dat for the legacy one\n`);
  const save = (path: string, imatrix: Imatrix) => {
    try {
      if (format === "dat") writeLegacyImatrix(path, imatrix);
      else writeImatrix(path, imatrix);
    } catch (error) {
      throw new CliError(`cannot write ${path}: ${error instanceof Error ? error.message : String(error)}`);
    }
  };

  if (values.file === undefined) {
    if (inFiles.length === 0) throw new CliError(`missing -f TEXT (or --in-file FILE to combine)\n${imatrixUsage}`);
    if (values.model !== undefined && !existsSync(values.model)) throw new CliError(`cannot open ${values.model}: no such file`);
    const combined = loadInFiles(inFiles, contextSize, values.model);
    warnPartial(combined, io);
    save(output, combined);
    io.stdout(`${output}: ${combined.entries.size} entries over ${plural(combined.chunkCount, "chunk")} of ${contextSize} tokens, combined from ${plural(inFiles.length, "file")}\n`);
    return;
  }

  const path = requireModelPath(values.model, imatrixUsage);
  if (!existsSync(path)) throw new CliError(`cannot open ${path}: no such file`);
  let text: string;
  try {
    text = readFileSync(values.file, "utf8");
  } catch (error) {
    throw new CliError(`cannot read ${values.file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  // llama.cpp's -f drops one trailing newline
  if (text.endsWith("\n")) text = text.slice(0, -1);
  const chunks = values.chunks === undefined ? undefined : parsePositiveInteger(values.chunks, "--chunks", 1);
  const firstChunkText = values["from-chunk"] ?? values.chunk;
  const firstChunk = parseCount(firstChunkText, values["from-chunk"] !== undefined ? "--from-chunk" : "--chunk");
  const saveFrequency = parseCount(values["save-frequency"], "--save-frequency");
  const outputFrequency = values["output-frequency"] === undefined ? 10 : parseCount(values["output-frequency"], "--output-frequency");
  const batchSize = parsePositiveInteger(values["batch-size"], "--batch-size", 2048);
  const ubatchSize = parsePositiveInteger(values["ubatch-size"], "--ubatch-size", 512);
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  const kvType = values["kv-type"] as KVType;
  if (!KV_TYPES.includes(kvType)) throw new CliError(`--kv-type must be one of ${KV_TYPES.join(", ")}, got "${values["kv-type"]}"`);
  const initial = inFiles.length > 0 ? loadInFiles(inFiles, contextSize, path) : undefined;
  const overrides = metadataOverrideOptions(values);
  const backend = await chooseBackend(threads, parseBackendChoice(values.device));
  const description = describeBackend(backend);
  const started = performance.now();
  let last: { chunks: number; tokens: number; perplexity: number } | undefined;
  let imatrix;
  try {
    imatrix = computeImatrix(path, text, {
      backend,
      contextSize,
      batchSize,
      ubatchSize,
      kvType,
      dataset: values.file,
      processOutput: values["process-output"],
      parseSpecial: values["parse-special"],
      ...(chunks !== undefined ? { chunks } : {}),
      ...(initial ? { initial } : {}),
      firstChunk,
      saveFrequency,
      onSave: (copy, chunk) => save(`${output}.at_${chunk}`, copy),
      outputFrequency,
      // written beside it and renamed over it: a run stopped while writing keeps the last whole file
      onOutput: (sofar) => {
        save(`${output}.partial`, sofar);
        renameSync(`${output}.partial`, output);
      },
      ...overrides,
      onChunk: (progress) => {
        if (progress.chunk === 1) {
          io.stderr(`importance matrix on ${description}: ${progress.tokens} tokens${firstChunk > 0 ? ` after the first ${plural(firstChunk, "chunk")}` : ""}, ${plural(progress.chunks, "chunk")} of ${contextSize}; ${progress.seconds.toFixed(2)} s for the first\n`);
        }
        io.stderr(`[${progress.chunk}]${progress.perplexity.toFixed(4)},${progress.chunk === progress.chunks ? "\n" : ""}`);
        last = progress;
      },
    });
  } catch (error) {
    if (error instanceof RangeError) throw new CliError(`${values.file}: ${error.message}`);
    throw error;
  }
  warnPartial(imatrix, io);
  save(output, imatrix);
  const seconds = (performance.now() - started) / 1000;
  io.stdout(
    `${output}: ${imatrix.entries.size} entries over ${plural(imatrix.chunkCount, "chunk")} of ${contextSize} tokens` +
      `${last ? ` (${last.chunks} evaluated, the text has ${last.tokens} tokens${firstChunk > 0 ? " after those skipped" : ""}); final estimate PPL = ${last.perplexity.toFixed(4)}` : ""}` +
      `${initial ? `; added to ${plural(inFiles.length, "file")}` : ""}; ${seconds.toFixed(1)} s\n`,
  );
}

/**
 * The --in-file files read and combined (chunk size -c); with a model, each checked against its
 * weights first. Any problem is one line naming the file (and the tensor).
 */
function loadInFiles(files: readonly string[], chunkSize: number, modelPath: string | undefined): Imatrix {
  let tensors: readonly GGUFTensorInfo[] | undefined;
  if (modelPath !== undefined) {
    try {
      tensors = openGGUFModel(modelPath).tensors;
    } catch (error) {
      throw new CliError(`cannot read ${modelPath}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  try {
    const sources = files.map((path) => {
      const imatrix = readImatrix(path);
      if (tensors) checkImatrixModel(imatrix, tensors, path);
      return { path, imatrix };
    });
    return combineImatrices(sources, { chunkSize });
  } catch (error) {
    if (error instanceof ImatrixError) throw new CliError(error.message);
    throw error;
  }
}

function warnPartial(imatrix: Imatrix, io: CliIO): void {
  for (const [name, entry] of imatrix.entries) {
    const empty = entry.counts.filter((count) => count === 0).length;
    if (empty > 0) io.stderr(`warning: ${name} has partial data: ${entry.counts.length - empty} of ${entry.counts.length} experts were routed to (the others get importance 1)\n`);
  }
}

/** A non-negative integer option (0 when absent). */
function parseCount(value: string | undefined, name: string): number {
  if (value === undefined) return 0;
  const parsed = Number(value);
  if (value.trim() === "" || !Number.isInteger(parsed) || parsed < 0) throw new CliError(`${name} must be a non-negative integer, got "${value}"`);
  return parsed;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}
