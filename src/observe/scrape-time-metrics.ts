import { Histogram, type Counter, type HistogramConfiguration, type LabelValues } from 'prom-client';

/**
 * Request-path metrics counted in typed arrays, handed to prom-client only at scrape.
 *
 * Why: a prom-client child bound with `labels()` still converts, validates and hashes its label set
 * on every `inc`/`observe`, and leaves garbage for the young generation on the request path. Here
 * each label set is a slot fixed when the metrics are built, so the request path adds to a number
 * and allocates nothing. The exposition is the same as before: the same names,
 * labels, values and series order (test/unit/scrape-time-metrics.test.ts compares the two after a
 * mixed run).
 */

export interface Incrementable {
  inc(value?: number): void;
}
export interface Observable {
  /** `traceId`: a sampled trace this observation belongs to, kept as its bucket's exemplar (tracing on). */
  observe(value: number, traceId?: string): void;
}

/** One bucket's exemplar as prom-client writes it in OpenMetrics: `# {trace_id="…"} value timestamp`. */
interface Exemplar {
  readonly labelSet: { readonly trace_id: string };
  readonly value: number;
  readonly timestamp: number;
}

/**
 * Counts per label set of one prom-client Counter; `flush()` (the counter's `collect`, run at scrape)
 * adds what was counted since the last scrape. The counter stays the one in the registry, so an
 * increment made on it directly still shows.
 */
export function counterSlots<L extends string>(labelSets: readonly LabelValues<L>[]) {
  const counts = new Float64Array(labelSets.length);
  const flushed = new Float64Array(labelSets.length);
  return {
    child(i: number): Incrementable {
      return {
        inc(value = 1) {
          counts[i] = (counts[i] as number) + value;
        },
      };
    },
    flush(counter: Counter<L>) {
      for (let i = 0; i < labelSets.length; i++) {
        const d = (counts[i] as number) - (flushed[i] as number);
        if (d > 0) {
          counter.inc(labelSets[i] as LabelValues<L>, d);
          flushed[i] = counts[i] as number;
        }
      }
    },
  };
}

/** Histogram.prototype.getForPromString: what Registry.metrics() reads (not in prom-client's type declarations). */
const PROM_STRING = (Histogram.prototype as unknown as { getForPromString(this: unknown): Promise<unknown> })
  .getForPromString;

type HistogramData<L extends string> = Awaited<ReturnType<Histogram<L>['get']>>;

/**
 * A prom-client Histogram whose label sets, fixed at construction, are observed into typed arrays
 * (one count per bucket, the sum and the count per label set) and written out at scrape in
 * prom-client's own form: a label set appears once first observed, in the order first observed,
 * its buckets cumulative, then +Inf, _sum and _count.
 */
export class ScrapeTimeHistogram<L extends string> extends Histogram<L> {
  private readonly metricName: string;
  private readonly sets: readonly LabelValues<L>[];
  private readonly bounds: readonly number[];
  private readonly bucketCounts: Float64Array; // per label set: one count per bound (not cumulative)
  private readonly sums: Float64Array;
  private readonly counts: Float64Array;
  private readonly order: number[] = []; // label sets, in the order first observed
  /** The latest exemplar per label set and bucket (+Inf last); made only once an observation brings a trace id. */
  private exemplars: Array<Exemplar | undefined> | undefined;

  constructor(config: HistogramConfiguration<L> & { buckets: number[] }, labelSets: readonly LabelValues<L>[]) {
    super(config);
    this.metricName = config.name;
    this.sets = labelSets;
    this.bounds = [...config.buckets].sort((a, b) => a - b);
    this.bucketCounts = new Float64Array(labelSets.length * this.bounds.length);
    this.sums = new Float64Array(labelSets.length);
    this.counts = new Float64Array(labelSets.length);
  }

  /** The observer of label set `i` (an index into the label sets given at construction). */
  child(i: number): Observable {
    const bounds = this.bounds;
    const width = bounds.length;
    const { bucketCounts, sums, counts, order } = this;
    const keep = (slot: number, value: number, traceId: string) => this.exemplar(slot, value, traceId);
    return {
      observe(value: number, traceId?: string) {
        if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
        if (counts[i] === 0) order.push(i);
        counts[i] = (counts[i] as number) + 1;
        sums[i] = (sums[i] as number) + value;
        let b = 0;
        for (; b < width; b++) {
          if (value <= (bounds[b] as number)) {
            bucketCounts[i * width + b] = (bucketCounts[i * width + b] as number) + 1;
            break;
          }
        }
        // Tracing off, never a trace id: no exemplar is kept, nothing is allocated.
        if (traceId !== undefined) keep(i * (width + 1) + b, value, traceId);
      },
    };
  }

  private exemplar(slot: number, value: number, traceId: string) {
    this.exemplars ??= new Array<Exemplar | undefined>(this.sets.length * (this.bounds.length + 1));
    this.exemplars[slot] = { labelSet: { trace_id: traceId }, value, timestamp: Date.now() / 1000 };
  }

  /** prom-client's exposition path (Registry.metrics) reads this; `get()` splays the labels as prom-client does. */
  async getForPromString() {
    // prom-client's own form of this histogram: its metadata, and anything observed on it directly.
    const base = (await PROM_STRING.call(this)) as HistogramData<L>;
    const name = this.metricName;
    // The fields prom-client's own values carry (exemplar: null on buckets, as without exemplars).
    const values: Array<{
      labels: object;
      sharedLabels: object;
      value: number;
      metricName: string;
      exemplar: Exemplar | null | undefined;
    }> = [];
    const exemplars = this.exemplars;
    const slots = this.bounds.length + 1;
    for (const i of this.order) {
      const labels = this.sets[i] as object;
      let acc = 0;
      for (let b = 0; b < this.bounds.length; b++) {
        acc += this.bucketCounts[i * this.bounds.length + b] as number;
        values.push({
          labels: { le: this.bounds[b] },
          sharedLabels: labels,
          value: acc,
          metricName: `${name}_bucket`,
          exemplar: exemplars?.[i * slots + b] ?? null,
        });
      }
      const count = this.counts[i] as number;
      const total = { sharedLabels: labels, exemplar: undefined };
      const inf = exemplars?.[i * slots + slots - 1] ?? null;
      values.push({ labels: { le: '+Inf' }, ...total, value: count, metricName: `${name}_bucket`, exemplar: inf });
      values.push({ labels: {}, ...total, value: this.sums[i] as number, metricName: `${name}_sum` });
      values.push({ labels: {}, ...total, value: count, metricName: `${name}_count` });
    }
    return { ...base, values: [...values, ...base.values] as unknown as HistogramData<L>['values'] };
  }

  override async get(): Promise<HistogramData<L>> {
    const data = await this.getForPromString();
    const values = data.values.map((v) => {
      if (!('sharedLabels' in (v as object))) return v;
      const { labels, sharedLabels, ...rest } = v as unknown as { labels: object; sharedLabels: object };
      return { ...rest, labels: { ...labels, ...sharedLabels } };
    });
    return { ...data, values: values as HistogramData<L>['values'] };
  }
}
