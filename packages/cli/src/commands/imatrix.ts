import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { type KVType, computeImatrix } from "@memra/core";
import { writeImatrix } from "@memra/gguf";
import { backendOptionHelp, chooseBackend, describeBackend, parseBackendChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { metadataOverrideOptionHelp, metadataOverrideOptions, metadataOverrideParseOptions, parsePositiveInteger, requireModelPath } from "./model-arguments";

export const imatrixUsage = `usage: memra imatrix -m MODEL -f TEXT [-o imatrix.gguf] [-c 512] [--chunks N] [--process-output]

An importance matrix for quantizing to low-bit types, as llama.cpp's llama-imatrix computes it and in
its GGUF file format (what \`llama-quantize --imatrix\` reads): for every weight matrix, the sum of the
squares of each input column's activations over the calibration text, and the tokens counted.

The text is cut into chunks of -c tokens (at least two chunks' worth needed), each evaluated from an
empty KV cache; dense matmuls of fewer than 16 rows are not counted, routed experts always are (per
expert). The perplexity of the second half of each chunk is printed as it goes.

options:
  -o, --output FILE       where to write the imatrix (default imatrix.gguf)
  -c, --ctx-size N        tokens per chunk (default 512)
  --chunks N              at most N chunks (default: all of the text)
  --process-output        also collect output.weight (the LM head; not a tied one)
  --parse-special         parse special tokens such as <|im_start|> in the text
  -b, --batch-size N      tokens evaluated together, several chunks as sequences (default 2048)
  --ubatch-size N         rows of one forward step (default 512)
  --kv-type TYPE          KV cache element type: f16 (default, as llama.cpp), f32, q8_0
  -t, --threads N         threads of the native CPU backend (default: one per processor)
${backendOptionHelp}
${metadataOverrideOptionHelp}

examples:
  memra imatrix -m Qwen3-0.6B-F16.gguf -f calibration.txt -o imatrix.gguf
  memra imatrix -m Qwen3-30B-A3B-Q8_0.gguf -f calibration.txt --chunks 100 -c 512
  memra quantize --imatrix imatrix.gguf Qwen3-0.6B-F16.gguf Qwen3-0.6B-IQ3_S.gguf IQ3_S`;

const KV_TYPES: readonly KVType[] = ["f16", "f32", "q8_0"];

export async function imatrixCommand(args: string[], io: CliIO): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      model: { type: "string", short: "m" },
      file: { type: "string", short: "f" },
      output: { type: "string", short: "o", default: "imatrix.gguf" },
      "ctx-size": { type: "string", short: "c" },
      chunks: { type: "string" },
      "process-output": { type: "boolean", default: false },
      "parse-special": { type: "boolean", default: false },
      "batch-size": { type: "string", short: "b" },
      "ubatch-size": { type: "string" },
      "kv-type": { type: "string", default: "f16" },
      threads: { type: "string", short: "t" },
      device: { type: "string" },
      ...metadataOverrideParseOptions,
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    io.stdout(`${imatrixUsage}\n`);
    return;
  }
  const path = requireModelPath(values.model, imatrixUsage);
  if (!values.file) throw new CliError(`missing -f TEXT\n${imatrixUsage}`);
  if (!existsSync(path)) throw new CliError(`cannot open ${path}: no such file`);
  let text: string;
  try {
    text = readFileSync(values.file, "utf8");
  } catch (error) {
    throw new CliError(`cannot read ${values.file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  // llama.cpp's -f drops one trailing newline
  if (text.endsWith("\n")) text = text.slice(0, -1);
  const contextSize = parsePositiveInteger(values["ctx-size"], "--ctx-size", 512);
  const chunks = values.chunks === undefined ? undefined : parsePositiveInteger(values.chunks, "--chunks", 1);
  const batchSize = parsePositiveInteger(values["batch-size"], "--batch-size", 2048);
  const ubatchSize = parsePositiveInteger(values["ubatch-size"], "--ubatch-size", 512);
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  const kvType = values["kv-type"] as KVType;
  if (!KV_TYPES.includes(kvType)) throw new CliError(`--kv-type must be one of ${KV_TYPES.join(", ")}, got "${values["kv-type"]}"`);
  const output = values.output;
  const folder = dirname(resolve(output));
  if (!existsSync(folder) || !statSync(folder).isDirectory()) throw new CliError(`cannot write ${output}: no folder ${folder}`);
  if (!output.endsWith(".gguf")) io.stderr(`note: ${output} is written in the GGUF imatrix format (llama-imatrix's default), whatever its name\n`);
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
      ...overrides,
      onChunk: (progress) => {
        if (progress.chunk === 1) {
          io.stderr(`importance matrix on ${description}: ${progress.tokens} tokens, ${progress.chunks} chunk${progress.chunks === 1 ? "" : "s"} of ${contextSize}; ${progress.seconds.toFixed(2)} s for the first\n`);
        }
        io.stderr(`[${progress.chunk}]${progress.perplexity.toFixed(4)},${progress.chunk === progress.chunks ? "\n" : ""}`);
        last = progress;
      },
    });
  } catch (error) {
    if (error instanceof RangeError) throw new CliError(`${values.file}: ${error.message}`);
    throw error;
  }
  for (const [name, entry] of imatrix.entries) {
    const empty = entry.counts.filter((count) => count === 0).length;
    if (empty > 0) io.stderr(`warning: ${name} has partial data: ${entry.counts.length - empty} of ${entry.counts.length} experts were routed to (the others get importance 1)\n`);
  }
  try {
    writeImatrix(output, imatrix);
  } catch (error) {
    throw new CliError(`cannot write ${output}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const seconds = (performance.now() - started) / 1000;
  io.stdout(
    `${output}: ${imatrix.entries.size} entries over ${imatrix.chunkCount} chunk${imatrix.chunkCount === 1 ? "" : "s"} of ${contextSize} tokens` +
      `${last ? ` (${last.chunks} evaluated, the text has ${last.tokens} tokens); final estimate PPL = ${last.perplexity.toFixed(4)}` : ""}; ${seconds.toFixed(1)} s\n`,
  );
}
