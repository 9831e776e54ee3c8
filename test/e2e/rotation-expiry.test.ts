import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { rotateKey } from '../../src/keys/key-changes.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { bearer, send } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const OLD = 'old-secret-0123456789abcdef';

/** Time is driven by an injected clock: no sleeps. */
describe('rotation grace period and key expiry', () => {
  const clock = manualClock(Date.parse('2026-11-22T10:00:00Z'));
  const store = createMemoryStore(
    {
      keys: [
        makeKey({ apiKey: 'rot', secret: OLD }),
        makeKey({ apiKey: 'exp', secret: OLD, expiresAt: '2026-11-22T10:05:00Z' }),
      ],
    },
    { clock },
  );
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let nonce = 0n;
  // A fresh nonce at the injected clock's "now".
  const call = (apiKey: string, secret: string) =>
    send(gate.url, ACCOUNTS_PATH, {
      headers: bearer(token(apiKey, secret, { nonce: (clock.nowNs() + nonce++).toString() })),
    });

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    gate = await startKeygate({ upstream: upstream.url, clock, store });
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
  });

  it('accepts old and new secrets during the grace period, only the new one after', async () => {
    expect((await call('rot', OLD)).status).toBe(200);
    const { record, secret: NEW = '' } = rotateKey((await store.getKey('rot'))!, 300_000, clock.nowMs());
    await store.putKey(record);

    expect((await call('rot', NEW)).status).toBe(200);
    expect((await call('rot', OLD)).status).toBe(200);
    clock.advance(299_000);
    expect((await call('rot', OLD)).status).toBe(200);
    clock.advance(1_000);
    const after = await call('rot', OLD);
    expect(after.status).toBe(401);
    expect(after.json()).toEqual({ code: 40106, message: 'Invalid Token' });
    expect((await call('rot', NEW)).status).toBe(200);
    expect((await call('rot', 'never-the-secret-0123456789')).status).toBe(401);
  });

  it('treats a key past its expiry like a revoked one (404 10013)', async () => {
    clock.set(Date.parse('2026-11-22T10:04:59Z'));
    expect((await call('exp', OLD)).status).toBe(200);
    clock.advance(1_000);
    const res = await call('exp', OLD);
    expect(res.status).toBe(404);
    expect(res.json()).toEqual({ code: 10013, message: 'Resource not found' });
    expect(gate.logs.join('')).toContain('"reason":"expired_key"');
  });
});
