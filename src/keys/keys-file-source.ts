import type { Logger } from 'pino';
import { createAsyncFileReloader, type AsyncFileReloader } from '../files/file-reloader.js';
import { loadKeysOffThread } from './load-keys-off-thread.js';
import type { KeyRecord } from './key-record.js';

export type KeysFileSource = AsyncFileReloader;

/** A key set being built beside the one in force (MemoryStore.stageKeys); structural, so keys/ needs nothing of store/. */
export interface KeySetStaging {
  add(records: readonly KeyRecord[]): void;
  scan(): Promise<void> | void;
  commit(): void;
  abandon(): void;
}

/**
 * Embedded mode: reloads the keys file when it changes (edits, saves by rename, symlink and
 * Kubernetes `..data` swaps: see files/file-reloader.ts) and when asked (SIGHUP). Reading,
 * parsing and validating run on a worker thread (load-keys-off-thread.ts); the records come
 * back in batches into a new set built beside the live one, which keeps serving; the swap is
 * one synchronous step, so no request sees a half-loaded set, and only the keys whose record
 * changed are announced (their cache entries dropped). A broken file is logged and the last
 * good set stays in force.
 */
export function createKeysFileSource(
  options: { file: string; debounceMs?: number },
  deps: { logger: Logger; stage: () => KeySetStaging },
): KeysFileSource {
  let cancel = new AbortController();
  const reloader = createAsyncFileReloader(
    {
      file: options.file,
      what: 'keys file',
      kept: 'set',
      ...(options.debounceMs !== undefined && { debounceMs: options.debounceMs }),
    },
    {
      logger: deps.logger,
      load: async (file: string) => {
        const staged = deps.stage();
        try {
          const count = await loadKeysOffThread(file, (batch) => staged.add(batch), cancel.signal);
          await staged.scan();
          return { staged, count };
        } catch (err) {
          staged.abandon();
          throw err;
        }
      },
      apply: ({ staged }) => staged.commit(),
      describe: ({ count }) => ({ keys: count }),
    },
  );
  return {
    reload: (cause) => reloader.reload(cause),
    close() {
      cancel.abort();
      cancel = new AbortController();
      reloader.close();
    },
  };
}
