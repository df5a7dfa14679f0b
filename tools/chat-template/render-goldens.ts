// Records the reference rendering of the Qwen3 chat-template cases:
// `bun tools/chat-template/render-goldens.ts` runs render.py (python3 + jinja2, the environment
// transformers' apply_chat_template uses) on packages/tokenizer's cases and writes
// packages/tokenizer/src/__fixtures__/qwen3-chat-template-goldens.json, which chat-template.test.ts
// compares @memra/tokenizer's rendering (@huggingface/jinja) with. CI never runs this.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { QWEN3_CHAT_TEMPLATE_CASES } from "../../packages/tokenizer/src/__fixtures__/qwen3-chat-template-cases.ts";
import { qwen3Vocabulary } from "../../packages/tokenizer/src/__fixtures__/qwen3-vocabulary.ts";

const template = qwen3Vocabulary().chatTemplate;
if (!template) throw new Error("the Qwen3 vocabulary fixture has no chat template");
const request = JSON.stringify({ template, cases: QWEN3_CHAT_TEMPLATE_CASES.map(({ name, messages, options }) => ({ name, messages, options })) });
const child = Bun.spawnSync(["python3", join(import.meta.dir, "render.py")], { stdin: new TextEncoder().encode(request) });
if (child.exitCode !== 0) throw new Error(`render.py failed (exit ${child.exitCode}): ${child.stderr.toString()}`);
const out = join(import.meta.dir, "../../packages/tokenizer/src/__fixtures__/qwen3-chat-template-goldens.json");
writeFileSync(out, child.stdout);
console.log(`wrote ${Object.keys(JSON.parse(child.stdout.toString()).goldens).length} renderings to ${out}`);
