// Tested in test/e2e/file-reloader.test.ts, test/e2e/keys-file-reload.test.ts, test/e2e/policy-source.test.ts.
import { createHash } from 'node:crypto';
import {
  createReadStream,
  lstatSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statSync,
  watch,
  type FSWatcher,
} from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Logger } from 'pino';

export interface FileReloader<R = boolean> {
  /** Reads the file now; on success applies it, otherwise logs every problem and keeps the last good value. */
  reload(cause: string): R;
  close(): void;
}

/** A reloader whose loading happens off the serving thread: `reload` settles once the value is applied or rejected. */
export type AsyncFileReloader = FileReloader<Promise<boolean>>;

export interface FileReloaderOptions {
  file: string;
  /** How log lines name the file, e.g. "keys file". */
  what: string;
  /** How log lines name what is kept when the file is rejected, e.g. "set". */
  kept: string;
  debounceMs?: number;
  /**
   * How long a changed file must stay the same (size, mtime and content) before it is loaded,
   * in ms (default SETTLE_MS): a file written in several writes is never loaded half-written.
   */
  settleMs?: number;
}

/**
 * A changed file is loaded only once two reads this far apart agree. A writer that pauses
 * longer than this mid-file can still be seen half-written: such writers should write a
 * temporary file and rename it into place (docs/keys.md).
 */
export const SETTLE_MS = 500;

export interface FileReloaderDeps<T> {
  logger: Logger;
  /**
   * Reads and validates the file; throws (ideally with a `problems` list) when it is broken.
   * A Promise (loading on a worker thread) makes `reload` asynchronous; loads then never overlap:
   * a reload asked for during one runs after it.
   */
  load(file: string): T;
  /** Swaps the new value in, in one synchronous step. */
  apply(value: T): void;
  /** Fields for the "loaded" log line: counts, never secrets. */
  describe(value: T): Record<string, unknown>;
}

/** Like FileReloaderDeps, with a load that runs elsewhere (a worker thread) and resolves with the value. */
export interface AsyncFileReloaderDeps<T> extends Omit<FileReloaderDeps<T>, 'load'> {
  load(file: string): Promise<T>;
}

/** Most symlink hops followed when collecting the folders to watch (the kernel's own limit is 40). */
const MAX_HOPS = 16;

/**
 * Reloads a config file when it changes and when asked (SIGHUP). One
 * implementation for every file Keygate reloads (keys file, policy file).
 *
 * The file is rarely a plain file in practice:
 *  - editors save by writing a temp file and renaming it over the old one;
 *  - the path may be a symlink into another folder, edited there;
 *  - a Kubernetes ConfigMap or Secret volume is `name -> ..data/name`, with
 *    `..data -> ..<timestamp>/`: an update writes a new timestamped folder and
 *    renames a new `..data` link into place, so no event ever names the file.
 * So every folder on the way from the path to the real file is watched
 * (re-armed after each change, as the real folder moves), any event there
 * triggers a check, and the check reloads only when the resolved file's
 * content differs from what was last loaded and has stopped changing (see
 * check). A broken file is logged and the last good value stays in force.
 * A reload asked for (SIGHUP) reads the file as it is, at once.
 */
export function createFileReloader<T>(options: FileReloaderOptions, deps: FileReloaderDeps<T>): FileReloader {
  return createReloader(options, deps, false) as FileReloader;
}

/** The same reloader, loading with a Promise (a worker thread): `reload` settles once the value is applied or rejected. */
export function createAsyncFileReloader<T>(
  options: FileReloaderOptions,
  deps: AsyncFileReloaderDeps<T>,
): AsyncFileReloader {
  return createReloader(options, deps, true) as AsyncFileReloader;
}

/**
 * The one implementation behind both: its closures (reload, check, arm) share the watch state,
 * which is why it runs past ~80 lines. A sync load applies in the caller's turn; an async one
 * (a Promise) applies when it settles, and a reload asked for meanwhile queues behind it.
 */
function createReloader<T>(
  options: FileReloaderOptions,
  deps: FileReloaderDeps<T> | AsyncFileReloaderDeps<T>,
  async: boolean,
): FileReloader<boolean | Promise<boolean>> {
  const { file, what } = options;
  const watchers = new Map<string, FSWatcher>();
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let seen = fingerprint(file);
  let running: Promise<boolean> | undefined;
  let queued: Promise<boolean> | undefined;
  let checks = 0; // checks started: only the latest acts once its reads are done

  const applied = (value: T, cause: string): true => {
    deps.apply(value);
    deps.logger.info({ file, ...deps.describe(value), cause }, `${what} loaded`);
    return true;
  };
  const rejected = (err: unknown, cause: string): false => {
    const problems = (err as { problems?: unknown }).problems;
    deps.logger.error(
      { file, cause, problems: Array.isArray(problems) ? problems : [(err as Error).message] },
      `${what} rejected; keeping the last good ${options.kept}`,
    );
    return false;
  };

  /** `print`: the file's fingerprint when the caller just read it (a watch-triggered check). */
  const reload = (cause: string, print?: string): boolean | Promise<boolean> => {
    if (running) {
      queued ??= running.then(() => {
        queued = undefined;
        return reload(cause);
      });
      return queued;
    }
    if (async && print === undefined) {
      // Read in chunks between other work (a large keys file takes tens of ms to hash in one go).
      running = fingerprintAsync(file).then((p) => {
        running = undefined;
        return reload(cause, p);
      });
      return running;
    }
    seen = print ?? fingerprint(file);
    let loaded: T | Promise<T>;
    try {
      loaded = deps.load(file);
    } catch (err) {
      const ok = rejected(err, cause);
      arm();
      return ok;
    }
    if (!(loaded instanceof Promise)) {
      try {
        return applied(loaded, cause);
      } catch (err) {
        return rejected(err, cause);
      } finally {
        arm();
      }
    }
    const settled: Promise<boolean> = loaded
      .then((value) => applied(value, cause))
      .catch((err: unknown) => rejected(err, cause))
      .finally(() => {
        running = undefined;
        arm();
      });
    running = settled;
    return settled;
  };

  /**
   * A watch event: once the file differs from what was loaded, read it again SETTLE_MS later and
   * reload only if nothing (size, mtime, content) changed in between; otherwise wait again. A
   * half-written file that parses (a YAML list cut after an entry) is never applied this way.
   * Another event meanwhile restarts the wait (one timer serves both).
   */
  const check = async (waitedFor?: string) => {
    if (closed) return;
    arm();
    const run = ++checks;
    // Read in chunks, each in its own turn: hashing a 100k-key file in one go stalled every request.
    const now = await stampAsync(file);
    if (closed || run !== checks) return; // a later check (a later event) decides
    if (waitedFor !== undefined && now.stamp === waitedFor) {
      if (now.print !== seen) void reload('file changed', now.print);
      return;
    }
    if (waitedFor === undefined && now.print === seen) return;
    clearTimeout(timer);
    timer = setTimeout(() => void check(now.stamp), options.settleMs ?? SETTLE_MS);
  };

  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(() => void check(), options.debounceMs ?? 100);
  };

  /** Watches exactly the folders the path resolves through right now. */
  function arm() {
    if (closed) return;
    const wanted = foldersOf(file);
    for (const [dir, w] of watchers) {
      if (!wanted.has(dir)) {
        w.close();
        watchers.delete(dir);
      }
    }
    for (const dir of wanted) {
      if (watchers.has(dir)) continue;
      try {
        const w = watch(dir, schedule);
        // A watched folder can vanish (Kubernetes deletes the old timestamped one): drop it; the next check re-arms.
        w.on('error', () => {
          w.close();
          if (watchers.get(dir) === w) watchers.delete(dir);
        });
        watchers.set(dir, w);
      } catch (err) {
        deps.logger.warn(
          { file, dir, err: (err as Error).message },
          `cannot watch the ${what}'s folder; SIGHUP still reloads`,
        );
      }
    }
  }

  arm();
  return {
    reload,
    close() {
      closed = true;
      clearTimeout(timer);
      for (const w of watchers.values()) w.close();
      watchers.clear();
    },
  };
}

/** The folder of the path, of every symlink hop, and of the real file. */
function foldersOf(file: string): Set<string> {
  const dirs = new Set<string>([dirname(resolve(file))]);
  let p = resolve(file);
  try {
    for (let hop = 0; hop < MAX_HOPS && lstatSync(p).isSymbolicLink(); hop++) {
      p = resolve(dirname(p), readlinkSync(p));
      dirs.add(dirname(p));
    }
    dirs.add(dirname(realpathSync(file)));
  } catch {
    // Missing for a moment (mid-rename) or a dangling link: the path's own folder still sees it come back.
  }
  return dirs;
}

/** The fingerprint, and with the file's size and mtime the stamp: what must stay the same while a change settles. */
async function stampAsync(file: string): Promise<{ stamp: string; print: string }> {
  let st: string;
  try {
    const s = statSync(file);
    st = `${s.size}\0${s.mtimeMs}\0`;
  } catch {
    st = '';
  }
  const print = await fingerprintAsync(file);
  return { stamp: `${st}${print}`, print };
}

/** Which file the path resolves to, and its content: a change to either means a reload. */
function fingerprint(file: string): string {
  try {
    const real = realpathSync(file);
    return `${real}\0${createHash('sha256').update(readFileSync(real)).digest('hex')}`;
  } catch (err) {
    return unreadable(err);
  }
}

/** fingerprint(), reading the file in 64 KiB chunks, each hashed in its own event-loop turn. */
async function fingerprintAsync(file: string): Promise<string> {
  try {
    const real = realpathSync(file);
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(real, { highWaterMark: 64 * 1024 })) hash.update(chunk as Buffer);
    return `${real}\0${hash.digest('hex')}`;
  } catch (err) {
    return unreadable(err);
  }
}

const unreadable = (err: unknown) => `error\0${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
