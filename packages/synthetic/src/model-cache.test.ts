import { existsSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { generateOnce } from "./model-cache";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("generateOnce", () => {
  it("writes a file once when several callers ask at once; the others wait for it", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "memra-once-")), "model.gguf");
    let writes = 0;
    const write = async (temporary: string) => {
      writes++;
      await sleep(150);
      writeFileSync(temporary, "model");
    };
    const paths = await Promise.all([generateOnce(path, write), generateOnce(path, write), generateOnce(path, write)]);
    expect(paths).toEqual([path, path, path]);
    expect(writes).toBe(1);
    expect(readdirSync(join(path, ".."))).toEqual(["model.gguf"]); // no lock or temporary file left
    await generateOnce(path, write);
    expect(writes).toBe(1);
  });

  it("waits for a live owner's lock, and takes over the lock of a process that is gone", async () => {
    const directory = mkdtempSync(join(tmpdir(), "memra-once-"));
    // A live owner (this process's parent) writes the file later: the caller waits, writing nothing.
    const waited = join(directory, "waited.gguf");
    writeFileSync(`${waited}.lock`, String(process.ppid));
    setTimeout(() => writeFileSync(waited, "theirs"), 200);
    let writes = 0;
    await generateOnce(waited, async (temporary) => {
      writes++;
      writeFileSync(temporary, "mine");
    });
    expect(writes).toBe(0);
    // An owner that exited: its lock is taken over.
    const gone = Bun.spawnSync(["true"]).pid;
    const abandoned = join(directory, "abandoned.gguf");
    writeFileSync(`${abandoned}.lock`, String(gone));
    await generateOnce(abandoned, async (temporary) => {
      writes++;
      writeFileSync(temporary, "mine");
    });
    expect(writes).toBe(1);
    expect(existsSync(`${abandoned}.lock`)).toBe(false);
  });
});
