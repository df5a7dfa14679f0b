/**
 * `memra imatrix` writes the file computeImatrix's result encodes to (the same backend, settings and
 * dataset name), and turns bad input into one line and exit code 1.
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ReferenceBackend, computeImatrix } from "@memra/core";
import { imatrixCalibrationText, loadImatrixGoldens } from "@memra/core/internal";
import { encodeImatrix, readImatrix } from "@memra/gguf";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const CALIBRATION = new URL("../../../core/src/__fixtures__/imatrix/calibration.txt", import.meta.url).pathname;
const directory = mkdtempSync(join(tmpdir(), "memra-imatrix-cli-"));
let moe = "";

function run(...args: string[]) {
  const result = Bun.spawnSync(["bun", MAIN, "imatrix", ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

beforeAll(async () => {
  const golden = loadImatrixGoldens().cases.find((c) => c.model === "moe-f32")!;
  moe = await syntheticModelFile(resolveOptions(golden.preset, golden.options));
}, 120_000);

describe("memra imatrix", () => {
  it("writes computeImatrix's imatrix, byte for byte, and reports progress and a summary", () => {
    const output = join(directory, "moe.gguf");
    const result = run("-m", moe, "-f", CALIBRATION, "-o", output, "-c", "64", "--chunks", "2", "--kv-type", "f32", "--device", "reference");
    expect(result.code, result.stderr).toBe(0);
    const expected = computeImatrix(moe, imatrixCalibrationText(), { backend: new ReferenceBackend(), contextSize: 64, chunks: 2, kvType: "f32", dataset: CALIBRATION });
    expect(Buffer.compare(readFileSync(output), Buffer.from(encodeImatrix(expected)))).toBe(0);
    expect(readImatrix(output).datasets).toEqual([CALIBRATION]);
    expect(result.stderr).toMatch(/^importance matrix on reference: 298 tokens, 2 chunks of 64; [\d.]+ s for the first\n\[1\][\d.]+,\[2\][\d.]+,\n$/);
    expect(result.stdout).toMatch(new RegExp(`^${output}: 16 entries over 2 chunks of 64 tokens \\(2 evaluated, the text has 298 tokens\\); final estimate PPL = [\\d.]+; [\\d.]+ s\\n$`));
  }, 120_000);

  it("warns of experts no token reached", () => {
    const result = run("-m", moe, "-f", CALIBRATION, "-o", join(directory, "sparse.gguf"), "-c", "12", "--chunks", "1", "--device", "reference");
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/warning: blk\.\d\.ffn_\w+_exps\.weight has partial data: \d of 8 experts were routed to \(the others get importance 1\)/);
  }, 60_000);

  it("fails with one line for bad input", () => {
    const cases: Array<[string[], string]> = [
      [["-m", moe], "missing -f TEXT"],
      [["-f", CALIBRATION], "missing -m MODEL"],
      [["-m", join(directory, "absent.gguf"), "-f", CALIBRATION], `cannot open ${join(directory, "absent.gguf")}: no such file`],
      [["-m", moe, "-f", join(directory, "absent.txt")], `cannot read ${join(directory, "absent.txt")}`],
      [["-m", moe, "-f", CALIBRATION, "-c", "256", "-o", join(directory, "x.gguf"), "--device", "reference"], `${CALIBRATION}: the text tokenizes to 298 tokens; a context of 256 needs at least 512`],
      [["-m", moe, "-f", CALIBRATION, "--chunks", "0"], '--chunks must be a positive integer, got "0"'],
      [["-m", moe, "-f", CALIBRATION, "--kv-type", "q4_0"], '--kv-type must be one of f16, f32, q8_0, got "q4_0"'],
      [["-m", moe, "-f", CALIBRATION, "-o", join(directory, "no", "folder.gguf")], `cannot write ${join(directory, "no", "folder.gguf")}: no folder ${join(directory, "no")}`],
    ];
    for (const [args, message] of cases) {
      const result = run(...args);
      expect(result.code, args.join(" ")).toBe(1);
      expect(result.stderr.split("\n")[0], args.join(" ")).toContain(`memra imatrix: ${message}`);
      // one line, but for a missing argument, which the usage follows
      if (args.includes("-m") && args.includes("-f")) expect(result.stderr.trimEnd().split("\n"), args.join(" ")).toHaveLength(1);
    }
    expect(existsSync(join(directory, "x.gguf"))).toBe(false);
    const help = run("--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("usage: memra imatrix -m MODEL -f TEXT");
  }, 120_000);
});
