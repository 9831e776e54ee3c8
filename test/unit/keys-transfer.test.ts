import { Readable, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { systemClock } from '../../src/clock.js';
import { main } from '../../src/cli/main.js';
import { parseFlatYaml } from '../../src/files/flat-yaml.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { makeKey } from '../helpers/make-key.js';

async function exportYaml(label: string): Promise<string> {
  const store = createMemoryStore(
    { keys: [makeKey({ apiKey: 'k1', label }), makeKey({ apiKey: 'k2', owner: 'acct_1' })] },
    { clock: systemClock() },
  );
  let out = '';
  const sink = (append: (s: string) => void) => new Writable({ write: (c, _e, cb) => (append(String(c)), cb()) });
  const code = await main(['keys', 'export', '--with-secrets'], {
    out: sink((s) => (out += s)),
    err: sink(() => {}),
    env: { KEYGATE_ACTOR: 'unit-test' },
    stdin: Readable.from([]),
    openKeyStore: async () => ({ store: { ...store, close: async () => {} }, encrypted: false }),
  });
  expect(code).toBe(0);
  return out;
}

describe('keys export (YAML)', () => {
  it.each<[string, string]>([
    ['a short label', 'billing job'],
    ['a label past 80 columns', `a long label ${'with many words '.repeat(10)}end`],
    ['a label with a colon and a hash', 'ops: nightly # batch'],
  ])('writes %s in the plain form the fast reader takes, meaning what yaml reads', async (_name, label) => {
    const text = await exportYaml(label);
    const fast = parseFlatYaml(Buffer.from(text));
    expect(fast).not.toBeUndefined();
    expect(fast).toStrictEqual(parse(text));
    expect((fast as { keys: Array<{ label?: string }> }).keys[0]!.label).toBe(label);
  });
});
