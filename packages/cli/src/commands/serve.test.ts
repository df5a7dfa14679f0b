import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel } from "@memra/core";
import { resolveOptions, syntheticLoraFile, syntheticModelFile } from "@memra/synthetic";
import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import { llamaArguments } from "../llama-arguments";
import { serveDefaultsOf, serveParseOptions } from "./serve";

const MAIN = new URL("../main.ts", import.meta.url).pathname;

/** Starts `memra serve` with `args`; resolves with its URL once it listens, and a stop function. */
async function serve(args: string[]): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = Bun.spawn(["bun", MAIN, "serve", "--port", "0", "--quiet", ...args], { stdout: "pipe", stderr: "pipe" });
  const reader = child.stdout.getReader();
  let output = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`memra serve exited: ${output}${await new Response(child.stderr).text()}`);
    output += new TextDecoder().decode(value);
    const match = /listening on (\S+)/.exec(output);
    if (match) {
      return {
        url: match[1]!,
        stop: async () => {
          child.kill("SIGTERM");
          await child.exited;
        },
      };
    }
  }
}

describe("memra serve", () => {
  it("serves under --alias, asks for --api-key, serves --lora-modules as models, and saves slots to --slot-save-path", async () => {
    const options = resolveOptions("tiny", { weightType: "q8_0", tiedEmbeddings: false });
    const model = await syntheticModelFile(options);
    const adapter = await syntheticLoraFile(options, { rank: 4, alpha: 8, seed: 3, strength: 0.5 });
    const slotDirectory = join(mkdtempSync(join(tmpdir(), "memra-serve-")), "slots"); // created by serve
    const server = await serve(["-m", model, "--alias", "tiny-chat", "--api-key", "k1,k2", "--lora-modules", `sql=${adapter}`, "--parallel", "2", "--ctx", "256", "--slot-save-path", slotDirectory]);
    try {
      const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string; parent?: string }[] };
      expect(models.data.map((entry) => [entry.id, entry.parent])).toEqual([
        ["tiny-chat", undefined],
        ["sql", "tiny-chat"],
      ]);
      const body = (name: string) => JSON.stringify({ model: name, prompt: "The quick brown fox", max_tokens: 6, temperature: 0 });
      expect((await fetch(`${server.url}/v1/completions`, { method: "POST", body: body("tiny-chat") })).status).toBe(401);
      const headers = { authorization: "Bearer k2" };
      const base = (await (await fetch(`${server.url}/v1/completions`, { method: "POST", body: body("tiny-chat"), headers })).json()) as { model: string; choices: { text: string }[] };
      const adapted = (await (await fetch(`${server.url}/v1/completions`, { method: "POST", body: body("sql"), headers })).json()) as { model: string; choices: { text: string }[] };
      expect(base.model).toBe("tiny-chat");
      expect(adapted.model).toBe("sql");
      expect(adapted.choices[0]!.text).not.toBe(base.choices[0]!.text);
      expect(await (await fetch(`${server.url}/lora-adapters`, { headers })).json()).toEqual([{ id: 0, path: adapter, scale: 0 }]);
      // The slot of the module's request is saved with the module's adapter at scale 1.
      const saved = await fetch(`${server.url}/slots/0?action=save`, { method: "POST", body: JSON.stringify({ filename: "sql.bin" }), headers });
      expect(saved.status).toBe(200);
      const withAdapter = loadModel(model, { lora: [{ path: adapter, scale: 0 }] });
      expect(withAdapter.loadState(join(slotDirectory, "sql.bin")).lora).toEqual([{ id: 0, scale: 1 }]);
      withAdapter.dispose();
      expect(() => loadModel(model).loadState(join(slotDirectory, "sql.bin"))).toThrow(/computed with the LoRA adapter/);
    } finally {
      await server.stop();
    }
  }, 60_000);
});

describe("memra serve's request defaults", () => {
  const defaultsOf = (args: string[]) => serveDefaultsOf(parseArgs({ args: llamaArguments("server", args, serveParseOptions, () => {}), options: serveParseOptions }).values);

  it("reads --dry-sequence-breaker with llama.cpp's escapes, as llama-server does, and as it is with --no-escape", () => {
    expect(defaultsOf(["--dry-multiplier", "0.8", "--dry-sequence-breaker", "\\n", "--dry-sequence-breaker", "\\x41#"]).sampling?.dry).toEqual({
      multiplier: 0.8,
      sequenceBreakers: ["\n", "A#"],
    });
    expect(defaultsOf(["--no-escape", "--dry-sequence-breaker", "\\n"]).sampling?.dry?.sequenceBreakers).toEqual(["\\n"]);
    expect(defaultsOf(["--dry-sequence-breaker", "none"]).sampling?.dry?.sequenceBreakers).toEqual([]);
    expect(defaultsOf(["-n", "12", "-rea", "off"])).toEqual({ maxTokens: 12, enableThinking: false });
  });
});
