// Tested in test/process/demo.test.ts.
import { readFileSync } from 'node:fs';

/**
 * Ends a foreground command when what started it ends. `npm run demo` runs `sh -c "node bin/keygate.js demo"`:
 * when npm is killed, the shell stays and keeps the demo as its child, so watching the parent alone would miss it.
 * Under an npm script (`npm_lifecycle_event` set), every shell between this process and npm is skipped and npm is
 * watched too. A process counts as ended when it is gone or a zombie (its parent has not reaped it yet), or, for
 * the direct parent, when this process was handed to another one.
 */

const SHELLS = new Set(['sh', 'dash', 'bash', 'zsh', 'ash', 'ksh']);

/** `comm` and parent pid of a process, from /proc (Linux); undefined where /proc cannot say. */
function statOf(pid: number): { comm: string; ppid: number; zombie: boolean } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ')'.
  const close = text.lastIndexOf(')');
  const rest = text.slice(close + 2).split(' ');
  return { comm: text.slice(text.indexOf('(') + 1, close), ppid: Number(rest[1]), zombie: rest[0] === 'Z' };
}

function alive(pid: number): boolean {
  const stat = statOf(pid);
  if (stat) return !stat.zombie;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The processes to watch: the parent, and under an npm script the shells up to npm and npm itself. */
export function watchedAncestors(env: NodeJS.ProcessEnv, ppid: number): number[] {
  const out = [ppid];
  if (env.npm_lifecycle_event === undefined) return out;
  let pid = ppid;
  for (let depth = 0; depth < 4; depth++) {
    const stat = statOf(pid);
    if (!stat || !SHELLS.has(stat.comm) || stat.ppid <= 1) break;
    pid = stat.ppid;
    out.push(pid);
  }
  return out;
}

/**
 * Calls `onEnded` once, with the pid that ended, when a watched ancestor ends; checked every `intervalMs` on an
 * unref'd timer (it never keeps the process alive). Returns the function that stops watching.
 */
export function watchParent(env: NodeJS.ProcessEnv, onEnded: (pid: number) => void, intervalMs = 500): () => void {
  const parent = process.ppid;
  const watched = watchedAncestors(env, parent);
  const timer = setInterval(() => {
    const ended = process.ppid !== parent ? parent : watched.find((pid) => !alive(pid));
    if (ended === undefined) return;
    clearInterval(timer);
    onEnded(ended);
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
