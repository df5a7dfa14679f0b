import { GGUFError } from "@memra/gguf";
import { CliError } from "./cli-error";
import type { CliIO } from "./cli-io";
import { inspectCommand } from "./commands/inspect";
import { logprobsCommand } from "./commands/logprobs";
import { perplexityCommand } from "./commands/perplexity";
import { tokenizeCommand } from "./commands/tokenize";

type Command = (args: string[], io: CliIO) => Promise<void>;

const COMMANDS: Record<string, { run: Command; summary: string }> = {
  inspect: { run: inspectCommand, summary: "print a GGUF file's metadata and tensor table" },
  tokenize: { run: tokenizeCommand, summary: "print the token ids of a text" },
  logprobs: { run: logprobsCommand, summary: "top-K next-token log-probabilities at every position" },
  perplexity: { run: perplexityCommand, summary: "perplexity of a model over a text file" },
};

export const usage = `usage: memra <command> [options]

commands:
${Object.entries(COMMANDS)
  .map(([name, { summary }]) => `  ${name.padEnd(10)} ${summary}`)
  .join("\n")}

Run \`memra <command> --help\` for a command's options.`;

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
    await command.run(args, io);
    return 0;
  } catch (error) {
    if (error instanceof CliError) {
      io.stderr(`memra ${name}: ${error.message}\n`);
      return error.exitCode;
    }
    if (error instanceof GGUFError) {
      io.stderr(`memra ${name}: ${error.offset < 0 ? "" : "invalid GGUF: "}${error.message}\n`);
      return 1;
    }
    if (error instanceof TypeError && /option|argument/i.test(error.message)) {
      io.stderr(`memra ${name}: ${error.message}\n`);
      return 1;
    }
    const message = error instanceof Error ? error.message : String(error);
    io.stderr(`memra ${name}: ${message.split("\n")[0]}\n`);
    return 1;
  }
}
