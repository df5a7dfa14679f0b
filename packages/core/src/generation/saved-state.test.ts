import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mulberry32, resolveOptions, syntheticLoraFile, syntheticModelFile } from "@memra/synthetic";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KVStateError, writeKVStateFile } from "../kv-state";
import { type LoadModelOptions, type Model, loadModel } from "../load-model";

const options = resolveOptions("tiny", { weightType: "q8_0" });
let path: string;
let directory: string;
const models: Model[] = [];

/** A greedy run's tokens, text, usage and per-token logprobs (from the stream's chunks). */
async function run(model: Model, options: Parameters<Model["generate"]>[1] = {}) {
  const stream = model.generate(PROMPT, { ...GREEDY, ...options });
  const logprobs: number[] = [];
  for await (const chunk of stream) if (chunk.logprob !== undefined) logprobs.push(chunk.logprob);
  return { ...(await stream.result), logprobs };
}

/** A fresh model of the synthetic file (its own engine and prefix cache), disposed after the tests. */
function fresh(extra: LoadModelOptions = {}): Model {
  const model = loadModel(path, extra);
  models.push(model);
  return model;
}

beforeAll(async () => {
  path = await syntheticModelFile(options);
  directory = mkdtempSync(join(tmpdir(), "memra-state-"));
  const model = fresh();
  WHOLE = Math.floor(model.tokenizer.encode(PROMPT, { special: true }).length / 16) * 16;
});

afterAll(() => {
  for (const model of models) model.dispose();
  rmSync(directory, { recursive: true, force: true });
});

const PROMPT =
  "The quick brown fox jumps over the lazy dog, and then it runs far away into the deep green woods where nobody can find it again. " +
  "Days later, a hunter walking along the river hears a rustle in the bushes and stops to listen, but only the wind answers him.";
/** The tokens of PROMPT in whole KV blocks of 16 (a saved state's reusable part): computed in beforeAll. */
let WHOLE = 0;
const GREEDY = { temperature: 0, maxTokens: 12, logprobs: true, ignoreEos: true } as const;

describe("saved KV states", () => {
  it("a saved prompt loaded into another model instance is reused: the same tokens and logprobs, its whole blocks not evaluated", async () => {
    const file = join(directory, "prompt.state");
    const saver = fresh();
    const promptTokens = saver.tokenizer.encode(PROMPT, { special: true });
    expect(promptTokens.length).toBeGreaterThan(48);
    expect(promptTokens.length % 16).not.toBe(0);
    const saved = await saver.saveState(file, PROMPT);
    expect(saved.tokens).toBe(promptTokens.length);
    const rowBytes = 2 * options.kvHeads * options.headDim; // f16
    expect(saved.bytes).toBeGreaterThan(options.layers * 2 * promptTokens.length * rowBytes);

    const baseline = await run(fresh());
    expect(baseline.usage.cachedPromptTokens).toBe(0);

    const loader = fresh();
    const loaded = loader.loadState(file);
    expect(loaded.tokens).toEqual(promptTokens);
    const whole = WHOLE;
    expect(loaded.cachedTokens).toBe(whole);
    expect(loaded.lora).toBeUndefined();
    const before = loader.engine.statistics.evaluatedTokens;
    const reused = await run(loader);
    expect(reused.usage.cachedPromptTokens).toBe(whole);
    // The prompt's tokens after the cached blocks, then one per generated token but the last.
    expect(loader.engine.statistics.evaluatedTokens - before).toBe(promptTokens.length - whole + GREEDY.maxTokens - 1);
    expect(reused.tokens).toEqual(baseline.tokens);
    expect(reused.text).toBe(baseline.text);
    expect(reused.logprobs).toHaveLength(GREEDY.maxTokens);
    reused.logprobs.forEach((logprob, i) => expect(logprob).toBeCloseTo(baseline.logprobs[i]!, 5));

    // A state of tokens the prefix cache already holds adds no blocks; loading it twice changes nothing.
    const used = loader.engine.pool.usedBlocks + loader.engine.pool.cachedBlocks;
    expect(loader.loadState(file).cachedTokens).toBe(whole);
    expect(loader.engine.pool.usedBlocks + loader.engine.pool.cachedBlocks).toBe(used);
  }, 60_000);

  it("a state loads into a model of another KV type (converted), and a model with a smaller pool names the blocks it lacks", async () => {
    const file = join(directory, "f16.state");
    await fresh().saveState(file, PROMPT);
    const q8 = fresh({ kvType: "q8_0" });
    const baseline = await run(fresh({ kvType: "q8_0" }));
    expect(q8.loadState(file).cachedTokens).toBe(WHOLE);
    const converted = await run(q8);
    expect(converted.usage.cachedPromptTokens).toBe(WHOLE);
    // f16 rows requantized to q8_0 differ from q8_0 rows of the f32 values by a rounding step: the
    // logprobs move about as much as between the f16 and q8_0 caches themselves (0.09 measured here).
    expect(converted.logprobs).toHaveLength(GREEDY.maxTokens);
    converted.logprobs.forEach((logprob, i) => expect(Math.abs(logprob - baseline.logprobs[i]!)).toBeLessThan(0.25));

    const small = fresh({ kvCacheTokens: 16 });
    expect(() => small.loadState(file)).toThrow(/tokens need \d free KV blocks of 16 tokens; the pool has 1 \(raise kvCacheTokens\)/);
    expect(small.engine.pool.cachedBlocks).toBe(0);
  }, 60_000);

  it("a chat session saved and restored in another model instance answers its next turn as the session itself does", async () => {
    const file = join(directory, "chat.state");
    const session = fresh().createChatSession({ system: "You are terse." });
    const turn = { temperature: 0, maxTokens: 10 } as const;
    await session.send("Name a colour.", turn).result;
    await session.send("And another one?", turn).result;
    const saved = await session.saveState(file);
    expect(saved.tokens).toBeGreaterThan(40);

    const restoredModel = fresh();
    const restored = restoredModel.restoreChatSession(file);
    expect(restored.messages).toEqual(session.messages);
    const expected = await session.send("Why?", turn).result;
    const answer = await restored.send("Why?", turn).result;
    expect(answer.text).toBe(expected.text);
    expect(answer.tokens).toEqual(expected.tokens);
    expect(answer.usage.cachedPromptTokens).toBeGreaterThanOrEqual(Math.floor(saved.tokens / 16) * 16 - 16);
    expect(answer.usage.cachedPromptTokens).toBeGreaterThan(32);
    expect(restored.messages).toEqual(session.messages);

    // A prompt state is not a chat session; a session with no turns saves its messages alone.
    await restoredModel.saveState(join(directory, "plain.state"), "Hello there");
    expect(() => restoredModel.restoreChatSession(join(directory, "plain.state"))).toThrow(/holds no chat session/);
    const empty = restoredModel.createChatSession({ system: "Only a system message." });
    expect((await empty.saveState(join(directory, "empty.state"))).tokens).toBe(0);
    expect(fresh().restoreChatSession(join(directory, "empty.state")).messages).toEqual([{ role: "system", content: "Only a system message." }]);
    expect(() => fresh().createChatSession({ system: "x", messages: [] })).toThrow(/give the system message in `messages`/);
  }, 60_000);

  it("a state computed with LoRA scales is reused by generations with those scales only", async () => {
    const adapter = await syntheticLoraFile(options, { rank: 4, alpha: 8, seed: 1, strength: 0.3 });
    const file = join(directory, "lora.state");
    const saver = fresh({ lora: [{ path: adapter, scale: 0 }] });
    await saver.saveState(file, PROMPT, { lora: [{ id: 0, scale: 0.5 }] });

    const loader = fresh({ lora: [{ path: adapter, scale: 0 }] });
    const loaded = loader.loadState(file);
    expect(loaded.lora).toEqual([{ id: 0, scale: 0.5 }]);
    const plain = await loader.complete(PROMPT, GREEDY);
    expect(plain.usage.cachedPromptTokens).toBe(0);
    const adapted = await loader.complete(PROMPT, { ...GREEDY, lora: [{ id: 0, scale: 0.5 }] });
    expect(adapted.usage.cachedPromptTokens).toBe(WHOLE);
    const expected = await fresh({ lora: [{ path: adapter, scale: 0.5 }] }).complete(PROMPT, GREEDY);
    expect(adapted.tokens).toEqual(expected.tokens);

    expect(() => fresh().loadState(file)).toThrow(/computed with the LoRA adapter .* which the model has not loaded/);
  }, 60_000);

  it("a file of another model, a damaged file and a missing one are KVStateErrors naming the file and what is wrong", async () => {
    const file = join(directory, "checked.state");
    const model = fresh();
    await model.saveState(file, "Hello there, general");
    const other = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", seed: 99 })));
    models.push(other);
    expect(() => other.loadState(file)).toThrow(KVStateError);
    expect(() => other.loadState(file)).toThrow(/checked\.state: saved by another model \(qwen3, \d+ layers, fingerprint [0-9a-f]{16}; this model's is [0-9a-f]{16}\)/);
    expect(other.fingerprint).not.toBe(model.fingerprint);
    expect(fresh().fingerprint).toBe(model.fingerprint);

    const bytes = readFileSync(file);
    const damaged = join(directory, "damaged.state");
    writeFileSync(damaged, bytes.subarray(0, bytes.byteLength - 3));
    expect(() => model.loadState(damaged)).toThrow(/damaged\.state: \d+ bytes; its header \(\d+ tokens, \d+ layers of f16 rows of \d+\) needs \d+/);
    writeFileSync(damaged, Buffer.concat([Buffer.from("GGUF"), bytes.subarray(4)]));
    expect(() => model.loadState(damaged)).toThrow(/not a Memra KV state file \(no "MEMRAKVS" at byte 0\)/);
    const badVersion = Buffer.from(bytes);
    badVersion.writeUInt32LE(7, 8);
    writeFileSync(damaged, badVersion);
    expect(() => model.loadState(damaged)).toThrow(/format version 7 at byte 8/);
    const longHeader = Buffer.from(bytes);
    longHeader.writeUInt32LE(0xfffffff0, 12);
    writeFileSync(damaged, longHeader);
    expect(() => model.loadState(damaged)).toThrow(/header of 4294967280 bytes \(byte 12\) runs past the file's/);
    const badJson = Buffer.from(bytes);
    badJson[16] = 0x41;
    writeFileSync(damaged, badJson);
    expect(() => model.loadState(damaged)).toThrow(/header at byte 16 is not JSON/);
    const badField = Buffer.from(bytes.toString("latin1").replace('"kvType":"f16"', '"kvType":"f64"'), "latin1");
    writeFileSync(damaged, badField);
    expect(() => model.loadState(damaged)).toThrow(/header field kvType/);
    expect(() => model.loadState(join(directory, "missing.state"))).toThrow(/missing\.state: cannot be read/);
    // Any byte of the header changed: a KVStateError, or a state that still loads (its tokens are checked).
    const random = mulberry32(17);
    const headerEnd = 16 + bytes.readUInt32LE(12);
    for (let trial = 0; trial < 200; trial++) {
      const mutated = Buffer.from(bytes);
      mutated[Math.floor(random() * headerEnd)] = Math.floor(random() * 256);
      writeFileSync(damaged, mutated);
      try {
        model.loadState(damaged);
      } catch (error) {
        expect(error, `trial ${trial}`).toBeInstanceOf(KVStateError);
      }
    }
    // Of the damaged files, only those that still loaded (tokens changed within the vocabulary) reached the prefix cache.
    expect(model.engine.pool.usedBlocks).toBe(0);
  }, 60_000);

  it("a failed save leaves the file it would replace as it was, and no temporary file", async () => {
    const file = join(directory, "kept.state");
    const model = fresh();
    await model.saveState(file, PROMPT);
    const before = readFileSync(file);
    const header = { model: "x", architecture: "qwen3", layers: 2, kvWidth: 32, kvType: "f32" as const, tokens: [1, 2] };
    expect(() =>
      writeKVStateFile(file, header, (layer) => {
        if (layer === 1) throw new Error("disk full");
        return new Uint8Array(2 * 32 * 4);
      }),
    ).toThrow(/disk full/);
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(readdirSync(directory).filter((name) => name.includes(".tmp"))).toEqual([]);
    await expect(model.saveState(join(directory, "no-such-directory", "x.state"), PROMPT)).rejects.toThrow(/x\.state: cannot be written/);
    expect(existsSync(join(directory, "no-such-directory"))).toBe(false);
  }, 60_000);
});
