import { ptr } from "bun:ffi";
import { GGMLType, dequantize, ggmlTypeInfo, ggmlTypeName, quantize } from "@memra/gguf";
import { SeededRandom } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { nativeLibraryUnavailableReason } from "./native-availability";
import { openMemraCpuLibrary } from "./native-library";
import { createNativeQuantizer } from "./native-quantizer";

const unavailable = nativeLibraryUnavailableReason();
const required = process.env.MEMRA_REQUIRE_NATIVE === "1";

describe.skipIf(unavailable !== undefined && !required)("createNativeQuantizer (memra_cpu_quantize over threads)", () => {
  const types = [
    GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0, GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K,
    GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.IQ3_S,
  ];

  it.each(types.map((t) => [ggmlTypeName(t), t] as const))("%s: the TypeScript quantizer's bytes on 3 threads, chunks not a multiple of the threads", (_name, type) => {
    const native = createNativeQuantizer(3);
    try {
      expect(native.threads).toBe(3);
      // 37 blocks of 256 values: 37 chunks of k-quant blocks (16 per chunk: 3 chunks), 296 blocks of 32 (128 per chunk: 3 chunks)
      const values = new SeededRandom(`native-quantizer:${type}`).normals(256 * 37, 0, 0.1);
      const info = ggmlTypeInfo(type)!;
      const out = new Uint8Array((values.length / info.blockSize) * info.bytesPerBlock);
      expect(native.quantizer(type, values, out)).toBe(true);
      expect(Buffer.from(out).equals(Buffer.from(quantize(type, values)))).toBe(true);
    } finally {
      native.dispose();
    }
  });

  it("leaves other types and partial blocks to the TypeScript quantizers; converts f16 and bf16 exactly", () => {
    const native = createNativeQuantizer(2);
    const values = new SeededRandom("native-quantizer:other").normals(512, 0, 1);
    expect(native.quantizer(GGMLType.F16, values, new Uint8Array(1024))).toBe(false);
    expect(native.quantizer(GGMLType.Q8_0, values.subarray(0, 48), new Uint8Array(34))).toBe(false);
    for (const type of [GGMLType.F16, GGMLType.BF16]) {
      const bytes = quantize(type, values);
      const out = new Float32Array(512);
      expect(native.dequantizer(type, bytes, 512, out)).toBe(true);
      expect(Buffer.from(out.buffer).equals(Buffer.from(dequantize(type, bytes, 512).buffer))).toBe(true);
    }
    expect(native.dequantizer(GGMLType.Q8_0, new Uint8Array(34), 32, new Float32Array(32))).toBe(false);
    native.dispose();
    expect(() => native.quantizer(GGMLType.Q8_0, values, new Uint8Array(544))).toThrow(/disposed/);
  });

  it("refuses the i-quants it reads but cannot write, naming the type", () => {
    // memra_cpu_quantize's own check (the dequantizer reads these; their quantizers need an importance matrix)
    const library = openMemraCpuLibrary();
    const context = library.createContext(1);
    try {
      const values = new Float32Array(256);
      const out = new Uint8Array(256);
      for (const type of [GGMLType.IQ2_XXS, GGMLType.IQ1_S, GGMLType.IQ3_XXS]) {
        expect(library.symbols.memra_cpu_quantize(context, type, ptr(values), 256, ptr(out), out.byteLength)).not.toBe(0);
        expect(library.lastError()).toMatch(new RegExp(`memra_cpu_quantize: type ${ggmlTypeName(type)} is not supported`));
      }
      expect(out).toEqual(new Uint8Array(256));
    } finally {
      library.destroyContext(context);
    }
  });

  it("reports the library's error for an output too small", () => {
    const native = createNativeQuantizer(1);
    try {
      expect(() => native.quantizer(GGMLType.Q4_K, new Float32Array(512), new Uint8Array(100))).toThrow(/memra_cpu_quantize: out has 100 bytes, 2 q4_K blocks need 288/);
    } finally {
      native.dispose();
    }
  });
});
