import { describe, expect, it } from 'vitest';
import { readWorkers, workersWarning, WORKERS_NO_GAIN_CORES } from '../../src/config/read-workers.js';

describe('readWorkers', () => {
  it.each([
    [undefined, true, 1, 0],
    ['2', true, 2, 0],
    ['0', true, 1, 1],
    ['two', true, 1, 1],
    ['2', false, 2, 1], // the embedded store's replay guard is per process
  ])('KEYGATE_WORKERS=%s (Redis: %s) → %i workers, %i problems', (raw, redis, workers, problems) => {
    const found: string[] = [];
    expect(readWorkers({ KEYGATE_WORKERS: raw }, redis, found)).toBe(workers);
    expect(found).toHaveLength(problems);
  });
});

describe('workersWarning: said when workers cannot pay on this host, never otherwise', () => {
  it.each([
    [1, 1, undefined],
    [1, 64, undefined],
    [2, 1, /KEYGATE_WORKERS=2 on a host with 1 CPU core: .*measured/],
    [2, 2, /KEYGATE_WORKERS=2 on a host with 2 CPU cores: at 2 cores or fewer, workers were measured to serve no more/],
    [4, 2, /with 2 CPU cores: at 2 cores or fewer/],
    [4, 4, undefined],
    [8, 4, /KEYGATE_WORKERS=8 on a host with 4 CPU cores: more workers than cores .* use at most 4/],
  ] as const)('%i workers on %i cores', (workers, cores, expected) => {
    const warning = workersWarning(workers, cores);
    if (expected === undefined) expect(warning).toBeUndefined();
    else expect(warning).toMatch(expected);
  });

  it('names the measured core count and the page that holds the measurement', () => {
    expect(WORKERS_NO_GAIN_CORES).toBe(2);
    expect(workersWarning(2, 2)).toContain('docs/performance.md');
  });
});
