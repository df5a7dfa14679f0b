/** Where a command writes; tests pass buffers, the real CLI passes the process streams. */
export interface CliIO {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Standard input as lines, for commands that stream (`tokenize --jsonl`). */
  stdinLines(): AsyncIterable<string>;
  /** Whether stderr / stdin are terminals (progress bars, interactive chat). */
  readonly stderrIsTerminal: boolean;
  readonly stdinIsTerminal: boolean;
}

export const processIO: CliIO = {
  stderrIsTerminal: process.stderr.isTTY === true,
  stdinIsTerminal: process.stdin.isTTY === true,
  stdout: (text) => {
    process.stdout.write(text);
  },
  stderr: (text) => {
    process.stderr.write(text);
  },
  async *stdinLines() {
    const decoder = new TextDecoder();
    let pending = "";
    for await (const chunk of process.stdin) {
      pending += decoder.decode(chunk as Uint8Array, { stream: true });
      let newline = pending.indexOf("\n");
      while (newline >= 0) {
        yield pending.slice(0, newline).replace(/\r$/, "");
        pending = pending.slice(newline + 1);
        newline = pending.indexOf("\n");
      }
    }
    pending += decoder.decode();
    if (pending.length > 0) yield pending;
  },
};
