import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GGMLType, type GGUFValue, ggufValue, writeGGUF } from "@memra/gguf";
import { describe, expect, it } from "vitest";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const directory = mkdtempSync(join(tmpdir(), "memra-inspect-"));

function run(...args: string[]) {
  const result = Bun.spawnSync(["bun", MAIN, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

function sampleFile(): string {
  const tokens = Array.from({ length: 20 }, (_, i) => `tok${i}`);
  const metadata = new Map<string, GGUFValue>([
    ["general.architecture", ggufValue.string("qwen3")],
    ["qwen3.block_count", ggufValue.uint32(2)],
    ["tokenizer.ggml.tokens", ggufValue.stringArray(tokens)],
    ["big.counter", ggufValue.uint64(2n ** 62n)],
  ]);
  const path = join(directory, "sample.gguf");
  writeFileSync(
    path,
    writeGGUF({
      metadata,
      tensors: [
        { name: "token_embd.weight", type: GGMLType.Q8_0, shape: [64, 20], data: new Uint8Array(34 * 2 * 20) },
        { name: "output_norm.weight", type: GGMLType.F32, shape: [64], data: new Uint8Array(256) },
      ],
    }),
  );
  return path;
}

describe("memra inspect", () => {
  const path = sampleFile();

  it("prints metadata with long arrays abbreviated and a tensor table with totals", () => {
    const { code, stdout, stderr } = run("inspect", path);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(stdout).toContain("GGUF v3, alignment 32, 4 metadata keys, 2 tensors");
    expect(stdout).toMatch(/tokenizer\.ggml\.tokens\s+\[string × 20\] \["tok0", "tok1", .*"tok7", \.\.\.\]/);
    expect(stdout).toMatch(/token_embd\.weight\s+q8_0\s+\[64, 20\]\s+1\.33 KiB/);
    expect(stdout).toMatch(/all\s+2 tensors\s+1\.34K elements/);
  });

  it("prints the whole file as one JSON object with --json", () => {
    const { code, stdout } = run("inspect", path, "--json");
    expect(code).toBe(0);
    const parsed = JSON.parse(stdout);
    expect(parsed.version).toBe(3);
    expect(parsed.alignment).toBe(32);
    expect(parsed.metadata["tokenizer.ggml.tokens"]).toHaveLength(20);
    expect(parsed.metadata["big.counter"]).toBe("4611686018427387904");
    expect(parsed.tensors).toEqual([
      { name: "token_embd.weight", type: "q8_0", shape: [64, 20], offset: 0 },
      { name: "output_norm.weight", type: "f32", shape: [64], offset: 1376 },
    ]);
  });

  it("reports a bad file in one line on stderr with exit code 1", () => {
    const bad = join(directory, "bad.gguf");
    writeFileSync(bad, Buffer.from("GGUF\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\x7f", "latin1"));
    const truncated = run("inspect", bad);
    expect(truncated.code).toBe(1);
    expect(truncated.stdout).toBe("");
    expect(truncated.stderr.trim().split("\n")).toHaveLength(1);
    expect(truncated.stderr).toMatch(/^memra inspect: invalid GGUF: tensor_count at byte 8: count 9223372036854775807 cannot fit/);

    const missing = run("inspect", join(directory, "missing.gguf"));
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim().split("\n")).toHaveLength(1);
    expect(missing.stderr).toContain("missing.gguf");

    const empty = join(directory, "empty.gguf");
    writeFileSync(empty, "");
    const emptyRun = run("inspect", empty);
    expect(emptyRun.code).toBe(1);
    expect(emptyRun.stderr.trim().split("\n")).toHaveLength(1);
  });

  it("rejects wrong usage with exit code 1", () => {
    expect(run("inspect").code).toBe(1);
    expect(run("nonsense").code).toBe(1);
    expect(run("inspect", path, "--bogus").code).toBe(1);
  });
});
