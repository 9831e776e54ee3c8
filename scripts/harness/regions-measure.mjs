// @ts-check
// The six measurements of the simulated regions (regions-topology.mjs), shared by `npm run regions`, which prints
// them, and the regions test tier, which asserts their properties with smaller counts. Every request goes through
// one pacer per region: at most `perRegionRate` requests a second on average (bursts of a quarter second).
import { randomBytes } from 'node:crypto';
import { token } from './mint.mjs';

export const ACCOUNTS_PATH = '/api/v3/viewer/accounts';

/** @typedef {import('./regions-topology.mjs').RegionsTopology} RegionsTopology */
/** @typedef {import('./regions-topology.mjs').Instance} Instance */
/** @typedef {{ status: number, code?: number, error?: string, sentAt: number, ms: number }} Answer */
/** @typedef {{ apiKey: string, apiSecret: string, home: string }} TestKey */

const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

/** @param {number[]} values @param {number} q */
export function quantile(values, q) {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return /** @type {number} */ (s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]);
}

/**
 * A token bucket per region: `rate` a second, bursts of rate/4.
 * @param {number} rate
 */
export function createPacer(rate) {
  /** @type {Map<string, { tokens: number, at: number }>} */
  const buckets = new Map();
  const burst = Math.max(1, rate / 4);
  /** @param {string} region */
  return async function pace(region) {
    for (;;) {
      const now = performance.now();
      const b = buckets.get(region) ?? { tokens: burst, at: now };
      b.tokens = Math.min(burst, b.tokens + ((now - b.at) * rate) / 1000);
      b.at = now;
      buckets.set(region, b);
      if (b.tokens >= 1) {
        b.tokens -= 1;
        return;
      }
      await sleep(Math.ceil(((1 - b.tokens) * 1000) / rate));
    }
  };
}

/**
 * @param {RegionsTopology} topo
 * @param {{ perRegionRate?: number, timeoutMs?: number }} [options]
 */
export function createClient(topo, options = {}) {
  const pace = createPacer(options.perRegionRate ?? 100);
  const timeoutMs = options.timeoutMs ?? 5_000;
  let sent = 0;
  /**
   * One request with `t` as its bearer token, paced.
   * @param {Instance} instance
   * @param {string} t
   * @returns {Promise<Answer>}
   */
  const send = async (instance, t) => {
    await pace(instance.region);
    sent++;
    const sentAt = Date.now();
    const started = performance.now();
    try {
      const r = await fetch(`${instance.url}${ACCOUNTS_PATH}`, {
        headers: { authorization: `Bearer ${t}` },
        signal: AbortSignal.timeout(timeoutMs),
      });
      const body = await r.text();
      const ms = performance.now() - started;
      if (r.status === 200) return { status: 200, sentAt, ms };
      /** @type {number | undefined} */
      let code;
      try {
        code = JSON.parse(body).code;
      } catch {
        code = undefined;
      }
      return { status: r.status, ...(code !== undefined && { code }), sentAt, ms };
    } catch (err) {
      // No answer: the cause's code (a timeout, a refused or reset connection) is kept for the tables.
      const e = /** @type {{ name?: string, cause?: { code?: string } }} */ (err);
      return { status: 0, error: e.cause?.code ?? e.name ?? 'error', sentAt, ms: performance.now() - started };
    }
  };
  /**
   * A management API call at `instance` (not paced: a handful per measurement).
   * @param {Instance} instance
   * @param {string} method
   * @param {string} path
   * @param {unknown} [body]
   */
  const manage = async (instance, method, path, body) => {
    const r = await fetch(`${instance.managementUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${topo.managementToken}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs * 4),
    });
    return { status: r.status, body: await r.text() };
  };
  /**
   * A GET of `path` without a token (paced), answered in ms.
   * @param {Instance} instance
   * @param {string} path
   */
  const get = async (instance, path) => {
    await pace(instance.region);
    sent++;
    const started = performance.now();
    const r = await fetch(`${instance.url}${path}`, { signal: AbortSignal.timeout(timeoutMs) });
    await r.text();
    return { status: r.status, ms: performance.now() - started };
  };
  return { send, manage, get, sentCount: () => sent };
}

/** @typedef {ReturnType<typeof createClient>} Client */

/**
 * Refusals by "code reason" from an instance's /metrics.
 * @param {Instance} instance
 * @returns {Promise<Map<string, number>>}
 */
export async function rejections(instance) {
  const text = await fetch(`${instance.adminUrl}/metrics`, { signal: AbortSignal.timeout(5_000) }).then((r) =>
    r.text(),
  );
  /** @type {Map<string, number>} */
  const out = new Map();
  for (const m of text.matchAll(/^keygate_auth_rejections_total\{([^}]*)\} (\S+)$/gm)) {
    const labels = Object.fromEntries([...(m[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    out.set(`${labels.code} ${labels.reason}`, Number(m[2]));
  }
  return out;
}

/**
 * The refusals counted between two readings of every instance, summed, without zeros.
 * @param {Map<string, number>[]} before
 * @param {Map<string, number>[]} after
 */
export function rejectionDelta(before, after) {
  /** @type {Record<string, number>} */
  const out = {};
  after.forEach((m, i) => {
    for (const [k, v] of m) {
      const d = v - (before[i]?.get(k) ?? 0);
      if (d > 0) out[k] = (out[k] ?? 0) + d;
    }
  });
  return out;
}

/** @param {Instance[]} instances */
export const readRejections = (instances) => Promise.all(instances.map(rejections));

/**
 * Makes keys (HS256, accounts:read) homed in `home` (where regions are off, the field is left out).
 * @param {RegionsTopology} topo
 * @param {string} prefix
 * @param {number} count
 * @param {string} home
 * @param {Record<string, unknown>} [extra] more fields (a rateLimit)
 * @returns {Promise<TestKey[]>}
 */
export async function makeKeys(topo, prefix, count, home, extra = {}) {
  const keys = Array.from({ length: count }, (_, i) => ({
    apiKey: `${prefix}-${i}-${randomBytes(3).toString('hex')}`,
    apiSecret: randomBytes(24).toString('base64url'),
    home,
  }));
  await topo.importKeys(
    keys.map((k) => ({
      apiKey: k.apiKey,
      apiSecret: k.apiSecret,
      scopes: ['accounts:read'],
      ...(topo.regionsOn && { home: k.home }),
      ...extra,
    })),
  );
  return keys;
}

/** @param {TestKey} key */
export const fresh = (key) => token(key.apiKey, key.apiSecret);

/**
 * Waits until every instance answers 200 for a fresh token of `key` (the key has reached every region's copy).
 * @param {Client} client
 * @param {Instance[]} instances
 * @param {TestKey} key
 * @param {number} timeoutMs
 */
export async function waitServed(client, instances, key, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (const i of instances) {
    for (;;) {
      const a = await client.send(i, fresh(key));
      if (a.status === 200) break;
      if (Date.now() > deadline)
        throw new Error(`${i.name} still answers ${a.status} ${a.code ?? ''} for ${key.apiKey}`);
      await sleep(100);
    }
  }
}

/**
 * 1. Revocation: `count` keys revoked one after another through the management API of an instance in `region`;
 * for each, probes at every instance send a fresh token every `probeEveryMs` from just before the revoke until
 * that instance refuses. Per instance: the time from the revoke's acknowledgement to the send time of the first
 * refused probe (negative: refused before the acknowledgement arrived).
 * @param {RegionsTopology} topo
 * @param {Client} client
 * @param {{ region: string, count: number, probeEveryMs?: number, maxWaitMs?: number }} options
 */
export async function measureRevocation(topo, client, options) {
  const { region, count, probeEveryMs = 5, maxWaitMs = 5_000 } = options;
  const home = topo.keystoreRegion;
  const keys = await makeKeys(topo, 'revoke', count, region === home ? home : region);
  const revoker = /** @type {Instance} */ (topo.instances.find((i) => i.region === region));
  await waitServed(client, topo.instances, /** @type {TestKey} */ (keys.at(-1)), 30_000);
  /** @type {Record<string, number[]>} */
  const byInstance = Object.fromEntries(topo.instances.map((i) => [i.name, []]));
  /** @type {string[]} */
  const failures = [];
  let probes = 0;
  let retried = 0;
  for (const key of keys) {
    const started = Date.now();
    /** @type {Map<string, number>} first refused send time per instance */
    const refusedAt = new Map();
    let stop = false;
    const loops = topo.instances.map(async (i) => {
      /** @type {Promise<void>[]} */
      const inFlight = [];
      let pending = 0;
      while (!stop && !refusedAt.has(i.name) && Date.now() - started < maxWaitMs) {
        // Every 5 ms, but no backlog: while the pacer holds probes back, a new one waits for them.
        if (pending >= 3) {
          await sleep(probeEveryMs);
          continue;
        }
        pending++;
        inFlight.push(
          client.send(i, fresh(key)).then((a) => {
            pending--;
            probes++;
            if (a.status === 404 && a.code === 10013) {
              const prev = refusedAt.get(i.name);
              if (prev === undefined || a.sentAt < prev) refusedAt.set(i.name, a.sentAt);
            }
          }),
        );
        await sleep(probeEveryMs);
      }
      await Promise.all(inFlight);
    });
    await sleep(30);
    // A 503 changed nothing (the store did not answer in time): the revoke is sent again, timed from its acknowledgement.
    // A 409 after a 503: the first attempt was written but not confirmed in time; this answer acknowledges it.
    let r = { status: 0, body: '' };
    let attempts = 0;
    while (attempts++ < 5 && r.status !== 200 && r.status !== 409)
      r = await client.manage(revoker, 'POST', `/v1/keys/${key.apiKey}/revoke`, { reason: 'regions demo' });
    const ackAt = Date.now();
    if (attempts > 2) retried++;
    if (r.status !== 200 && r.status !== 409) failures.push(`revoke ${key.apiKey}: ${r.status} ${r.body}`);
    await Promise.all(loops);
    stop = true;
    for (const i of topo.instances) {
      const at = refusedAt.get(i.name);
      if (at === undefined) failures.push(`${i.name} never refused ${key.apiKey} within ${maxWaitMs} ms`);
      else byInstance[i.name]?.push(at - ackAt);
    }
  }
  /** @type {Record<string, number[]>} */
  const byRegion = {};
  for (const i of topo.instances) (byRegion[i.region] ??= []).push(...(byInstance[i.name] ?? []));
  return {
    keystoreRegion: topo.keystoreRegion,
    revokedIn: region,
    count,
    probes,
    retried,
    failures,
    byRegion: Object.fromEntries(
      Object.entries(byRegion).map(([r, v]) => [
        r,
        {
          max: Math.max(...v),
          median: quantile(v, 0.5),
          delayFromKeystoreMs: topo.net.delayMs(topo.keystoreRegion, r),
        },
      ]),
    ),
  };
}

/**
 * 2. Replay: each of `tokens` tokens sent to every instance at the same moment; counts the 200s per token.
 * `during(i)` runs once when token i is about to go (a fault injected mid-run).
 * @param {Client} client
 * @param {Instance[]} instances
 * @param {TestKey[]} keys the tokens are signed for these keys in turn
 * @param {number} tokens
 * @param {{ during?: { at: number, action: () => Promise<void> } }} [options]
 */
export async function measureReplay(client, instances, keys, tokens, options = {}) {
  let duplicates = 0;
  let admitted = 0;
  /** @type {Record<string, number>} */
  const answers = {};
  const concurrency = 4;
  let next = 0;
  /** @type {Promise<void> | undefined} */
  let fault;
  const worker = async () => {
    while (next < tokens) {
      const n = next++;
      if (options.during && n === options.during.at) fault = options.during.action();
      const t = fresh(/** @type {TestKey} */ (keys[n % keys.length]));
      const got = await Promise.all(instances.map((i) => client.send(i, t)));
      const ok = got.filter((a) => a.status === 200).length;
      if (ok > 1) duplicates++;
      if (ok >= 1) admitted++;
      for (const a of got) answers[label(a)] = (answers[label(a)] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  await fault;
  return { tokens, admitted, duplicates, answers };
}

/**
 * 3. Limits: one key (rate/s, burst), one sender per instance at `senderRate`/s for `seconds`. The exact figure:
 * burst + rate × the time between the first and the last request sent.
 * @param {RegionsTopology} topo
 * @param {Client} client
 * @param {{ rate: number, burst: number, senderRate: number, seconds: number, home: string }} options
 */
export async function measureLimits(topo, client, options) {
  const { rate, burst, senderRate, seconds, home } = options;
  const [key] = await makeKeys(topo, 'limit', 1, home, { rateLimit: { rate: `${rate}/s`, burst } });
  const k = /** @type {TestKey} */ (key);
  await waitServed(client, topo.instances, k, 30_000);
  // Let the bucket fill again after the waits above.
  await sleep(Math.ceil((burst / rate) * 1000) + 500);
  let first = Infinity;
  let last = 0;
  let ok = 0;
  let limited = 0;
  /** @type {Answer[]} */
  const others = [];
  const start = Date.now();
  const interval = 1000 / senderRate;
  await Promise.all(
    topo.instances.map(async (i, idx) => {
      /** @type {Promise<void>[]} */
      const inFlight = [];
      // Senders start spread over one interval, as independent clients would.
      let due = start + (idx * interval) / topo.instances.length;
      while (due < start + seconds * 1000) {
        const wait = due - Date.now();
        if (wait > 0) await sleep(wait);
        first = Math.min(first, Date.now());
        last = Math.max(last, Date.now());
        inFlight.push(
          client.send(i, fresh(k)).then((a) => {
            if (a.status === 200) ok++;
            else if (a.status === 429) limited++;
            else others.push(a);
          }),
        );
        due += interval;
      }
      await Promise.all(inFlight);
    }),
  );
  const spanS = (last - first) / 1000;
  const exact = burst + rate * spanS;
  return {
    rate,
    burst,
    senders: topo.instances.length,
    senderRate,
    seconds: spanS,
    admitted: ok,
    limited,
    other: tally(others),
    exact,
    errorPct: ((ok - exact) / exact) * 100,
  };
}

/**
 * Sends fresh tokens of `key` at `instance` every `everyMs` until stopped; returns every answer.
 * @param {Client} client
 * @param {Instance} instance
 * @param {TestKey} key
 * @param {number} everyMs
 */
export function steady(client, instance, key, everyMs) {
  /** @type {Array<Answer & { token: string }>} */
  const answers = [];
  let running = true;
  /** @type {Promise<void>[]} */
  const inFlight = [];
  const loop = (async () => {
    while (running) {
      const t = fresh(key);
      inFlight.push(client.send(instance, t).then((a) => void answers.push({ ...a, token: t })));
      await sleep(everyMs);
    }
  })();
  return {
    answers,
    stop: async () => {
      running = false;
      await loop;
      await Promise.all(inFlight);
      return answers;
    },
  };
}

/**
 * From `from` on, the send time of the first answer after which nothing is admitted (no 200 came later); with no
 * 200 at all, the first answer's. Null: a 200 came last (or no answer).
 * @param {Answer[]} answers
 * @param {number} from
 */
export function allRefusedFrom(answers, from) {
  const after = answers.filter((a) => a.sentAt >= from).sort((a, b) => a.sentAt - b.sentAt);
  let at = null;
  for (const a of after) {
    if (a.status === 200) at = null;
    else at ??= a.sentAt;
  }
  return at;
}

/** @param {Answer[]} answers */
export function p99(answers) {
  return quantile(
    answers.filter((a) => a.status === 200).map((a) => a.ms),
    0.99,
  );
}

/**
 * "200", "404 10013", "0 UND_ERR_CONNECT_TIMEOUT" (no answer, and why).
 * @param {{ status: number, code?: number, error?: string }} a
 */
export const label = (a) => `${a.status}${a.code ? ` ${a.code}` : ''}${a.error ? ` ${a.error}` : ''}`;

/**
 * @param {Answer[]} answers
 * @returns {Record<string, number>}
 */
export function tally(answers) {
  /** @type {Record<string, number>} */
  const out = {};
  for (const a of answers) {
    out[label(a)] = (out[label(a)] ?? 0) + 1;
  }
  return out;
}

/**
 * 4. Partition: `region` cut from the other regions for `seconds`. Traffic at every instance: at the cut
 * region's instances for a key homed there; at the others, one key homed at home and one homed in the cut region.
 * After the heal: tokens the cut region admitted before the cut are sent again, and a key revoked during the cut
 * (at another region) is tried everywhere.
 * @param {RegionsTopology} topo
 * @param {Client} client
 * @param {{ region: string, seconds: number, everyMs?: number, settleMs?: number }} options
 */
export async function measurePartition(topo, client, options) {
  const { region, seconds, everyMs = 100, settleMs = 15_000 } = options;
  const others = topo.net.regions.filter((r) => r !== region);
  const other = /** @type {string} */ (others[0]);
  const [cutKey, otherKey, revokedKey] = [
    ...(await makeKeys(topo, 'cut-home', 1, region)),
    ...(await makeKeys(topo, 'other-home', 1, other)),
    ...(await makeKeys(topo, 'revoked-in-cut', 1, other)),
  ];
  for (const k of [cutKey, otherKey, revokedKey])
    await waitServed(client, topo.instances, /** @type {TestKey} */ (k), 30_000);
  const cutGates = topo.instances.filter((i) => i.region === region);
  const otherGates = topo.instances.filter((i) => i.region !== region);
  const flows = [
    ...cutGates.map((i) => ({
      i,
      what: 'cut region, own key',
      s: steady(client, i, /** @type {TestKey} */ (cutKey), everyMs),
    })),
    ...otherGates.map((i) => ({
      i,
      what: 'elsewhere, key homed elsewhere',
      s: steady(client, i, /** @type {TestKey} */ (otherKey), everyMs),
    })),
    ...otherGates.map((i) => ({
      i,
      what: 'elsewhere, key homed in cut region',
      s: steady(client, i, /** @type {TestKey} */ (cutKey), everyMs),
    })),
  ];
  await sleep(2_000);
  const before = await readRejections(topo.instances);
  const cutAt = Date.now();
  await topo.net.isolate(region);
  await sleep(500);
  const revokeWhere = /** @type {Instance} */ (otherGates[0]);
  // Until acknowledged (a 503 changed nothing; a 409 after one: the earlier attempt was written after all).
  let revoke = { status: 0, body: '' };
  while (Date.now() - cutAt < seconds * 1000 - 250 && revoke.status !== 200 && revoke.status !== 409) {
    revoke = await client.manage(revokeWhere, 'POST', `/v1/keys/${revokedKey?.apiKey}/revoke`, {});
    if (revoke.status !== 200 && revoke.status !== 409) await sleep(250);
  }
  await sleep(Math.max(0, cutAt + seconds * 1000 - Date.now()));
  const duringRejections = rejectionDelta(before, await readRejections(topo.instances));
  const healAt = Date.now();
  await topo.net.rejoin(region);
  await sleep(settleMs);
  const answers = await Promise.all(flows.map((f) => f.s.stop()));
  const recoveredAfterMs = await recovered(client, topo.instances, /** @type {TestKey} */ (cutKey), healAt, 60_000);
  /** @param {Array<Answer & { token: string }>} list @param {number} from @param {number} to */
  const within = (list, from, to) => list.filter((a) => a.sentAt >= from && a.sentAt < to);
  const rows = flows.map((f, n) => {
    const list = /** @type {Array<Answer & { token: string }>} */ (answers[n]);
    const firstAll503 = allRefusedFrom(within(list, cutAt, healAt), cutAt);
    return {
      instance: f.i.name,
      what: f.what,
      before: tally(within(list, 0, cutAt)),
      during: tally(within(list, cutAt, healAt)),
      after: tally(within(list, healAt, Infinity)),
      all503AfterMs: firstAll503 === null ? null : firstAll503 - cutAt,
      p99BeforeMs: p99(within(list, 0, cutAt)),
      p99DuringMs: p99(within(list, cutAt, healAt)),
    };
  });
  // Tokens the cut region admitted before the cut, sent again now: refused.
  const admittedBefore = flows
    .flatMap((f, n) => (f.i.region === region ? /** @type {Array<Answer & { token: string }>} */ (answers[n]) : []))
    .filter((a) => a.status === 200 && a.sentAt < cutAt)
    .slice(-20);
  /** @type {Record<string, number>} */
  const replayed = {};
  for (const a of admittedBefore)
    for (const i of topo.instances) {
      const k = label(await client.send(i, a.token));
      replayed[k] = (replayed[k] ?? 0) + 1;
    }
  /** @type {Record<string, string>} */
  const revokedAfter = {};
  for (const i of topo.instances) {
    revokedAfter[i.name] = label(await client.send(i, fresh(/** @type {TestKey} */ (revokedKey))));
  }
  return {
    region,
    seconds,
    revokeDuringCut: revoke.status,
    rows,
    rejectionsDuringCut: duringRejections,
    recoveredAfterHealMs: recoveredAfterMs,
    replayedAfterHeal: replayed,
    revokedAfterHeal: revokedAfter,
  };
}

/**
 * Per instance, ms from `since` until it admits a fresh token of `key` again (polled; null: not within `timeoutMs`).
 * @param {Client} client
 * @param {Instance[]} instances
 * @param {TestKey} key
 * @param {number} since
 * @param {number} timeoutMs
 * @returns {Promise<Record<string, number | null>>}
 */
async function recovered(client, instances, key, since, timeoutMs) {
  /** @type {Record<string, number | null>} */
  const out = {};
  await Promise.all(
    instances.map(async (i) => {
      const deadline = Date.now() + timeoutMs;
      out[i.name] = null;
      while (Date.now() < deadline) {
        if ((await client.send(i, fresh(key))).status === 200) {
          out[i.name] = Date.now() - since;
          return;
        }
        await sleep(250);
      }
    }),
  );
  return out;
}

/**
 * 5. The keystore master's region cut off for `seconds`: its instances' answers, when the other regions' sentinels
 * name a new master, a key change made there meanwhile, and after the heal every revoked key tried everywhere.
 * @param {RegionsTopology} topo
 * @param {Client} client
 * @param {{ seconds: number, everyMs?: number, settleMs?: number }} options
 */
export async function measureKeystoreCut(topo, client, options) {
  const { seconds, everyMs = 100, settleMs = 20_000 } = options;
  const region = topo.keystoreRegion;
  const other = /** @type {string} */ (topo.net.regions.find((r) => r !== region));
  const oldMaster = await topo.keystoreMaster(other);
  const [live, revokedBefore, revokedDuring] = [
    ...(await makeKeys(topo, 'ks-live', 1, other)),
    ...(await makeKeys(topo, 'ks-revoked-before', 1, other)),
    ...(await makeKeys(topo, 'ks-revoked-during', 1, other)),
  ];
  for (const k of [live, revokedBefore, revokedDuring])
    await waitServed(client, topo.instances, /** @type {TestKey} */ (k), 30_000);
  const otherGate = /** @type {Instance} */ (topo.instances.find((i) => i.region === other));
  const r0 = await client.manage(otherGate, 'POST', `/v1/keys/${revokedBefore?.apiKey}/revoke`, {});
  const flows = topo.instances.map((i) => ({ i, s: steady(client, i, /** @type {TestKey} */ (live), everyMs) }));
  await sleep(2_000);
  const before = await readRejections(topo.instances);
  const cutAt = Date.now();
  await topo.net.isolate(region);
  let promotedAt = null;
  let newMaster = oldMaster;
  /** @type {{ status: number, body: string } | undefined} */
  let revokeDuring;
  let revokeAckAt = null;
  while (Date.now() - cutAt < seconds * 1000) {
    if (promotedAt === null) {
      // Any sentinel outside the cut region that answers (a busy machine can make one slow).
      for (const r of topo.net.regions.filter((x) => x !== region)) {
        const named = await topo.keystoreMaster(r).catch(() => oldMaster);
        if (named !== oldMaster) {
          newMaster = named;
          promotedAt = Date.now();
          break;
        }
      }
    } else if (revokeDuring === undefined || (revokeDuring.status !== 200 && revokeDuring.status !== 409)) {
      revokeDuring = await client.manage(otherGate, 'POST', `/v1/keys/${revokedDuring?.apiKey}/revoke`, {});
      if (revokeDuring.status === 200 || revokeDuring.status === 409) revokeAckAt = Date.now();
    }
    await sleep(100);
  }
  const duringRejections = rejectionDelta(before, await readRejections(topo.instances));
  const healAt = Date.now();
  await topo.net.rejoin(region);
  await sleep(settleMs);
  const answers = await Promise.all(flows.map((f) => f.s.stop()));
  const recoveredAfterMs = await recovered(client, topo.instances, /** @type {TestKey} */ (live), healAt, 60_000);
  /** @param {Answer[]} list @param {number} from @param {number} to */
  const within = (list, from, to) => list.filter((a) => a.sentAt >= from && a.sentAt < to);
  const rows = flows.map((f, n) => {
    const list = /** @type {Answer[]} */ (answers[n]);
    const during = within(list, cutAt, healAt);
    const firstAll503 = allRefusedFrom(during, cutAt);
    const first503 = during.find((a) => a.status === 503);
    const last503 = [...list].reverse().find((a) => a.status === 503);
    const lastOkAfterCut = [...during].reverse().find((a) => a.status === 200);
    return {
      instance: f.i.name,
      before: tally(within(list, 0, cutAt)),
      during: tally(during),
      after: tally(within(list, healAt, Infinity)),
      first503AfterMs: first503 ? first503.sentAt - cutAt : null,
      all503AfterMs: firstAll503 === null ? null : firstAll503 - cutAt,
      last503AfterHealMs: last503 && last503.sentAt >= healAt ? last503.sentAt - healAt : null,
      servedAgainDuringCutAfterMs:
        lastOkAfterCut && first503 && lastOkAfterCut.sentAt > first503.sentAt ? lastOkAfterCut.sentAt - cutAt : null,
    };
  });
  /** @type {Record<string, string>} */
  const revokedAfter = {};
  for (const i of topo.instances)
    for (const [what, k] of /** @type {const} */ ([
      ['before', revokedBefore],
      ['during', revokedDuring],
    ])) {
      revokedAfter[`${i.name} ${what}`] = label(await client.send(i, fresh(/** @type {TestKey} */ (k))));
    }
  return {
    region,
    seconds,
    oldMaster,
    newMaster,
    promotedAfterMs: promotedAt === null ? null : promotedAt - cutAt,
    revokeBeforeCut: r0.status,
    revokeDuringCut: revokeDuring?.status ?? null,
    revokeDuringAckAfterMs: revokeAckAt === null ? null : revokeAckAt - cutAt,
    rows,
    rejectionsDuringCut: duringRejections,
    recoveredAfterHealMs: recoveredAfterMs,
    revokedAfterHeal: revokedAfter,
    keystoreMasterAfterHeal: await topo.keystoreMaster(region).catch((e) => String(e)),
  };
}

/**
 * 6. Latency: p50 and p99 at every instance, for a key homed in the instance's region and for one homed in each
 * other region, and for /api/v3/time (answered by Keygate itself: the floor).
 * @param {RegionsTopology} topo
 * @param {Client} client
 * @param {{ requests: number }} options requests per instance and key
 */
export async function measureLatency(topo, client, options) {
  const keys = new Map();
  for (const r of topo.net.regions) keys.set(r, /** @type {TestKey} */ ((await makeKeys(topo, `lat-${r}`, 1, r))[0]));
  for (const k of keys.values()) await waitServed(client, topo.instances, k, 30_000);
  /** @type {Array<{ instance: string, home: string, p50: number, p99: number, rttToHomeMs: number }>} */
  const rows = [];
  await Promise.all(
    topo.instances.map(async (i) => {
      for (const [home, key] of keys) {
        /** @type {number[]} */
        const ms = [];
        for (let n = 0; n < options.requests; n++) {
          const a = await client.send(i, fresh(key));
          if (a.status === 200) ms.push(a.ms);
        }
        rows.push({
          instance: i.name,
          home: home === i.region ? `${home} (at home)` : home,
          p50: quantile(ms, 0.5),
          p99: quantile(ms, 0.99),
          rttToHomeMs: 2 * topo.net.delayMs(i.region, home),
        });
      }
      /** @type {number[]} */
      const floor = [];
      for (let n = 0; n < options.requests; n++) {
        floor.push((await client.get(i, '/api/v3/time')).ms);
      }
      rows.push({
        instance: i.name,
        home: '/api/v3/time (no key)',
        p50: quantile(floor, 0.5),
        p99: quantile(floor, 0.99),
        rttToHomeMs: 0,
      });
    }),
  );
  rows.sort((a, b) => a.instance.localeCompare(b.instance) || a.home.localeCompare(b.home));
  return { rows };
}
