/** The byte each one-letter escape stands for: \n \r \t \' \" \\. */
const SIMPLE: Readonly<Record<number, number>> = { 0x6e: 0x0a, 0x72: 0x0d, 0x74: 0x09, 0x27: 0x27, 0x22: 0x22, 0x5c: 0x5c };

/**
 * llama.cpp's escape processing of prompts, reverse prompts and DRY sequence breakers (common.cpp's
 * string_process_escapes, on unless --no-escape): \n, \r, \t, \', \", \\ and \xHH (a byte); any
 * other backslash stays as it is.
 */
export function processEscapes(text: string): string {
  if (!text.includes("\\")) return text;
  const input = Buffer.from(text, "utf8");
  const output = Buffer.alloc(input.length);
  let out = 0;
  for (let i = 0; i < input.length; i++) {
    const byte = input[i]!;
    if (byte !== 0x5c || i + 1 >= input.length) {
      output[out++] = byte;
      continue;
    }
    const next = input[++i]!;
    if (SIMPLE[next] !== undefined) {
      output[out++] = SIMPLE[next]!;
      continue;
    }
    if (next === 0x78 && i + 2 < input.length) {
      const hex = String.fromCharCode(input[i + 1]!, input[i + 2]!);
      if (/^[0-9a-fA-F]{2}$/.test(hex)) {
        output[out++] = Number.parseInt(hex, 16);
        i += 2;
        continue;
      }
    }
    output[out++] = 0x5c;
    output[out++] = next;
  }
  return output.subarray(0, out).toString("utf8");
}
