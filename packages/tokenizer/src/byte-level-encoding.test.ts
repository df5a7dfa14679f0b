import { describe, expect, it } from "vitest";
import { BYTE_TO_CODEPOINT, CODEPOINT_TO_BYTE, byteLevelEncode } from "./byte-level-encoding";

describe("GPT-2 byte-level encoding", () => {
  it("maps printable Latin-1 bytes to themselves and the rest from U+0100 on", () => {
    expect(BYTE_TO_CODEPOINT[0x41]).toBe(0x41);
    expect(BYTE_TO_CODEPOINT[0xe9]).toBe(0xe9);
    expect(BYTE_TO_CODEPOINT[0x00]).toBe(0x100);
    expect(String.fromCharCode(BYTE_TO_CODEPOINT[0x20] ?? 0)).toBe("Ġ");
    expect(String.fromCharCode(BYTE_TO_CODEPOINT[0x0a] ?? 0)).toBe("Ċ");
    expect(BYTE_TO_CODEPOINT[0xad]).toBe(0x143);
  });

  it("is a bijection between the 256 bytes and 256 code points", () => {
    expect(new Set(BYTE_TO_CODEPOINT).size).toBe(256);
    for (let byte = 0; byte < 256; byte++) expect(CODEPOINT_TO_BYTE[BYTE_TO_CODEPOINT[byte] ?? 0]).toBe(byte);
    expect(Array.from(CODEPOINT_TO_BYTE).filter((b) => b >= 0).length).toBe(256);
  });

  it("encodes UTF-8 bytes as vocabulary strings", () => {
    expect(byteLevelEncode(new TextEncoder().encode(" the"))).toBe("Ġthe");
    expect(byteLevelEncode(new TextEncoder().encode("é"))).toBe("Ã©");
  });
});
