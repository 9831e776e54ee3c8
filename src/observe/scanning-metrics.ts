// Tested in test/e2e/secret-scanning.test.ts, test/unit/github-scanning.test.ts.
import { Counter, type Registry } from 'prom-client';

/** The labels a secret scanning report's tokens are answered with (GitHub's partner API). */
export const SCANNING_LABELS = ['true_positive', 'false_positive'] as const;
export type ScanningLabel = (typeof SCANNING_LABELS)[number];

/** keygate_secret_scanning_reports_total{label}: every token of a verified report, by the label answered. */
export function createScanningMetrics(registry: Registry): { count(label: ScanningLabel): void } {
  const reports = new Counter({
    name: 'keygate_secret_scanning_reports_total',
    help: 'Tokens reported by GitHub secret scanning (verified reports only), by the label answered',
    labelNames: ['label'],
    registers: [registry],
  });
  for (const label of SCANNING_LABELS) reports.labels(label).inc(0);
  return { count: (label) => reports.labels(label).inc() };
}
