import { Readable, Writable } from 'node:stream';
import type { CliIo } from '../../src/cli/cli-io.js';
import { main } from '../../src/cli/main.js';

/** What one `keygate …` run printed, and its exit code. */
export interface CliRun {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

/**
 * `keygate …` in process, as bin/keygate.js runs it, with the environment and the key store given: its output
 * collected, stdin empty.
 */
export async function runCli(args: readonly string[], io: Pick<CliIo, 'env' | 'openKeyStore'>): Promise<CliRun> {
  let out = '';
  let err = '';
  const sink = (append: (s: string) => void) => new Writable({ write: (c, _e, cb) => (append(String(c)), cb()) });
  const code = await main([...args], {
    out: sink((s) => (out += s)),
    err: sink((s) => (err += s)),
    env: io.env,
    stdin: Readable.from([]),
    openKeyStore: io.openKeyStore,
  });
  return { code, out, err };
}
