// Tested in test/e2e/load-keys-off-thread.test.ts (the worker it starts).
import { parentPort, workerData } from 'node:worker_threads';
import { KeysFileError, loadKeysFileWithOwners } from './keys-file.js';

/**
 * Worker thread entry (see load-keys-off-thread.ts): reads, parses and validates a keys file
 * away from the event loop that serves requests, then hands the records over in batches, one
 * batch per request from the serving thread. Pulled, not pushed: a port delivers every queued
 * message in one turn, so pushing them all would make the serving thread deserialise the
 * whole set in one block, which is the pause this thread exists to avoid.
 */
export interface KeysFileWorkerData {
  readonly file: string;
  readonly batchSize: number;
}

/** What the worker answers to each "next": a batch, the end, or every problem the file has. */
export type KeysFileWorkerMessage =
  | { readonly kind: 'batch'; readonly records: unknown[] }
  | { readonly kind: 'done'; readonly count: number; readonly owners: unknown[] }
  | { readonly kind: 'rejected'; readonly problems: readonly string[] };

const port = parentPort;
if (!port) throw new Error('keys-file-worker.js runs only as a worker thread');
const { file, batchSize } = workerData as KeysFileWorkerData;
const send = (m: KeysFileWorkerMessage) => port.postMessage(m);

let records: unknown[] = [];
let owners: unknown[] = [];
let next = 0;
try {
  ({ records, owners } = loadKeysFileWithOwners(file));
} catch (err) {
  send({ kind: 'rejected', problems: err instanceof KeysFileError ? err.problems : [(err as Error).message] });
  records = [];
  next = -1;
}
port.on('message', () => {
  if (next < 0) return;
  if (next >= records.length) {
    send({ kind: 'done', count: records.length, owners });
    next = -1;
    return;
  }
  send({ kind: 'batch', records: records.slice(next, next + batchSize) });
  next += batchSize;
});
