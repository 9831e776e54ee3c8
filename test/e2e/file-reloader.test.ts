import { createHash } from 'node:crypto';
import { appendFileSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createFileReloader, SETTLE_MS, type FileReloader } from '../../src/files/file-reloader.js';
import { FILE_LAYOUTS } from '../helpers/file-layouts.js';

/**
 * createFileReloader on its own, over real files and real fs watches: every
 * way operators deploy a file (test/helpers/file-layouts.ts), a broken file,
 * a reload on request. What each reloaded file means to Keygate is tested by
 * feature: keys-file-reload, policy-source, management-api.
 */
class BrokenFile extends Error {
  constructor(readonly problems: string[]) {
    super('broken');
  }
}

/** The file's value: "v=<n>" lines; anything else is rejected with a problem list, as the real loaders do. */
function load(file: string, read: (f: string) => string): number {
  const m = /^v=(\d+)\n?$/.exec(read(file));
  if (!m) throw new BrokenFile([`${file}: expected v=<number>`]);
  return Number(m[1]);
}

interface Harness {
  reloader: FileReloader;
  applied: number[];
  logs: Array<{ msg: string; cause?: string; problems?: string[] }>;
}

let open: FileReloader[] = [];
afterEach(() => {
  for (const r of open) r.close();
  open = [];
});

function start(path: string): Harness {
  const applied: number[] = [];
  const logs: Harness['logs'] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({ write: (c, _e, cb) => (logs.push(JSON.parse(String(c))), cb()) }),
  );
  const reloader = createFileReloader(
    { file: path, what: 'test file', kept: 'value', debounceMs: 20 },
    {
      logger,
      load: (f) => load(f, (x) => readFileSync(x, 'utf8')),
      apply: (v) => applied.push(v),
      describe: (v) => ({ value: v }),
    },
  );
  open.push(reloader);
  return { reloader, applied, logs };
}

const POLL = { timeout: 5_000, interval: 20 };

describe.each(FILE_LAYOUTS)('file reloader: %s', (_name, layout) => {
  it('applies each change, keeps the last good value on a broken file, then recovers', async () => {
    const file = layout('value.txt', 'v=1\n');
    const h = start(file.path);
    // Nothing is applied at creation: the caller loaded the first value itself.
    expect(h.applied).toEqual([]);

    const t0 = performance.now();
    file.update('v=2\n');
    await expect.poll(() => h.applied, POLL).toEqual([2]);
    const detectMs = performance.now() - t0;
    expect(h.logs.at(-1)).toMatchObject({ msg: 'test file loaded', cause: 'file changed', value: 2 });

    file.update('not a value');
    await expect.poll(() => h.logs.at(-1)?.msg, POLL).toBe('test file rejected; keeping the last good value');
    expect(h.logs.at(-1)?.problems).toEqual([`${file.path}: expected v=<number>`]);
    expect(h.applied).toEqual([2]);

    // The watch follows the file as it moves (Kubernetes swaps folders): a second and third change still land.
    file.update('v=3\n');
    await expect.poll(() => h.applied, POLL).toEqual([2, 3]);
    file.update('v=4\n');
    await expect.poll(() => h.applied, POLL).toEqual([2, 3, 4]);

    // After close, a change is not applied: waited for three times what detecting one took in this run.
    h.reloader.close();
    file.update('v=5\n');
    await new Promise((r) => setTimeout(r, Math.max(3 * detectMs, 200)));
    expect(h.applied).toEqual([2, 3, 4]);
  });
});

describe('file reloader: a file written in two halves', () => {
  const [, plain] = FILE_LAYOUTS[0] as (typeof FILE_LAYOUTS)[number];

  it('applies only the whole file: the half, valid on its own, is never loaded', async () => {
    const file = plain('value.txt', 'v=3\n');
    const h = start(file.path);
    // "v=4" alone is a valid value; the whole file is "v=45". Written in place, a pause between the halves
    // shorter than the settle time (what a slow writer or a cat > file over a network does).
    writeFileSync(file.path, 'v=4');
    await new Promise((r) => setTimeout(r, SETTLE_MS / 4));
    appendFileSync(file.path, '5\n');
    await expect.poll(() => h.applied, POLL).toEqual([45]);
    expect(h.logs.filter((l) => l.msg === 'test file loaded')).toHaveLength(1);
  });
});

describe('file reloader: on request (SIGHUP)', () => {
  const [, plain] = FILE_LAYOUTS[0] as (typeof FILE_LAYOUTS)[number];

  it('reload() applies the file as it is and says whether it was accepted', async () => {
    const file = plain('value.txt', 'v=7\n');
    const h = start(file.path);
    expect(h.reloader.reload('reload requested')).toBe(true);
    expect(h.applied).toEqual([7]);
    expect(h.logs.at(-1)).toMatchObject({ msg: 'test file loaded', cause: 'reload requested', value: 7 });
  });

  it('reload() of a broken file returns false and applies nothing', async () => {
    const file = plain('value.txt', 'v=1\n');
    const h = start(file.path);
    h.reloader.close(); // only the explicit reload here, no watch racing it
    file.update('garbage');
    expect(h.reloader.reload('reload requested')).toBe(false);
    expect(h.applied).toEqual([]);
    expect(h.logs.at(-1)).toMatchObject({
      msg: 'test file rejected; keeping the last good value',
      cause: 'reload requested',
    });
  });

  it('a missing file (and folder) is rejected like a broken one; the unwatchable folder is said once per try', async () => {
    const h = start('/nonexistent/keygate/value.txt');
    expect(h.reloader.reload('reload requested')).toBe(false);
    expect(h.applied).toEqual([]);
    expect(h.logs.map((l) => l.msg)).toEqual([
      "cannot watch the test file's folder; SIGHUP still reloads",
      'test file rejected; keeping the last good value',
      "cannot watch the test file's folder; SIGHUP still reloads",
    ]);
  });
});

describe('file reloader: a large file', () => {
  const [, plain] = FILE_LAYOUTS[0] as (typeof FILE_LAYOUTS)[number];

  it('is read and hashed between other work: no turn of the event loop blocks for one whole-file hash', async () => {
    const big = (c: string) => `v=1\n${c.repeat(32 * 1024 * 1024)}`;
    const file = plain('value.txt', big('a'));
    // What one whole-file read and hash costs in this run: the block each check used to make, three times over.
    const t0 = performance.now();
    createHash('sha256').update(readFileSync(file.path)).digest('hex');
    const wholeHashMs = performance.now() - t0;

    const applied: number[] = [];
    const reloader = createFileReloader(
      { file: file.path, what: 'test file', kept: 'value', debounceMs: 20 },
      {
        logger: pino({ level: 'silent' }),
        load: (f) => statSync(f).size,
        apply: (v) => applied.push(v),
        describe: () => ({}),
      },
    );
    open.push(reloader);
    let longestGapMs = 0;
    let last = performance.now();
    const ticker = setInterval(() => {
      const now = performance.now();
      longestGapMs = Math.max(longestGapMs, now - last);
      last = now;
    }, 1);
    try {
      file.update(big('b'));
      last = performance.now();
      await expect.poll(() => applied.length, POLL).toBe(1);
    } finally {
      clearInterval(ticker);
    }
    expect(longestGapMs).toBeLessThan(wholeHashMs);
  });
});
