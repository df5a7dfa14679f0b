import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { existsSync } from "node:fs";
import { type ChatSession, KVStateError, type Model, loadModel } from "@memra/core";
import { ReasoningSplitter } from "@memra/tokenizer";
import { backendOptionHelp, parsePlacementDeviceChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { defaultModelPath } from "../default-model";
import { processEscapes } from "../escapes";
import { llamaArguments } from "../llama-arguments";
import { parseKVType } from "./model-arguments";
import { chatTemplateOptionHelp, chatTemplateParseOptions, placeModel, placementOptionHelp, placementParseOptions, loraOptionHelp, loraOrderOf, loraParseOptions, ropeScalingOptionHelp, ropeScalingParseOptions } from "../placement-arguments";
import { progressBar } from "../progress-bar";
import { samplingOptionHelp, samplingOptionsOfFlags, samplingParseOptions } from "../sampling-arguments";
import { loadSpeculative, speculativeOptionHelp, speculativeParseOptions } from "../speculative-arguments";
import { parsePositiveInteger } from "./model-arguments";

export const chatUsage = `usage: memra chat [-m MODEL] [-p MESSAGE] [--system TEXT] [--no-think] [options]

A conversation through the model's chat template. With -p, one turn. Otherwise, when standard
input is a terminal, an interactive conversation (history kept and its KV cache reused; Ctrl-C
stops the current answer, Ctrl-D quits); when it is not, each line of standard input is a turn.
The answer goes to stdout; the model's <think> reasoning to stderr (unless --quiet).

options:
  -m, --model FILE     GGUF model (default: the built-in demo model)
  -p, --prompt TEXT    one message, one answer (\\n, \\t, \\\\, \\xHH ... read as llama.cpp reads them)
  --no-escape          take -p as it is
  --system TEXT        system prompt (llama-cli's -sys; -sysf FILE reads it from a file)
  --session FILE       keep the conversation in FILE: its messages and KV state are restored when it
                       exists (its tokens are not evaluated again) and saved after every turn
  --no-think           Qwen3's non-thinking mode (enable_thinking = false)
  -n, --max-tokens N   most tokens per answer (default 512; -1: half the context)
${samplingOptionHelp(23)}
  -t, --threads N      threads of the native CPU backend (default: one per processor)
${backendOptionHelp}
  --ctx N              tokens of KV cache (default: the model's context length, at most 8192; 0: the model's)
  --kv-type TYPE       KV cache element type: f16 (default), f32, q8_0 (llama.cpp's -ctk/-ctv)
${chatTemplateOptionHelp}
${placementOptionHelp}
${ropeScalingOptionHelp}
${loraOptionHelp}
${speculativeOptionHelp}
  --quiet              no progress bar, no reasoning, no notices

llama-cli's flags work too (-c, -ngl, -sys, -rea off, --reasoning-budget 0, --chat-template-file,
-ctk/-ctv, -fa, --jinja, ...): each is memra's option of the same meaning, is accepted with a notice
when it changes nothing here, or is refused with the reason.

examples:
  memra chat -m qwen3-0.6b-q8_0.gguf -p "Why is the sky blue?" --no-think
  memra chat -m qwen3-0.6b-q8_0.gguf --system "Answer in French."
  memra chat -m qwen3-0.6b-q8_0.gguf --session trip.state -p "And the day after?"`;

/** memra chat's options (parseArgs specs). */
export const chatParseOptions = {
  model: { type: "string", short: "m" },
  prompt: { type: "string", short: "p" },
  system: { type: "string" },
  session: { type: "string" },
  "no-think": { type: "boolean", default: false },
  "max-tokens": { type: "string", short: "n" },
  ...samplingParseOptions,
  "no-escape": { type: "boolean", default: false },
  threads: { type: "string", short: "t" },
  device: { type: "string" },
  ctx: { type: "string" },
  "kv-type": { type: "string", default: "f16" },
  ...placementParseOptions,
  ...ropeScalingParseOptions,
  ...chatTemplateParseOptions,
  ...loraParseOptions,
  ...speculativeParseOptions,
  quiet: { type: "boolean", short: "q", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const;

export async function chatCommand(args: string[], io: CliIO): Promise<void> {
  const notices: string[] = [];
  const { values: parsed, tokens } = parseArgs({
    tokens: true,
    args: llamaArguments("cli", args, chatParseOptions, (message) => notices.push(message)),
    options: chatParseOptions,
  });
  const values = { ...parsed, loraOrder: loraOrderOf(tokens) };
  if (values.help) {
    io.stdout(`${chatUsage}\n`);
    return;
  }
  if (!values.quiet) for (const message of notices) io.stderr(`${message}\n`);
  parsePlacementDeviceChoice(values.device);
  const kvType = parseKVType(values["kv-type"]);
  const escape = (text: string) => (values["no-escape"] ? text : processEscapes(text));
  if (values.prompt !== undefined) values.prompt = escape(values.prompt);
  const sampling = samplingOptionsOfFlags(values, escape);
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  const path = values.model ?? (await defaultModelPath(io, values.quiet));
  const notice = (message: string) => values.quiet || io.stderr(`${message}\n`);
  const placed = await placeModel(path, values, threads, { kvType }, notice);
  const bar = progressBar(io, "loading", io.stderrIsTerminal && !values.quiet);
  const model = loadModel(path, { ...placed.load, kvCacheTokens: placed.contextTokens, kvType, onProgress: bar.update });
  bar.end();
  let speculation: Awaited<ReturnType<typeof loadSpeculative>>;
  let session: ChatSession;
  try {
    session = openSession(model, values.session, values.system);
    speculation = await loadSpeculative(model, values, threads, { contextTokens: placed.contextTokens }, notice);
  } catch (error) {
    model.dispose();
    throw error;
  }
  if (values.session !== undefined && session.messages.some((message) => message.role !== "system")) {
    notice(`restored ${session.messages.length} messages from ${values.session}`);
  }
  // -n -1 / -2 (llama.cpp's no limit): half the context, the rest for the history
  const maxTokens = ["-1", "-2"].includes(values["max-tokens"]?.trim() ?? "") ? Math.max(1, Math.floor(placed.contextTokens / 2)) : parsePositiveInteger(values["max-tokens"], "--max-tokens", 512);
  const options = {
    maxTokens,
    enableThinking: !values["no-think"],
    ...(speculation.speculative ? { speculative: speculation.speculative } : {}),
    ...sampling,
  };
  const turn = async (message: string, signal?: AbortSignal) => {
    const splitter = new ReasoningSplitter();
    const stream = session.send(message, { ...options, ...(signal ? { signal } : {}) });
    for await (const chunk of stream) {
      const { reasoning, content } = splitter.push(chunk.text);
      if (reasoning && !values.quiet) io.stderr(reasoning);
      if (content) io.stdout(content);
    }
    const { reasoning, content } = splitter.flush();
    if (reasoning && !values.quiet) io.stderr(reasoning);
    io.stdout(`${content}\n`);
    const result = await stream.result;
    if (values.session !== undefined) await saveSession(session, values.session);
    return result;
  };

  try {
    if (values.prompt !== undefined) {
      await turn(values.prompt);
      return;
    }
    if (io.stdinIsTerminal) {
      await interactive(session, io, turn);
      return;
    }
    for await (const line of io.stdinLines()) if (line.trim() !== "") await turn(line);
  } finally {
    session.dispose();
    model.dispose();
    speculation.draft?.dispose();
  }
}

/** The chat session: restored from --session FILE when it exists, else new (with --system). */
function openSession(model: Model, file: string | undefined, system: string | undefined): ChatSession {
  if (file === undefined || !existsSync(file)) return model.createChatSession(system === undefined ? {} : { system });
  let session: ChatSession;
  try {
    session = model.restoreChatSession(file);
  } catch (error) {
    if (error instanceof KVStateError) throw new CliError(`--session: ${error.message} (delete the file to start a new conversation)`);
    throw error;
  }
  const first = session.messages[0];
  if (system !== undefined && (first?.role !== "system" || first.content !== system)) {
    session.dispose();
    throw new CliError(`--session: ${file} holds a conversation with ${first?.role === "system" ? "another" : "no"} system message; drop --system to continue it`);
  }
  return session;
}

async function saveSession(session: ChatSession, file: string): Promise<void> {
  try {
    await session.saveState(file);
  } catch (error) {
    if (error instanceof KVStateError) throw new CliError(`--session: ${error.message}`);
    throw error;
  }
}

async function interactive(_session: ChatSession, io: CliIO, turn: (message: string, signal?: AbortSignal) => Promise<unknown>): Promise<void> {
  const readline = createInterface({ input: process.stdin, output: process.stderr, prompt: "> " });
  let current: AbortController | undefined;
  readline.on("SIGINT", () => {
    if (current) current.abort();
    else readline.close();
  });
  io.stderr("memra chat — Ctrl-C stops an answer, Ctrl-D quits.\n");
  readline.prompt();
  for await (const line of readline) {
    if (line.trim() !== "") {
      current = new AbortController();
      await turn(line, current.signal);
      current = undefined;
    }
    readline.prompt();
  }
}
