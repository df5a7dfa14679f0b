/**
 * llama.cpp server's slots on memra serve: GET /slots, id_slot on /completion, and POST
 * /slots/ID?action=save|restore|erase with --slot-save-path (KV state files), on a synthetic model.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Model, loadModel } from "@memra/core";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenAIServer, startOpenAIServer } from "./openai-server";

let path: string;
let directory: string;
const opened: { model: Model; server: OpenAIServer }[] = [];

/** A server on a model of its own (its own prefix cache), stopped after the tests. */
function serve(slotSavePath?: string): OpenAIServer {
  const model = loadModel(path, { maxSequences: 3, kvCacheTokens: 3 * 256 });
  const server = startOpenAIServer({ model, modelId: "tiny.gguf", port: 0, contextLength: 256, ...(slotSavePath ? { slotSavePath } : {}) });
  opened.push({ model, server });
  return server;
}

beforeAll(async () => {
  path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
  directory = mkdtempSync(join(tmpdir(), "memra-slots-"));
});

afterAll(async () => {
  for (const { model, server } of opened) {
    await server.stop();
    model.dispose();
  }
  rmSync(directory, { recursive: true, force: true });
});

const PROMPT = "Once upon a time, in a kingdom by the sea, there lived a princess who could talk to the fish, and every morning she walked to the shore to hear their news.";

async function call(server: OpenAIServer, route: string, body?: object): Promise<{ status: number; body: Record<string, any> }> {
  const response = await fetch(`${server.url}${route}`, body === undefined ? {} : { method: "POST", body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

describe("memra serve: llama.cpp's slots", () => {
  it("a request runs in the slot it names; a slot saved to a file is restored by another server, whose next request reuses it", async () => {
    const saver = serve(directory);
    const completion = { prompt: PROMPT, n_predict: 6, temperature: 0, id_slot: 2 };
    const first = await call(saver, "/completion", completion);
    expect(first.status).toBe(200);
    expect(first.body.id_slot).toBe(2);
    const slots = await call(saver, "/slots");
    expect(slots.body).toHaveLength(3);
    const promptTokens = first.body.tokens_evaluated as number;
    expect(slots.body[2]).toMatchObject({ id: 2, n_ctx: 256, is_processing: false, n_past: promptTokens + 6, next_token: [{ n_decoded: 6 }] });
    expect(slots.body[2].id_task).toBeGreaterThanOrEqual(0);
    expect(slots.body[0]).toMatchObject({ id: 0, id_task: -1, n_past: 0 });
    expect((await call(saver, "/slots?fail_on_no_slot=1")).status).toBe(200);

    const saved = await call(saver, "/slots/2?action=save", { filename: "princess.bin" });
    expect(saved.status).toBe(200);
    expect(saved.body).toMatchObject({ id_slot: 2, filename: "princess.bin", n_saved: promptTokens + 6, n_written: Bun.file(join(directory, "princess.bin")).size });
    expect(saved.body.timings.save_ms).toBeGreaterThan(0);

    const restorer = serve(directory);
    const restored = await call(restorer, "/slots/0?action=restore", { filename: "princess.bin" });
    expect(restored.status).toBe(200);
    expect(restored.body).toMatchObject({ id_slot: 0, filename: "princess.bin", n_restored: promptTokens + 6, n_read: saved.body.n_written });
    expect((await call(restorer, "/slots")).body[0].n_past).toBe(promptTokens + 6);
    const again = await call(restorer, "/completion", { ...completion, id_slot: -1 });
    expect(again.body.content).toBe(first.body.content);
    // Its prompt's whole blocks came from the restored state: only the rest was evaluated.
    expect(again.body.timings.prompt_n).toBe(promptTokens - Math.floor(promptTokens / 16) * 16);
    expect(again.body.id_slot).toBe(0); // the lowest idle slot

    const erased = await call(restorer, "/slots/0?action=erase", {});
    expect(erased.body).toEqual({ id_slot: 0, n_erased: promptTokens + 6 });
    expect((await call(restorer, "/slots/0?action=save", { filename: "empty.bin" })).body.error.message).toMatch(/slot 0 holds no tokens to save/);
  }, 60_000);

  it("erase forgets the slot's cached keys and values (the next request evaluates its whole prompt), but those another slot's tokens start with; a busy slot is erased once its request ends", async () => {
    const server = serve();
    const completion = { prompt: PROMPT, n_predict: 4, temperature: 0 };
    const first = await call(server, "/completion", { ...completion, id_slot: 0 });
    const promptTokens = first.body.tokens_evaluated as number;
    expect(first.body.timings.prompt_n).toBe(promptTokens);
    // Not erased: the prompt's whole blocks come from the cache.
    const cached = await call(server, "/completion", { ...completion, id_slot: 0 });
    expect(cached.body.timings.prompt_n).toBe(promptTokens - Math.floor(promptTokens / 16) * 16);
    expect((await call(server, "/slots/0?action=erase", {})).body).toEqual({ id_slot: 0, n_erased: promptTokens + 4 });
    const evaluated = await call(server, "/completion", { ...completion, id_slot: 0 });
    expect(evaluated.body.timings.prompt_n).toBe(promptTokens);
    expect(evaluated.body.content).toBe(first.body.content);
    // Slot 1 ran the same prompt: erasing slot 0 leaves the blocks slot 1's tokens start with.
    await call(server, "/completion", { ...completion, id_slot: 1 });
    await call(server, "/slots/0?action=erase", {});
    expect((await call(server, "/completion", { ...completion, id_slot: 2 })).body.timings.prompt_n).toBe(promptTokens - Math.floor(promptTokens / 16) * 16);
    // Erasing a busy slot waits for its request, then forgets what it ran.
    const long = call(server, "/completion", { ...completion, n_predict: 40, ignore_eos: true, id_slot: 0 });
    await Bun.sleep(20);
    const erased = await call(server, "/slots/0?action=erase", {});
    expect((await long).status).toBe(200);
    expect(erased.body).toEqual({ id_slot: 0, n_erased: promptTokens + 40 });
  });

  it("a request naming a busy slot waits for it, first come first; one naming another slot does not; a client that leaves while waiting frees its place", async () => {
    const server = serve();
    const finished: string[] = [];
    const run = (name: string, body: object, signal?: AbortSignal) =>
      fetch(`${server.url}/completion`, { method: "POST", body: JSON.stringify({ prompt: PROMPT, temperature: 0, ignore_eos: true, ...body }), ...(signal ? { signal } : {}) }).then(
        async (response) => {
          finished.push(name);
          return (await response.json()) as Record<string, any>;
        },
        () => finished.push(`${name} left`),
      );
    const long = run("long", { n_predict: 80, id_slot: 1 }); // still running when the others arrive
    await Bun.sleep(20);
    const leaving = new AbortController();
    const left = run("leaves", { n_predict: 2, id_slot: 1 }, leaving.signal);
    const waiting = run("waits", { n_predict: 2, id_slot: 1 });
    const elsewhere = run("elsewhere", { n_predict: 2, id_slot: 2 });
    await Bun.sleep(20);
    leaving.abort();
    await Promise.all([long, left, waiting, elsewhere]);
    // The one on slot 2 ran beside the long one; the one waiting for slot 1 ran after it.
    expect(finished.indexOf("elsewhere")).toBeLessThan(finished.indexOf("long"));
    expect(finished.indexOf("long")).toBeLessThan(finished.indexOf("waits"));
    expect(finished).toContain("leaves left");
    const slots = await call(server, "/slots");
    expect(slots.body.map((slot: { is_processing: boolean }) => slot.is_processing)).toEqual([false, false, false]);
  });

  it("refuses a slot that does not exist, a path outside the save directory, an unknown action, a bad file, and save without --slot-save-path", async () => {
    const server = serve(directory);
    const unknownSlot = await call(server, "/completion", { prompt: "Hi", n_predict: 2, id_slot: 7 });
    expect(unknownSlot.status).toBe(400);
    expect(unknownSlot.body.error.message).toMatch(/id_slot 7: the server has slots 0 to 2/);
    expect((await call(server, "/slots/9?action=erase", {})).body.error.message).toMatch(/id_slot 9: the server has slots 0 to 2/);
    for (const filename of ["../escape.bin", "a/b.bin", "", ".."]) {
      const response = await call(server, "/slots/0?action=save", { filename });
      expect(response.status, filename).toBe(400);
      expect(response.body.error.param).toBe("filename");
    }
    expect(existsSync(join(directory, "..", "escape.bin"))).toBe(false);
    expect((await call(server, "/slots/0?action=load", { filename: "x.bin" })).body.error.message).toMatch(/action must be save, restore or erase, got "load"/);
    const missing = await call(server, "/slots/0?action=restore", { filename: "missing.bin" });
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toMatch(/missing\.bin: cannot be read/);
    await Bun.write(join(directory, "garbage.bin"), "garbage, not a state file");
    expect((await call(server, "/slots/0?action=restore", { filename: "garbage.bin" })).body.error.message).toMatch(/not a Memra KV state file/);

    const plain = serve();
    const refused = await call(plain, "/slots/0?action=save", { filename: "x.bin" });
    expect(refused.status).toBe(501);
    expect(refused.body.error.message).toMatch(/need memra serve --slot-save-path DIR/);
    expect((await call(plain, "/slots")).body).toHaveLength(3);
  }, 60_000);
});
