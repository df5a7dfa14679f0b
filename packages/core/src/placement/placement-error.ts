/** One device a placement does not fit on: what it would need, what it has. */
export interface PlacementShortfall {
  readonly device: string;
  readonly neededBytes: number;
  readonly availableBytes: number;
  readonly weightBytes: number;
  readonly kvBytes: number;
  readonly scratchBytes: number;
}

/** "1.50 GiB", "12.0 MiB", "512 B": a byte count for messages. */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${value} B`;
  return `${value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0)} ${units[unit]}`;
}

/**
 * A placement cannot be made: the model, its KV cache and scratch do not fit the devices (or the
 * options contradict them). Thrown by planPlacement before anything is allocated; names the bytes
 * each overfull device needs and has.
 */
export class PlacementError extends Error {
  override readonly name = "PlacementError";
  constructor(
    problem: string,
    readonly shortfalls: readonly PlacementShortfall[] = [],
  ) {
    const details = shortfalls.map(
      (s) =>
        `${s.device} needs ${formatBytes(s.neededBytes)} (weights ${formatBytes(s.weightBytes)}, KV ${formatBytes(s.kvBytes)}, scratch ${formatBytes(s.scratchBytes)}) but has ${formatBytes(s.availableBytes)}`,
    );
    super(details.length ? `${problem}: ${details.join("; ")}` : problem);
  }
}
