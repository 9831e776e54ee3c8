import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseExposition, sampleNames, type Family, type Sample } from '../helpers/exposition.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { bearer, send } from '../helpers/http.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { MIXED_SECRET, mixedTrafficEnv, mixedTrafficKeys, runMixedTraffic } from '../helpers/mixed-traffic.js';
import { token } from '../helpers/tokens.js';
import { promtoolVersion, recordPromtoolAbsent, runPromtool } from '../helpers/promtool.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { repoRoot } from '../helpers/deploy.js';
import { headingAnchors, readDoc } from '../helpers/markdown.js';
import { freePort } from '../helpers/free-port.js';
import pino from 'pino';
import { loadConfig } from '../../src/config/load-config.js';
import { createKeygate } from '../../src/create-keygate.js';
import { REASONS } from '../../src/errors.js';
import { NOT_READY_REASONS } from '../../src/observe/readiness.js';

const root = new URL('../../', import.meta.url);
const ALERTS = 'deploy/prometheus/alerts.yml';
const ALERT_TESTS = 'deploy/prometheus/alerts.test.yml';
const DASHBOARD = 'deploy/grafana/keygate-dashboard.json';
const read = (path: string) => readFileSync(new URL(path, root), 'utf8');

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
const rules = (parseYaml(read(ALERTS)) as { groups: Array<{ rules: Rule[] }> }).groups.flatMap((g) => g.rules);
const ruleTests = parseYaml(read(ALERT_TESTS)) as {
  tests: Array<{
    input_series: Array<{ series: string }>;
    alert_rule_test: Array<{ alertname: string; exp_alerts: unknown[] }>;
  }>;
};
const dashboard = JSON.parse(read(DASHBOARD)) as { panels: unknown[]; templating: { list: unknown[] } };

/** Every "expr" string (panel targets) and template query in the dashboard. */
function dashboardExprs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const n of node) dashboardExprs(n, out);
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if ((k === 'expr' || k === 'definition') && typeof v === 'string') out.push(v);
      else dashboardExprs(v, out);
    }
  }
  return out;
}

const exprSources: Array<[string, string]> = [
  ...dashboardExprs(dashboard).map((e): [string, string] => [DASHBOARD, e]),
  ...rules.map((r): [string, string] => [`${ALERTS} ${r.alert}`, r.expr]),
  ...ruleTests.tests.flatMap((t) => t.input_series.map((s): [string, string] => [ALERT_TESTS, s.series])),
];

/** Labels Prometheus adds at scrape time, and dashboard variables. */
const TARGET_LABELS = new Set(['job', 'instance', 'le']);

describe('dashboard and alert rules match the real /metrics', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let families: Map<string, Family>;
  let names: Set<string>;
  const seriesOf = (name: string): Sample[] =>
    [...families.values()].flatMap((f) => f.samples.filter((s) => s.name === name));

  beforeAll(async () => {
    redis = await startRedis(); // our own: frozen below so Redis-failure series exist too
    upstream = await startRecordingUpstream();
    gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      keys: mixedTrafficKeys(),
      env: mixedTrafficEnv(),
    });
    // The regions' metrics exist only with regions on (docs/regions.md): registered here so the scrape has them.
    gate.keygate.metrics.enableRegions(() => 0.25);
    await runMixedTraffic(gate, upstream);
    redis.pause();
    const frozen = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', MIXED_SECRET)) }).finally(() =>
      redis.resume(),
    );
    expect(frozen.status).toBe(503); // outcome="error", reason store_unavailable, redis_errors{kind="timeout"}
    families = parseExposition(await (await fetch(`${gate.adminUrl}/metrics`)).text());
    names = sampleNames(families);
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it.each(exprSources)('%s: every metric, label and label value in %s exists in a scrape', (_where, expr) => {
    // Keygate's own metrics, and the process_*/nodejs_* defaults it exports under their standard names.
    const refs = [...expr.matchAll(/\b((?:keygate|process|nodejs)_[a-zA-Z0-9_]+)(\{[^}]*\})?/g)];
    expect(refs.length, 'expression uses no Keygate metric').toBeGreaterThan(0);
    const labelsSeen = new Set<string>(TARGET_LABELS);
    for (const [, name, matchers] of refs) {
      expect(names.has(name as string), `${name} is not in /metrics`).toBe(true);
      const series = seriesOf(name as string);
      for (const s of series) for (const l of Object.keys(s.labels)) labelsSeen.add(l);
      for (const [, label, op, value] of (matchers ?? '').matchAll(
        /([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"/g,
      )) {
        if (TARGET_LABELS.has(label as string)) continue;
        const values = series.map((s) => s.labels[label as string]).filter((v): v is string => v !== undefined);
        expect(values.length, `${name} has no label ${label}`).toBeGreaterThan(0);
        if (op === '=') expect(values, `${name}{${label}="${value}"} matches no series`).toContain(value);
        if (op === '=~')
          expect(
            values.some((v) => new RegExp(`^(?:${value})$`).test(v)),
            `${name}{${label}=~"${value}"} matches no series`,
          ).toBe(true);
      }
    }
    for (const [, list] of expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)) {
      for (const label of (list as string)
        .split(',')
        .map((l) => l.trim())
        .filter(Boolean))
        expect(labelsSeen.has(label), `grouping by unknown label ${label}`).toBe(true);
    }
  });

  it('the dashboard shows request rate by code, rejection reasons, latency quantiles, cache hit ratio and Redis health', () => {
    const all = dashboardExprs(dashboard).join('\n');
    expect(all).toMatch(/sum by \(code\) \(rate\(keygate_requests_total/);
    expect(all).toMatch(/sum by \(code, reason\) \(rate\(keygate_auth_rejections_total/);
    for (const q of ['0.5', '0.9', '0.99'])
      expect(all).toContain(`histogram_quantile(${q}, sum by (le) (rate(keygate_auth_duration_seconds_bucket`);
    expect(all).toMatch(
      /keygate_key_cache_events_total\{[^}]*event="hit"[^}]*\}.*\/.*keygate_key_cache_events_total\{[^}]*event=~"hit\|miss"/,
    );
    expect(all).toContain('keygate_redis_up{');
    expect(all).toContain('keygate_redis_errors_total{');
    // Node's defaults under their standard names, and which builds are running.
    for (const m of [
      'process_cpu_seconds_total{',
      'process_resident_memory_bytes{',
      'nodejs_eventloop_lag_p99_seconds{',
      'count by (version, node_version) (keygate_build_info{',
    ])
      expect(all).toContain(m);
    expect(all).not.toMatch(/keygate_(process|nodejs)_/);
  });

  it('alerts cover 5xx rate, Redis down, replay and signature-failure spikes, overload shedding, p99 auth latency and an unreachable upstream, each with a firing unit test', () => {
    expect(rules.map((r) => r.alert).sort()).toEqual(
      [
        'KeygateAuthLatencyHigh',
        'KeygateHigh5xxRate',
        'KeygateHomeUnreachable',
        'KeygateKeystoreStale',
        'KeygateOverloaded',
        'KeygateRedisDown',
        'KeygateRedisSubscriberDown',
        'KeygateReplaySpike',
        'KeygateSignatureFailureSpike',
        'KeygateUpstreamUnreachable',
      ].sort(),
    );
    const fired = new Set(
      ruleTests.tests.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)),
    );
    const quiet = new Set(
      ruleTests.tests.flatMap((t) =>
        t.alert_rule_test.filter((a) => a.exp_alerts.length === 0).map((a) => a.alertname),
      ),
    );
    for (const r of rules) {
      expect(fired.has(r.alert), `${r.alert} has no test where it fires`).toBe(true);
      expect(quiet.has(r.alert), `${r.alert} has no test where it stays quiet`).toBe(true);
      expect(['critical', 'warning']).toContain(r.labels?.severity);
      expect(r.annotations?.summary, r.alert).toMatch(/\S/);
      expect(r.for, r.alert).toMatch(/^\d+m$/);
    }
    expect(read(ALERTS)).toMatch(/histogram_quantile\(0\.99,[\s\S]*keygate_auth_duration_seconds_bucket/);
  });

  it('promtool: rules check, rule unit tests, and every dashboard query parses (when promtool is on PATH)', async ({
    annotate,
  }) => {
    if (!promtoolVersion()) return recordPromtoolAbsent(annotate, 'promtool check rules / test rules');
    const check = runPromtool(['check', 'rules', new URL(ALERTS, root).pathname]);
    expect(check.output).toContain('SUCCESS');
    expect(check.status).toBe(0);
    const unit = runPromtool(['test', 'rules', new URL(ALERT_TESTS, root).pathname]);
    expect(unit.output).toContain('SUCCESS');
    expect(unit.status).toBe(0);
    // Dashboard queries as recording rules, Grafana variables replaced, so promtool parses each one.
    const dir = mkdtempSync(join(tmpdir(), 'keygate-dash-'));
    const asRules = {
      groups: [
        {
          name: 'dashboard',
          rules: dashboardExprs(dashboard)
            .filter((e) => !e.startsWith('label_values('))
            .map((e, i) => ({
              record: `keygate:dashboard_query_${i}`,
              expr: e.replaceAll('$__rate_interval', '5m').replaceAll('$job', '.*').replaceAll('$instance', '.*'),
            })),
        },
      ],
    };
    const file = join(dir, 'dashboard-rules.json');
    writeFileSync(file, JSON.stringify(asRules));
    const dash = runPromtool(['check', 'rules', file]);
    expect(dash.output).toContain(`SUCCESS: ${asRules.groups[0]!.rules.length} rules found`);
    expect(dash.status).toBe(0);
  });
});

// Issue 35 item 9: the overview's "Auth p99" counted outcome="error" (Redis unavailable, fast 503s)
// while the latency panel and the KeygateAuthLatencyHigh alert did not. One definition everywhere.
describe('auth latency has one definition: allow/deny decisions, outcome="error" excluded', () => {
  const rules = read('deploy/prometheus/alerts.yml');
  const exprs = [
    ...dashboardExprs(dashboard.panels),
    ...[...rules.matchAll(/expr:\s*\|?\s*([^\n]+(?:\n\s{10,}[^\n]+)*)/g)].map((m) => m[1]!),
  ];
  const latency = exprs.filter((e) => e.includes('keygate_auth_duration_seconds_bucket'));
  it('finds the latency queries', () => {
    expect(latency.length).toBeGreaterThanOrEqual(4);
  });
  it.each(latency)('%s', (expr) => {
    expect(expr).toContain('outcome!="error"');
  });
});

// An alert that fires at 3 a.m. says where to start: each rule's runbook_url names a section of the docs.
describe('every alert has a runbook_url naming an existing docs heading', () => {
  it.each(rules.map((r) => [r.alert, r] as const))('%s', (_name, rule) => {
    const url = rule.annotations?.runbook_url;
    expect(url, `${rule.alert} has no runbook_url`).toBeDefined();
    const [path, anchor] = url!.split('#');
    // A repository path into docs/ (docs/alerts.md says how to prefix it with where the docs are read).
    expect(path).toMatch(/^docs\/[\w/-]+\.md$/);
    expect(existsSync(join(repoRoot, path!)), path).toBe(true);
    expect([...headingAnchors(readDoc(path!))], url).toContain(anchor);
    // The section is this alert's own, not a page an alert shares with others.
    expect(anchor).toBe(rule.alert.toLowerCase());
  });

  it('the anchor check refuses a heading that does not exist', () => {
    expect([...headingAnchors(readDoc('docs/alerts.md'))]).not.toContain('keygatenosuchalert');
  });
});

// The words an alert puts in front of the on-call engineer are the ones Keygate answers with: each rejection
// reason a description names is a reason of the catalogue, each /readyz reason one /readyz gives, and the
// one KeygateRedisDown names is what /readyz really answers while the command connection is down.
describe('the reasons the alert texts name are the ones Keygate answers', () => {
  const texts = rules.map((r) => [r.alert, `${r.annotations?.summary ?? ''} ${r.annotations?.description ?? ''}`]);
  const readyzReasons = (text: string) => [...text.matchAll(/\/readyz answers 503 (\w+)/g)].map((m) => m[1]!);

  it.each(texts)('%s', (_name, text) => {
    for (const reason of readyzReasons(text)) expect(Object.keys(NOT_READY_REASONS)).toContain(reason);
    for (const list of text.matchAll(/by reason: ([\w ,()]+)/g))
      for (const reason of list[1]!.split(',').map((s) => s.trim().split(' ')[0]!))
        expect(Object.keys(REASONS)).toContain(reason);
    for (const m of text.matchAll(/\(reason (\w+)\)/g)) expect(Object.keys(REASONS)).toContain(m[1]);
  });

  it('KeygateRedisDown: /readyz with the command connection down (nothing listens at the Redis address)', async () => {
    const port = await freePort();
    const config = loadConfig({
      KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
      KEYGATE_PORT: '0',
      KEYGATE_ADMIN_PORT: '0',
      KEYGATE_HOST: '127.0.0.1',
      KEYGATE_ADMIN_HOST: '127.0.0.1',
      KEYGATE_REDIS_URL: `redis://127.0.0.1:${port}`,
    });
    const gate = createKeygate(config, { logger: pino({ level: 'silent' }) });
    try {
      const { adminPort } = await gate.listen();
      let body: { reason?: string; cause?: string } = {};
      for (let i = 0; i < 100 && body.reason !== 'redis_unreachable'; i++) {
        body = JSON.parse((await send(`http://127.0.0.1:${adminPort}`, '/readyz')).body) as typeof body;
        if (body.reason !== 'redis_unreachable') await new Promise((r) => setTimeout(r, 50));
      }
      expect(body).toMatchObject({ reason: 'redis_unreachable', cause: 'refused' });
      const rule = rules.find((r) => r.alert === 'KeygateRedisDown')!;
      expect(readyzReasons(rule.annotations!.description!)).toEqual([body.reason]);
    } finally {
      await gate.close();
    }
  });
});
