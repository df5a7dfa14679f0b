import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import type { ChatMessage } from "@memra/tokenizer";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Model, loadModel } from "../load-model";

let model: Model;

beforeAll(async () => {
  model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
});

afterAll(() => model.dispose());

const TURN = { temperature: 0, maxTokens: 8, enableThinking: false } as const;
const MESSAGES = [
  "Tell me about the mountains in the north of the country and the rivers that run from them.",
  "And what about the forests along those rivers, are they old or were they planted?",
  "Which animals live in the forests, and which of them come down to the villages in winter?",
  "How do the villagers keep them away from their gardens and their stores of grain?",
  "Tell me one story the villagers tell their children about the oldest of those animals.",
];

describe("ChatSession and its context", () => {
  it("leaves the oldest whole turns out of the prompt when the history outgrows the context, answering as a fresh chat of the turns kept", async () => {
    const contextLength = 112;
    const session = model.createChatSession({ system: "You are a guide.", contextLength });
    let truncated = false;
    for (const message of MESSAGES) {
      const before = session.messages.length;
      const answer = await session.send(message, TURN).result;
      const kept = session.messagesInContext;
      // The prompt of the turn: the system message, then whole turns from a user message on, then the message.
      const prompt = kept.slice(0, -1) as ChatMessage[];
      expect(prompt[0]).toEqual({ role: "system", content: "You are a guide." });
      expect(prompt[1]?.role).toBe("user");
      expect(prompt.at(-1)).toEqual({ role: "user", content: message });
      expect(answer.usage.promptTokens + TURN.maxTokens).toBeLessThanOrEqual(contextLength);
      const fresh = await model.chat(prompt, TURN);
      expect(answer.tokens, message).toEqual(fresh.tokens);
      expect(answer.promptTokens).toEqual(fresh.promptTokens);
      if (kept.length < before + 2) truncated = true;
    }
    expect(truncated).toBe(true);
    // The history itself keeps every message.
    expect(session.messages).toHaveLength(1 + 2 * MESSAGES.length);
    // A saved session keeps which turns its prompts leave out: the restored one's next prompt is the same.
    const file = join(mkdtempSync(join(tmpdir(), "memra-chat-")), "session.state");
    await session.saveState(file);
    const restored = model.restoreChatSession(file);
    expect(restored.messages).toEqual(session.messages);
    expect(restored.messagesInContext).toEqual(session.messagesInContext);
    const [next, again] = [await session.send("Thank you.", TURN).result, await restored.send("Thank you.", TURN).result];
    expect(again.promptTokens).toEqual(next.promptTokens);
    expect(again.tokens).toEqual(next.tokens);
    restored.dispose();
    session.dispose();
  }, 60_000);

  it('"error" refuses a turn that does not fit, naming the sizes; a message alone too long is refused either way', async () => {
    const strict = model.createChatSession({ contextLength: 64, contextOverflow: "error" });
    await strict.send("Hello there.", TURN).result;
    expect(() => strict.send(MESSAGES.join(" "), TURN)).toThrow(/chat session: the history and the message \(\d+ prompt tokens\) \+ maxTokens \(8\) exceed the session's context of 64 tokens/);
    strict.dispose();
    const lenient = model.createChatSession({ contextLength: 64 });
    expect(() => lenient.send(MESSAGES.join(" "), TURN)).toThrow(/chat session: the message alone \(\d+ prompt tokens\) \+ maxTokens \(8\) exceed the session's context of 64 tokens/);
    // Nothing was left of the history by the refused turn, and the session still answers.
    expect(lenient.messages).toEqual([]);
    expect((await lenient.send("Hi", TURN).result).tokens.length).toBeGreaterThan(0);
    lenient.dispose();
    expect(() => model.createChatSession({ contextOverflow: "shift" as never })).toThrow(/contextOverflow must be "truncate-history" or "error"/);
  }, 60_000);
});
