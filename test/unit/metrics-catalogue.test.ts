import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { REASONS } from '../../src/errors.js';
import { createMetrics, LABEL_VALUES } from '../../src/observe/metrics.js';
import { NOT_READY_REASONS } from '../../src/observe/readiness.js';

const root = new URL('../../', import.meta.url);
const readme = readFileSync(new URL('README.md', root), 'utf8');
const section = (title: string) => {
  const start = readme.indexOf(`\n## ${title}\n`);
  expect(start, `README has a "## ${title}" section`).toBeGreaterThan(-1);
  const end = readme.indexOf('\n## ', start + 4);
  return readme.slice(start, end === -1 ? undefined : end);
};
const rowOf = (text: string, first: string) => text.split('\n').find((l) => l.startsWith(`| \`${first}\` |`));

describe('README "Metrics" lists every metric with its labels and their values', () => {
  const metrics = section('Metrics');
  const own = createMetrics({ defaultMetrics: false }).registry.getMetricsAsArray();
  const VALUES_OF: Record<string, string> = {
    keygate_auth_duration_seconds: 'authOutcome',
    keygate_upstream_duration_seconds: 'upstreamStatusClass',
    keygate_key_cache_events_total: 'keyCacheEvent',
    keygate_redis_errors_total: 'redisErrorKind',
    keygate_redis_up: 'redisConnection',
    keygate_key_invalidations_total: 'invalidationScope',
  };
  it('maps every LABEL_VALUES set to a metric', () => {
    expect(new Set(Object.values(VALUES_OF))).toEqual(new Set(Object.keys(LABEL_VALUES)));
  });

  it.each(own.map((m) => [m.name, m]))('%s', (name, m) => {
    const row = rowOf(metrics, name);
    expect(row, `no README row for ${name}`).toBeDefined();
    expect(row).toContain(`| ${m.type} |`);
    const labels = (m as unknown as { labelNames: string[] }).labelNames;
    for (const l of labels) expect(row, `${name} label ${l}`).toContain(`\`${l}\``);
    if (labels.length === 0) expect(row).toContain('| none |');
    // Every fixed value of its label is spelled out in its row.
    for (const v of LABEL_VALUES[VALUES_OF[name] as keyof typeof LABEL_VALUES] ?? []) expect(row, `${name} value ${v}`).toContain(`\`${v}\``);
  });

  it('lists Node default metrics and every alert of deploy/prometheus/alerts.yml', () => {
    expect(metrics).toContain('`process_*`, `nodejs_*`');
    expect(metrics).not.toMatch(/^\| `keygate_(process|nodejs)_/m);
    const alerts = (parseYaml(readFileSync(new URL('deploy/prometheus/alerts.yml', root), 'utf8')) as { groups: Array<{ rules: Array<{ alert: string }> }> }).groups.flatMap((g) => g.rules);
    for (const a of alerts) expect(rowOf(metrics, a.alert), a.alert).toBeDefined();
  });
});

describe('README "Operations" documents readiness', () => {
  it.each(Object.keys(NOT_READY_REASONS))('/readyz reason %s', (reason) => {
    expect(rowOf(section('Operations'), reason)).toBeDefined();
  });
});

describe('README "Rejection reasons" lists every reason with the code it carries', () => {
  it.each(Object.entries(REASONS))('README row for %s shows its code', (reason, { code }) => {
    expect(rowOf(readme, reason)).toContain(`| \`${reason}\` | ${code} |`);
  });
});
