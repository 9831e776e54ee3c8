/**
 * A strict reader of the Prometheus text exposition format (0.0.4), so the
 * scrape is checked even where promtool is not installed. Throws on the first
 * line it cannot read, with the line number.
 */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Family {
  readonly name: string;
  readonly type: string;
  readonly help: string;
  readonly samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const SUFFIXES: Record<string, string[]> = {
  counter: [''],
  gauge: [''],
  untyped: [''],
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
};

export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  const lines = text.split('\n');
  if (lines[lines.length - 1] !== '') throw new Error('exposition must end with a newline');
  lines.forEach((line, i) => {
    const where = `line ${i + 1}: ${JSON.stringify(line.slice(0, 120))}`;
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return; // a plain comment
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
      const existing = families.get(name);
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) throw new Error(`${where}: unknown type`);
        if (existing?.type) throw new Error(`${where}: second TYPE for ${name}`);
        if (existing && existing.samples.length > 0) throw new Error(`${where}: TYPE after samples`);
        families.set(name, { name, type: rest, help: existing?.help ?? '', samples: existing?.samples ?? [] });
      } else {
        if (existing?.help) throw new Error(`${where}: second HELP for ${name}`);
        families.set(name, { name, type: existing?.type ?? '', help: rest, samples: existing?.samples ?? [] });
      }
      return;
    }
    const sample = parseSample(line, where);
    const family = familyOf(families, sample.name);
    if (!family) throw new Error(`${where}: sample of an undeclared family`);
    const id = `${sample.name}{${Object.entries(sample.labels)
      .sort()
      .map(([k, v]) => `${k}=${v}`)
      .join(',')}}`;
    if (seen.has(id)) throw new Error(`${where}: duplicate series ${id}`);
    seen.add(id);
    family.samples.push(sample);
  });
  for (const f of families.values()) {
    if (!f.type) throw new Error(`family ${f.name} has HELP but no TYPE`);
    if (f.type === 'histogram') checkHistogram(f);
  }
  return families;
}

function familyOf(families: Map<string, Family>, sampleName: string): Family | undefined {
  for (const [name, f] of families) {
    for (const suffix of SUFFIXES[f.type] ?? ['']) if (sampleName === name + suffix) return f;
  }
  return undefined;
}

function parseSample(line: string, where: string): Sample {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
  if (!m) throw new Error(`${where}: bad sample name`);
  const name = m[1] as string;
  let pos = name.length;
  const labels: Record<string, string> = {};
  if (line[pos] === '{') {
    pos++;
    while (line[pos] !== '}') {
      const ln = /^([a-zA-Z_][a-zA-Z0-9_]*)="/.exec(line.slice(pos));
      if (!ln || !LABEL_NAME.test(ln[1] as string)) throw new Error(`${where}: bad label at column ${pos}`);
      pos += ln[0].length;
      let value = '';
      for (;;) {
        const c = line[pos];
        if (c === undefined) throw new Error(`${where}: unterminated label value`);
        pos++;
        if (c === '"') break;
        if (c === '\\') {
          const e = line[pos++];
          if (e === 'n') value += '\n';
          else if (e === '\\' || e === '"') value += e;
          else throw new Error(`${where}: bad escape \\${e}`);
        } else value += c;
      }
      if ((ln[1] as string) in labels) throw new Error(`${where}: label ${ln[1]} twice`);
      labels[ln[1] as string] = value;
      if (line[pos] === ',') pos++;
      else if (line[pos] !== '}') throw new Error(`${where}: expected , or } at column ${pos}`);
    }
    pos++;
  }
  const rest = /^ (\S+)( -?\d+)?$/.exec(line.slice(pos));
  if (!rest) throw new Error(`${where}: bad value part`);
  const raw = rest[1] as string;
  // As Prometheus reads it (Go's ParseFloat): NaN and [+-]Inf[inity] in any case.
  const special = /^(nan|([+-]?)inf(inity)?)$/i.exec(raw);
  const value = special
    ? special[1]!.toLowerCase() === 'nan'
      ? NaN
      : special[2] === '-'
        ? -Infinity
        : Infinity
    : Number(raw);
  if (!special && (raw.trim() === '' || Number.isNaN(value))) throw new Error(`${where}: value is not a number`);
  return { name, labels, value };
}

/** Buckets cumulative, +Inf bucket present and equal to _count, per label set. */
function checkHistogram(f: Family): void {
  const groups = new Map<string, { buckets: Array<[number, number]>; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const g = groups.get(key) ?? { buckets: [] };
    groups.set(key, g);
    if (s.name.endsWith('_bucket')) {
      if (le === undefined) throw new Error(`${f.name}: bucket without le`);
      g.buckets.push([le === '+Inf' ? Infinity : Number(le), s.value]);
    } else if (s.name.endsWith('_count')) g.count = s.value;
  }
  for (const [key, g] of groups) {
    const sorted = [...g.buckets].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < sorted.length; i++) {
      if ((sorted[i] as [number, number])[1] < (sorted[i - 1] as [number, number])[1])
        throw new Error(`${f.name}${key}: buckets not cumulative`);
    }
    const inf = sorted[sorted.length - 1];
    if (!inf || inf[0] !== Infinity) throw new Error(`${f.name}${key}: no +Inf bucket`);
    if (g.count !== inf[1]) throw new Error(`${f.name}${key}: +Inf bucket ${inf[1]} != _count ${g.count}`);
  }
}

/** The value of one series, or undefined when absent. */
export function valueOf(
  families: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const f of families.values()) {
    for (const s of f.samples) {
      if (s.name !== name) continue;
      const keys = Object.keys(s.labels);
      if (keys.length === Object.keys(labels).length && keys.every((k) => s.labels[k] === labels[k])) return s.value;
    }
  }
  return undefined;
}

/** Every sample name in the scrape (family names plus _bucket/_sum/_count). */
export function sampleNames(families: Map<string, Family>): Set<string> {
  const out = new Set<string>();
  for (const f of families.values()) {
    out.add(f.name);
    for (const s of f.samples) out.add(s.name);
  }
  return out;
}
