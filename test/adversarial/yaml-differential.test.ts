import { describe, expect, it } from 'vitest';
import { checkDifferential, flat, flowKeysFiles, full } from '../helpers/cases/yaml-documents.js';

/**
 * The fast YAML reader against the `yaml` package, searched hard: thousands of random documents a
 * property (test/helpers/cases/yaml-documents.ts says what they hold), and flow-style keys files of
 * 10,000 keys. A document costs about 1/40 of an over-the-socket property case, so the shared knob
 * is scaled: 40 x KEYGATE_PROPERTY_RUNS documents a property (6,000 by default). The unit tier runs
 * the same properties on 100 documents.
 */
const RUNS = 40 * Number(process.env.KEYGATE_PROPERTY_RUNS ?? 150);

describe('the fast YAML reader against yaml', () => {
  it('on random documents in every style, declines or reads exactly what yaml reads', () => {
    const { readMultiLine, readFlow } = checkDifferential(RUNS);
    console.log(
      `[property] yaml differential: ${RUNS} documents a property; read ${readMultiLine} of several lines, ${readFlow} with a flow collection over lines`,
    );
    // Not a vacuous property: documents of several lines, and flow collections over lines, are read.
    expect(readMultiLine).toBeGreaterThan(RUNS / 200);
    expect(readFlow).toBeGreaterThan(RUNS / 200);
  }, 600_000);

  it('reads flow-style keys files of 10,000 keys exactly as yaml does', () => {
    for (const text of flowKeysFiles(10_000)) {
      const got = flat(text) as { keys: unknown[] } | undefined;
      expect(got?.keys).toHaveLength(10_000);
      expect(got).toStrictEqual(full(text));
    }
  }, 600_000);
});
