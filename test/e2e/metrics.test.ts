import { createStreamMetrics, STREAM_CLOSE_REASONS } from '../../src/observe/stream-metrics.js';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES, REASONS } from '../../src/errors.js';
import { createMetrics, LABEL_VALUES } from '../../src/observe/metrics.js';
import { parseExposition, valueOf, type Family } from '../helpers/exposition.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { send } from '../helpers/http.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import {
  mixedTrafficEnv,
  mixedTrafficKeys,
  runMixedTraffic,
  waitFor,
  type MixedResult,
} from '../helpers/mixed-traffic.js';
import { promtoolVersion, recordPromtoolAbsent, runPromtool } from '../helpers/promtool.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { statusOf } from '../helpers/raw-socket.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';

const scrape = async (gate: RunningKeygate) => {
  const res = await fetch(`${gate.adminUrl}/metrics`);
  const text = await res.text();
  return { res, text, families: parseExposition(text) };
};

/** Keygate's own metric families (without Node's default ones) and the labels each may carry. */
const OWN_LABELS: Record<string, string[]> = {
  keygate_requests_total: ['code'],
  keygate_auth_rejections_total: ['code', 'reason'],
  keygate_admitted_tokens_total: ['alg'],
  keygate_auth_duration_seconds: ['outcome', 'le'],
  keygate_upstream_duration_seconds: ['status_class', 'le'],
  keygate_upstream_errors_total: ['cause'],
  keygate_inflight_requests: [],
  keygate_key_cache_events_total: ['event'],
  keygate_redis_errors_total: ['kind'],
  keygate_redis_up: ['connection'],
  keygate_redis_may_evict: [],
  keygate_redis_evicted_keys: [],
  keygate_refused_public_keys_total: [],
  keygate_redis_keystore_emptied_total: [],
  keygate_key_invalidations_total: ['scope'],
  keygate_assertions_signed_total: ['mode'],
  keygate_assertion_cache_hits_total: [],
  keygate_trace_spans_dropped_total: ['reason'],
  keygate_webhook_deliveries_total: ['outcome'],
  keygate_webhook_pending: [],
  keygate_build_info: ['version', 'node_version'],
  keygate_open_streams: [],
  keygate_streams_closed_total: ['reason'],
  keygate_upgrade_refusals_total: ['code'],
};

/** Every value a Keygate label may take: fixed sets, never request data. */
const ALLOWED_VALUES: Record<string, ReadonlySet<string>> = {
  code: new Set(['ok', 'public', 'time', ...ERROR_CODES.map(String)]),
  outcome: new Set([...LABEL_VALUES.authOutcome, ...LABEL_VALUES.webhookOutcome]),
  status_class: new Set(LABEL_VALUES.upstreamStatusClass),
  cause: new Set(LABEL_VALUES.upstreamErrorCause),
  event: new Set(LABEL_VALUES.keyCacheEvent),
  kind: new Set(LABEL_VALUES.redisErrorKind),
  connection: new Set(LABEL_VALUES.redisConnection),
  scope: new Set(LABEL_VALUES.invalidationScope),
  mode: new Set(LABEL_VALUES.assertionMode),
  alg: new Set(['HS256', 'EdDSA', 'ES256']),
  reason: new Set([...Object.keys(REASONS), ...STREAM_CLOSE_REASONS, ...LABEL_VALUES.spanDropReason]),
  version: new Set([
    (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version,
  ]),
  node_version: new Set([process.version]),
};

const seriesIds = (families: Map<string, Family>) =>
  new Set(
    [...families.values()]
      .filter((f) => f.name in OWN_LABELS)
      .flatMap((f) => f.samples.map((s) => `${s.name}${JSON.stringify(s.labels)}`)),
  );

/** promtool lints prom-client's own default gauges; these three lines are the only ones tolerated. */
const PROM_CLIENT_LINT =
  /^nodejs_active_(handles|requests|resources)_total non-counter metrics should not have "_total" suffix$/;

describe('/metrics after a mixed run of good and bad requests (Redis store)', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let before: Map<string, Family>;
  let after: Map<string, Family>;
  let text: string;
  let contentType: string | null;
  let mixed: MixedResult;
  const delta = (name: string, labels: Record<string, string> = {}) =>
    (valueOf(after, name, labels) ?? NaN) - (valueOf(before, name, labels) ?? 0);

  beforeAll(async () => {
    redis = await startRedis({ shared: true });
    await redis.flush();
    upstream = await startRecordingUpstream();
    gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      keys: mixedTrafficKeys(),
      env: mixedTrafficEnv(),
    });
    before = (await scrape(gate)).families;
    mixed = await runMixedTraffic(gate, upstream);
    // A key change published on Redis reaches this instance over pub/sub.
    await gate.keygate.store.putKey(
      makeKey({ apiKey: 'good', secret: 'rotated-secret-0123456789abcdef', id: 'key-good' }),
    );
    await waitFor(
      async () => valueOf((await scrape(gate)).families, 'keygate_key_invalidations_total', { scope: 'key' }) ?? 0,
      (n) => n >= 1,
    );
    await waitFor(
      async () => valueOf((await scrape(gate)).families, 'keygate_inflight_requests'),
      (n) => n === 0,
    );
    const s = await scrape(gate);
    after = s.families;
    text = s.text;
    contentType = s.res.headers.get('content-type');
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('is Prometheus text format 0.0.4 that parses strictly (HELP/TYPE, no duplicate series, cumulative buckets)', () => {
    expect(contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    for (const name of Object.keys(OWN_LABELS)) expect(after.get(name)?.help, name).toMatch(/\S/);
  });

  it('pre-creates one zero series per outcome code and per (code, reason) before any traffic', () => {
    for (const code of ['ok', 'public', 'time', ...ERROR_CODES.map(String)])
      expect(valueOf(before, 'keygate_requests_total', { code }), code).toBe(0);
    for (const [reason, { code }] of Object.entries(REASONS)) {
      expect(valueOf(before, 'keygate_auth_rejections_total', { code: String(code), reason }), reason).toBe(0);
    }
  });

  it('counts every request once in keygate_requests_total{code}, by the code it was answered with', () => {
    for (const code of ['ok', 'public', 'time', ...ERROR_CODES.map(String)]) {
      expect(delta('keygate_requests_total', { code }), `code ${code}`).toBe(mixed.requests[code] ?? 0);
    }
    const sent = Object.values(mixed.requests).reduce((a, b) => a + b, 0);
    const counted = after.get('keygate_requests_total')!.samples.reduce((a, s) => a + s.value, 0);
    expect(counted).toBe(sent);
  });

  it('counts every refusal in keygate_auth_rejections_total{code,reason}', () => {
    for (const [reason, { code }] of Object.entries(REASONS)) {
      expect(delta('keygate_auth_rejections_total', { code: String(code), reason }), `${code}/${reason}`).toBe(
        mixed.rejections[`${code}/${reason}`] ?? 0,
      );
    }
    // No series outside the catalogue pairs.
    expect(after.get('keygate_auth_rejections_total')!.samples).toHaveLength(Object.keys(REASONS).length);
  });

  it('observes auth decisions and upstream responses in histograms with sub-millisecond buckets', () => {
    for (const [outcome, n] of Object.entries(mixed.auth))
      expect(delta('keygate_auth_duration_seconds_count', { outcome }), outcome).toBe(n);
    for (const [status_class, n] of Object.entries(mixed.upstream))
      expect(delta('keygate_upstream_duration_seconds_count', { status_class }), status_class).toBe(n);
    const les = after
      .get('keygate_auth_duration_seconds')!
      .samples.filter((s) => s.name.endsWith('_bucket') && s.labels.le !== '+Inf')
      .map((s) => Number(s.labels.le));
    expect(Math.min(...les)).toBeLessThan(0.0001);
    for (const cause of LABEL_VALUES.upstreamErrorCause)
      expect(delta('keygate_upstream_errors_total', { cause }), cause).toBe(mixed.upstreamErrors[cause] ?? 0);
    // The 504 waited for the 300 ms upstream timeout.
    expect(valueOf(after, 'keygate_upstream_duration_seconds_sum', { status_class: 'timeout' })).toBeGreaterThanOrEqual(
      0.25,
    );
  });

  it('reports key cache, Redis and in-flight state', () => {
    expect(delta('keygate_key_cache_events_total', { event: 'miss' })).toBeGreaterThanOrEqual(4); // good, walled, gone, nobody
    expect(delta('keygate_key_cache_events_total', { event: 'hit' })).toBeGreaterThanOrEqual(5);
    expect(delta('keygate_key_cache_events_total', { event: 'evict_change' })).toBe(1); // the putKey above
    expect(valueOf(after, 'keygate_redis_up', { connection: 'command' })).toBe(1);
    expect(valueOf(after, 'keygate_redis_up', { connection: 'subscriber' })).toBe(1);
    // (Commands tried before the first connect count as errors, hence deltas.)
    expect(delta('keygate_redis_errors_total', { kind: 'timeout' })).toBe(0);
    expect(delta('keygate_redis_errors_total', { kind: 'error' })).toBe(0);
    expect(valueOf(after, 'keygate_key_invalidations_total', { scope: 'key' })).toBeGreaterThanOrEqual(1);
    expect(valueOf(after, 'keygate_key_invalidations_total', { scope: 'all' })).toBeGreaterThanOrEqual(1); // flush on connect
    expect(valueOf(after, 'keygate_inflight_requests')).toBe(0);
  });

  it("includes Node default process metrics under their standard names, and only Keygate's own under keygate_", () => {
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'process_start_time_seconds',
      'process_open_fds',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_p99_seconds',
      'nodejs_gc_duration_seconds',
      'nodejs_version_info',
    ]) {
      expect(after.has(name), name).toBe(true);
    }
    const prefixed = [...after.keys()].filter((n) => n.startsWith('keygate_'));
    expect(new Set(prefixed)).toEqual(new Set(Object.keys(OWN_LABELS)));
    for (const n of after.keys()) expect(n, n).toMatch(/^(keygate|process|nodejs)_/);
  });

  it('keygate_build_info is 1, labelled with the package and Node.js versions', () => {
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    expect(valueOf(after, 'keygate_build_info', { version, node_version: process.version })).toBe(1);
    expect(after.get('keygate_build_info')!.samples).toHaveLength(1);
    expect(text).toMatch(
      new RegExp(
        `^keygate_build_info\\{version="${version.replace(/\./g, '\\.')}",node_version="${process.version.replace(/\./g, '\\.')}"\\} 1$`,
        'm',
      ),
    );
  });

  it('every Keygate label takes a value from a fixed set: no key, path, IP or token', () => {
    const own = createMetrics({ defaultMetrics: false });
    createStreamMetrics(own.registry);
    expect(new Set(own.registry.getMetricsAsArray().map((m) => m.name))).toEqual(new Set(Object.keys(OWN_LABELS)));
    for (const [name, labelNames] of Object.entries(OWN_LABELS)) {
      for (const s of after.get(name)!.samples) {
        expect(Object.keys(s.labels).sort(), s.name).toEqual(
          [...labelNames].sort().filter((l) => l !== 'le' || s.name.endsWith('_bucket')),
        );
        for (const [k, v] of Object.entries(s.labels))
          if (k !== 'le') expect(ALLOWED_VALUES[k]!.has(v), `${s.name} ${k}="${v}"`).toBe(true);
      }
    }
    const labelText = [...after.values()].flatMap((f) => f.samples.flatMap((s) => Object.values(s.labels))).join('\n');
    for (const leak of [
      'good',
      'walled',
      'nobody',
      'key-good',
      '127.0.0.1',
      '/api',
      '/status',
      'page=2',
      ...mixed.tokens,
    ])
      expect(labelText).not.toContain(leak);
  });

  it('adds no series when keys, paths, queries and forwarded IPs are all new (cardinality stays fixed)', async () => {
    const known = seriesIds(after);
    for (let i = 0; i < 20; i++) {
      const r = Math.random().toString(36).slice(2);
      await send(gate.url, `/api/v3/${r}?q=${r}`, {
        headers: { authorization: `Bearer ${r}.${r}.${r}`, 'x-forwarded-for': `10.1.${i}.7` },
      });
      await send(gate.url, `/${r}`);
    }
    await expect.poll(async () => valueOf((await scrape(gate)).families, 'keygate_inflight_requests')).toBe(0);
    const now = (await scrape(gate)).families;
    expect(seriesIds(now)).toEqual(known);
  });

  it('passes promtool check metrics (when promtool is on PATH)', async ({ annotate }) => {
    if (!promtoolVersion()) return recordPromtoolAbsent(annotate, 'promtool check metrics');
    // Keygate's own families must lint clean.
    const ownOnly = text
      .split('\n')
      .filter((l) => !/^(# (HELP|TYPE) )?(process|nodejs)_/.test(l))
      .join('\n');
    const own = runPromtool(['check', 'metrics'], ownOnly);
    expect(own.output.trim()).toBe('');
    expect(own.status).toBe(0);
    // The full scrape parses; the only lint findings are prom-client's own default gauges.
    const full = runPromtool(['check', 'metrics'], text);
    const findings = full.output.trim().split('\n').filter(Boolean);
    for (const f of findings) expect(f).toMatch(PROM_CLIENT_LINT);
  });

  it('counts a request timeout (408) the parser reports as 40800 with a JSON body', async () => {
    // Node checks request timeouts only every 30 s, so drive the clientError path directly on a real connection.
    const serverSide = new Promise<Socket>((resolve) => gate.keygate.proxy.once('connection', resolve));
    const client = connect(gate.port, '127.0.0.1');
    let response = '';
    client.on('data', (c: Buffer) => (response += c.toString()));
    const ended = new Promise((r) => client.on('close', r));
    const socket = await serverSide;
    gate.keygate.proxy.emit(
      'clientError',
      Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }),
      socket,
    );
    await ended;
    expect(statusOf(response)).toBe(408);
    expect(response).toMatch(/connection: close/i);
    expect(response.endsWith('{"code":40800,"message":"Request timeout"}')).toBe(true);
    const now = (await scrape(gate)).families;
    expect(valueOf(now, 'keygate_requests_total', { code: '40800' })).toBe(1);
    expect(valueOf(now, 'keygate_auth_rejections_total', { code: '40800', reason: 'request_timeout' })).toBe(1);
  });
});

describe('/metrics with the embedded memory store', () => {
  it('has no keygate_redis_up series, and the Redis error counters stay at zero', async () => {
    const upstream = await startRecordingUpstream();
    const gate = await startKeygate({ upstream: upstream.url, keys: [makeKey({ apiKey: 'm' })] });
    try {
      await send(gate.url, ACCOUNTS_PATH);
      const { families } = await scrape(gate);
      expect(families.get('keygate_redis_up')?.samples).toEqual([]);
      expect(valueOf(families, 'keygate_redis_errors_total', { kind: 'error' })).toBe(0);
      expect(valueOf(families, 'keygate_requests_total', { code: '40004' })).toBe(1);
    } finally {
      await gate.close();
      await upstream.close();
    }
  });
});
