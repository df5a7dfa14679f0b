import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
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
 * test workers ask at once: one generates it (see generateOnce), the others wait for it.
 */
export async function syntheticModelFile(options: SyntheticModelOptions): Promise<string> {
  const path = join(syntheticCacheDirectory(), `${syntheticModelKey(options)}.gguf`);
  return generateOnce(path, (temporary) => writeGGUFFile(temporary, buildSyntheticModel(options)));
}

/** How long a lock file without a live owner's pid may stay before a waiter takes it over. */
const UNOWNED_LOCK_MS = 30_000;

/**
 * `path`, written by `write` (into a temporary file, renamed into place) unless it exists. Across
 * processes, the first to create `path.lock` writes it and the others wait for it, instead of each
 * generating the same model (test files of different workers ask for the same models at once;
 * a small model is seconds of work). A lock left by a process that died is taken over.
 */
export async function generateOnce(path: string, write: (temporary: string) => Promise<unknown>): Promise<string> {
  if (existsSync(path)) return path;
  mkdirSync(dirname(path), { recursive: true });
  const lock = `${path}.lock`;
  for (;;) {
    let descriptor: number | undefined;
    try {
      descriptor = openSync(lock, "wx");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    if (descriptor !== undefined) {
      try {
        writeSync(descriptor, String(process.pid));
        closeSync(descriptor);
        if (!existsSync(path)) {
          const temporary = `${path}.${process.pid}.${Date.now()}.tmp`;
          try {
            await write(temporary);
            renameSync(temporary, path);
          } finally {
            rmSync(temporary, { force: true });
          }
        }
        return path;
      } finally {
        rmSync(lock, { force: true });
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (existsSync(path)) return path;
    if (abandoned(lock)) rmSync(lock, { force: true });
  }
}

/** Whether a lock's owner is gone: its pid names no process, or it has no pid long after it was made. */
function abandoned(lock: string): boolean {
  let owner: number;
  let made: number;
  try {
    owner = Number(readFileSync(lock, "utf8"));
    made = statSync(lock).mtimeMs;
  } catch {
    return false; // released meanwhile: the next attempt takes it
  }
  if (!Number.isInteger(owner) || owner <= 0) return Date.now() - made > UNOWNED_LOCK_MS;
  try {
    process.kill(owner, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}
