import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createProgress } from '../../src/cli/keys/progress.js';

function sink(isTTY: boolean) {
  let written = '';
  const stream = Object.assign(new Writable({ write: (c, _e, cb) => ((written += String(c)), cb()) }), { isTTY });
  return { stream, written: () => written };
}

describe('createProgress', () => {
  it('on a terminal: redraws one line at most every redrawMs, with the share done, and clears it at the end', () => {
    const { stream, written } = sink(true);
    let now = 0;
    const p = createProgress({ label: 'importing', total: 1_000, redrawMs: 100 }, { stream, now: () => now });
    p.advance(100); // drawn
    now = 50;
    p.advance(100); // too soon: not drawn
    now = 150;
    p.advance(300); // drawn
    p.done();
    expect(written()).toBe('\r\x1b[2Kimporting 100 of 1,000 (10%)\r\x1b[2Kimporting 500 of 1,000 (50%)\r\x1b[2K');
  });

  it('without a total: the count alone', () => {
    const { stream, written } = sink(true);
    const p = createProgress({ label: 'listing' }, { stream, now: () => 0 });
    p.advance(2_500);
    expect(written()).toBe('\r\x1b[2Klisting 2,500');
  });

  it('piped or redirected: writes nothing at all', () => {
    const { stream, written } = sink(false);
    const p = createProgress({ label: 'importing', total: 10 }, { stream, now: () => 0 });
    p.advance(5);
    p.done();
    expect(written()).toBe('');
  });
});
