#!/usr/bin/env node
// @ts-check
// Micro-benchmark of the auth hot path's pieces, in one process, interleaved
// (best of 30 batches of 1000 each, so a busy machine skews every variant alike).
//
//   npm run bench:verify
//
// Signature verification side by side: Keygate's verifySignature (node:crypto
// HMAC with the KeyObject cached with the key, what Keygate does), the same
// HMAC keyed from the secret string on every call, jose compactVerify pinned
// to HS256 (the differential reference) with a cached CryptoKey and with raw
// bytes, and bare WebCrypto. Then the other pieces of the hot path: the
// structural pre-checks; one log line; the request header sweep and the
// response head copy; a whole authenticate() call; and route matching
// (request target check + override check + route lookup, what runs before
// authentication) at 10, 200 and 2,000 routes, for a normal target and the worst
// one step 1 lets through (64 segments, no route). Issue 34: verifySignature and
// authenticate() for an EdDSA and an ES256 key beside HS256, each with a good
// token and a forged one (HS256: signed with another secret; EdDSA/ES256: signed
// by another key pair), and the ratios to HS256 from the same run. Each figure is the
// wall time of one call, calls made one after another (so an async call's
// thread-pool round trip is in it). The last line prints the ratio of jose
// to Keygate's verifier from the same run. Issue 27: a forged token for a key rotated
// 1,000 times (300 s grace each, as fast as the API allows) against a forged token for
// a key with no history, whole authenticate() calls side by side, and the ratio.
// Issue 32: the signed identity assertion's cost per pass:
// identity mode (a cache hit, what nearly every request costs) and request mode (one signature per
// request) with an Ed25519 and a P-256 key, beside authenticate() from the same run.
// Issue 39: every variant's median batch beside its best (the median keeps the
// collections and cache misses a request meets; the best hides them), and a whole
// authenticate() as a request runs it: a store already holding the nonces a
// steady 1,500 req/s leaves in it (rate × nonce TTL), a fresh token each call,
// so the HMAC, the decode, the key cache and the replay guard run as in a request.
import { createHmac, generateKeyPairSync, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAssertionKeys, newAssertionKey } from '../dist/assertion/assertion-keys.js';
import { createAssertionSigner } from '../dist/assertion/assertion-signer.js';
import { compactVerify } from 'jose';
import { systemClock } from '../dist/clock.js';
import { responseHead } from '../dist/gateway/upstream/response-head.js';
import { boundedDestination, createLogger } from '../dist/observe/logger.js';
import { createRequestLogger } from '../dist/observe/request-logger.js';
import { createAuthenticator } from '../dist/pipeline/authenticate.js';
import { decodeToken } from '../dist/pipeline/decode-token.js';
import { verifySignature } from '../dist/pipeline/verify-signature.js';
import { forwardHeaders } from '../dist/pipeline/forward-headers.js';
import { compileRouteTable } from '../dist/policy/compile-route-table.js';
import { findRoute } from '../dist/policy/find-route.js';
import { compileRoute, DEFAULT_MATCHING } from '../dist/policy/routes.js';
import { checkOverride } from '../dist/pipeline/check-override.js';
import { checkTarget } from '../dist/pipeline/check-target.js';
import { createKeyCache } from '../dist/store/key-cache.js';
import { rotateKey } from '../dist/keys/key-changes.js';
import { parseKeyRecord } from '../dist/keys/key-record.js';
import { createMemoryStore } from '../dist/store/memory/memory-store.js';
import { SECRET, get, median, mint as mintWith } from './bench/lib.mjs';
import { claims, signWithKey } from './harness/mint.mjs';

const BATCH = 1000;
const ROUNDS = 30;
let nonce = 0n;
/**
 * A fresh nonce: now, in ns, or one past the last. A run lasts longer than recv_window, so a nonce
 * counted up from the start would fall out of the window and authenticate() would time a refusal.
 */
const nextNonce = () => {
  const now = BigInt(Date.now()) * 1_000_000n;
  nonce = nonce >= now ? nonce + 1n : now;
  return nonce;
};
const mint = () => mintWith(nextNonce(), SECRET, 'k');

const clock = systemClock();
/** @param {Record<string, unknown>} raw */
const parsed = (raw) => {
  const { record, errors } = parseKeyRecord(raw, String(raw.apiKey));
  if (!record) throw new Error(`bench key does not parse: ${errors.join('; ')}`);
  return record;
};
/** @param {'EdDSA' | 'ES256'} alg */
const keyPair = (alg) =>
  alg === 'EdDSA' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
/** The EdDSA and ES256 bench keys (issue 34): Keygate holds the public key; `other` signs the forged tokens. */
const ASYM = /** @type {const} */ (['EdDSA', 'ES256']).map((alg) => ({
  alg,
  apiKey: `k-${alg}`,
  pair: keyPair(alg),
  other: keyPair(alg),
}));
/** Issue 27: a key rotated ROTATES times in a row, each with the default 300 s grace, through the real rotateKey. */
const ROTATES = 1000;
let rotatedKey = parsed({ apiKey: 'k-rotated', apiSecret: SECRET, scopes: ['accounts:read'] });
for (let i = 0; i < ROTATES; i++) {
  const r = rotateKey(rotatedKey, 300_000, Date.now());
  if (r.errors.length > 0) throw new Error(`bench rotate refused: ${r.errors.join('; ')}`);
  rotatedKey = r.record;
}
const store = createMemoryStore(
  {
    keys: [
      parsed({ apiKey: 'k', apiSecret: SECRET, scopes: ['accounts:read'] }),
      rotatedKey,
      ...ASYM.map((a) =>
        parsed({
          apiKey: a.apiKey,
          alg: a.alg,
          publicKey: a.pair.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
          scopes: ['accounts:read'],
        }),
      ),
    ],
  },
  { clock },
);
const keys = createKeyCache({ ttlMs: 60_000, negativeTtlMs: 1_000, maxEntries: 10 }, { store, clock });
const decodeOptions = { maxTokenBytes: 4096, defaultRecvWindowSeconds: 30, maxRecvWindowSeconds: 60 };
const auth = createAuthenticator({ ...decodeOptions, defaultRateLimit: undefined }, { keys, store, clock });
// Issue 39: the store a request meets at 1,500 req/s: rate × the nonce TTL (2 × 30 s + 5 s) entries already in it.
const STEADY_NONCES = 1_500 * 65;
const steadyStore = createMemoryStore(
  { keys: [parsed({ apiKey: 'k', apiSecret: SECRET, scopes: ['accounts:read'] })] },
  { clock },
);
for (let i = 0; i < STEADY_NONCES; i++) await steadyStore.admit('k', String(nextNonce()), 65_000, undefined);
const steadyAuth = createAuthenticator(
  { ...decodeOptions, defaultRateLimit: undefined },
  {
    keys: createKeyCache({ ttlMs: 60_000, negativeTtlMs: 1_000, maxEntries: 10 }, { store: steadyStore, clock }),
    store: steadyStore,
    clock,
  },
);
const AS_RUN = `authenticate() as a request runs it (store holding ${STEADY_NONCES} nonces)`;
const prepared = await keys.get('k');
if (!prepared) throw new Error('bench key is not in the store');
const verifyKeys = prepared.verifyKeys;
const rawKey = new TextEncoder().encode(SECRET);
// jose's fastest form: the secret imported once as a CryptoKey (what Keygate cached before node:crypto).
const cryptoKey = await crypto.subtle.importKey('raw', rawKey, { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
// Keygate's own destination (batched writes), pointed at /dev/null.
const pinoLogger = createLogger({ level: 'info' }, boundedDestination({ fd: openSync('/dev/null', 'w') }));
const requestLog = createRequestLogger(pinoLogger);
// One request's log fields, built afresh per call as Keygate builds them per request (both log variants pay alike).
const requestLine = () => ({
  requestId: 'f7c1',
  method: 'GET',
  route: '/api/v3/viewer/accounts',
  clientIp: '127.0.0.1',
  keyId: 'k',
  code: 'ok',
  status: 200,
  authMs: 0.05,
  upstreamMs: 0.4,
  durationMs: 0.6,
});

// An upstream response head as the bench upstream sends it, and a request to answer.
const upstreamRaw = [
  'Content-Type',
  'application/json',
  'Content-Length',
  '28',
  'Date',
  'Sun, 22 Nov 2026 09:00:00 GMT',
  'Connection',
  'keep-alive',
  'Keep-Alive',
  'timeout=60',
].map((h) => Buffer.from(h, 'latin1'));

const KEYGATE = 'verifySignature: node:crypto, cached KeyObject (used)';
const JOSE = 'jose compactVerify HS256, cached CryptoKey';
const NOW = Date.now();
// Policies shaped like real APIs: resources with :id, sub-resources, list routes, a catch-all last.
/** @param {number} n */
function routeTable(n) {
  /** @type {Array<{ method: string | string[], path: string, scopes: string[] }>} */
  const rules = [];
  for (let i = 0; rules.length < n - 1; i++) {
    rules.push({ method: 'GET', path: `/api/v3/res${i}/:id/sub${i % 7}/:sub`, scopes: [`r${i}`] });
    rules.push({ method: ['POST', 'PUT'], path: `/api/v3/res${i}/:id`, scopes: [`w${i}`] });
    rules.push({ method: 'GET', path: `/api/v3/res${i}/list`, scopes: [`r${i}`] });
  }
  rules.length = n - 1;
  rules.push({ method: ['GET', 'HEAD'], path: '/api/v3/*', scopes: ['read'] });
  /** @type {string[]} */
  const problems = [];
  const compiled = rules.map((r, i) => compileRoute(r, `routes[${i}]`, problems)).filter((r) => r !== undefined);
  const table = compileRouteTable(compiled, DEFAULT_MATCHING, problems);
  if (problems.length > 0) throw new Error(problems.join('\n'));
  return table;
}
const NORMAL_TARGET = '/api/v3/res1/42/sub1/9?x=1';
// The most segments step 1 accepts (64), each short, in upper case (so both readings run), matching no route for DELETE.
const WORST_TARGET = `/API/V3/${'X/'.repeat(61)}`;
const NO_OVERRIDE = new Set();
const requestHeaders = {
  host: '127.0.0.1:8080',
  'user-agent': 'wrk',
  accept: '*/*',
  authorization: 'Bearer x',
  'x-request-id': 'r1',
  connection: 'keep-alive',
};
/** @param {ReturnType<typeof routeTable>} table @param {string} method @param {string} url */
const matchOnce = (table, method, url) => {
  const target = checkTarget(method, url);
  if (!target.ok) throw new Error(`bench target refused: ${target.reason}`);
  const m = checkOverride(method, requestHeaders, target.query, NO_OVERRIDE);
  if (!('methods' in m)) throw new Error(`bench request refused: ${m.reason}`);
  return findRoute(table, m.methods, target.path);
};
/** @type {Record<string, (token: string) => unknown>} */
const routeVariants = {};
for (const n of [10, 200, 2000]) {
  const t0 = performance.now();
  const table = routeTable(n);
  console.log(`route table: ${n} routes compiled in ${(performance.now() - t0).toFixed(1)} ms, ${table.states} states`);
  if (!matchOnce(table, 'GET', NORMAL_TARGET) || matchOnce(table, 'DELETE', WORST_TARGET))
    throw new Error('route table answers unexpectedly');
  routeVariants[`route match, ${n} routes, normal target`] = () => matchOnce(table, 'GET', NORMAL_TARGET);
  routeVariants[`route match, ${n} routes, worst target`] = () => matchOnce(table, 'DELETE', WORST_TARGET);
}

/** A whole authenticate() call that must admit the token: a refusal would time the wrong path. @param {string} t */
const admitted = async (t) => {
  const verdict = await auth(['Authorization', `Bearer ${t}`]);
  if (!verdict.ok) throw new Error(`bench token refused by authenticate(): ${verdict.reason}`);
};
/** A whole authenticate() call that must refuse the token as forged (bad_signature). @param {string} t */
const forgedRefused = async (t) => {
  const verdict = await auth(['Authorization', `Bearer ${t}`]);
  if (verdict.ok || verdict.reason !== 'bad_signature') throw new Error('bench forged token not refused as forged');
};
const FORGED_FRESH = 'authenticate() forged token, key with no history';
const FORGED_ROTATED = `authenticate() forged token, key after ${ROTATES} rotates`;
/** Token makers other than the default (a good HS256 token for 'k'), by variant name. @type {Record<string, () => string>} */
const minters = {};
/** Per alg: [verify, forged verify, authenticate()] variant names, for the ratios printed last. @type {Array<[string, string, string, string]>} */
const algRows = [];
/** @type {Record<string, (token: string) => unknown>} */
const algVariants = {};
/** @param {string} name @param {() => string} make @param {(t: string) => unknown} fn */
const variant = (name, make, fn) => {
  minters[name] = make;
  algVariants[name] = fn;
};
const hsForged = () => mintWith(nextNonce(), 'forged-secret-0123456789abcdef', 'k');
variant(FORGED_FRESH, hsForged, forgedRefused);
variant(FORGED_ROTATED, () => mintWith(nextNonce(), 'forged-secret-0123456789abcdef', 'k-rotated'), forgedRefused);
variant('verifySignature HS256, forged (another secret)', hsForged, (t) => {
  if (verifySignature(t, 'HS256', verifyKeys, NOW).ok) throw new Error('forged HS256 token verified');
});
algRows.push([
  'HS256',
  KEYGATE,
  'verifySignature HS256, forged (another secret)',
  'authenticate() end to end (memory store)',
]);
for (const a of ASYM) {
  const prep = await keys.get(a.apiKey);
  if (!prep) throw new Error(`bench key ${a.apiKey} is not in the store`);
  const header = { alg: a.alg, typ: 'JWT' };
  /** @param {import('node:crypto').KeyObject} k */
  const signed = (k) => () => signWithKey(header, claims(a.apiKey, { nonce: String(nextNonce()) }), k);
  const names = /** @type {[string, string, string, string]} */ ([
    a.alg,
    `verifySignature ${a.alg}`,
    `verifySignature ${a.alg}, forged (another key pair)`,
    `authenticate() end to end (memory store), ${a.alg}`,
  ]);
  variant(names[1], signed(a.pair.privateKey), (t) => {
    if (!verifySignature(t, a.alg, prep.verifyKeys, NOW).ok) throw new Error(`bench ${a.alg} token did not verify`);
  });
  variant(names[2], signed(a.other.privateKey), (t) => {
    if (verifySignature(t, a.alg, prep.verifyKeys, NOW).ok) throw new Error(`forged ${a.alg} token verified`);
  });
  variant(names[3], signed(a.pair.privateKey), admitted);
  algRows.push(names);
}

// Issue 32: the assertion signers, each over its own keys file (0600, as Keygate requires).
/** @param {'EdDSA' | 'ES256'} alg @param {'identity' | 'request'} mode */
function assertionSigner(alg, mode) {
  const file = join(mkdtempSync(join(tmpdir(), 'keygate-bench-assertion-')), 'keys.json');
  writeFileSync(file, JSON.stringify({ keys: [newAssertionKey(alg)] }), { mode: 0o600 });
  const set = loadAssertionKeys(file, undefined);
  const options = { audience: 'bench', issuer: 'keygate', ttlSeconds: 60, mode, maxEntries: 10 };
  return createAssertionSigner(options, { clock, keys: () => set });
}
const ASSERTION_REQUEST = { requestId: 'r1', method: 'GET', target: '/api/v3/viewer/accounts' };
/** @type {Array<[string, import('../dist/assertion/assertion-signer.js').AssertionSigner]>} */
const assertionRows = [
  ['assertion: identity mode, cache hit (EdDSA)', assertionSigner('EdDSA', 'identity')],
  ['assertion: request mode, Ed25519 sign', assertionSigner('EdDSA', 'request')],
  ['assertion: request mode, P-256 sign', assertionSigner('ES256', 'request')],
];
/** @type {Record<string, () => unknown>} */
const assertionVariants = Object.fromEntries(
  assertionRows.map(([name, signer]) => [name, () => signer.sign(prepared.record, ASSERTION_REQUEST)]),
);

/** @type {Record<string, (token: string) => unknown>} */
const variants = {
  [KEYGATE]: (t) => {
    if (!verifySignature(t, 'HS256', verifyKeys, NOW).ok) throw new Error('bench token did not verify');
  },
  'node:crypto HMAC, keyed from the string per call': (t) => {
    const d = t.lastIndexOf('.');
    return timingSafeEqual(
      createHmac('sha256', SECRET).update(t.slice(0, d)).digest(),
      Buffer.from(t.slice(d + 1), 'base64url'),
    );
  },
  [JOSE]: (t) => compactVerify(t, cryptoKey, { algorithms: ['HS256'] }),
  'jose compactVerify HS256, raw Uint8Array': (t) => compactVerify(t, rawKey, { algorithms: ['HS256'] }),
  'WebCrypto subtle.verify only': (t) => {
    const d = t.lastIndexOf('.');
    return crypto.subtle.verify(
      'HMAC',
      cryptoKey,
      Buffer.from(t.slice(d + 1), 'base64url'),
      Buffer.from(t.slice(0, d)),
    );
  },
  'decodeToken pre-checks': (t) => decodeToken(t, decodeOptions),
  'one request line (fixed serializer, used)': () => requestLog(requestLine(), false),
  'the same line through pino (before)': () => pinoLogger.info(requestLine(), 'request'),
  'forwardHeaders (upstream head from the raw headers)': () =>
    forwardHeaders(
      [
        'Host',
        '127.0.0.1:8080',
        'User-Agent',
        'wrk',
        'Accept',
        '*/*',
        'Authorization',
        'Bearer x',
        'X-Request-Id',
        'r1',
        'Connection',
        'keep-alive',
      ],
      { peerIp: '127.0.0.1', peerTrusted: false, requestId: 'r1' },
    ),
  'responseHead (upstream response head)': () => responseHead(upstreamRaw, 'r1'),
  'authenticate() end to end (memory store)': admitted,
  [AS_RUN]: async (t) => {
    const verdict = await steadyAuth(['Authorization', `Bearer ${t}`]);
    if (!verdict.ok) throw new Error(`bench token refused by authenticate(): ${verdict.reason}`);
  },
  ...algVariants,
  ...assertionVariants,
  ...routeVariants,
};

const best = Object.fromEntries(Object.keys(variants).map((k) => [k, Infinity]));
/** Every batch's µs per call, by variant (the median is printed beside the best). @type {Record<string, number[]>} */
const batches = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, fn] of Object.entries(variants)) {
    const tokens = Array.from({ length: BATCH }, minters[name] ?? mint); // fresh nonces: authenticate() records each once
    const t0 = performance.now();
    for (let i = 0; i < BATCH; i++) await fn(/** @type {string} */ (tokens[i]));
    const us = ((performance.now() - t0) * 1000) / BATCH;
    best[name] = Math.min(best[name] ?? Infinity, us);
    get(batches, name).push(us);
  }
}
const rows = Object.entries(best).map(([name, us]) => ({
  variant: name,
  usPerOp: Math.round(us * 100) / 100,
  medianUsPerOp: Math.round(median(get(batches, name)) * 100) / 100,
}));
console.table(rows);
console.log(JSON.stringify(rows));
console.log(`jose / node:crypto verify, same run: ${(get(best, JOSE) / get(best, KEYGATE)).toFixed(1)}×`);
// Issue 32: each assertion variant beside a whole authenticate() (HS256, memory store), same run.
const whole = get(best, 'authenticate() end to end (memory store)');
for (const [name] of assertionRows)
  console.log(
    `${name}: ${get(best, name).toFixed(2)} µs, ${(get(best, name) / whole).toFixed(2)}× authenticate() (${whole.toFixed(2)} µs)`,
  );
// Issue 34: each alg against HS256, same run (good verify, forged verify, whole authenticate()).
const hs = /** @type {[string, string, string, string]} */ (algRows[0]);
for (const [alg, good, forged, whole] of algRows) {
  console.log(
    `${alg}: verify ${get(best, good).toFixed(2)} µs (${(get(best, good) / get(best, hs[1])).toFixed(2)}× HS256), forged ${get(best, forged).toFixed(2)} µs (${(get(best, forged) / get(best, hs[2])).toFixed(2)}× a forged HS256), authenticate() ${get(best, whole).toFixed(2)} µs (${(get(best, whole) / get(best, hs[3])).toFixed(2)}× HS256)`,
  );
}
// Issue 27: rotation history is bounded, so a forged token's cost must not grow with the rotations.
const checked = (await keys.get('k-rotated'))?.verifyKeys.length ?? 0;
console.log(
  `history: a forged token for a key rotated ${ROTATES} times costs ${get(best, FORGED_ROTATED).toFixed(2)} µs, for a key with no history ${get(best, FORGED_FRESH).toFixed(2)} µs (${(get(best, FORGED_ROTATED) / get(best, FORGED_FRESH)).toFixed(2)}×, same run); secrets checked: ${checked} (stored previous: ${rotatedKey.previousSecrets?.length ?? 0})`,
);
