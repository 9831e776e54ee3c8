// @ts-check
// The ledger's per-step half (scripts/bench/ledger.mjs runs it as a child, with --expose-gc and a
// young generation large enough that a batch never collects): each step of the request path
// (REQUEST_STEPS, then the response's head and the outcome record) driven `batch` times in a row on
// inputs prepared beforehand, as a wrk request meets it (Host, a Bearer token with a fresh nonce), for
// the public route, the embedded store and Redis. Per step: CPU time per call (process.cpuUsage, all
// threads: the Redis client's reads count) and V8 heap bytes allocated per call (used_heap_size across a
// batch that ran no collection), medians of `rounds` batches. A step runs the same functions with the
// same arguments as its function in src/gateway/request-path.ts; Node's HTTP server, undici and the
// sockets are not steps: the ledger gives them as the rest of the whole request.
//
//   node --expose-gc --max-semi-space-size=64 --min-semi-space-size=64 scripts/bench/ledger-steps.mjs \
//        <keys file> <public policy file> <redis url | -> <batch> <rounds> <log level>
// prints one JSON line: { paths: { public|embedded|redis: [{ step, cpuNs, bytes }] } }
import { openSync } from 'node:fs';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { getHeapStatistics } from 'node:v8';
import { systemClock } from '../../dist/clock.js';
import { loadConfig } from '../../dist/config/load-config.js';
import { REQUEST_STEPS } from '../../dist/gateway/request-path.js';
import { compileRequestPlan } from '../../dist/gateway/request-plan.js';
import { createProxyMode } from '../../dist/gateway/proxy-mode.js';
import { responseHead } from '../../dist/gateway/upstream/response-head.js';
import { Walk } from '../../dist/gateway/walk.js';
import { clientIp } from '../../dist/net/client-ip.js';
import { normalizeIp } from '../../dist/net/cidr.js';
import { boundedDestination, createLogger } from '../../dist/observe/logger.js';
import { createMetrics } from '../../dist/observe/metrics.js';
import { createRequestRecorder } from '../../dist/observe/request-record.js';
import { createAuthenticator } from '../../dist/pipeline/authenticate.js';
import { authorize } from '../../dist/pipeline/authorize.js';
import { checkHeaders } from '../../dist/pipeline/check-headers.js';
import { checkOverride } from '../../dist/pipeline/check-override.js';
import { checkTarget } from '../../dist/pipeline/check-target.js';
import { forwardHeaders, requestIdOf } from '../../dist/pipeline/forward-headers.js';
import { loadPolicy } from '../../dist/policy/load-policy.js';
import { TIME_PATH } from '../../dist/policy/policy.js';
import { createKeyCache } from '../../dist/store/key-cache.js';
import { createMemoryStore } from '../../dist/store/memory/memory-store.js';
import { createRedisStore } from '../../dist/store/redis/redis-store.js';
import { waitStoreReady } from '../../dist/store/wait-ready.js';
import { loadKeysFile } from '../../dist/keys/keys-file.js';
import { API_KEY, PATH, SECRET, mint } from './lib.mjs';

const [keysFile, policyFile, redisUrl, batchArg, roundsArg, level = 'info'] = process.argv.slice(2);
const BATCH = Number(batchArg);
const ROUNDS = Number(roundsArg);
const PUBLIC_PATH = '/public/bench';
const gc = /** @type {() => void} */ (globalThis.gc);
if (typeof gc !== 'function') throw new Error('ledger-steps.mjs runs with --expose-gc');

const clock = systemClock();
const logger = createLogger({ level }, boundedDestination({ fd: openSync('/dev/null', 'w') }));
const metrics = createMetrics();
const recorder = createRequestRecorder({ logger, metrics });
const problems = /** @type {string[]} */ ([]);
const policy = loadPolicy(String(policyFile), problems);
if (problems.length > 0) throw new Error(problems.join('\n'));
const plan = compileRequestPlan(policy);
const mode = createProxyMode(/** @type {never} */ ({}), {
  boundBodyMaxBytes: 1,
  minBodyBytesPerSecond: 0,
  bodyRateGraceMs: 0,
});
const decodeOptions = { maxTokenBytes: 4096, defaultRecvWindowSeconds: 30, maxRecvWindowSeconds: 60 };
const upstreamRaw = ['Content-Type', 'application/json', 'Content-Length', '29', 'Date', new Date().toUTCString()]
  .concat(['Connection', 'keep-alive', 'Keep-Alive', 'timeout=60'])
  .map((h) => Buffer.from(h, 'latin1'));

let lastNonce = BigInt(Date.now()) * 1_000_000n;
/**
 * A request as the ledger's real run sends it (raw and parsed headers), with a fresh token when `token`
 * (the public route gets one too, and drops it).
 * @param {string} path @param {boolean} token
 */
function request(path, token) {
  const socket = new Socket();
  const req = new IncomingMessage(socket);
  req.method = 'GET';
  req.url = path;
  const raw = ['Host', '127.0.0.1:8080'];
  if (token) raw.push('Authorization', `Bearer ${mint(++lastNonce, SECRET, API_KEY)}`);
  req.rawHeaders = raw;
  req.headers = token ? { host: raw[1], authorization: raw[3] } : { host: raw[1] };
  return { req, res: new ServerResponse(req) };
}

/**
 * Median CPU ns and heap bytes per call of `step` over ROUNDS batches of BATCH calls, each batch on
 * fresh inputs from `prepare`. A batch that collected (the heap shrank) is run again.
 * @template T
 * @param {(n: number) => T[]} prepare
 * @param {(input: T) => unknown} step
 * @param {number} [wave] async steps: this many calls at once (a loop turn's worth), awaited together
 */
async function measure(prepare, step, wave = 0, calls = BATCH) {
  const cpu = [];
  const bytes = [];
  for (let r = 0, tries = 0; r < ROUNDS && tries < ROUNDS * 3; tries++) {
    const inputs = prepare(calls);
    // The logger's batched writes of the previous batch go out first (LOG_FLUSH_INTERVAL_MS).
    await new Promise((resolve) => setTimeout(resolve, 120));
    gc();
    const h0 = getHeapStatistics().used_heap_size;
    const c0 = process.cpuUsage();
    if (wave === 0) for (let i = 0; i < calls; i++) step(/** @type {T} */ (inputs[i]));
    else
      for (let i = 0; i < calls; i += wave)
        await Promise.all(inputs.slice(i, i + wave).map((x) => step(/** @type {T} */ (x))));
    const c = process.cpuUsage(c0);
    const h1 = getHeapStatistics().used_heap_size;
    if (h1 < h0) continue;
    cpu.push(((c.user + c.system) * 1000) / calls);
    bytes.push((h1 - h0) / calls);
    r++;
  }
  const med = (/** @type {number[]} */ xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  return { cpuNs: Math.round(med(cpu)), bytes: Math.round(med(bytes)), calls };
}

/**
 * How many calls make a batch: at least BATCH, and enough for about 30 ms of CPU (the kernel counts
 * CPU time in ticks), within 24 MB of allocation (the batch must not collect).
 * @param {{ cpuNs: number, bytes: number }} first a measured batch of BATCH calls
 * @param {number} [max] fewer for steps whose inputs are requests made beforehand (their memory), and for
 *   the record (its log lines must fit the logger's buffer: a dropped line would cost nothing)
 */
function callsFor(first, max = 200_000) {
  const byCpu = Math.ceil(30e6 / Math.max(first.cpuNs, 1));
  const byBytes = Math.floor(24e6 / Math.max(first.bytes, 1));
  return Math.max(BATCH, Math.min(byCpu, byBytes, max));
}

/** @param {'public' | 'embedded' | 'redis'} path */
async function stepsOf(path) {
  const isPublic = path === 'public';
  const target = isPublic ? PUBLIC_PATH : PATH;
  const keys = loadKeysFile(String(keysFile));
  const store =
    path === 'redis'
      ? createRedisStore(
          {
            connection: /** @type {never} */ (
              loadConfig({ KEYGATE_REDIS_URL: redisUrl, KEYGATE_UPSTREAM: 'http://127.0.0.1:1' }).redis
            ),
            // A loaded machine answers the start's server checks late; the steps measure no deadline.
            commandTimeoutMs: 10_000,
          },
          { logger },
        )
      : createMemoryStore({ keys }, { clock });
  if (path === 'redis') await waitStoreReady(store);
  const cache = createKeyCache({ ttlMs: 60_000, negativeTtlMs: 1_000, maxEntries: 100 }, { store, clock });
  const authenticate = createAuthenticator(
    { ...decodeOptions, defaultRateLimit: undefined },
    { keys: cache, store, clock },
  );
  const key = await cache.get(API_KEY);
  if (!key) throw new Error('ledger: the bench key is not in the store');
  // One walk as far as each step needs it: the steps after it read what the earlier ones wrote.
  const { req, res } = request(target, true);
  const passed = () => {};
  const log = recorder.open(res, requestIdOf(undefined), 'GET', performance.now());
  const w = new Walk(req, res, log, performance.now(), false, plan, passed);
  w.peer = normalizeIp('127.0.0.1');
  const asked = mode.original(req, false);
  const checked = checkTarget('GET', target);
  if (!checked.ok) throw new Error('ledger: target refused');
  const methods = checkOverride('GET', req.headers, checked.query, plan.methodOverride);
  if (!('methods' in methods)) throw new Error('ledger: override refused');
  const decision = plan.decide(methods.methods, checked.path);
  if (decision.isPublic !== isPublic)
    throw new Error(`ledger: ${target} is not ${isPublic ? 'public' : 'authenticated'}`);
  Object.assign(w, {
    asked,
    target: checked,
    method: 'GET',
    methods: methods.methods,
    route: decision.route,
    api: decision.api,
    isPublic,
  });
  const same = (/** @type {number} */ n) => new Array(n).fill(0);
  const headerContext = { peerIp: w.peer, peerTrusted: false, requestId: log.requestId };
  const fresh = (/** @type {number} */ n) => Array.from({ length: n }, () => request(target, true));
  /** @type {Record<string, [(n: number) => unknown[], (x: any) => unknown, number?]>} */
  const drives = {
    admit: [
      fresh,
      (/** @type {{ req: IncomingMessage, res: ServerResponse }} */ x) => {
        const started = performance.now();
        const l = recorder.open(x.res, requestIdOf(x.req.headers['x-request-id']), x.req.method, started);
        return new Walk(x.req, x.res, l, started, false, plan, passed);
      },
    ],
    screenHeaders: [same, () => normalizeIp('127.0.0.1') && checkHeaders(req.rawHeaders, 100)],
    checkIpBudget: [same, () => clientIp(w.peer, undefined, plan.trustedProxies)],
    originalRequest: [same, () => mode.original(req, false)],
    checkRequestTarget: [same, () => checkTarget('GET', target)],
    serveTime: [same, () => checked.path !== TIME_PATH || !plan.timeEndpoint],
    checkMethodOverride: [same, () => checkOverride('GET', req.headers, checked.query, plan.methodOverride)],
    matchRoute: [same, () => plan.decide(methods.methods, checked.path)],
    buildUpstreamHead: [
      same,
      () => forwardHeaders(req.rawHeaders, { peerIp: w.peer, peerTrusted: false, requestId: log.requestId }),
    ],
    passPublic: [same, () => w.isPublic || !w.api],
    authenticate: isPublic
      ? [same, () => undefined]
      : [
          fresh,
          (/** @type {{ req: IncomingMessage }} */ x) => authenticate(x.req.rawHeaders, w),
          path === 'redis' ? 32 : 0,
        ],
    spendIpBudget: [same, () => w.plan.policy.failedAuthLimit === undefined],
    authorizeKey: [
      same,
      () => (isPublic ? undefined : authorize(key, '127.0.0.1', decision.route, plan.unlistedRoutes)),
    ],
    // What proxy mode's pass adds to the upstream head once a key passed (no owner, no assertion: the bench key's).
    pass: [
      (/** @type {number} */ n) => Array.from({ length: n }, () => forwardHeaders(req.rawHeaders, headerContext)),
      (/** @type {{ headers: string[] }} */ head) => (isPublic ? head : head.headers.push('x-api-key-id', 'bench')),
    ],
    responseHead: [same, () => responseHead(upstreamRaw, log.requestId, 200)],
    // The outcome of a forwarded request, on the log its admit opened: metrics and the request line.
    record: [
      (/** @type {number} */ n) =>
        fresh(n).map((x) => {
          const l = recorder.open(x.res, requestIdOf(undefined), 'GET', performance.now());
          Object.assign(l, {
            route: isPublic ? '/public/*' : PATH,
            clientIp: '127.0.0.1',
            ...(isPublic ? { code: 'public' } : { keyId: 'bench', code: 'ok' }),
            status: 200,
            upstreamMs: 0.4,
            durationMs: 0.6,
          });
          return l;
        }),
      (/** @type {import('../../src/observe/request-record.js').RequestLog} */ l) => recorder.record(l),
    ],
  };
  w.head = /** @type {any} */ (
    forwardHeaders(req.rawHeaders, { peerIp: w.peer, peerTrusted: false, requestId: log.requestId })
  );
  // Every step of REQUEST_STEPS is driven (a new step without a drive here stops the ledger), then the response's.
  const names = [...REQUEST_STEPS.map((s) => s.name), 'responseHead', 'record'];
  const rows = [];
  for (const step of names) {
    const drive = drives[step];
    if (drive === undefined) throw new Error(`ledger: no drive for step ${step} (scripts/bench/ledger-steps.mjs)`);
    // A first batch warms the step up (the JIT) and sizes the batches.
    const first = await measure(drive[0], drive[1], drive[2]);
    rows.push({
      step,
      ...(await measure(
        drive[0],
        drive[1],
        drive[2],
        callsFor(first, drive[0] === fresh || step === 'record' ? 20_000 : 200_000),
      )),
    });
  }
  await store.close();
  return rows;
}

const paths = /** @type {Record<string, unknown>} */ ({});
for (const p of /** @type {const} */ (['public', 'embedded', 'redis']))
  if (p !== 'redis' || redisUrl !== '-') paths[p] = await stepsOf(p);
process.stdout.write(`${JSON.stringify({ paths })}\n`);
process.exit(0);
