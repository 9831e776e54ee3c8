import { describe, expect, it } from 'vitest';
import { epochVerdict } from '../../src/store/redis/connection/keystore-epoch.js';

/**
 * What one reading of the keystore's epoch marker means (issue 46, item 5). The script behind it (read, or
 * write when absent, in one step) and everything that follows from a verdict run against real Redis servers
 * in test/e2e/keystore-emptied.test.ts.
 */
describe('epochVerdict', () => {
  it('the first reading is adopted, whatever it is: nothing was known to compare with', () => {
    expect(epochVerdict(undefined, 'a1')).toBe('adopt');
  });

  it('the value known: nothing happened', () => {
    expect(epochVerdict('a1', 'a1')).toBe('same');
  });

  it('another value, whether this process re-created the marker or another instance did first: emptied', () => {
    // Two instances notice the same emptying: the second finds the first one's new marker, not nothing.
    expect(epochVerdict('a1', 'b2')).toBe('emptied');
  });
});
