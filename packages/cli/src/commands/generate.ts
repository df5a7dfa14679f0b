import { existsSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { GrammarError, GrammarSyntaxError, JsonSchemaError, KVStateError, type Model, StructuredOutputError, loadModel, prepareOutputConstraint } from "@memra/core";
import { backendOptionHelp, parsePlacementDeviceChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { defaultModelPath } from "../default-model";
import { placeModel, placementOptionHelp, placementParseOptions, loraOptionHelp, loraOrderOf, loraParseOptions, ropeScalingOptionHelp, ropeScalingParseOptions } from "../placement-arguments";
import { progressBar } from "../progress-bar";
import { joinNegativeSamplingValues, samplingOptionHelp, samplingOptionsOfFlags, samplingParseOptions } from "../sampling-arguments";
import { loadSpeculative, speculativeOptionHelp, speculativeParseOptions } from "../speculative-arguments";
import { parsePositiveInteger } from "./model-arguments";

export const generateUsage = `usage: memra generate [-m MODEL] (-p PROMPT | -f FILE) [options]

Completes PROMPT as is (no chat template), streaming the text to stdout as tokens arrive.
Special tokens written in the prompt (<|im_start|>, ...) are parsed, as llama.cpp does.
Without -m, a built-in demo model is used (see the notice it prints).

options:
  -m, --model FILE        GGUF model
  -p, --prompt TEXT       the prompt
  -f, --file FILE         the prompt from a file, as is (- for standard input; llama-cli's -f)
  -n, --max-tokens N      most tokens to generate (default 128)
  --temp T                temperature (default 0.8; 0 = greedy)
  --top-k K               (default 40; 0 disables)
  --top-p P               (default 0.95; 1 disables)
  --min-p P               (default 0.05; 0 disables)
  --repeat-penalty R      (default 1 = off)
${samplingOptionHelp(26)}
  --seed S                sampling seed (default: random; the one used is in --json output)
  --stop S                stop string; repeat for several
  --ignore-eos            never end at an end-of-generation token: generate -n tokens (benchmarks)
  --json-schema FILE      constrain the output to the JSON schema in FILE (--json adds the parsed "value")
  --grammar FILE          constrain the output to the GBNF grammar in FILE (llama.cpp's format)
  -t, --threads N         threads of the native CPU backend (default: one per processor)
${backendOptionHelp}
  --ctx N                 tokens of KV cache (default: the model's context length, at most 8192)
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

examples:
  memra generate -p "The capital of France is" -n 16 --temp 0
  memra generate -m qwen3-0.6b-q8_0.gguf -p "Once upon a time" --mirostat 2 --mirostat-ent 4
  memra generate -m qwen3-0.6b-q8_0.gguf -p "<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n" --stop "<|im_end|>"`;

function parseNumber(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (value.trim() === "" || !Number.isFinite(parsed)) throw new CliError(`${name} must be a number, got "${value}"`);
  return parsed;
}

export async function generateCommand(args: string[], io: CliIO): Promise<void> {
  const { values: parsed, tokens } = parseArgs({
    tokens: true,
    args: joinNegativeSamplingValues(joinNegativeKeep(args)),
    options: {
      model: { type: "string", short: "m" },
      prompt: { type: "string", short: "p" },
      file: { type: "string", short: "f" },
      "max-tokens": { type: "string", short: "n" },
      temp: { type: "string" },
      "top-k": { type: "string" },
      "top-p": { type: "string" },
      "min-p": { type: "string" },
      "repeat-penalty": { type: "string" },
      ...samplingParseOptions,
      seed: { type: "string" },
      stop: { type: "string", multiple: true },
      "ignore-eos": { type: "boolean", default: false },
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
      json: { type: "boolean", default: false },
      quiet: { type: "boolean", short: "q", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const values = { ...parsed, loraOrder: loraOrderOf(tokens) };
  if (values.help) {
    io.stdout(`${generateUsage}\n`);
    return;
  }
  if (values.prompt !== undefined && values.file !== undefined) throw new CliError("give -p PROMPT or -f FILE, not both");
  if (values.file !== undefined) values.prompt = readPromptFile(values.file);
  if (values.prompt === undefined) throw new CliError(`missing -p PROMPT or -f FILE\n${generateUsage}`);
  const prompt = values.prompt;
  const promptCache = values["prompt-cache"];
  if (promptCache === undefined && (values["prompt-cache-all"] || values["prompt-cache-ro"])) throw new CliError("--prompt-cache-all and --prompt-cache-ro need --prompt-cache FILE");
  if (values["prompt-cache-all"] && values["prompt-cache-ro"]) throw new CliError("give --prompt-cache-all or --prompt-cache-ro, not both");
  parsePlacementDeviceChoice(values.device);
  const contextShift = parseContextShift(values["context-shift"], values.keep);
  if (contextShift && (values["model-draft"] !== undefined || values.lookup)) throw new CliError("--context-shift cannot be combined with speculative decoding (--model-draft, --lookup)");
  const sampling = samplingOptionsOfFlags(values);
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  const constraint = readConstraint(values["json-schema"], values.grammar);
  const path = values.model ?? (await defaultModelPath(io, values.quiet));
  const notice = (message: string) => values.quiet || io.stderr(`${message}\n`);
  const placed = await placeModel(path, values, threads, {}, notice);
  const bar = progressBar(io, "loading", io.stderrIsTerminal && !values.quiet);
  const model = loadModel(path, { ...placed.load, kvCacheTokens: placed.contextTokens, onProgress: bar.update });
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

  const seed = parseNumber(values.seed, "--seed");
  const options = {
    maxTokens: parsePositiveInteger(values["max-tokens"], "--max-tokens", 128),
    temperature: parseNumber(values.temp, "--temp"),
    topK: parseNumber(values["top-k"], "--top-k"),
    topP: parseNumber(values["top-p"], "--top-p"),
    minP: parseNumber(values["min-p"], "--min-p"),
    repeatPenalty: parseNumber(values["repeat-penalty"], "--repeat-penalty"),
    ...sampling,
    seed,
    stop: values.stop,
    ignoreEos: values["ignore-eos"] || undefined,
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

/** `--keep -1` as `--keep=-1` (parseArgs takes a value starting with "-" for an option). */
function joinNegativeKeep(args: readonly string[]): string[] {
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--keep" && /^-\d+$/.test(args[i + 1] ?? "")) joined.push(`--keep=${args[++i]}`);
    else joined.push(args[i]!);
  }
  return joined;
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

/** Reads and compiles --json-schema / --grammar before the model loads, so that a bad file fails fast with its name. */
function readConstraint(schemaPath: string | undefined, grammarPath: string | undefined): { schema?: object; grammar?: string } {
  if (schemaPath !== undefined && grammarPath !== undefined) throw new CliError("give --json-schema or --grammar, not both");
  const read = (path: string, flag: string) => {
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

/** The prompt text of -f FILE (- reads standard input); a file that cannot be read is named. */
function readPromptFile(file: string): string {
  try {
    return readFileSync(file === "-" ? 0 : file, "utf8");
  } catch (error) {
    throw new CliError(`-f "${file}": ${(error as Error).message}`);
  }
}
