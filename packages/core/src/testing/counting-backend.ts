import type { Backend, DeviceBuffer } from "../backend";

/** What a countingBackend has counted. */
export interface ReadCounts {
  /** Floats read back through read and readInto. */
  floatsRead: number;
  /** Rows the overriding picks (argmaxRows, topKRows, logSoftmaxAt) were asked for. */
  rowsPicked: number;
}

/**
 * `inner` seen through a proxy that counts the floats read back (read, readInto) and the rows of
 * the picking ops in `picks`, which replace (or, given undefined, hide) the inner backend's own:
 * for tests of what a step reads back.
 */
export function countingBackend<B extends Backend>(
  inner: B,
  picks: { argmaxRows?: Backend["argmaxRows"] | undefined; topKRows?: Backend["topKRows"] | undefined; logSoftmaxAt?: Backend["logSoftmaxAt"] | undefined },
): B & { readonly counts: ReadCounts } {
  const counts: ReadCounts = { floatsRead: 0, rowsPicked: 0 };
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === "counts") return counts;
      if (property === "argmaxRows" || property === "topKRows" || property === "logSoftmaxAt") {
        if (!(property in picks)) {
          const own = Reflect.get(target, property, receiver);
          return typeof own === "function" ? own.bind(target) : own;
        }
        const pick = picks[property] as ((...args: unknown[]) => void) | undefined;
        if (!pick) return undefined;
        return (...args: unknown[]) => {
          counts.rowsPicked += (property === "topKRows" ? args[3] : args[2]) as number;
          pick(...args);
        };
      }
      if (property === "read") {
        return (buffer: DeviceBuffer, offset?: number, length?: number) => {
          const values = target.read(buffer, offset, length);
          counts.floatsRead += values.length;
          return values;
        };
      }
      if (property === "readInto") {
        return (buffer: DeviceBuffer, offset: number, length: number, out: Float32Array, outOffset: number) => {
          counts.floatsRead += length;
          target.readInto!(buffer, offset, length, out, outOffset);
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as B & { readonly counts: ReadCounts };
}
