import { mkdirSync, readFileSync } from "node:fs";
import { basename } from "node:path";
import { parseArgs } from "node:util";
import { type KVType, loadModel } from "@memra/core";
import { backendOptionHelp, describeBackend, parsePlacementDeviceChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { defaultModelPath } from "../default-model";
import { chatTemplateOptionHelp, chatTemplateParseOptions, parseLoraArguments, placeModel, placementOptionHelp, placementParseOptions, loraOptionHelp, loraOrderOf, loraParseOptions, ropeScalingOptionHelp, ropeScalingParseOptions } from "../placement-arguments";
import { progressBar } from "../progress-bar";
import { loadSpeculative, speculativeOptionHelp, speculativeParseOptions } from "../speculative-arguments";
import { type ServerDefaults, startOpenAIServer } from "../server/openai-server";
import { llamaArguments } from "../llama-arguments";
import { processEscapes } from "../escapes";
import { type SamplingValues, samplingOptionHelp, samplingOptionsOfFlags, samplingParseOptions } from "../sampling-arguments";
import { parseKVType, parsePositiveInteger } from "./model-arguments";

export const serveUsage = `usage: memra serve [-m MODEL] [options]

An OpenAI-compatible HTTP server: POST /v1/chat/completions and /v1/completions (streaming with
server-sent events or not), GET /v1/models, /health and /metrics (Prometheus). Requests run
concurrently: every decode step runs one token of each active request as one batch (continuous
batching) over a paged KV cache shared by all of them, with prefix caching.

options:
  -m, --model FILE      GGUF model (default: the built-in demo model)
  --host HOST           address to listen on (default 127.0.0.1)
  --port PORT           (default 8080; 0 picks a free one)
  --parallel N          most requests decoded together (default 4)
  --ctx N               most tokens of one request, prompt and completion (default: the model's, at most
                        4096; 0: the model's)
  --kv-type TYPE        KV cache element type: f16 (default), f32, q8_0
  --context-shift       a request may generate past --ctx: when its context fills, the tokens after
                        /completion's n_keep (default 0) are halved (or n_discard of them dropped) and
                        it goes on (llama.cpp's); "truncated" is then true. Not with speculative decoding
  --api-key KEY         requests must carry "Authorization: Bearer KEY" (or X-Api-Key); comma-separated
                        for several; also MEMRA_API_KEY. /health and /v1/models stay open
  --api-key-file FILE   keys one per line
  --alias NAME          the model's name in /v1/models and answers (default: the file's name; llama.cpp's
                        --alias, vLLM's --served-model-name)
  --lora-modules NAME=FILE  serve a LoRA adapter as model NAME (vLLM's): requests naming it run with it
                        at scale 1, others without it; repeat for several
  --slot-save-path DIR  where POST /slots/ID?action=save|restore writes and reads KV state files
                        (llama.cpp's; GET /slots lists the --parallel slots)
  -t, --threads N       threads for the native CPU backend
  --n-predict N         most tokens a request generates when it names no max_tokens / n_predict
                        (default: what its context leaves)
  --no-think            requests that do not say (chat_template_kwargs.enable_thinking) get Qwen3's
                        non-thinking mode (llama-server's -rea off, --reasoning-budget 0)
  --reasoning-format F  none: the reasoning stays in the answer's content; deepseek (default), auto:
                        it goes to reasoning_content (a request's reasoning_format wins)
  --no-escape           take --dry-sequence-breaker as it is (by default \\n, \\t, \\xHH... are
                        read as llama-server reads them)
${chatTemplateOptionHelp}
sampling defaults, for requests that leave a parameter out (as llama-server's; without --temp / --top-p,
the OpenAI endpoints take OpenAI's temperature 1 and top_p 1):
${samplingOptionHelp(24)}
${backendOptionHelp}
${placementOptionHelp}
${ropeScalingOptionHelp}
${loraOptionHelp}
${speculativeOptionHelp}
  --quiet               no progress bar, no notices

llama-server's flags work too (-c, -np, -ngl, -ctk/-ctv, -fa, -a, --jinja, --metrics, -cb, ...): each
is memra's option of the same meaning, is accepted with a notice when it changes nothing here, or is
refused with the reason.

The KV pool holds --parallel × --ctx tokens; requests beyond it wait, and a running request may be
preempted (and recomputed later) when the pool runs out.

examples:
  memra serve -m qwen3-0.6b-q8_0.gguf --parallel 8
  curl http://127.0.0.1:8080/v1/chat/completions -d '{"messages":[{"role":"user","content":"Hi"}]}'`;


/** memra serve's options (parseArgs specs). */
export const serveParseOptions = {
  model: { type: "string", short: "m" },
  host: { type: "string", default: "127.0.0.1" },
  port: { type: "string", default: "8080" },
  parallel: { type: "string" },
  ctx: { type: "string" },
  "kv-type": { type: "string", default: "f16" },
  "context-shift": { type: "boolean", default: false },
  "api-key": { type: "string" },
  "api-key-file": { type: "string" },
  "lora-modules": { type: "string", multiple: true },
  alias: { type: "string" },
  "slot-save-path": { type: "string" },
  "served-model-name": { type: "string" },
  threads: { type: "string", short: "t" },
  device: { type: "string" },
  ...samplingParseOptions,
  "n-predict": { type: "string" },
  "no-think": { type: "boolean", default: false },
  "no-escape": { type: "boolean", default: false },
  "reasoning-format": { type: "string" },
  ...placementParseOptions,
  ...ropeScalingParseOptions,
  ...chatTemplateParseOptions,
  ...loraParseOptions,
  ...speculativeParseOptions,
  quiet: { type: "boolean", short: "q", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const;

const REASONING_FORMATS = ["none", "deepseek", "deepseek-legacy", "auto"] as const;

/**
 * The request defaults serve's flags set (ServerDefaults): sampling, --n-predict, --no-think and
 * --reasoning-format. The DRY sequence breakers are read with llama.cpp's escapes unless
 * --no-escape, as llama-server reads them.
 */
export function serveDefaultsOf(
  values: SamplingValues & { readonly "n-predict"?: string; readonly "no-think"?: boolean; readonly "no-escape"?: boolean; readonly "reasoning-format"?: string },
): ServerDefaults {
  const sampling = samplingOptionsOfFlags(values, values["no-escape"] ? (text) => text : processEscapes);
  const reasoningFormat = values["reasoning-format"] as (typeof REASONING_FORMATS)[number] | undefined;
  if (reasoningFormat !== undefined && !REASONING_FORMATS.includes(reasoningFormat)) throw new CliError(`--reasoning-format must be one of ${REASONING_FORMATS.join(", ")}, got "${reasoningFormat}"`);
  const nPredict = values["n-predict"]?.trim();
  const maxTokens = nPredict === undefined || nPredict === "-1" || nPredict === "-2" ? undefined : parsePositiveInteger(nPredict, "--n-predict", 1);
  return {
    ...(Object.keys(sampling).length > 0 ? { sampling } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {}),
    ...(values["no-think"] ? { enableThinking: false } : {}),
    ...(reasoningFormat !== undefined ? { reasoningFormat } : {}),
  };
}

export async function serveCommand(args: string[], io: CliIO): Promise<void> {
  const notices: string[] = [];
  const { values: parsed, tokens } = parseArgs({
    tokens: true,
    args: llamaArguments("server", args, serveParseOptions, (message) => notices.push(message)),
    options: serveParseOptions,
  });
  const values = { ...parsed, loraOrder: loraOrderOf(tokens) };
  if (values.help) {
    io.stdout(`${serveUsage}\n`);
    return;
  }
  if (!values.quiet) for (const message of notices) io.stderr(`${message}\n`);
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new CliError(`--port must be 0 to 65535, got "${values.port}"`);
  const parallel = parsePositiveInteger(values.parallel, "--parallel", 4);
  const kvType = parseKVType(values["kv-type"]);
  const defaults = serveDefaultsOf(values);
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  parsePlacementDeviceChoice(values.device);
  const apiKeys = readApiKeys(values["api-key"] ?? process.env.MEMRA_API_KEY, values["api-key-file"]);
  const modules = parseLoraModules(values["lora-modules"]);
  const slotSavePath = values["slot-save-path"];
  if (slotSavePath !== undefined) {
    try {
      mkdirSync(slotSavePath, { recursive: true });
    } catch (error) {
      throw new CliError(`--slot-save-path "${slotSavePath}": ${(error as Error).message}`);
    }
  }
  if (values["context-shift"] && (values["model-draft"] !== undefined || values.lookup)) throw new CliError("--context-shift cannot be combined with speculative decoding (--model-draft, --lookup)");
  const path = values.model ?? (await defaultModelPath(io, values.quiet));

  // The KV pool is sized from the context, read from the header before the weights load; the
  // plan checks that it and the weights fit before any is read.
  const notice = (message: string) => values.quiet || io.stderr(`${message}\n`);
  const placed = await placeModel(path, values, threads, { defaultContext: 4096, sequences: parallel, kvType }, notice);
  const contextLength = placed.contextTokens;
  const backend = placed.primary;
  const bar = progressBar(io, "loading", io.stderrIsTerminal && !values.quiet);
  // The modules' adapters come after --lora's, at scale 0: a request that names one turns it on.
  const adapters = parseLoraArguments(values) ?? [];
  const lora = [...adapters, ...modules.map((module) => ({ path: module.path, scale: 0 }))];
  const loraModules = new Map(modules.map((module, i) => [module.name, adapters.length + i]));
  const model = loadModel(path, { ...placed.load, ...(lora.length > 0 ? { lora } : {}), onProgress: bar.update, maxSequences: parallel, kvCacheTokens: parallel * contextLength, kvType });
  bar.end();
  let speculation: Awaited<ReturnType<typeof loadSpeculative>>;
  try {
    speculation = await loadSpeculative(model, values, threads, { contextTokens: contextLength, sequences: parallel }, notice);
  } catch (error) {
    model.dispose();
    throw error;
  }
  // The whole KV pool is made resident before the first request (as llama.cpp clears its KV
  // buffers at start): the server's memory is then what it is at start, not growing under load.
  model.engine.pool.prefault();
  const server = startOpenAIServer({
    model,
    modelId: values.alias ?? values["served-model-name"] ?? basename(path),
    hostname: values.host,
    port,
    contextLength,
    ...(apiKeys.length > 0 ? { apiKeys } : {}),
    ...(loraModules.size > 0 ? { loraModules } : {}),
    ...(slotSavePath !== undefined ? { slotSavePath } : {}),
    ...(values["context-shift"] ? { contextShift: true } : {}),
    ...(speculation.speculative ? { speculative: speculation.speculative } : {}),
    ...(Object.keys(defaults).length > 0 ? { defaults } : {}),
  });
  if (!values.quiet) {
    const pool = model.engine.pool;
    io.stderr(
      `memra serve: ${basename(path)} on ${describeBackend(backend)}; ${parallel} parallel, context ${contextLength}, ` +
        `KV pool ${pool.blocks} blocks of ${pool.blockTokens} tokens (${kvType}, ${(pool.bytes / 2 ** 20).toFixed(1)} MiB)` +
        `${apiKeys.length > 0 ? `; ${apiKeys.length} API key${apiKeys.length === 1 ? "" : "s"}` : ""}\n`,
    );
  }
  io.stdout(`listening on ${server.url}\n`);
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  await server.stop();
  model.dispose();
  speculation.draft?.dispose();
}

/** --api-key (comma-separated, or MEMRA_API_KEY) and --api-key-file (one key per line, blank lines and # comments skipped). */
export function readApiKeys(keys: string | undefined, file: string | undefined): string[] {
  const found = (keys ?? "").split(",").map((key) => key.trim()).filter((key) => key !== "");
  if (keys !== undefined && found.length === 0) throw new CliError("--api-key is empty");
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      throw new CliError(`--api-key-file "${file}": ${(error as Error).message}`);
    }
    const lines = text.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== "" && !line.startsWith("#"));
    if (lines.length === 0) throw new CliError(`--api-key-file "${file}" holds no key`);
    found.push(...lines);
  }
  return found;
}

/** --lora-modules NAME=FILE (vLLM's form), each name once and none the base model's. */
export function parseLoraModules(items: readonly string[] | undefined): { name: string; path: string }[] {
  const modules = (items ?? []).map((item) => {
    const equals = item.indexOf("=");
    if (equals <= 0 || equals === item.length - 1) throw new CliError(`--lora-modules takes NAME=FILE, got "${item}"`);
    return { name: item.slice(0, equals), path: item.slice(equals + 1) };
  });
  const seen = new Set<string>();
  for (const { name } of modules) {
    if (seen.has(name)) throw new CliError(`--lora-modules names "${name}" twice`);
    seen.add(name);
  }
  return modules;
}
