import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { REASONS } from '../../src/errors.js';
import { createMetrics, LABEL_VALUES } from '../../src/observe/metrics.js';
import { NOT_READY_REASONS } from '../../src/observe/readiness.js';
import { createStreamMetrics, STREAM_CLOSE_REASONS } from '../../src/observe/stream-metrics.js';
import { createScanningMetrics } from '../../src/observe/scanning-metrics.js';
import { codeSpans, readDoc, section, tableRows } from '../helpers/markdown.js';

const root = new URL('../../', import.meta.url);
const metricsDoc = readDoc('docs/reference/metrics.md');
const errorsDoc = readDoc('docs/reference/errors.md');
const rowOf = (text: string, first: string) => text.split('\n').find((l) => l.startsWith(`| \`${first}\` |`));
/** The names in backticks that open a row of the text's tables, e.g. every `keygate_…` metric row. */
const rowNames = (text: string, pattern: RegExp) =>
  tableRows(text)
    .map((cells) => codeSpans(cells[0]!)[0])
    .filter((name): name is string => name !== undefined && pattern.test(name));
const alerts = (
  parseYaml(readFileSync(new URL('deploy/prometheus/alerts.yml', root), 'utf8')) as {
    groups: Array<{ rules: Array<{ alert: string }> }>;
  }
).groups.flatMap((g) => g.rules);

describe('docs/reference/metrics.md lists every metric with its labels and their values', () => {
  const metrics = metricsDoc;
  const created = createMetrics({ defaultMetrics: false });
  // The regions' metrics are registered only with regions on (src/observe/metrics.ts enableRegions).
  created.enableRegions(() => 0);
  const registry = created.registry;
  // The streams' metrics live on the same registry (src/observe/stream-metrics.ts).
  createStreamMetrics(registry);
  // So do the secret scanning endpoint's (src/observe/scanning-metrics.ts), registered when it is served.
  createScanningMetrics(registry);
  const own = registry.getMetricsAsArray();
  const VALUES_OF: Record<string, string> = {
    keygate_auth_duration_seconds: 'authOutcome',
    keygate_admitted_tokens_total: 'tokenAlg',
    keygate_upstream_duration_seconds: 'upstreamStatusClass',
    keygate_upstream_errors_total: 'upstreamErrorCause',
    keygate_key_cache_events_total: 'keyCacheEvent',
    keygate_redis_errors_total: 'redisErrorKind',
    keygate_redis_up: 'redisConnection',
    keygate_key_invalidations_total: 'invalidationScope',
    keygate_assertions_signed_total: 'assertionMode',
    keygate_trace_spans_dropped_total: 'spanDropReason',
    keygate_webhook_deliveries_total: 'webhookOutcome',
  };
  it('maps every LABEL_VALUES set to a metric', () => {
    expect(new Set(Object.values(VALUES_OF))).toEqual(new Set(Object.keys(LABEL_VALUES)));
  });

  it.each(own.map((m) => [m.name, m]))('%s', (name, m) => {
    const row = rowOf(metrics, name);
    expect(row, `no row for ${name}`).toBeDefined();
    expect(row).toContain(`| ${m.type} |`);
    const labels = (m as unknown as { labelNames: string[] }).labelNames;
    for (const l of labels) expect(row, `${name} label ${l}`).toContain(`\`${l}\``);
    if (labels.length === 0) expect(row).toContain('| none |');
    // Every fixed value of its label is spelled out in its row.
    for (const v of LABEL_VALUES[VALUES_OF[name] as keyof typeof LABEL_VALUES] ?? [])
      expect(row, `${name} value ${v}`).toContain(`\`${v}\``);
  });

  it('spells out every reason a stream closes for', () => {
    const row = rowOf(metrics, 'keygate_streams_closed_total');
    for (const reason of STREAM_CLOSE_REASONS) expect(row, reason).toContain(`\`${reason}\``);
  });

  it('lists Node default metrics and every alert of deploy/prometheus/alerts.yml', () => {
    expect(metrics).toContain('`process_*`, `nodejs_*`');
    expect(metrics).not.toMatch(/^\| `keygate_(process|nodejs)_/m);
    for (const a of alerts) expect(rowOf(metrics, a.alert), a.alert).toBeDefined();
  });

  // The other direction: no row for a metric or an alert that no longer exists.
  it('has a row only for metrics the registry has', () => {
    expect(rowNames(metrics, /^keygate_/).sort()).toEqual(own.map((m) => m.name).sort());
  });
  it('has a row only for alerts deploy/prometheus/alerts.yml has', () => {
    expect(rowNames(section(metrics, 'Dashboard and alerts'), /^Keygate[A-Z]/).sort()).toEqual(
      alerts.map((a) => a.alert).sort(),
    );
  });
});

describe('docs/running.md "Health and readiness" documents readiness', () => {
  const health = section(readDoc('docs/running.md'), 'Health and readiness');
  it.each(Object.keys(NOT_READY_REASONS))('/readyz reason %s', (reason) => {
    expect(rowOf(health, reason)).toBeDefined();
  });
  it('has a row only for reasons /readyz can give', () => {
    expect(rowNames(health, /^[a-z_]+$/).sort()).toEqual(Object.keys(NOT_READY_REASONS).sort());
  });
});

describe('docs/reference/errors.md "Rejection reasons" lists every reason with the code it carries', () => {
  it.each(Object.entries(REASONS))('row for %s shows its code', (reason, { code }) => {
    expect(rowOf(errorsDoc, reason)).toContain(`| \`${reason}\` | ${code} |`);
  });
});
