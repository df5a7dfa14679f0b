/**
 * A placement in executable form: the backend each layer (and each layer's experts) computes on.
 * `bindPlacement` turns a plan's device names into backends; the Transformer takes the result.
 */
import { readFileSync } from "node:fs";
import { freemem } from "node:os";
import type { Backend } from "../backend";
import { PlacementError } from "./placement-error";
import type { PlacementPlan } from "./plan-placement";

export interface BackendPlacement {
  /** The backend of each layer's attention, norms, router and dense FFN, and of its KV blocks. */
  readonly layers: readonly Backend[];
  /** The backend of each layer's routed experts. Default: the layer's. */
  readonly experts?: readonly Backend[];
  /** The token embedding's backend. Default: the first layer's. */
  readonly embedding?: Backend;
  /** The final norm's and LM head's backend. Default: the last layer's. */
  readonly output?: Backend;
}

/** The plan with its device names replaced by `backends[name]` (every device the plan uses must have one). */
export function bindPlacement(plan: PlacementPlan, backends: Readonly<Record<string, Backend>>): BackendPlacement {
  const backend = (name: string) => {
    const found = backends[name];
    if (!found) throw new PlacementError(`the plan puts work on device "${name}", but no backend was given for it (given: ${Object.keys(backends).join(", ") || "none"})`);
    return found;
  };
  return {
    layers: plan.layers.map((layer) => backend(layer.device)),
    experts: plan.layers.map((layer) => backend(layer.expertDevice)),
    embedding: backend(plan.embeddingDevice),
    output: backend(plan.outputDevice),
  };
}

/** Devices the plan puts any work on, in the order of plan.devices. */
export function devicesInUse(plan: PlacementPlan): string[] {
  const used = new Set<string>([plan.embeddingDevice, plan.outputDevice]);
  for (const layer of plan.layers) {
    used.add(layer.device);
    used.add(layer.expertDevice);
  }
  return plan.devices.map((d) => d.name).filter((name) => used.has(name));
}

/** RAM the OS could give a new allocation now: MemAvailable on Linux, free memory elsewhere. */
export function hostAvailableBytes(): number {
  try {
    const match = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync("/proc/meminfo", "utf8"));
    if (match) return Number(match[1]) * 1024;
  } catch {
    // not Linux
  }
  return freemem();
}
