import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { writeGGUFFile } from "@memra/gguf";
import { hashString } from "./random";
import { GENERATOR_VERSION, type SyntheticModelOptions, buildSyntheticModel } from "./synthetic-model";

/** Where generated models are cached: `$MEMRA_CACHE_DIR/synthetic` or `~/.cache/memra/synthetic`. */
export function syntheticCacheDirectory(): string {
  const root = process.env.MEMRA_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "memra");
  return join(root, "synthetic");
}

/** A stable file name for the options and the generator version. */
export function syntheticModelKey(options: SyntheticModelOptions): string {
  const canonical = JSON.stringify(Object.fromEntries(Object.entries(options).sort(([a], [b]) => a.localeCompare(b))));
  const digest = [hashString(`v${GENERATOR_VERSION}:${canonical}`), hashString(`${canonical}:v${GENERATOR_VERSION}`)]
    .map((h) => h.toString(16).padStart(8, "0"))
    .join("");
  return `${options.architecture}-${options.layers}x${options.hidden}-${options.weightType}-s${options.seed}-g${GENERATOR_VERSION}-${digest}`;
}

/**
 * The path of a generated model with these options, generating it on first use. Safe when several
 * test workers ask at once: each writes a private temporary file and renames it into place.
 */
export async function syntheticModelFile(options: SyntheticModelOptions): Promise<string> {
  const directory = syntheticCacheDirectory();
  const path = join(directory, `${syntheticModelKey(options)}.gguf`);
  if (existsSync(path)) return path;
  mkdirSync(directory, { recursive: true });
  const temporary = `${path}.${process.pid}.${Date.now()}.tmp`;
  try {
    await writeGGUFFile(temporary, buildSyntheticModel(options));
    renameSync(temporary, path);
  } finally {
    rmSync(temporary, { force: true });
  }
  return path;
}
