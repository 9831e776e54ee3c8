import { describe, expect, it } from 'vitest';
import { effectiveHome, movedCutoffNs } from '../../src/store/home.js';

describe('effective home (src/store/home.ts)', () => {
  const cases = [
    {
      name: 'no owner, own home',
      record: { home: 'tyo', homeMovedAtMs: 5 },
      owner: undefined,
      want: { home: 'tyo', movedAtMs: 5 },
    },
    { name: 'no owner, no home: the default', record: {}, owner: undefined, want: { home: 'fra', movedAtMs: 0 } },
    {
      name: "an owner's home wins",
      record: { owner: 'acme', home: 'tyo' },
      owner: { home: 'iad', movedAtMs: 7 },
      want: { home: 'iad', movedAtMs: 7 },
    },
    {
      name: "an owner without a home: the default, never the key's",
      record: { owner: 'acme', home: 'tyo' },
      owner: undefined,
      want: { home: 'fra', movedAtMs: 0 },
    },
    {
      name: "the later of the key's and the owner's moves",
      record: { owner: 'acme', homeMovedAtMs: 9 },
      owner: { home: 'iad', movedAtMs: 7 },
      want: { home: 'iad', movedAtMs: 9 },
    },
  ];
  for (const c of cases) it(c.name, () => expect(effectiveHome(c.record, c.owner, 'fra')).toEqual(c.want));

  it('the cut-off: the move + the largest recv_window + the staleness bound, in ns; none when never moved', () => {
    expect(movedCutoffNs(0, 60_000, 1_000)).toBe(0n);
    expect(movedCutoffNs(1_000_000, 60_000, 1_000)).toBe(1_061_000n * 1_000_000n);
  });
});
