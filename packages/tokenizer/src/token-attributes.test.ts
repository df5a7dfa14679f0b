import { describe, expect, it } from "vitest";
import { TokenAttribute, TokenType, resolveTokenAttributes } from "./token-attributes";

const vocabulary = (tokens: string[], tokenTypes: number[], extra: Record<string, unknown> = {}) => ({
  tokens,
  tokenTypes,
  merges: [],
  preTokenizer: "qwen2",
  ...extra,
});

describe("resolveTokenAttributes", () => {
  it("maps token types to llama.cpp attributes", () => {
    const types = [TokenType.NORMAL, TokenType.UNKNOWN, TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNUSED, TokenType.BYTE, 0, 99];
    const { attributes } = resolveTokenAttributes(vocabulary(["a", "b", "c", "d", "e", "f", "g", "h"], types));
    expect(Array.from(attributes)).toEqual([
      TokenAttribute.NORMAL,
      TokenAttribute.UNKNOWN,
      TokenAttribute.CONTROL,
      TokenAttribute.USER_DEFINED,
      TokenAttribute.UNUSED,
      TokenAttribute.BYTE,
      TokenAttribute.UNDEFINED,
      TokenAttribute.UNDEFINED,
    ]);
    expect(Array.from(resolveTokenAttributes({ tokens: ["a"], merges: [], preTokenizer: "qwen2" }).attributes)).toEqual([TokenAttribute.NORMAL]);
  });

  it("finds EOT by text (<|im_end|> before <|endoftext|>) and forces it to CONTROL", () => {
    const tokens = ["x", "<|endoftext|>", "<|im_end|>"];
    const resolved = resolveTokenAttributes(vocabulary(tokens, [1, 1, 1]));
    expect(resolved.eotTokenId).toBe(2);
    expect((resolved.attributes[2] ?? 0) & TokenAttribute.CONTROL).toBeTruthy();
    expect((resolved.attributes[1] ?? 0) & TokenAttribute.CONTROL).toBeTruthy(); // an end-of-generation text
    expect(resolveTokenAttributes(vocabulary(tokens, [1, 1, 1], { eotTokenId: 1 })).eotTokenId).toBe(1);
  });

  it("collects end-of-generation tokens like llama.cpp", () => {
    const tokens = ["x", "<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<|im_start|>"];
    const resolved = resolveTokenAttributes(vocabulary(tokens, [1, 3, 3, 3, 3, 3, 3], { eosTokenId: 2, bosTokenId: 1 }));
    expect([...resolved.endOfGenerationTokenIds].sort()).toEqual([1, 2, 3, 4, 5]);
    expect(resolved.fimPadTokenId).toBe(3);
    expect(resolved.fimRepoTokenId).toBe(4);
    expect(resolved.fimSeparatorTokenId).toBe(5);
  });

  it("uses llama.cpp's gpt2 defaults for BOS/EOS (11) and ignores ids outside the vocabulary", () => {
    const tokens = Array.from({ length: 20 }, (_, i) => `t${i}`);
    const resolved = resolveTokenAttributes(vocabulary(tokens, tokens.map(() => 1), { bosTokenId: 99, paddingTokenId: 3 }));
    expect(resolved.bosTokenId).toBe(11);
    expect(resolved.eosTokenId).toBe(11);
    expect(resolved.paddingTokenId).toBe(3);
    expect(resolveTokenAttributes(vocabulary(["a"], [1])).bosTokenId).toBeUndefined();
  });

  it("marks control tokens named 'unused' as unused", () => {
    const { attributes } = resolveTokenAttributes(vocabulary(["<unused0>", "unused"], [3, 1]));
    expect(attributes[0]).toBe(TokenAttribute.CONTROL | TokenAttribute.UNUSED);
    expect(attributes[1]).toBe(TokenAttribute.NORMAL);
  });
});
