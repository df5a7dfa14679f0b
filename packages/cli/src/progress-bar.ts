import type { CliIO } from "./cli-io";

/**
 * A one-line progress bar on stderr, drawn only when stderr is a terminal (and not --quiet);
 * returns the callback to feed and a function that clears the line.
 */
export function progressBar(io: CliIO, label: string, enabled: boolean): { update: (done: number, total: number) => void; end: () => void } {
  if (!enabled) return { update: () => {}, end: () => {} };
  let lastDrawn = -1;
  return {
    update(done, total) {
      const fraction = total > 0 ? Math.min(1, done / total) : 1;
      const percent = Math.floor(fraction * 100);
      if (percent === lastDrawn) return;
      lastDrawn = percent;
      const width = 30;
      const filled = Math.round(fraction * width);
      io.stderr(`\r${label} [${"#".repeat(filled)}${" ".repeat(width - filled)}] ${String(percent).padStart(3)}%`);
    },
    end() {
      if (lastDrawn >= 0) io.stderr("\r\x1b[2K");
    },
  };
}
