#!/usr/bin/env node
// Micro-benchmark of the auth hot path's pieces, in one process, interleaved
// (best of 30 batches of 1000 each, so a busy machine skews every variant alike).
//
//   npm run bench:verify
//
// It measures the levers named in README "Performance": jose with a cached
// CryptoKey (what Keygate does) versus jose re-importing raw bytes, bare
// WebCrypto, and node:crypto HMAC (not used: Keygate verifies with jose);
// the structural pre-checks; one log line; and a whole authenticate() call.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { compactVerify } from 'jose';
import pino from 'pino';
import { systemClock } from '../dist/clock.js';
import { createLogger } from '../dist/observe/logger.js';
import { createAuthenticator } from '../dist/pipeline/authenticate.js';
import { decodeToken } from '../dist/pipeline/decode-token.js';
import { createKeyCache } from '../dist/store/key-cache.js';
import { parseKeyRecord } from '../dist/store/key-record.js';
import { createMemoryStore } from '../dist/store/memory-store.js';

const SECRET = 'bench-secret-0123456789abcdef';
const BATCH = 1000;
const ROUNDS = 30;
const H = Buffer.from('{"alg":"HS256","typ":"JWT"}').toString('base64url');
let nonce = BigInt(Date.now()) * 1_000_000n;
const mint = () => {
  const p = Buffer.from(JSON.stringify({ type: 'OpenAPIV2', sub: 'k', nonce: (++nonce).toString() })).toString('base64url');
  return `${H}.${p}.${createHmac('sha256', SECRET).update(`${H}.${p}`).digest('base64url')}`;
};

const clock = systemClock();
const store = createMemoryStore({ keys: [parseKeyRecord({ apiKey: 'k', apiSecret: SECRET, scopes: ['accounts:read'] }, 'k').record] }, { clock });
const keys = createKeyCache({ ttlMs: 60_000, negativeTtlMs: 1_000, maxEntries: 10 }, { store, clock });
const auth = createAuthenticator({ maxTokenBytes: 4096, defaultRecvWindowSeconds: 30, maxRecvWindowSeconds: 60 }, { keys, store, clock });
const cryptoKey = (await keys.get('k')).verifyKeys[0].key;
const rawKey = new TextEncoder().encode(SECRET);
const logger = createLogger({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: false }));
const decodeOptions = { maxTokenBytes: 4096, defaultRecvWindowSeconds: 30, maxRecvWindowSeconds: 60 };

const variants = {
  'jose, cached CryptoKey (used)': (t) => compactVerify(t, cryptoKey, { algorithms: ['HS256'] }),
  'jose, raw Uint8Array': (t) => compactVerify(t, rawKey, { algorithms: ['HS256'] }),
  'WebCrypto subtle.verify only': (t) => {
    const d = t.lastIndexOf('.');
    return crypto.subtle.verify('HMAC', cryptoKey, Buffer.from(t.slice(d + 1), 'base64url'), Buffer.from(t.slice(0, d)));
  },
  'node:crypto HMAC (not used)': (t) => {
    const d = t.lastIndexOf('.');
    return timingSafeEqual(createHmac('sha256', SECRET).update(t.slice(0, d)).digest(), Buffer.from(t.slice(d + 1), 'base64url'));
  },
  'decodeToken pre-checks': (t) => decodeToken(t, decodeOptions),
  'one pino request line': () =>
    logger.info({ requestId: 'f7c1', method: 'GET', route: '/api/v3/viewer/accounts', clientIp: '127.0.0.1', keyId: 'k', code: 'ok', status: 200, authMs: 0.05, upstreamMs: 0.4, durationMs: 0.6 }, 'request'),
  'authenticate() end to end (memory store)': (t) => auth(['Authorization', `Bearer ${t}`]),
};

const best = Object.fromEntries(Object.keys(variants).map((k) => [k, Infinity]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, fn] of Object.entries(variants)) {
    const tokens = Array.from({ length: BATCH }, mint); // fresh nonces: authenticate() records each once
    const t0 = performance.now();
    for (let i = 0; i < BATCH; i++) await fn(tokens[i]);
    best[name] = Math.min(best[name], ((performance.now() - t0) * 1000) / BATCH);
  }
}
const rows = Object.entries(best).map(([name, us]) => ({ variant: name, usPerOp: Math.round(us * 100) / 100 }));
console.table(rows);
console.log(JSON.stringify(rows));
