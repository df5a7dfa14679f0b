import type { Backend, DeviceBuffer } from "../backend";

/**
 * Copies `length` floats of `source` (on `from`) into `target` (on `to`) through host memory: the
 * one transfer between backends, at device boundaries only. `staging` is reused host memory.
 */
export function transferBetweenBackends(from: Backend, source: DeviceBuffer, to: Backend, target: DeviceBuffer, length: number, staging: Float32Array): void {
  if (from.readInto) {
    from.readInto(source, 0, length, staging, 0);
    to.write(target, staging.subarray(0, length));
  } else {
    to.write(target, from.read(source, 0, length));
  }
}
