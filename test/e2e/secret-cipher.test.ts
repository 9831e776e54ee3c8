import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import { parseEncryptionKey } from '../../src/config/secret-encryption.js';
import { createSecretCipher, SecretCipherError } from '../../src/keys/secret-cipher.js';
import { StoreUnavailableError } from '../../src/store/store.js';
import { waitStoreReady } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';

const k1 = randomBytes(32);
const k2 = randomBytes(32);

describe('secret cipher (AES-256-GCM)', () => {
  const c1 = createSecretCipher({ current: k1 });
  it('round-trips and never contains the plain secret', () => {
    const sealed = c1.seal('my-secret-value', 'key_1');
    expect(sealed).not.toContain('my-secret-value');
    expect(sealed.startsWith('kg1.')).toBe(true);
    expect(c1.open(sealed, 'key_1')).toBe('my-secret-value');
    expect(c1.seal('my-secret-value', 'key_1')).not.toBe(sealed); // random IV
  });
  it('refuses the wrong key, another record id, and tampering', () => {
    const sealed = c1.seal('s', 'key_1');
    expect(() => createSecretCipher({ current: k2 }).open(sealed, 'key_1')).toThrow(SecretCipherError);
    expect(() => c1.open(sealed, 'key_2')).toThrow(SecretCipherError);
    const parts = sealed.split('.');
    parts[3] = Buffer.from('x').toString('base64url');
    expect(() => c1.open(parts.join('.'), 'key_1')).toThrow(SecretCipherError);
    expect(() => c1.open('garbage', 'key_1')).toThrow(SecretCipherError);
  });
  it('opens with the previous key and reports what is not current', () => {
    const old = c1.seal('s', 'id');
    const rotated = createSecretCipher({ current: k2, previous: [k1] });
    expect(rotated.open(old, 'id')).toBe('s');
    expect(rotated.isCurrent(old)).toBe(false);
    expect(rotated.isCurrent(rotated.seal('s', 'id'))).toBe(true);
  });
  it.each([
    ['hex', k1.toString('hex'), true],
    ['base64', k1.toString('base64'), true],
    ['base64url', k1.toString('base64url'), true],
    ['short', 'abcd', false],
    ['31 bytes', randomBytes(31).toString('hex'), false],
  ])('parses a %s key', (_n, raw, ok) => {
    const problems: string[] = [];
    expect(parseEncryptionKey(raw, 'K', problems) !== undefined).toBe(ok);
    expect(problems.length === 0).toBe(ok);
  });
});

describe('Redis store with sealed secrets', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis({ shared: true });
    await redis.flush();
  });
  afterAll(() => redis.stop());

  it('stores only sealed secrets (current and previous) and reads them back', async () => {
    const logger = pino({ level: 'silent' });
    const store = createRedisStore({ url: redis.url, cipher: createSecretCipher({ current: k1 }) }, { logger });
    await waitStoreReady(store);
    const rec = makeKey({
      apiKey: 'enc',
      secret: 'plain-secret-never-at-rest-1',
      previousSecrets: [{ secret: 'old-secret-never-at-rest-22', validUntil: '2030-01-01T00:00:00Z' }],
    });
    await store.putKey(rec);
    const raw = new Redis(redis.url);
    const stored = (await raw.hget('keygate:{keystore}:key:enc', 'json')) as string;
    raw.disconnect();
    expect(stored).not.toContain('plain-secret-never-at-rest-1');
    expect(stored).not.toContain('old-secret-never-at-rest-22');
    expect(JSON.parse(stored)).not.toHaveProperty('apiSecret');
    expect(await store.getKey('enc')).toEqual(rec);

    const wrong = createRedisStore({ url: redis.url, cipher: createSecretCipher({ current: k2 }) }, { logger });
    const none = createRedisStore({ url: redis.url }, { logger });
    await waitStoreReady(wrong);
    await waitStoreReady(none);
    await expect(wrong.getKey('enc')).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(none.getKey('enc')).rejects.toThrow(/KEYGATE_SECRET_ENCRYPTION_KEY/);
    const rotated = createRedisStore(
      { url: redis.url, cipher: createSecretCipher({ current: k2, previous: [k1] }) },
      { logger },
    );
    await waitStoreReady(rotated);
    expect(await rotated.getKey('enc')).toEqual(rec);
    await Promise.all([store, wrong, none, rotated].map((s) => s.close()));
  });
});
