import { describe, expect, it } from "vitest";
import { QWEN3_CHAT_TEMPLATE_CASES } from "./__fixtures__/qwen3-chat-template-cases";
import goldens from "./__fixtures__/qwen3-chat-template-goldens.json";
import { qwen3Vocabulary } from "./__fixtures__/qwen3-vocabulary";
import { CHATML_TEMPLATE, ChatTemplate } from "./chat-template";

describe("ChatTemplate with Qwen3's template", () => {
  const template = new ChatTemplate(qwen3Vocabulary().chatTemplate ?? "");

  it.each(QWEN3_CHAT_TEMPLATE_CASES)("$name: as Python's jinja2 renders it (transformers' environment)", ({ name, messages, options, expected }) => {
    const golden = (goldens.goldens as Record<string, string>)[name];
    expect(golden, `no reference rendering of "${name}": run bun tools/chat-template/render-goldens.ts`).toBeDefined();
    expect(template.render(messages, options)).toBe(golden);
    if (expected !== undefined) expect(golden).toBe(expected);
  });

  it("the reference renderings are of these cases, all of them", () => {
    expect(Object.keys(goldens.goldens).sort()).toEqual(QWEN3_CHAT_TEMPLATE_CASES.map((entry) => entry.name).sort());
  });

  it("adds the generation prompt unless told not to", () => {
    expect(template.render([{ role: "user", content: "x" }])).toBe("<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
  });
});

describe("ChatTemplate", () => {
  it("renders ChatML", () => {
    const chatml = new ChatTemplate(CHATML_TEMPLATE);
    const messages = [
      { role: "system", content: "s" },
      { role: "user", content: "u" },
      { role: "assistant", content: "a" },
    ] as const;
    expect(chatml.render(messages, { addGenerationPrompt: false })).toBe(
      "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n<|im_start|>assistant\na<|im_end|>\n",
    );
  });

  it("gives templates bos_token, eos_token and extra variables", () => {
    const template = new ChatTemplate("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}{{ date }}", { bosToken: "<s>", eosToken: "</s>" });
    expect(template.render([{ role: "user", content: "x" }], { extraContext: { date: "2026" } })).toBe("<s>x</s>2026");
  });

  it("leaves tools undefined when there are none, so `if tools` is false", () => {
    const template = new ChatTemplate("{% if tools %}T{% else %}N{% endif %}");
    expect(template.render([], { tools: [] })).toBe("N");
    expect(template.render([], { tools: [{ type: "function", function: { name: "f" } }] })).toBe("T");
  });
});
