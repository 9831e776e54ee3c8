import { describe, expect, it } from 'vitest';
import { readEnvInt } from '../../src/config/read-env-int.js';

describe('readEnvInt: an integer setting, every problem recorded, the default kept', () => {
  const cases: ReadonlyArray<[string, string | undefined, number, string | undefined]> = [
    ['unset: the default', undefined, 50, undefined],
    ['empty: the default', '', 50, undefined],
    ['digits in range', '75', 75, undefined],
    ['the minimum itself', '10', 10, undefined],
    ['the maximum itself', '100', 100, undefined],
    ['leading zeros: the number they spell (7, below the minimum)', '007', 50, 'between 10 and 100, got "007"'],
    ['below the minimum', '9', 50, 'between 10 and 100, got "9"'],
    ['above the maximum', '101', 50, 'between 10 and 100, got "101"'],
    ['negative', '-20', 50, 'got "-20"'],
    ['a fraction', '20.5', 50, 'got "20.5"'],
    ['an exponent', '2e1', 50, 'got "2e1"'],
    ['spaces around', ' 20 ', 50, 'got " 20 "'],
    ['a unit', '20ms', 50, 'got "20ms"'],
    ['hex', '0x14', 50, 'got "0x14"'],
  ];
  it.each(cases)('%s (%j)', (_name, raw, value, problem) => {
    const problems: string[] = [];
    expect(readEnvInt({ KEYGATE_X: raw }, 'KEYGATE_X', 50, 10, 100, problems)).toBe(value);
    if (problem === undefined) expect(problems).toEqual([]);
    else {
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(/^KEYGATE_X: must be an integer between 10 and 100, got /);
      expect(problems[0]).toContain(problem);
    }
  });

  it('adds to the problems already found, never replaces them', () => {
    const problems = ['KEYGATE_EARLIER: bad'];
    readEnvInt({ A: 'x' }, 'A', 1, 0, 9, problems);
    readEnvInt({ B: 'y' }, 'B', 1, 0, 9, problems);
    expect(problems.map((p) => p.split(':')[0])).toEqual(['KEYGATE_EARLIER', 'A', 'B']);
  });
});
