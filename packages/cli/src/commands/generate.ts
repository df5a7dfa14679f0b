import { existsSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { GrammarError, GrammarSyntaxError, JsonSchemaError, KVStateError, type Model, StructuredOutputError, loadModel, prepareOutputConstraint } from "@memra/core";
import { backendOptionHelp, parsePlacementDeviceChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { defaultModelPath } from "../default-model";
import { placeModel, placementOptionHelp, placementParseOptions, loraOptionHelp, loraOrderOf, loraParseOptions, ropeScalingOptionHelp, ropeScalingParseOptions } from "../placement-arguments";
import { progressBar } from "../progress-bar";
import { processEscapes } from "../escapes";
import { llamaArguments, readFlagFile } from "../llama-arguments";
import { samplingOptionHelp, samplingOptionsOfFlags, samplingParseOptions } from "../sampling-arguments";
import { loadSpeculative, speculativeOptionHelp, speculativeParseOptions } from "../speculative-arguments";
import { parseKVType, parsePositiveInteger } from "./model-arguments";

export const generateUsage = `usage: memra generate [-m MODEL] (-p PROMPT | -f FILE) [options]

Completes PROMPT as is (no chat template), streaming the text to stdout as tokens arrive.
Special tokens written in the prompt (<|im_start|>, ...) are parsed, as llama.cpp does.
Without -m, a built-in demo model is used (see the notice it prints).

options:
  -m, --model FILE        GGUF model
  -p, --prompt TEXT       the prompt; \\n, \\t, \\\\, \\xHH ... are read as llama.cpp reads them
  -f, --file FILE         the prompt from a file, less one final newline (- for standard input)
  --no-escape             take the prompt, --stop and --dry-sequence-breaker as they are (no \\n escapes)
  -n, --max-tokens N      most tokens to generate (default 128; -1: until the context is full)
${samplingOptionHelp(26)}
  --stop S                stop string; repeat for several (llama.cpp's -r)
  --json-schema FILE      constrain the output to the JSON schema in FILE, or given as JSON text (--json
                          adds the parsed "value")
  --grammar FILE          constrain the output to the GBNF grammar in FILE, or given as text (llama.cpp's
                          format)
  -t, --threads N         threads of the native CPU backend (default: one per processor)
${backendOptionHelp}
  --ctx N                 tokens of KV cache (default: the model's context length, at most 8192; 0: the model's)
  --kv-type TYPE          KV cache element type: f16 (default), f32, q8_0 (llama.cpp's -ctk/-ctv)
  --context-shift         generate past the context: when it fills, half of the tokens after --keep are
                          discarded and generation goes on (llama.cpp's); -n may then exceed --ctx
  --keep N                with --context-shift: the prompt tokens always kept (default 0; -1: all)
${placementOptionHelp}
${ropeScalingOptionHelp}
${loraOptionHelp}
${speculativeOptionHelp}
  --prompt-cache FILE     keep the prompt's KV state in FILE: read when it exists (the prompt's tokens it
                          holds are not evaluated again), written after generating (llama-cli's option)
  --prompt-cache-all      write the generated tokens' state to FILE too (a later prompt may continue it)
  --prompt-cache-ro       read FILE, never write it
  --no-special            treat special-token text in the prompt as plain text
  --json                  print one JSON object at the end instead of streaming
  --quiet                 no progress bar, no notices

llama-completion's flags work too (-c, -ngl, -ctk/-ctv, -fa, -s, -r, --grammar-file, -jf, ...): each
is memra's option of the same meaning, is accepted with a notice when it changes nothing here, or is
refused with the reason.

examples:
  memra generate -p "The capital of France is" -n 16 --temp 0
  memra generate -m qwen3-0.6b-q8_0.gguf -p "Once upon a time" --mirostat 2 --mirostat-ent 4
  memra generate -m qwen3-0.6b-q8_0.gguf -p "<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n" --stop "<|im_end|>"`;

/** memra generate's options (parseArgs specs). */
export const generateParseOptions = {
  model: { type: "string", short: "m" },
  prompt: { type: "string", short: "p" },
  file: { type: "string", short: "f" },
  "max-tokens": { type: "string", short: "n" },
  ...samplingParseOptions,
  stop: { type: "string", multiple: true },
  "json-schema": { type: "string" },
  grammar: { type: "string" },
  threads: { type: "string", short: "t" },
  device: { type: "string" },
  ctx: { type: "string" },
  "context-shift": { type: "boolean", default: false },
  keep: { type: "string" },
  ...placementParseOptions,
  ...ropeScalingParseOptions,
  ...loraParseOptions,
  ...speculativeParseOptions,
  "prompt-cache": { type: "string" },
  "prompt-cache-all": { type: "boolean", default: false },
  "prompt-cache-ro": { type: "boolean", default: false },
  "no-special": { type: "boolean", default: false },
  "no-escape": { type: "boolean", default: false },
  "kv-type": { type: "string", default: "f16" },
  json: { type: "boolean", default: false },
  quiet: { type: "boolean", short: "q", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const;

export async function generateCommand(args: string[], io: CliIO): Promise<void> {
  const notices: string[] = [];
  const { values: parsed, tokens } = parseArgs({
    tokens: true,
    args: llamaArguments("completion", args, generateParseOptions, (message) => notices.push(message)),
    options: generateParseOptions,
  });
  const values = { ...parsed, loraOrder: loraOrderOf(tokens) };
  if (values.help) {
    io.stdout(`${generateUsage}\n`);
    return;
  }
  if (values.prompt !== undefined && values.file !== undefined) throw new CliError("give -p PROMPT or -f FILE, not both");
  const escape = (text: string) => (values["no-escape"] ? text : processEscapes(text));
  if (values.file !== undefined) values.prompt = readFlagFile(values.file, "-f");
  if (values.prompt !== undefined) values.prompt = escape(values.prompt);
  if (values.prompt === undefined) throw new CliError(`missing -p PROMPT or -f FILE\n${generateUsage}`);
  if (!values.quiet) for (const message of notices) io.stderr(`${message}\n`);
  const prompt = values.prompt;
  const promptCache = values["prompt-cache"];
  if (promptCache === undefined && (values["prompt-cache-all"] || values["prompt-cache-ro"])) throw new CliError("--prompt-cache-all and --prompt-cache-ro need --prompt-cache FILE");
  if (values["prompt-cache-all"] && values["prompt-cache-ro"]) throw new CliError("give --prompt-cache-all or --prompt-cache-ro, not both");
  parsePlacementDeviceChoice(values.device);
  const kvType = parseKVType(values["kv-type"]);
  const contextShift = parseContextShift(values["context-shift"], values.keep);
  if (contextShift && (values["model-draft"] !== undefined || values.lookup)) throw new CliError("--context-shift cannot be combined with speculative decoding (--model-draft, --lookup)");
  const sampling = samplingOptionsOfFlags(values, escape);
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  const constraint = readConstraint(values["json-schema"], values.grammar);
  const path = values.model ?? (await defaultModelPath(io, values.quiet));
  const notice = (message: string) => values.quiet || io.stderr(`${message}\n`);
  const placed = await placeModel(path, values, threads, { kvType }, notice);
  const bar = progressBar(io, "loading", io.stderrIsTerminal && !values.quiet);
  const model = loadModel(path, { ...placed.load, kvCacheTokens: placed.contextTokens, kvType, onProgress: bar.update });
  bar.end();
  let speculation: Awaited<ReturnType<typeof loadSpeculative>>;
  let cachedState: readonly number[] = [];
  try {
    if (promptCache !== undefined && existsSync(promptCache)) cachedState = loadPromptCache(model, promptCache);
    speculation = await loadSpeculative(model, values, threads, { contextTokens: placed.contextTokens }, notice);
  } catch (error) {
    model.dispose();
    throw error;
  }

  const options = {
    maxTokens: maxTokensOf(values["max-tokens"], () => placed.contextTokens - model.tokenizer.encode(prompt, { special: !values["no-special"] }).length),
    ...sampling,
    stop: values.stop?.map(escape),
    special: !values["no-special"],
    speculative: speculation.speculative,
    contextShift,
    ...constraint,
  };
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const abort = new AbortController();
  const onInterrupt = () => abort.abort();
  process.once("SIGINT", onInterrupt);
  try {
    const stream = model.generate(prompt, { ...defined, signal: abort.signal });
    let result: Awaited<typeof stream.result>;
    try {
      for await (const chunk of stream) if (!values.json) io.stdout(chunk.text);
      result = await stream.result;
    } catch (error) {
      if (error instanceof StructuredOutputError) throw new CliError(`${error.message} (raise --max-tokens?)`);
      throw error;
    }
    if (promptCache !== undefined && !values["prompt-cache-ro"]) {
      const tokens = values["prompt-cache-all"] ? [...result.promptTokens, ...result.tokens] : [...result.promptTokens];
      // A file that already holds these very tokens is left as it is.
      if (tokens.length !== cachedState.length || tokens.some((token, i) => token !== cachedState[i])) {
        try {
          await model.saveState(promptCache, tokens.slice(0, model.contextLength));
        } catch (error) {
          if (error instanceof KVStateError) throw new CliError(`--prompt-cache: ${error.message}`);
          throw error;
        }
      }
    }
    if (values.json) {
      io.stdout(
        `${JSON.stringify({
          prompt_tokens: result.promptTokens,
          cached_prompt_tokens: result.usage.cachedPromptTokens,
          tokens: result.tokens,
          text: result.text,
          finish_reason: result.finishReason,
          ...(constraint.schema !== undefined ? { value: result.value } : {}),
          seed: result.seed,
          timings: { prefill_tps: result.timings.prefillTokensPerSecond, decode_tps: result.timings.decodeTokensPerSecond },
          ...(result.speculative ? { speculative: { drafted: result.speculative.drafted, accepted: result.speculative.accepted } } : {}),
          ...(result.contextShift ? { context_shift: { shifts: result.contextShift.shifts, discarded_tokens: result.contextShift.discardedTokens } } : {}),
        })}\n`,
      );
    } else {
      io.stdout("\n");
      if (!values.quiet) {
        const t = result.timings;
        io.stderr(
          `[${result.finishReason}] ${result.usage.promptTokens} prompt tokens` +
            (result.usage.cachedPromptTokens > 0 ? ` (${result.usage.cachedPromptTokens} cached)` : "") +
            ` at ${t.prefillTokensPerSecond.toFixed(1)} t/s, ` +
            `${result.usage.completionTokens} generated at ${t.decodeTokensPerSecond.toFixed(1)} t/s` +
            (result.speculative ? `; ${result.speculative.accepted} of ${result.speculative.drafted} draft tokens accepted` : "") +
            (result.contextShift ? `; context shifted ${result.contextShift.shifts} time${result.contextShift.shifts === 1 ? "" : "s"} (${result.contextShift.discardedTokens} tokens discarded)` : "") +
            "\n",
        );
      }
    }
  } finally {
    process.off("SIGINT", onInterrupt);
    model.dispose();
    speculation.draft?.dispose();
  }
}

/** -n: a number of tokens, or -1 / -2 (llama.cpp's "no limit" and "until the context is full"): what `room` leaves. */
function maxTokensOf(value: string | undefined, room: () => number): number {
  if (value === undefined) return 128;
  if (value.trim() === "-1" || value.trim() === "-2") return Math.max(1, room());
  return parsePositiveInteger(value, "--max-tokens", 128);
}

/** --context-shift and --keep as the contextShift option (undefined without --context-shift). */
function parseContextShift(enabled: boolean, keep: string | undefined): { keep: number } | undefined {
  if (!enabled) {
    if (keep !== undefined) throw new CliError("--keep needs --context-shift");
    return undefined;
  }
  if (keep === undefined) return { keep: 0 };
  const parsed = Number(keep);
  if (keep.trim() === "" || !Number.isInteger(parsed) || parsed < -1) throw new CliError(`--keep must be -1 (the whole prompt) or a number of tokens, got "${keep}"`);
  return { keep: parsed };
}

/**
 * Reads and compiles --json-schema / --grammar before the model loads, so that a bad file fails fast
 * with its name. Each is a file, or the schema or grammar itself (llama.cpp's -j and --grammar): a
 * value starting with "{" is a schema, one holding "::=" that is no file a grammar.
 */
function readConstraint(schemaPath: string | undefined, grammarPath: string | undefined): { schema?: object; grammar?: string } {
  if (schemaPath !== undefined && grammarPath !== undefined) throw new CliError("give --json-schema or --grammar, not both");
  const read = (path: string, flag: string) => {
    if (flag === "--json-schema" && path.trimStart().startsWith("{")) return path;
    if (flag === "--grammar" && path.includes("::=") && !existsSync(path)) return path;
    try {
      return readFileSync(path, "utf8");
    } catch (error: unknown) {
      throw new CliError(`${flag}: cannot read "${path}": ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  try {
    if (schemaPath !== undefined) {
      const text = read(schemaPath, "--json-schema");
      let schema: object;
      try {
        schema = JSON.parse(text) as object;
      } catch (error: unknown) {
        throw new CliError(`--json-schema: "${schemaPath}" is not JSON: ${error instanceof Error ? error.message : String(error)}`);
      }
      prepareOutputConstraint({ schema });
      return { schema };
    }
    if (grammarPath !== undefined) {
      const grammar = read(grammarPath, "--grammar");
      prepareOutputConstraint({ grammar });
      return { grammar };
    }
  } catch (error) {
    if (error instanceof JsonSchemaError) throw new CliError(`--json-schema "${schemaPath}": ${error.message}`);
    if (error instanceof GrammarSyntaxError || error instanceof GrammarError) throw new CliError(`--grammar "${grammarPath}": ${error.message}`);
    throw error;
  }
  return {};
}

/** Loads --prompt-cache FILE into the model's prefix cache; returns the tokens it holds. A bad file stops the command. */
function loadPromptCache(model: Model, file: string): readonly number[] {
  try {
    return model.loadState(file).tokens;
  } catch (error) {
    if (error instanceof KVStateError) throw new CliError(`--prompt-cache: ${error.message} (delete the file to start it again)`);
    throw error;
  }
}
