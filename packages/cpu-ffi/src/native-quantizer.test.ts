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
    GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.IQ3_S, GGMLType.IQ3_XXS,
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
      for (const type of [GGMLType.IQ2_XXS, GGMLType.IQ1_S, GGMLType.TQ1_0]) {
        expect(library.symbols.memra_cpu_quantize(context, type, ptr(values), 256, ptr(out), out.byteLength)).not.toBe(0);
        // iq2_xxs and iq1_s: unsupported until written, then they need an importance matrix
        expect(library.lastError()).toMatch(new RegExp(`memra_cpu_quantize: (type ${ggmlTypeName(type)} is not supported|${ggmlTypeName(type)} needs an importance matrix)`));
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

  describe("with an importance matrix (memra_cpu_quantize_rows)", () => {
    // 5 rows; 25 blocks of 32 a row for the 32-value types (a last group of blocks short of the 8 lanes)
    const rowLength = (type: GGMLType) => (ggmlTypeInfo(type)!.blockSize === 32 ? 25 * 32 : 3 * 256);
    const input = (type: GGMLType) => {
      const random = new SeededRandom(`native-quantizer:importance:${type}`);
      const values = random.normals(5 * rowLength(type), 0, 0.1);
      values.fill(0, 64, 96); // an all-zero block
      for (let i = 0; i < rowLength(type); i++) values[rowLength(type) + i]! *= 2 ** ((i >> 5) % 9) / 16; // a row of unequal blocks
      const importance = random.normals(rowLength(type), 0, 1).map((v, i) => (i % 53 === 0 || (i >= 160 && i < 192) ? 0 : v * v * 2 ** ((i * 7) % 21 - 10)));
      return { values, importance };
    };

    it.each(types.flatMap((t) => [1, 2].map((threads) => [ggmlTypeName(t), threads, t] as const)))(
      "%s on %i thread(s): the TypeScript quantizer's bytes, with importance and without",
      (_name, threads, type) => {
        const native = createNativeQuantizer(threads);
        try {
          const { values, importance } = input(type);
          const info = ggmlTypeInfo(type)!;
          const out = new Uint8Array((values.length / info.blockSize) * info.bytesPerBlock);
          expect(native.quantizer(type, values, out, importance)).toBe(true);
          const weighted = quantize(type, values, importance);
          expect(Buffer.from(out).equals(Buffer.from(weighted))).toBe(true);
          // straight through the entry point, importance NULL: the unweighted bytes
          const library = openMemraCpuLibrary();
          const context = library.createContext(threads);
          try {
            out.fill(0);
            library.call("memra_cpu_quantize_rows", context, type, ptr(values), 5, rowLength(type), null, ptr(out), out.byteLength);
            expect(Buffer.from(out).equals(Buffer.from(quantize(type, values)))).toBe(true);
          } finally {
            library.destroyContext(context);
          }
          if (type !== GGMLType.Q8_0) expect(Buffer.from(out).equals(Buffer.from(weighted))).toBe(false);
        } finally {
          native.dispose();
        }
      },
    );

    it("leaves importance of a length that does not fit to the TypeScript quantizer, which rejects it", () => {
      const native = createNativeQuantizer(1);
      try {
        const values = new SeededRandom("native-quantizer:importance:lengths").normals(1024, 0, 1);
        const out = new Uint8Array(576);
        expect(native.quantizer(GGMLType.Q4_K, values, out, new Float32Array(768))).toBe(false); // 1024 is not rows of 768
        expect(native.quantizer(GGMLType.Q4_K, values, out, new Float32Array(384))).toBe(false); // not whole blocks
        expect(native.quantizer(GGMLType.Q4_K, values, out, new Float32Array(0))).toBe(false);
        expect(() => quantize(GGMLType.Q4_K, values, new Float32Array(768))).toThrow(RangeError);
        expect(out).toEqual(new Uint8Array(576));
        expect(native.quantizer(GGMLType.Q4_K, values, out, new Float32Array(512).fill(1))).toBe(true);
      } finally {
        native.dispose();
      }
    });

    it("checks its arguments, naming them", () => {
      const library = openMemraCpuLibrary();
      const context = library.createContext(2);
      try {
        const values = new Float32Array(1024).fill(0.5);
        const importance = new Float32Array(512).fill(1);
        const out = new Uint8Array(1024);
        const rows = (type: number, count: number, length: number, bytes = out.byteLength, weights: Float32Array | null = importance) =>
          library.symbols.memra_cpu_quantize_rows(context, type, ptr(values), count, length, weights && ptr(weights), ptr(out), bytes);
        expect(rows(GGMLType.Q4_K, 2, 300)).not.toBe(0);
        expect(library.lastError()).toMatch(/memra_cpu_quantize_rows: row_length is 300, not a whole number of q4_K blocks \(256 values\)/);
        expect(rows(GGMLType.Q4_K, 2, 512, 500)).not.toBe(0);
        expect(library.lastError()).toMatch(/memra_cpu_quantize_rows: out has 500 bytes, 2 rows of 512 q4_K values need 576/);
        expect(rows(GGMLType.Q4_K, -1, 512)).not.toBe(0);
        expect(library.lastError()).toMatch(/memra_cpu_quantize_rows: rows is -1/);
        expect(rows(GGMLType.Q4_K, 1, 0)).not.toBe(0);
        expect(library.lastError()).toMatch(/memra_cpu_quantize_rows: row_length is 0/);
        for (const type of [GGMLType.TQ1_0, GGMLType.F16, 99]) {
          expect(rows(type, 2, 512)).not.toBe(0);
          expect(library.lastError()).toMatch(/memra_cpu_quantize_rows: type .* is not supported/);
        }
        expect(library.symbols.memra_cpu_quantize_rows(context, GGMLType.Q4_K, null, 2, 512, ptr(importance), ptr(out), out.byteLength)).not.toBe(0);
        expect(library.lastError()).toMatch(/memra_cpu_quantize_rows: x is NULL/);
        expect(library.symbols.memra_cpu_quantize_rows(null, GGMLType.Q4_K, ptr(values), 2, 512, ptr(importance), ptr(out), out.byteLength)).not.toBe(0);
        expect(library.lastError()).toMatch(/memra_cpu_quantize_rows: cpu is NULL/);
        expect(out).toEqual(new Uint8Array(1024));
        expect(rows(GGMLType.Q4_K, 0, 512, 0)).toBe(0); // nothing to do
        expect(rows(GGMLType.Q4_K, 2, 512)).toBe(0);
      } finally {
        library.destroyContext(context);
      }
    });
  });
});
