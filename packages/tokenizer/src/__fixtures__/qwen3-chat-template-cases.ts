import type { ChatMessage, ChatTemplateOptions, ChatToolDefinition } from "../chat-template";

/**
 * Conversations rendered with Qwen3's chat template (tokenizer_config.json of Qwen3), with the text
 * transformers' `apply_chat_template` gives for them, derived by hand from the template:
 * - a leading system message is printed first; later system messages in the loop;
 * - assistant turns after the last real user query get a `<think>` block (empty when there is no
 *   reasoning) if they are the last message or have reasoning; earlier ones lose their reasoning;
 * - `reasoning_content` wins over a `<think>…</think>` inside `content`;
 * - consecutive tool messages share one `<|im_start|>user` turn;
 * - `enable_thinking: false` appends an empty think block to the generation prompt.
 * Every case is also rendered by Python's jinja2 in transformers' environment
 * (`bun tools/chat-template/render-goldens.ts`), the reference the tests hold both to.
 */
export interface ChatTemplateCase {
  readonly name: string;
  readonly messages: readonly ChatMessage[];
  readonly options: ChatTemplateOptions;
  /** Derived by hand (cases added later have only the reference rendering, qwen3-chat-template-goldens.json). */
  readonly expected?: string;
}

const weatherTool: ChatToolDefinition = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Température actuelle en °C",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

const weatherToolJson =
  '{"type": "function", "function": {"name": "get_weather", "description": "Température actuelle en °C", ' +
  '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}';

const toolsPreamble =
  "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
  weatherToolJson +
  "\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
  '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n';

export const QWEN3_CHAT_TEMPLATE_CASES: readonly ChatTemplateCase[] = [
  {
    name: "one user message with a generation prompt",
    messages: [{ role: "user", content: "Hello" }],
    options: { addGenerationPrompt: true },
    expected: "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
  },
  {
    name: "enable_thinking: false adds an empty think block",
    messages: [{ role: "user", content: "Hello" }],
    options: { addGenerationPrompt: true, enableThinking: false },
    expected: "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
  },
  {
    name: "enable_thinking: true changes nothing",
    messages: [{ role: "user", content: "Hello" }],
    options: { addGenerationPrompt: true, enableThinking: true },
    expected: "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
  },
  {
    name: "no generation prompt",
    messages: [{ role: "user", content: "Hello" }],
    options: { addGenerationPrompt: false, enableThinking: false },
    expected: "<|im_start|>user\nHello<|im_end|>\n",
  },
  {
    name: "system prompt and multi-turn: earlier assistant turns lose their reasoning",
    messages: [
      { role: "system", content: "You are helpful." },
      { role: "user", content: "What is 2+2?" },
      { role: "assistant", content: "<think>\nSimple math.\n</think>\n\n2+2 = 4." },
      { role: "user", content: "And 3+3?" },
    ],
    options: { addGenerationPrompt: true },
    expected:
      "<|im_start|>system\nYou are helpful.<|im_end|>\n" +
      "<|im_start|>user\nWhat is 2+2?<|im_end|>\n" +
      "<|im_start|>assistant\n2+2 = 4.<|im_end|>\n" +
      "<|im_start|>user\nAnd 3+3?<|im_end|>\n" +
      "<|im_start|>assistant\n",
  },
  {
    name: "the last assistant turn keeps reasoning_content in a think block",
    messages: [
      { role: "user", content: "Hi" },
      { role: "assistant", content: "\nHello!", reasoning_content: "\nThe user greets me.\n\n" },
    ],
    options: { addGenerationPrompt: false },
    expected: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nThe user greets me.\n</think>\n\nHello!<|im_end|>\n",
  },
  {
    name: "the last assistant turn without reasoning gets an empty think block",
    messages: [
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello!" },
    ],
    options: { addGenerationPrompt: false },
    expected: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n",
  },
  {
    name: "a system message after the first is rendered in place",
    messages: [
      { role: "user", content: "a" },
      { role: "system", content: "b" },
      { role: "user", content: "c" },
    ],
    options: { addGenerationPrompt: true },
    expected:
      "<|im_start|>user\na<|im_end|>\n<|im_start|>system\nb<|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n",
  },
  {
    name: "tools with a system prompt, a tool call and two tool responses",
    messages: [
      { role: "system", content: "You are a weather bot." },
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } }] },
      { role: "tool", content: '{"temperature": 21}' },
      { role: "tool", content: '{"humidity": 40}' },
    ],
    options: { addGenerationPrompt: true, tools: [weatherTool] },
    expected:
      "<|im_start|>system\nYou are a weather bot.\n\n" +
      toolsPreamble +
      "<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
      '<|im_start|>user\n<tool_response>\n{"temperature": 21}\n</tool_response>\n<tool_response>\n{"humidity": 40}\n</tool_response><|im_end|>\n' +
      "<|im_start|>assistant\n",
  },
  {
    name: "tools without a system prompt; content before two tool calls, JSON-string arguments as given",
    messages: [
      { role: "user", content: "Check a and b" },
      {
        role: "assistant",
        content: "Let me check.",
        tool_calls: [
          { type: "function", function: { name: "a", arguments: '{"x": 1}' } },
          { type: "function", function: { name: "b", arguments: {} } },
        ],
      },
      { role: "tool", content: "ok" },
    ],
    options: { addGenerationPrompt: true, tools: [weatherTool] },
    expected:
      "<|im_start|>system\n" +
      toolsPreamble +
      "<|im_start|>user\nCheck a and b<|im_end|>\n" +
      "<|im_start|>assistant\nLet me check.\n" +
      '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n' +
      '<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call><|im_end|>\n' +
      "<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n" +
      "<|im_start|>assistant\n",
  },
  {
    name: "a user turn that is only a tool response is not a query (multi-step reasoning kept)",
    messages: [
      { role: "user", content: "Q" },
      { role: "assistant", content: "<think>\nr1\n</think>\n\nA1" },
      { role: "user", content: "<tool_response>\nresult\n</tool_response>" },
      { role: "assistant", content: "<think>\nr2\n</think>\n\nA2" },
    ],
    options: { addGenerationPrompt: false },
    expected:
      "<|im_start|>user\nQ<|im_end|>\n" +
      "<|im_start|>assistant\n<think>\nr1\n</think>\n\nA1<|im_end|>\n" +
      "<|im_start|>user\n<tool_response>\nresult\n</tool_response><|im_end|>\n" +
      "<|im_start|>assistant\n<think>\nr2\n</think>\n\nA2<|im_end|>\n",
  },
  {
    name: "two tools, nested parameters, enable_thinking false (a forced tool choice's prompt)",
    messages: [{ role: "user", content: "Plan a trip" }],
    options: {
      addGenerationPrompt: true,
      enableThinking: false,
      tools: [
        weatherTool,
        {
          type: "function",
          function: {
            name: "book",
            description: 'Books "rooms" <fast>',
            parameters: {
              type: "object",
              properties: { nights: { type: "integer", minimum: 1 }, guests: { type: "array", items: { type: "object", properties: { name: { type: "string" } } } } },
              required: ["nights"],
            },
          },
        },
      ],
    },
  },
  {
    name: "an answered call with reasoning_content and ids, then the next question",
    messages: [
      { role: "user", content: "Weather in Oslo?" },
      {
        role: "assistant",
        content: "",
        reasoning_content: "I need the weather tool.",
        tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Oslo"}' } }],
      },
      { role: "tool", content: '{"celsius": -3}', tool_call_id: "call_1" },
      { role: "assistant", content: "It is -3 °C." },
      { role: "user", content: "And tomorrow?" },
    ],
    options: { addGenerationPrompt: true, tools: [weatherTool] },
  },
  {
    name: "the last turn is an assistant's tool call with reasoning",
    messages: [
      { role: "user", content: "Weather in Oslo?" },
      { role: "assistant", content: "Checking.", reasoning_content: "Use the tool.", tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Oslo" } } }] },
    ],
    options: { addGenerationPrompt: false, tools: [weatherTool] },
  },
  {
    name: "non-ASCII and special-looking text pass through unchanged",
    messages: [
      { role: "system", content: "Réponds en français 🇫🇷" },
      { role: "user", content: "你好 <think> \"quotes\" {{ not jinja }}" },
    ],
    options: { addGenerationPrompt: true, enableThinking: false },
    expected:
      "<|im_start|>system\nRéponds en français 🇫🇷<|im_end|>\n" +
      '<|im_start|>user\n你好 <think> "quotes" {{ not jinja }}<|im_end|>\n' +
      "<|im_start|>assistant\n<think>\n\n</think>\n\n",
  },
];
