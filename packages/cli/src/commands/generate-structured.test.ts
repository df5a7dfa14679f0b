import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
let model = "";
const directory = mkdtempSync(join(tmpdir(), "memra-structured-"));

function run(args: string[]) {
  const result = Bun.spawnSync(["bun", MAIN, ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

function file(name: string, text: string): string {
  const path = join(directory, name);
  writeFileSync(path, text);
  return path;
}

beforeAll(async () => {
  model = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
});

describe("memra generate --json-schema / --grammar", () => {
  it("constrains the output to a JSON schema and prints its value with --json", () => {
    const schema = file(
      "person.json",
      JSON.stringify({ type: "object", properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer", minimum: 0, maximum: 99 } }, required: ["name", "age"] }),
    );
    for (const seed of ["1", "2", "3"]) {
      const result = run(["generate", "-m", model, "-p", "Person:", "-n", "120", "--temp", "1", "--seed", seed, "--json-schema", schema, "--json"]);
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
      const parsed = JSON.parse(result.stdout);
      expect(parsed.value).toEqual(JSON.parse(parsed.text));
      expect(typeof parsed.value.name).toBe("string");
      expect(Number.isInteger(parsed.value.age) && parsed.value.age >= 0 && parsed.value.age <= 99).toBe(true);
      expect(parsed.finish_reason).toBe("stop");
    }
  });

  it("constrains the streamed output to a GBNF grammar", () => {
    const grammar = file("yes-no.gbnf", 'root ::= ("yes" | "no") ", because " [a-z]{1,8} "."\n');
    const result = run(["generate", "-m", model, "-p", "Answer:", "-n", "40", "--temp", "1", "--seed", "5", "--grammar", grammar, "--quiet"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^(yes|no), because [a-z]{1,8}\.\n$/);
  });

  it("names the file and the place of a bad grammar or schema, before loading the model", () => {
    const grammar = file("bad.gbnf", 'root ::= "a"\nitem ::= [a-\n');
    const badGrammar = run(["generate", "-m", "/nonexistent.gguf", "-p", "x", "--grammar", grammar]);
    expect(badGrammar.code).toBe(1);
    expect(badGrammar.stderr).toContain(`--grammar "${grammar}": unterminated character class (missing ]) at 2:10`);
    const schema = file("bad.json", JSON.stringify({ type: "object", properties: { a: { type: "strin" } } }));
    const badSchema = run(["generate", "-m", "/nonexistent.gguf", "-p", "x", "--json-schema", schema]);
    expect(badSchema.code).toBe(1);
    expect(badSchema.stderr).toContain("(at /properties/a/type)");
    const notJson = run(["generate", "-m", "/nonexistent.gguf", "-p", "x", "--json-schema", file("not.json", "{")]);
    expect(notJson.stderr).toMatch(/is not JSON/);
    expect(run(["generate", "-m", model, "-p", "x", "--json-schema", schema, "--grammar", grammar]).stderr).toMatch(/not both/);
  });

  it("says when generation stops before the value is complete", () => {
    const schema = file("long.json", JSON.stringify({ type: "string", minLength: 40 }));
    const result = run(["generate", "-m", model, "-p", "x", "-n", "2", "--seed", "1", "--json-schema", schema, "--json"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/generation ended \(length\) before the output was complete.*raise --max-tokens/);
  });
});
