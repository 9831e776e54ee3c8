import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { ERRORS } from '../../src/errors.js';
import type { KeyRecord } from '../../src/keys/key-record.js';
import { startKeygate, type RunningKeygate } from './keygate.js';
import { makeKey } from './make-key.js';
import { token } from './tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from './recording-upstream.js';

export const SECRET = 'adversarial-secret-0123456789';
export const OTHER_SECRET = 'adversarial-other-0123456789';
export const POLICY = fileURLToPath(new URL('../fixtures/adversarial-policy.yaml', import.meta.url));

export const KEYS: KeyRecord[] = [
  makeKey({ apiKey: 'good', secret: SECRET, id: 'key-good', scopes: ['accounts:read', 'items:write'] }),
  makeKey({ apiKey: 'other', secret: OTHER_SECRET, id: 'key-other', scopes: ['accounts:read', 'items:write'] }),
  // Lacks accounts:read: every spelling of /api/v3/viewer/accounts must refuse it.
  makeKey({ apiKey: 'narrow', secret: OTHER_SECRET, id: 'key-narrow', scopes: ['items:write'] }),
];

export interface Fixture {
  upstream: RecordingUpstream;
  gate: RunningKeygate;
  /** A fresh valid token for key "good". */
  tok(extra?: Record<string, unknown>): string;
  /** "Authorization: Bearer <fresh token>\r\n" */
  auth(): string;
  close(): Promise<void>;
}

export async function startFixture(
  options: { env?: Record<string, string>; redisUrl?: string } = {},
): Promise<Fixture> {
  const upstream = await startRecordingUpstream();
  const gate = await startKeygate({
    upstream: upstream.url,
    keys: KEYS,
    ...(options.redisUrl && { redisUrl: options.redisUrl }),
    env: { KEYGATE_CONFIG: POLICY, ...options.env },
  });
  const tok = (extra: Record<string, unknown> = {}) => token('good', SECRET, extra);
  return {
    upstream,
    gate,
    tok,
    auth: () => `Authorization: Bearer ${tok()}\r\n`,
    close: async () => {
      await gate.close();
      await upstream.close();
    },
  };
}

/** Every status Keygate (or Node's parser in front of it) may answer with, besides the upstream's own. */
export const DOCUMENTED_STATUSES = new Set([...Object.values(ERRORS).map((e) => e.status), 408, 431]);
export const DOCUMENTED_CODES = new Set(Object.keys(ERRORS).map(Number));

/** The upstream saw no request at all and no byte on the wire. */
export function expectNothingForwarded(upstream: RecordingUpstream, label?: string): void {
  expect(
    upstream.received.map((a) => `${a.method} ${a.url}`),
    label,
  ).toEqual([]);
  expect(upstream.wire(), label).toBe('');
}

/** Waits a little so that anything Keygate might still be writing upstream has arrived. */
export const settle = (ms = 50) => new Promise((r) => setTimeout(r, ms));
