import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAssertionKey } from '../../src/assertion/assertion-keys.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startInstancePair, type InstancePair } from '../helpers/instance-pair.js';
import { type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { createOpenApiCheck, managementClient, writeTokensFile } from '../helpers/management.js';
import { token } from '../helpers/tokens.js';

/**
 * Issue 46, item 3: the identity assertion is cached per key, and a change of the key's expiry must
 * drop it on every instance: after `expiresAt` moves earlier through one instance, both instances'
 * assertions carry exp = min(now + TTL, the new expiry), never the cached one past it.
 */
const SECRET = 'bounds-secret-0123456789abcdef';

describe('identity assertion and a key whose expiry moves earlier (two instances, one Redis)', () => {
  let pair: InstancePair;
  let a: RunningKeygate;
  let b: RunningKeygate;
  let ops: ReturnType<typeof managementClient>;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-bounds-'));
    const keyFile = join(dir, 'assertion-keys.json');
    writeFileSync(keyFile, JSON.stringify({ keys: [newAssertionKey('EdDSA', 'ed-1')] }), { mode: 0o600 });
    const tokens = writeTokensFile([{ name: 'ops', access: 'write' }], dir);
    pair = await startInstancePair({
      keys: [makeKey({ apiKey: 'bounded', secret: SECRET, expiresAt: new Date(Date.now() + 3_600_000).toISOString() })],
      env: {
        KEYGATE_ASSERTION_KEYS_FILE: keyFile,
        KEYGATE_ASSERTION_AUDIENCE: 'https://svc.internal',
        KEYGATE_ASSERTION_TTL_SECONDS: '120',
        KEYGATE_MANAGEMENT_PORT: '0',
        KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file,
      },
    });
    ({ a, b } = pair);
    ops = managementClient(a.managementUrl as string, tokens.tokens.ops as string, createOpenApiCheck());
  });
  afterAll(async () => {
    await pair.close();
  });

  /** The exp of the assertion the upstream received for one request through `gate`. */
  async function expVia(gate: RunningKeygate): Promise<number> {
    pair.upstream.reset();
    const r = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('bounded', SECRET)) });
    expect(r.status).toBe(200);
    const assertion = pair.upstream.received[0]?.headers['x-keygate-assertion'] as string;
    return (JSON.parse(Buffer.from(assertion.split('.')[1] as string, 'base64url').toString()) as { exp: number }).exp;
  }

  it('both instances re-sign at once with exp no later than the new expiry', async () => {
    const before = Math.floor(Date.now() / 1000);
    // Cached on both instances: about now + 120 s.
    for (const gate of [a, b]) {
      expect(await expVia(gate)).toBeGreaterThanOrEqual(before + 119);
      expect(await expVia(gate)).toBeGreaterThanOrEqual(before + 119);
    }
    const expiresAtMs = Date.now() + 30_000;
    const expiresAt = new Date(expiresAtMs).toISOString();
    const patched = await ops.call('PATCH', '/v1/keys/bounded', { json: { expiresAt } });
    expect(patched.status).toBe(200);
    const bound = Math.floor(expiresAtMs / 1000);
    // The change message reaches b within tens of ms; poll rather than guess how long.
    for (const gate of [a, b])
      await expect.poll(() => expVia(gate), { timeout: 10_000, interval: 100 }).toBeLessThanOrEqual(bound);
    expect(await expVia(a)).toBe(bound);
    expect(await expVia(b)).toBe(bound);
  });
});
