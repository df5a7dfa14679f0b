import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CliError } from "./cli-error";
import type { CliIO } from "./cli-io";

/** The demo model shipped with the CLI (tools/demo-model/MODEL_CARD.md). */
export const DEMO_MODEL_FILE = "memra-demo-qwen3-q8_0.gguf";

/** Where the demo model lies: `assets/` beside `src/` and `dist/` in the package. */
export function demoModelPath(): string {
  return fileURLToPath(new URL(`../assets/${DEMO_MODEL_FILE}`, import.meta.url));
}

/**
 * The model `generate`, `chat`, `serve` and `bench` use without -m: memra's demo model, a small
 * Qwen3 (4 layers, hidden 256, 4,096-token vocabulary) trained on fortunes, the Jargon File, The
 * Devil's Dictionary and WordNet glosses. It writes English, not facts.
 */
export async function defaultModelPath(io: CliIO, quiet: boolean): Promise<string> {
  const path = demoModelPath();
  if (!existsSync(path)) throw new CliError(`no model given and the built-in demo model is missing (${path}): pass -m path/to/model.gguf`);
  if (!quiet) {
    io.stderr(
      `memra: no -m given, so using the built-in demo model at ${path}: a 4.2M-parameter Qwen3 trained on fortunes and dictionaries. ` +
        "It writes English, not facts; pass -m path/to/model.gguf to run a real model.\n",
    );
  }
  return path;
}
