/** A stream that may be a terminal (process.stderr is a tty.WriteStream when it is one). */
export type MaybeTty = NodeJS.WritableStream & { readonly isTTY?: boolean };

/** The fewest ms between two redraws: often enough to look alive, rarely enough to cost nothing. */
export const PROGRESS_REDRAW_MS = 100;

export interface Progress {
  /** `n` more done. */
  advance(n: number): void;
  /** Clears the progress line (the action then prints its one-line summary). */
  done(): void;
}

const NONE: Progress = Object.freeze({ advance() {}, done() {} });
const count = (n: number) => n.toLocaleString('en-US');

/**
 * A count (and a percentage when the total is known) that redraws itself on one line of `stream`, for
 * the long key actions (import, export, list of 100k keys take seconds). Only on a terminal: piped or
 * redirected, nothing is written, so a script's stderr and every --json output stay as they were.
 */
export function createProgress(
  options: { label: string; total?: number; redrawMs?: number },
  deps: { stream: MaybeTty; now: () => number },
): Progress {
  if (deps.stream.isTTY !== true) return NONE;
  const redrawMs = options.redrawMs ?? PROGRESS_REDRAW_MS;
  let doneCount = 0;
  let drawnAt = -Infinity;
  let drawn = false;
  const draw = () => {
    const { total } = options;
    const of =
      total !== undefined && total > 0 ? ` of ${count(total)} (${Math.floor((100 * doneCount) / total)}%)` : '';
    deps.stream.write(`\r\x1b[2K${options.label} ${count(doneCount)}${of}`);
    drawn = true;
  };
  return {
    advance(n) {
      doneCount += n;
      const now = deps.now();
      if (now - drawnAt < redrawMs) return;
      drawnAt = now;
      draw();
    },
    done() {
      if (drawn) deps.stream.write('\r\x1b[2K');
      drawn = false;
    },
  };
}
