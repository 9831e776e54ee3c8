import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { startKeygate, type RunningKeygate, type StartKeygateOptions } from './keygate.js';
import { startRecordingUpstream, type RecordingUpstream } from './recording-upstream.js';

/**
 * A gate (Keygate in-process, on real sockets) in front of a recording upstream: the set-up the forwarding,
 * binding and logging tests share. `useGate` in a describe block starts both before its tests and closes both
 * after them; `startGate` is the same for a single test, which closes it itself.
 */
export interface GateOptions extends Omit<StartKeygateOptions, 'upstream'> {
  /** The policy file's YAML (written to a temporary file and named by KEYGATE_CONFIG); the shipped one otherwise. */
  readonly policy?: string;
  /** Before each test, empty the upstream's record and drop its handler. */
  readonly resetUpstream?: boolean;
}

export interface GateAndUpstream {
  readonly gate: RunningKeygate;
  readonly upstream: RecordingUpstream;
}

/** A policy file holding `yaml`, in a directory of its own. */
export function writePolicyFile(yaml: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'keygate-policy-')), 'policy.yaml');
  writeFileSync(file, yaml);
  return file;
}

export async function startGate(options: GateOptions = {}): Promise<GateAndUpstream & { close(): Promise<void> }> {
  const { policy, resetUpstream: _reset, ...rest } = options;
  const upstream = await startRecordingUpstream();
  try {
    const gate = await startKeygate({
      ...rest,
      upstream: upstream.url,
      env: { ...(policy !== undefined && { KEYGATE_CONFIG: writePolicyFile(policy) }), ...rest.env },
    });
    return {
      gate,
      upstream,
      close: async () => {
        await gate.close();
        await upstream.close();
      },
    };
  } catch (err) {
    await upstream.close();
    throw err;
  }
}

/** Registers the hooks in the calling describe block; the gate and the upstream are read once its tests run. */
export function useGate(options: GateOptions = {}): GateAndUpstream {
  let started: (GateAndUpstream & { close(): Promise<void> }) | undefined;
  beforeAll(async () => {
    started = await startGate(options);
  });
  afterAll(async () => {
    await started?.close();
  });
  if (options.resetUpstream) beforeEach(() => started?.upstream.reset());
  const running = () => {
    if (!started) throw new Error('useGate: read the gate inside a test or a hook, once beforeAll has run');
    return started;
  };
  return {
    get gate() {
      return running().gate;
    },
    get upstream() {
      return running().upstream;
    },
  };
}
