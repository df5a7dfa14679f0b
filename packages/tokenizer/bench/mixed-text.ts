import type { TokenizerVocabulary } from "../src/tokenizer-vocabulary";
import { mulberry32 } from "@memra/synthetic";


const BYTE_LEVEL_SPACE = "Ġ";

/** Byte-level vocabulary text → UTF-8 text ("Ġthe" → " the"), or undefined when not valid UTF-8. */
function vocabularyText(token: string): string | undefined {
  const bytes: number[] = [];
  for (const character of token) {
    const codepoint = character.codePointAt(0) ?? 0;
    if ((codepoint >= 0x21 && codepoint <= 0x7e) || (codepoint >= 0xa1 && codepoint <= 0xac) || (codepoint >= 0xae && codepoint <= 0xff)) {
      bytes.push(codepoint);
    } else if (codepoint >= 0x100 && codepoint < 0x144) {
      const unprintable: number[] = [];
      for (let b = 0; b < 256; b++) if (!((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))) unprintable.push(b);
      bytes.push(unprintable[codepoint - 0x100] ?? 0);
    } else {
      return undefined;
    }
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bytes));
  } catch {
    return undefined;
  }
}

/**
 * About `bytes` bytes of deterministic mixed text for tokenizer benchmarks: English-like prose and
 * code built from vocabulary words, CJK, Cyrillic/Arabic/Devanagari words, numbers, URLs, emoji and
 * whitespace runs. Words follow a Zipf-like distribution, so that repeats are as common as in text.
 */
export function mixedText(vocabulary: TokenizerVocabulary, bytes = 1 << 20, seed = 1): string {
  const random = mulberry32(seed);
  const english: string[] = [];
  const cjk: string[] = [];
  const otherScripts: string[] = [];
  for (const token of vocabulary.tokens.slice(0, 151643)) {
    if (/^Ġ[a-z]{2,}$/.test(token)) english.push(token.slice(1));
    else if (token.startsWith(BYTE_LEVEL_SPACE) || token.length < 2) continue;
    else {
      const text = vocabularyText(token);
      if (!text) continue;
      if (/^[\u4e00-\u9fff\u3040-\u30ff\uac00-\ud7af]+$/u.test(text)) cjk.push(text);
      else if (/^[\u0400-\u04ff\u0600-\u06ff\u0900-\u097f]{2,}$/u.test(text)) otherScripts.push(text);
    }
  }
  // Zipf-like: earlier (more frequent BPE) tokens are picked more often.
  const zipf = <T>(items: readonly T[]): T => items[Math.floor(items.length * random() ** 3)] as T;
  const word = (): string => zipf(english);
  const identifier = (): string => word() + word().replace(/^./, (c) => c.toUpperCase());
  const emoji = ["🙂", "👍🏽", "👨‍👩‍👧", "🎉", "🚀", "❤️", "🇯🇵"];

  const paragraph = (): string => {
    const sentences: string[] = [];
    for (let s = 0, n = 2 + Math.floor(random() * 5); s < n; s++) {
      const words: string[] = [];
      for (let w = 0, m = 5 + Math.floor(random() * 15); w < m; w++) {
        const r = random();
        if (r < 0.03) words.push(String(Math.floor(random() * 100000)));
        else if (r < 0.05) words.push(`${word()}'s`);
        else if (r < 0.07) words.push(`"${word()}"`);
        else words.push(word());
        if (random() < 0.08) words[words.length - 1] += ",";
      }
      const sentence = words.join(" ");
      sentences.push(sentence.charAt(0).toUpperCase() + sentence.slice(1) + [".", ".", ".", "?", "!"][Math.floor(random() * 5)]);
    }
    return `${sentences.join(" ")}\n\n`;
  };
  const codeBlock = (): string => {
    const name = identifier();
    const lines = [`function ${name}(${word()}, ${word()}) {`];
    for (let l = 0, n = 2 + Math.floor(random() * 6); l < n; l++) {
      lines.push(`  const ${identifier()} = ${word()}.${identifier()}(${Math.floor(random() * 1000)}, "${word()} ${word()}");`);
    }
    lines.push(`  return ${word()} === null ? [] : { ${word()}: ${word()} };`, "}");
    return `\`\`\`js\n${lines.join("\n")}\n\`\`\`\n\n`;
  };
  const cjkParagraph = (): string => {
    let text = "";
    for (let s = 0, n = 2 + Math.floor(random() * 4); s < n; s++) {
      for (let w = 0, m = 4 + Math.floor(random() * 12); w < m; w++) text += zipf(cjk);
      text += ["，", "。", "！", "？", "、"][Math.floor(random() * 5)];
    }
    return `${text}\n\n`;
  };
  const otherParagraph = (): string => {
    const words: string[] = [];
    for (let w = 0, m = 6 + Math.floor(random() * 20); w < m; w++) words.push(zipf(otherScripts));
    return `${words.join(" ")}.\n\n`;
  };
  const miscLine = (): string =>
    [
      `https://${word()}.example.com/${word()}/${Math.floor(random() * 10000)}?${word()}=${word()}`,
      `${2000 + Math.floor(random() * 30)}-0${1 + Math.floor(random() * 9)}-1${Math.floor(random() * 10)} ${Math.floor(random() * 24)}:${10 + Math.floor(random() * 50)}`,
      `${zipf(emoji)} ${word()} ${zipf(emoji)}${zipf(emoji)}`,
      `\t\t${word()}\t${word()}   ${word()}\r\n`,
      `| ${word()} | ${Math.floor(random() * 1e6) / 100} | ${word()} |`,
    ][Math.floor(random() * 5)] + "\n";

  const encoder = new TextEncoder();
  const parts: string[] = [];
  let size = 0;
  while (size < bytes) {
    const r = random();
    const part = r < 0.5 ? paragraph() : r < 0.65 ? codeBlock() : r < 0.8 ? cjkParagraph() : r < 0.9 ? otherParagraph() : miscLine();
    parts.push(part);
    size += encoder.encode(part).length;
  }
  return parts.join("");
}

if (import.meta.main) {
  const { qwen3Vocabulary } = await import("../src/__fixtures__/qwen3-vocabulary");
  const target = process.argv[2];
  const text = mixedText(qwen3Vocabulary());
  if (target) await Bun.write(target, text);
  else process.stdout.write(text);
}
