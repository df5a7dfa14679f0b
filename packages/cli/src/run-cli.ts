import { CliError } from "./cli-error";
import type { CliIO } from "./cli-io";

type Command = (args: string[], io: CliIO) => Promise<void>;

// Commands load on use, so `memra inspect` does not pay for the model core and a slow import
// slows only the command that needs it.
const COMMANDS: Record<string, { load: () => Promise<Command>; summary: string }> = {
  generate: { load: async () => (await import("./commands/generate")).generateCommand, summary: "complete a prompt, streaming the text" },
  chat: { load: async () => (await import("./commands/chat")).chatCommand, summary: "a conversation through the chat template" },
  inspect: { load: async () => (await import("./commands/inspect")).inspectCommand, summary: "print a GGUF file's metadata and tensor table" },
  tokenize: { load: async () => (await import("./commands/tokenize")).tokenizeCommand, summary: "print the token ids of a text" },
  embed: { load: async () => (await import("./commands/embed")).embedCommand, summary: "the embedding of a text (pooled hidden state), as llama-embedding" },
  rerank: { load: async () => (await import("./commands/rerank")).rerankCommand, summary: "score documents against a query with a reranker (Qwen3-Reranker)" },
  logprobs: { load: async () => (await import("./commands/logprobs")).logprobsCommand, summary: "top-K next-token log-probabilities at every position" },
  perplexity: { load: async () => (await import("./commands/perplexity")).perplexityCommand, summary: "perplexity of a model over a text file" },
  bench: { load: async () => (await import("./commands/bench")).benchCommand, summary: "prompt and generation speed, llama-bench style (pp512, tg128)" },
  serve: { load: async () => (await import("./commands/serve")).serveCommand, summary: "an OpenAI-compatible HTTP server with continuous batching" },
  imatrix: { load: async () => (await import("./commands/imatrix")).imatrixCommand, summary: "an importance matrix over a calibration text, as llama-imatrix (for quantize --imatrix)" },
  quantize: { load: async () => (await import("./commands/quantize")).quantizeCommand, summary: "rewrite a model with quantized weights, as llama-quantize (Q4_K_M, Q8_0, ...)" },
  "gguf-split": { load: async () => (await import("./commands/gguf-split")).ggufSplitCommand, summary: "split a model into shards or merge them, as llama.cpp's gguf-split" },
  plan: { load: async () => (await import("./commands/plan")).planCommand, summary: "where each layer would run (GPUs, CPU) and the memory it takes, without loading" },
};

export const usage = `usage: memra <command> [options]

commands:
${Object.entries(COMMANDS)
  .map(([name, { summary }]) => `  ${name.padEnd(10)} ${summary}`)
  .join("\n")}

Run \`memra <command> --help\` for a command's options and examples.`;

/** Errors whose message is meant for the user as it is: no stack trace, exit code 1. */
const USER_ERRORS = new Set(["CliError", "GGUFError", "InvalidOptionError", "TokenizerError", "UnsupportedArchitectureError", "UnsupportedTensorTypeError", "UnsupportedOpError", "ModelTensorError", "GrammarSyntaxError", "GrammarError", "JsonSchemaError", "StructuredOutputError", "PlacementError", "QuantizationError", "MetadataOverrideError", "ImatrixError"]);

/** Runs the CLI with the given arguments; returns the exit code. Errors become one line on stderr. */
export async function runCli(argv: string[], io: CliIO): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    io.stdout(`${usage}\n`);
    return name === undefined ? 1 : 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    io.stderr(`memra: unknown command "${name}"\n${usage}\n`);
    return 1;
  }
  try {
    await (await command.load())(args, io);
    return 0;
  } catch (error) {
    if (error instanceof CliError) {
      io.stderr(`memra ${name}: ${error.message}\n`);
      return error.exitCode;
    }
    const message = error instanceof Error ? error.message : String(error);
    const kind = error instanceof Error ? error.name : "";
    // GGUFError with an offset describes a malformed file; without one, a file that cannot be opened.
    const prefix = kind === "GGUFError" && (error as { offset?: number }).offset !== -1 ? "invalid GGUF: " : "";
    if (USER_ERRORS.has(kind) || (error instanceof TypeError && /option|argument/i.test(message))) {
      io.stderr(`memra ${name}: ${prefix}${message.split("\n")[0]}\n`);
      return 1;
    }
    io.stderr(`memra ${name}: ${message.split("\n")[0]}\n`);
    return 1;
  }
}
