/**
 * llama.cpp server's slots, as memra serve keeps them: `--parallel` slots, one taken by each request
 * while it runs (the one it names with `id_slot`, else the lowest idle one), each remembering the
 * tokens of the last request it ran (prompt and completion). GET /slots reports them; POST
 * /slots/ID?action=save|restore|erase saves a slot's tokens as a KV state file, loads one (into the
 * prefix cache, where every request whose prompt starts with its tokens reuses them) or forgets them
 * (their cached keys and values too, as llama.cpp's erase clears the slot's KV cache).
 * The engine batches requests whatever their slot; a request that names a busy slot (/completion's
 * `id_slot`) waits until the slot is idle, as llama.cpp's server defers it (acquireIdle).
 */
import { basename, join } from "node:path";
import { KVStateError, type Model } from "@memra/core";
import { RequestError } from "./request-error";

export interface Slot {
  readonly id: number;
  /** Requests running in the slot now. */
  running: number;
  /** The latest request's task id (-1: none yet). */
  task: number;
  /** The last finished request's prompt and completion tokens (or a restored state's tokens). */
  tokens: readonly number[];
  promptTokens: number;
  decoded: number;
  /** The LoRA scales the tokens' keys and values were computed with (a save computes them alike). */
  lora: readonly { readonly id: number; readonly scale: number }[];
}

export class ServerSlots {
  readonly slots: Slot[];
  private nextTask = 0;
  /** Per slot: the requests waiting for it to be idle, first come first (acquireIdle). */
  private readonly waiting = new Map<Slot, (() => void)[]>();

  constructor(
    private readonly model: Model,
    private readonly contextLength: number,
    /** Where save and restore read and write files (`--slot-save-path`); undefined: they are refused. */
    private readonly savePath: string | undefined,
  ) {
    this.slots = Array.from({ length: model.engine.maxSequences }, (_, id) => ({ id, running: 0, task: -1, tokens: [], promptTokens: 0, decoded: 0, lora: [] }));
  }

  /** The slot `id` names (RequestError 400 naming `field` when there is none). */
  slot(id: number, field = "id_slot"): Slot {
    const slot = Number.isInteger(id) ? this.slots[id] : undefined;
    if (!slot) throw new RequestError(400, `${field} ${id}: the server has slots 0 to ${this.slots.length - 1}`, field);
    return slot;
  }

  /**
   * A slot for a request starting now: `requested` (-1 or undefined: the lowest idle one, else the
   * least busy). `lora`: the request's LoRA scales (undefined: the model's at this moment).
   */
  acquire(requested: number | undefined, promptTokens: number, lora?: readonly { readonly id: number; readonly scale: number }[]): Slot {
    const slot =
      requested !== undefined && requested !== -1 ? this.slot(requested) : this.slots.reduce((best, candidate) => (candidate.running < best.running ? candidate : best));
    slot.running++;
    slot.task = this.nextTask++;
    slot.promptTokens = promptTokens;
    slot.decoded = 0;
    slot.lora = lora ?? this.model.loraAdapters.map(({ id, scale }) => ({ id, scale }));
    return slot;
  }

  /**
   * acquire, once the slot `requested` names is idle: a request naming a busy slot waits for it, in
   * order of arrival, as llama.cpp's server defers its task (-1 or undefined: at once, as acquire).
   * Undefined when `signal` aborts first.
   */
  async acquireIdle(requested: number | undefined, promptTokens: number, lora: readonly { readonly id: number; readonly scale: number }[] | undefined, signal?: AbortSignal): Promise<Slot | undefined> {
    if (requested !== undefined && requested !== -1) {
      const slot = this.slot(requested);
      const queue = this.waiting.get(slot) ?? [];
      this.waiting.set(slot, queue);
      let turn = slot.running === 0 && queue.length === 0;
      while (!turn && !signal?.aborted) {
        const woken = await new Promise<boolean>((resolve) => {
          const wake = () => {
            signal?.removeEventListener("abort", abort);
            resolve(true);
          };
          const abort = () => {
            const at = queue.indexOf(wake);
            if (at >= 0) queue.splice(at, 1);
            resolve(false);
          };
          queue.push(wake);
          signal?.addEventListener("abort", abort, { once: true });
        });
        turn = woken && slot.running === 0; // else taken meanwhile by a request naming no slot: wait again
      }
      if (signal?.aborted) {
        if (slot.running === 0) queue.shift()?.(); // the turn passes on
        return undefined;
      }
    }
    if (signal?.aborted) return undefined;
    return this.acquire(requested, promptTokens, lora);
  }

  /** The request in `slot` ended; `tokens`: its prompt and completion (kept for save), undefined when it failed. */
  release(slot: Slot, tokens: readonly number[] | undefined): void {
    slot.running = Math.max(0, slot.running - 1);
    if (tokens) {
      slot.tokens = tokens;
      slot.decoded = tokens.length - slot.promptTokens;
    }
    if (slot.running === 0) this.waiting.get(slot)?.shift()?.();
  }

  /** Resolves once `slot` runs no request (in turn with the requests waiting for it: see acquireIdle). */
  private async whenIdle(slot: Slot): Promise<void> {
    const queue = this.waiting.get(slot) ?? [];
    this.waiting.set(slot, queue);
    while (slot.running > 0) await new Promise<void>((resolve) => queue.push(resolve));
  }

  /** The LoRA scales a slot's tokens were computed with, as the engine's createSequence takes them (none without adapters). */
  private scalesOf(slot: Slot): { loraScales?: number[] } {
    const adapters = this.model.loraAdapters.length;
    if (adapters === 0) return {};
    const scales = new Array<number>(adapters).fill(0);
    for (const { id, scale } of slot.lora) scales[id] = scale;
    return { loraScales: scales };
  }

  /** GET /slots: llama.cpp's fields that apply. */
  describe(): Record<string, unknown>[] {
    return this.slots.map((slot) => ({
      id: slot.id,
      id_task: slot.task,
      n_ctx: this.contextLength,
      is_processing: slot.running > 0,
      n_past: slot.tokens.length,
      next_token: [{ n_decoded: slot.decoded }],
    }));
  }

  /** Whether any slot is idle (GET /slots?fail_on_no_slot=1). */
  get anyIdle(): boolean {
    return this.slots.some((slot) => slot.running === 0);
  }

  /** POST /slots/ID?action=...: save, restore or erase. */
  async action(id: number, action: string | null, body: { readonly filename?: string | undefined }): Promise<Record<string, unknown>> {
    const model = this.model;
    const slot = this.slot(id, "id_slot");
    if (action === "erase") {
      // As llama.cpp's: deferred while the slot runs a request, then its tokens' keys and values
      // are forgotten (their cached blocks freed, but those another slot's tokens start with too).
      await this.whenIdle(slot);
      const erased = slot.tokens.length;
      const others = this.slots.filter((other) => other !== slot && other.tokens.length > 0);
      model.engine.forgetPrefix(slot.tokens, { ...this.scalesOf(slot), keep: others.map((other) => ({ tokens: other.tokens, ...this.scalesOf(other) })) });
      slot.tokens = [];
      slot.decoded = 0;
      if (slot.running === 0) this.waiting.get(slot)?.shift()?.(); // the turn passes on
      return { id_slot: slot.id, n_erased: erased };
    }
    if (action !== "save" && action !== "restore") throw new RequestError(400, `action must be save, restore or erase, got ${JSON.stringify(action)}`, "action");
    if (this.savePath === undefined) throw new RequestError(501, "slot save and restore need memra serve --slot-save-path DIR", "action");
    const filename = body.filename;
    if (typeof filename !== "string" || filename === "" || filename !== basename(filename) || filename === "." || filename === "..") {
      throw new RequestError(400, `filename must be a file name in the slot save path, got ${JSON.stringify(filename)}`, "filename");
    }
    const path = join(this.savePath, filename);
    const started = performance.now();
    if (action === "save") {
      if (slot.running > 0) throw new RequestError(409, `slot ${slot.id} is processing a request`, "id_slot");
      if (slot.tokens.length === 0) throw new RequestError(400, `slot ${slot.id} holds no tokens to save`, "id_slot");
      const saved = await model.saveState(path, slot.tokens, slot.lora.length > 0 ? { lora: slot.lora } : {});
      return { id_slot: slot.id, filename, n_saved: saved.tokens, n_written: saved.bytes, timings: { save_ms: performance.now() - started } };
    }
    try {
      const loaded = model.loadState(path);
      slot.tokens = loaded.tokens;
      slot.promptTokens = loaded.tokens.length;
      slot.decoded = 0;
      slot.lora = loaded.lora ?? model.loraAdapters.map(({ id }) => ({ id, scale: 0 }));
      return { id_slot: slot.id, filename, n_restored: loaded.tokens.length, n_read: Bun.file(path).size, timings: { restore_ms: performance.now() - started } };
    } catch (error) {
      if (error instanceof KVStateError) throw new RequestError(400, error.message, "filename");
      throw error;
    }
  }
}
