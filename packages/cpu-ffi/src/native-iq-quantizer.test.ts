import { ptr } from "bun:ffi";
import { GGMLType, ggmlTypeInfo, ggmlTypeName, quantize } from "@memra/gguf";
import { SeededRandom } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { nativeLibraryUnavailableReason } from "./native-availability";
import { openMemraCpuLibrary } from "./native-library";
import { createNativeQuantizer } from "./native-quantizer";

const unavailable = nativeLibraryUnavailableReason();
const required = process.env.MEMRA_REQUIRE_NATIVE === "1";

// native/cpu/quantize-iq2.c and quantize-iq1.c against @memra/gguf's quantize-iq2.ts / quantize-iq1.ts (which give ggml's bytes: quantize-iq-imatrix.test.ts)
describe.skipIf(unavailable !== undefined && !required)("iq2 and iq1 quantization in libmemra_cpu (memra_cpu_quantize_rows)", () => {
  const types = [GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S, GGMLType.IQ1_S, GGMLType.IQ1_M];
  const optional = new Set([GGMLType.IQ2_S, GGMLType.IQ1_M]);
  const rowLength = 3 * 256;
  const rows = 5;
  const random = new SeededRandom("native-iq-quantizer");
  const values = random.normals(rows * rowLength, 0, 0.1);
  values.fill(0, 0, 256); // an all-zero super-block
  values.fill(0, 256 + 64, 256 + 96); // an all-zero group of 32
  for (let i = 512; i < 768; i++) values[i] = Math.round(values[i]! * 20) / 20; // ties in iq1's sort
  for (let i = 768; i < 1024; i++) values[i]! *= 2 ** -30; // below some types' "all zero" thresholds
  for (let i = 1024; i < 1280; i++) values[i] = -Math.abs(values[i]!) * 1000;
  for (let i = rowLength; i < 2 * rowLength; i++) values[i]! *= 2 ** ((i >> 5) % 9) / 16; // a row of unequal groups
  const importance = random.normals(rowLength, 0, 1).map((v, i) => (i % 53 === 0 || (i >= 160 && i < 192) ? 0 : v * v * 2 ** (((i * 7) % 21) - 10)));

  it.each(types.flatMap((t) => [1, 3].map((threads) => [ggmlTypeName(t), threads, t] as const)))(
    "%s on %i thread(s): the TypeScript quantizer's bytes, with importance (and without where ggml allows)",
    (_name, threads, type) => {
      const native = createNativeQuantizer(threads);
      try {
        const info = ggmlTypeInfo(type)!;
        const out = new Uint8Array((values.length / info.blockSize) * info.bytesPerBlock);
        expect(native.quantizer(type, values, out, importance)).toBe(true);
        expect(Buffer.from(out).equals(Buffer.from(quantize(type, values, importance)))).toBe(true);
        if (!optional.has(type)) return;
        out.fill(0);
        expect(native.quantizer(type, values, out)).toBe(true);
        expect(Buffer.from(out).equals(Buffer.from(quantize(type, values)))).toBe(true);
      } finally {
        native.dispose();
      }
    },
  );

  it("refuses iq2_xxs, iq2_xs and iq1_s without importance, naming the type", () => {
    const library = openMemraCpuLibrary();
    const context = library.createContext(1);
    try {
      const out = new Uint8Array(512);
      for (const type of [GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ1_S]) {
        expect(library.symbols.memra_cpu_quantize_rows(context, type, ptr(values), 1, 256, null, ptr(out), out.byteLength)).not.toBe(0);
        expect(library.lastError()).toMatch(new RegExp(`memra_cpu_quantize_rows: ${ggmlTypeName(type)} needs an importance matrix`));
        expect(library.symbols.memra_cpu_quantize(context, type, ptr(values), 256, ptr(out), out.byteLength)).not.toBe(0);
        expect(library.lastError()).toMatch(new RegExp(`memra_cpu_quantize: ${ggmlTypeName(type)} needs an importance matrix`));
      }
      expect(out).toEqual(new Uint8Array(512));
    } finally {
      library.destroyContext(context);
    }
  });
});
