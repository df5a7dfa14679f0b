/**
 * imatrixStatistics as llama-imatrix's `--show-statistics` prints them (tools/imatrix/imatrix.cpp
 * show_statistics): the same tables, columns, widths and printf rounding (round half to even on
 * the exact binary value, as glibc does), without the log's timestamps.
 */
import type { ImatrixStatistics } from "@memra/gguf";

const f = Math.fround;
const TENSOR_HEADER = [" Layer", "       Tensor", "          Σ(Act²)", "  Min", "            Max", "           μ", "   σ", " % Active", "N", "   Entropy", "E (norm)", "ZD", "  CosSim"];
const LAYER_HEADER = ["  Layer", "     μΣ(Act²)", "      μZD", "μCosSim"];

/** The statistics text of `statistics`, computed over the file(s) named `source`. */
export function formatImatrixStatistics(statistics: ImatrixStatistics, source: string): string {
  let text = `\nComputing statistics for ${source} (${statistics.tensors.length} tensors)\n`;
  text += `\n${TENSOR_HEADER.join("\t")}\n${"=".repeat(169)}\n`;
  for (const t of statistics.tensors) {
    text += `${[
      t.layer.padStart(5),
      t.tensor.padEnd(20),
      printfFixed(t.sum, 10, 2),
      printfFixed(t.min, 8, 4),
      printfFixed(t.max, 11, 4),
      printfFixed(t.mean, 6, 2),
      printfFixed(t.standardDeviation, 6, 2),
      `${printfFixed(f(t.active * 100), 8, 2)}%`,
      String(t.elements).padStart(6),
      printfFixed(t.entropy, 10, 4),
      `${printfFixed(t.entropyPercent, 6, 2)}%`,
      `${printfFixed(f(100 * t.zd), 10, 2)}%`,
      printfFixed(t.cosineSimilarity, 8, 4),
    ].join("\t")}\n`;
  }
  text += `\nComputing weighted average statistics per layer (${statistics.layers.length} layers)\n`;
  text += `\n${LAYER_HEADER.join("\t")}\n${"=".repeat(48)}\n`;
  for (const l of statistics.layers) {
    text += `${[String(l.layer).padStart(5), printfFixed(l.sum, 14, 2), `${printfFixed(f(100 * l.zd), 10, 4)}%`, printfFixed(l.cosineSimilarity, 6, 4)].join("\t")}\n`;
  }
  return `${text}\n`;
}

/**
 * printf("%<width>.<digits>f", value) as glibc prints it: the exact binary value rounded half to
 * even (JavaScript's toFixed rounds half up: 3.125 → "3.13" where printf writes "3.12"); "-nan"
 * for a NaN (x86's default NaN has its sign bit set), "inf".
 */
export function printfFixed(value: number, width: number, digits: number): string {
  let text: string;
  if (Number.isNaN(value)) text = "-nan";
  else if (!Number.isFinite(value)) text = value < 0 ? "-inf" : "inf";
  else {
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, value);
    const bits = view.getBigUint64(0);
    const negative = bits >> 63n === 1n;
    const biased = Number((bits >> 52n) & 0x7ffn);
    const fraction = bits & ((1n << 52n) - 1n);
    // |value| = mantissa × 2^exponent
    const mantissa = biased === 0 ? fraction : fraction | (1n << 52n);
    const exponent = (biased === 0 ? 1 : biased) - 1075;
    const scaled = mantissa * 10n ** BigInt(digits);
    let quotient: bigint;
    if (exponent >= 0) quotient = scaled << BigInt(exponent);
    else {
      const divisor = 1n << BigInt(-exponent);
      quotient = scaled / divisor;
      const twice = 2n * (scaled % divisor);
      if (twice > divisor || (twice === divisor && quotient % 2n === 1n)) quotient += 1n;
    }
    const decimal = quotient.toString().padStart(digits + 1, "0");
    const whole = decimal.slice(0, decimal.length - digits);
    text = `${negative ? "-" : ""}${whole}${digits > 0 ? `.${decimal.slice(decimal.length - digits)}` : ""}`;
  }
  return text.padStart(width);
}
