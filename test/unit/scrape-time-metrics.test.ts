import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, REASONS, type Reason } from '../../src/errors.js';
import { KEY_ALGS } from '../../src/keys/public-key.js';
import { createMetrics, LABEL_VALUES, OUTCOMES } from '../../src/observe/metrics.js';

const NAMES = [
  'keygate_requests_total',
  'keygate_auth_rejections_total',
  'keygate_admitted_tokens_total',
  'keygate_auth_duration_seconds',
  'keygate_upstream_duration_seconds',
];

/**
 * The request path's metrics as they were built before issue 39 (prom-client children bound with
 * labels(), every inc/observe through prom-client): the reference the scrape-time metrics must equal.
 */
function promClientReference() {
  const registry = new Registry();
  const requests = new Counter({ name: NAMES[0] as string, help: 'h', labelNames: ['code'], registers: [registry] });
  const rejections = new Counter({
    name: NAMES[1] as string,
    help: 'h',
    labelNames: ['code', 'reason'],
    registers: [registry],
  });
  for (const code of OUTCOMES) requests.inc({ code }, 0);
  for (const code of ERROR_CODES) requests.inc({ code: String(code) }, 0);
  for (const [reason, { code }] of Object.entries(REASONS)) rejections.inc({ code: String(code), reason }, 0);
  const admitted = new Counter({ name: NAMES[2] as string, help: 'h', labelNames: ['alg'], registers: [registry] });
  for (const alg of KEY_ALGS) admitted.inc({ alg }, 0);
  const auth = new Histogram({
    name: NAMES[3] as string,
    help: 'h',
    labelNames: ['outcome'],
    buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1],
    registers: [registry],
  });
  const upstream = new Histogram({
    name: NAMES[4] as string,
    help: 'h',
    labelNames: ['status_class'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  return {
    registry,
    request: (code: string) => requests.labels({ code }).inc(),
    reject: (reason: Reason) => rejections.labels({ code: String(REASONS[reason].code), reason }).inc(),
    admit: (alg: string) => admitted.labels({ alg }).inc(),
    auth: (outcome: string, s: number) => auth.labels({ outcome }).observe(s),
    upstream: (cls: string, s: number) => upstream.labels({ status_class: cls }).observe(s),
  };
}

/** The exposition of the five metrics, HELP lines aside (the reference's help texts are placeholders). */
async function exposition(registry: Registry) {
  const out: string[] = [];
  for (const name of NAMES) {
    const text = await registry.getSingleMetricAsString(name);
    out.push(...text.split('\n').filter((l) => !l.startsWith('# HELP')));
  }
  return out;
}

const seconds = fc.oneof(
  fc.constantFrom(0, 0.00005, 0.0001, 0.001, 0.0025, 1, 30, 31, 1e-9),
  fc.double({ min: 0, max: 40, noNaN: true }),
);
const op = fc.oneof(
  fc.record({ kind: fc.constant('request' as const), code: fc.constantFrom(...OUTCOMES, ...ERROR_CODES.map(String)) }),
  fc.record({ kind: fc.constant('reject' as const), reason: fc.constantFrom(...(Object.keys(REASONS) as Reason[])) }),
  fc.record({ kind: fc.constant('admit' as const), alg: fc.constantFrom(...KEY_ALGS) }),
  fc.record({ kind: fc.constant('auth' as const), outcome: fc.constantFrom(...LABEL_VALUES.authOutcome), s: seconds }),
  fc.record({
    kind: fc.constant('upstream' as const),
    cls: fc.constantFrom(...LABEL_VALUES.upstreamStatusClass),
    s: seconds,
  }),
  fc.record({ kind: fc.constant('scrape' as const) }),
);

describe('scrape-time metrics', () => {
  it('expose exactly what the prom-client children exposed for the same mixed run (names, labels, values, order), scraped at any points', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 300 }), async (ops) => {
        const ref = promClientReference();
        const metrics = createMetrics({ defaultMetrics: false });
        const b = metrics.bound;
        for (const o of ops) {
          if (o.kind === 'request') {
            ref.request(o.code);
            b.requests.get(o.code)?.inc();
          } else if (o.kind === 'reject') {
            ref.reject(o.reason);
            b.rejections[o.reason].inc();
          } else if (o.kind === 'admit') {
            ref.admit(o.alg);
            b.admittedTokens[o.alg].inc();
          } else if (o.kind === 'auth') {
            ref.auth(o.outcome, o.s);
            b.authSeconds[o.outcome].observe(o.s);
          } else if (o.kind === 'upstream') {
            ref.upstream(o.cls, o.s);
            b.upstreamSeconds.get(o.cls)?.observe(o.s);
          } else expect(await exposition(metrics.registry)).toEqual(await exposition(ref.registry));
        }
        expect(await exposition(metrics.registry)).toEqual(await exposition(ref.registry));
      }),
      { numRuns: 100 },
    );
  });

  it('give the same get() values as prom-client (labels splayed), for code that reads a metric object', async () => {
    const ref = promClientReference();
    const metrics = createMetrics({ defaultMetrics: false });
    for (const [outcome, s] of [
      ['deny', 0.002],
      ['allow', 0.0001],
      ['allow', 3],
    ] as const) {
      ref.auth(outcome, s);
      metrics.bound.authSeconds[outcome].observe(s);
    }
    const [mine, theirs] = [
      await metrics.authSeconds.get(),
      await ref.registry.getSingleMetric(NAMES[3] as string)?.get(),
    ];
    expect(mine.values).toEqual(theirs?.values);
  });
});
