import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { KEY_ACTIONS } from '../../src/cli/keys/keys-actions.js';
import { main } from '../../src/cli/main.js';
import { createMemoryStore, type MemoryStore } from '../../src/store/memory/memory-store.js';
import { makeKey } from '../helpers/make-key.js';

/**
 * `keygate keys <action>` in-process, through main() as bin/keygate.js calls
 * it, against the memory store: exit status, stdout and stderr of each action.
 */
const dir = mkdtempSync(join(tmpdir(), 'keygate-keys-actions-'));
const KEYS_FILE = join(dir, 'import.yaml');
writeFileSync(
  KEYS_FILE,
  'keys:\n  - { apiKey: imported-1, apiSecret: imported-secret-0123456789, scopes: [a] }\n  - { apiKey: active, apiSecret: replaced-secret-0123456789 }\n',
);
const BROKEN_FILE = join(dir, 'broken.yaml');
writeFileSync(BROKEN_FILE, 'keys:\n  - { apiKey: fine-key, apiSecret: fine-secret-0123456789 }\n  - { apiKey: x }\n');

let store: MemoryStore;
let encrypted: boolean;
beforeEach(() => {
  store = createMemoryStore(
    {
      keys: [
        makeKey({ apiKey: 'active', label: 'first' }),
        makeKey({ apiKey: 'gone', state: 'revoked', revokedAt: new Date().toISOString() }),
      ],
    },
    { clock: systemClock() },
  );
  encrypted = false;
});

interface Run {
  code: number;
  out: string;
  err: string;
}

async function keys(...args: string[]): Promise<Run> {
  let out = '';
  let err = '';
  const sink = (append: (s: string) => void) => new Writable({ write: (c, _e, cb) => (append(String(c)), cb()) });
  const code = await main(['keys', ...args], {
    out: sink((s) => (out += s)),
    err: sink((s) => (err += s)),
    env: { KEYGATE_ACTOR: 'unit-test' },
    stdin: Readable.from([]),
    // The memory store outlives each command (the command closes what it opened).
    openKeyStore: async () => ({ store: { ...store, close: async () => {} }, encrypted }),
  });
  return { code, out, err };
}

const json = (r: Run) => JSON.parse(r.out) as Record<string, unknown>;
const auditActions = (r: Run) =>
  r.err
    .split('\n')
    .filter((l) => l.includes('"audit"'))
    .map((l) => (JSON.parse(l) as { audit: { action: string; actor: string } }).audit);

describe('keygate keys: each action succeeds, audited as the actor', () => {
  it.each<[string, string[], (r: Run) => void]>([
    [
      'create',
      ['create', '--scopes', 'a,b', '--label', 'ci', '--ttl', '1d', '--rate-limit', '5/s', '--burst', '9'],
      (r) =>
        expect(r.out).toMatch(
          /^Created key key_[0-9a-f]+\n {2}apiKey: {4}kg_[0-9a-f]{32}\n {2}apiSecret: kgs_[0-9A-Za-z]{46}\n[^]*rate limit: 5\/s/,
        ),
    ],
    [
      'list',
      ['list'],
      (r) => expect(r.out.split('\n').map((l) => l.split(/\s+/)[0])).toEqual(['API', 'active', 'gone', '']),
    ],
    ['list --state', ['list', '--state', 'revoked'], (r) => expect(r.out).not.toMatch(/^active/m)],
    [
      'show',
      ['show', 'active'],
      (r) => expect(json(r)).toMatchObject({ apiKey: 'active', status: 'active', label: 'first', lastUsedAt: null }),
    ],
    ['usage', ['usage', 'active', '--days', '3'], (r) => expect(r.out).toContain('requests, last 3 days (UTC): 0')],
    [
      'update',
      ['update', 'active', '--scopes', 'x', '--no-expiry'],
      (r) => expect(json(r)).toMatchObject({ apiKey: 'active', scopes: ['x'] }),
    ],
    [
      'rotate',
      ['rotate', 'active', '--grace', '0'],
      (r) => expect(r.out).toMatch(/^Rotated active \(id-active\)\n {2}new apiSecret: kgs_[0-9A-Za-z]{46}\n/),
    ],
    ['revoke', ['revoke', 'active', '--reason', 'left'], (r) => expect(r.out).toBe('revoked active (id-active)\n')],
    ['delete', ['delete', 'gone'], (r) => expect(r.out).toBe('deleted gone (id-gone)\n')],
    [
      'export',
      ['export'],
      (r) =>
        expect(r.out).toMatch(
          /^# keygate keys export \(no secrets: not importable\)\nkeys:\n {2}- id: id-active\n {4}apiKey: active\n/,
        ),
    ],
    [
      'import',
      ['import', KEYS_FILE],
      (r) => expect(r.out).toBe('imported 1 new, replaced 0, skipped 1 existing (use --replace to overwrite)\n'),
    ],
  ])('%s', async (_name, args, check) => {
    const r = await keys(...args, '--verbose');
    expect(r.code, r.err).toBe(0);
    check(r);
    for (const entry of auditActions(r)) expect(entry.actor).toBe('unit-test');
  });

  it('the audit entries reach the terminal only with --verbose (issue 41: 1,001 lines for a 1,000-key import)', async () => {
    const quiet = await keys('import', KEYS_FILE, '--replace');
    // No audit lines; only the warning that the store holds its secrets unencrypted (this context seals nothing).
    expect(quiet.code).toBe(0);
    expect(quiet.err).toMatch(/^warning: 2 secrets were stored unencrypted: [^\n]*\n$/);
    const verbose = await keys('import', KEYS_FILE, '--replace', '--verbose');
    expect(auditActions(verbose).map((a) => a.action)).toEqual(['import-replace', 'import-replace']);
  });

  it('every change is audited once with its action, through the shared key operations', async () => {
    const audited = async (...args: string[]) => auditActions(await keys(...args, '--verbose')).map((a) => a.action);
    expect(await audited('create')).toEqual(['create']);
    expect(await audited('update', 'active', '--label', 'l')).toEqual(['update']);
    expect(await audited('rotate', 'active')).toEqual(['rotate']);
    expect(await audited('import', KEYS_FILE, '--replace')).toEqual(['import', 'import-replace']);
    expect(await store.getKey('active')).toMatchObject({ secret: 'replaced-secret-0123456789' });
    expect(await audited('revoke', 'active')).toEqual(['revoke']);
    // Revocation wins: importing the active record over the revoked key is refused, nothing audited.
    expect(await audited('import', KEYS_FILE, '--replace')).toEqual([]);
    expect(await store.getKey('active')).toMatchObject({ state: 'revoked' });
    expect(await audited('delete', 'active')).toEqual(['delete']);
    expect(await audited('export', '--with-secrets')).toEqual(['export-with-secrets']);
    expect(await audited('list')).toEqual([]);
  });

  it('changes what it says: revoke, delete, rotate, update are in the store afterwards', async () => {
    await keys('revoke', 'active', '--reason', 'left');
    expect(await store.getKey('active')).toMatchObject({ state: 'revoked', revokeReason: 'left' });
    await keys('delete', 'active');
    expect(await store.getKey('active')).toBeNull();
    const before = await store.getKey('gone');
    await keys('import', KEYS_FILE);
    expect((await store.getKey('imported-1'))?.scopes).toEqual(['a']);
    expect(await store.getKey('gone')).toEqual(before);
  });

  it("export carries the owners' own limits as the keys file's owners:, and import sets them (kept unless --replace)", async () => {
    await store.putOwner({ owner: 'acme', rateLimit: { rate: '12/h', burst: 12 } }, undefined);
    const exported = await keys('export', '--with-secrets', '--json');
    const doc = JSON.parse(exported.out) as { owners?: unknown };
    expect(doc.owners).toEqual({ acme: { rateLimit: { rate: '12/h', burst: 12 } } });
    const file = join(dir, 'with-owners.json');
    writeFileSync(
      file,
      JSON.stringify({
        ...doc,
        owners: { acme: { rateLimit: { rate: '1/s' } }, beta: { rateLimit: { rate: '3/m' } } },
      }),
    );
    await store.putOwner({ owner: 'acme', rateLimit: { rate: '12/h', burst: 12 } }, undefined);
    const kept = await keys('import', file);
    expect(kept.out).toContain("set 1 of 2 owners' limits");
    expect((await store.readOwner('acme'))?.rateLimit).toEqual({ rate: '12/h', burst: 12 });
    expect((await store.readOwner('beta'))?.rateLimit).toEqual({ rate: '3/m' });
    expect(store.ownerLimit('beta')?.burst).toBe(3);
    await keys('import', file, '--replace');
    expect((await store.readOwner('acme'))?.rateLimit).toEqual({ rate: '1/s' });
  });
});

describe('keygate keys list: pages', () => {
  it('--limit prints one page and the next cursor on stderr; --cursor goes on from there', async () => {
    const first = await keys('list', '--limit', '1');
    expect(first.code).toBe(0);
    expect(first.out.split('\n').map((l) => l.split(/\s+/)[0])).toEqual(['API', 'active', '']);
    const cursor = /^more keys follow: --cursor (\S+)\n$/.exec(first.err)?.[1] as string;
    expect(cursor).toBeDefined();
    const second = await keys('list', '--limit', '1', '--cursor', cursor, '--json');
    expect(JSON.parse(second.out)).toMatchObject({ keys: [{ apiKey: 'gone' }], nextCursor: null });
    expect(second.err).toBe('');
  });

  it('without --limit, every key, read page by page (more than one page of 500)', async () => {
    for (let i = 0; i < 600; i++) await store.putKey(makeKey({ apiKey: `many-${String(i).padStart(3, '0')}` }));
    const all = await keys('list', '--json');
    const listed = (JSON.parse(all.out) as Array<{ apiKey: string }>).map((k) => k.apiKey);
    expect(listed).toHaveLength(602);
    expect(listed).toEqual([...listed].sort());
  });
});

describe('keygate keys --json: every action prints JSON', () => {
  const cases: Record<string, [string[], (v: Record<string, unknown>) => void]> = {
    create: [
      ['create', '--owner', 'acct_1', '--json'],
      (v) => expect(Object.keys(v).sort()).toEqual(['allowIps', 'apiKey', 'apiSecret', 'id', 'owner', 'scopes']),
    ],
    list: [
      ['list', '--json'],
      (v) => expect((v as unknown as Array<{ apiKey: string }>).map((k) => k.apiKey)).toEqual(['active', 'gone']),
    ],
    show: [['show', 'active', '--json'], (v) => expect(v).toMatchObject({ apiKey: 'active', status: 'active' })],
    usage: [
      ['usage', 'active', '--days', '2', '--json'],
      (v) => expect(v).toMatchObject({ apiKey: 'active', days: 2, total: 0, lastUsedAt: null }),
    ],
    update: [
      ['update', 'active', '--label', 'new', '--json'],
      (v) => expect(v).toMatchObject({ apiKey: 'active', label: 'new' }),
    ],
    rotate: [
      ['rotate', 'active', '--json'],
      (v) => expect(Object.keys(v).sort()).toEqual(['apiKey', 'apiSecret', 'id', 'previousSecretValidUntil']),
    ],
    revoke: [
      ['revoke', 'active', '--reason', 'r', '--json'],
      (v) => expect(v).toMatchObject({ apiKey: 'active', status: 'revoked', state: 'revoked', revokeReason: 'r' }),
    ],
    delete: [['delete', 'active', '--json'], (v) => expect(v).toEqual({ deleted: 'active', id: 'id-active' })],
    credits: [
      ['credits', 'metered', '--add', '5', '--json'],
      (v) => expect(v).toEqual({ remaining: 15, refill: null, nextRefillAt: null }),
    ],
    export: [
      ['export', '--json'],
      (v) =>
        expect(v).toEqual({
          keys: [expect.objectContaining({ apiKey: 'active' }), expect.objectContaining({ apiKey: 'gone' })],
        }),
    ],
    import: [
      ['import', KEYS_FILE, '--json'],
      (v) => expect(v).toEqual({ total: 2, created: 1, replaced: 0, skipped: 1, complete: true }),
    ],
    reencrypt: [['reencrypt', '--json'], (v) => expect(v).toEqual({ resealed: 2 })],
  };

  it('has a case for every action in the table', () => {
    expect(Object.keys(cases).sort()).toEqual(KEY_ACTIONS.map((a) => a.spec.name).sort());
  });

  it.each(Object.entries(cases))('%s --json', async (name, [args, check]) => {
    encrypted = true;
    // A top-up needs a key with credits (the seeded keys have none).
    if (name === 'credits') await store.putKey(makeKey({ apiKey: 'metered', credits: { remaining: 10 } }));
    const r = await keys(...args);
    expect(r.code, r.err).toBe(0);
    check(JSON.parse(r.out) as Record<string, unknown>);
    expect(r.out).not.toContain('secret-for-'); // only create and rotate print a secret, and only the new one
  });
});

describe('keygate keys: a missing key is exit 1 on stderr', () => {
  it.each(['show', 'usage', 'update', 'rotate', 'revoke', 'delete'])('%s nope', async (action) => {
    const r = await keys(action, 'nope', ...(action === 'update' ? ['--label', 'x'] : []));
    expect(r).toEqual({ code: 1, out: '', err: `keygate keys ${action}: no key "nope"\n` });
  });

  it.each([
    [
      'update of a revoked key',
      ['update', 'gone', '--label', 'x'],
      'the key is revoked: a revoked key cannot be changed',
    ],
    ['revoke of a revoked key', ['revoke', 'gone'], 'the key is already revoked'],
    ['rotate of a revoked key', ['rotate', 'gone'], 'only an active key can be rotated'],
  ])('%s is refused with exit 1', async (_name, args, message) => {
    const r = await keys(...args);
    expect(r).toEqual({ code: 1, out: '', err: `keygate keys ${args[0]}: ${message}\n` });
  });
});

describe('keygate keys: usage errors are exit 2 on stderr, naming the action', () => {
  it.each<[string[], string | RegExp]>([
    [['list', '--jsn'], "unknown option '--jsn'"],
    [['create', '--reason', 'x'], "unknown option '--reason'"],
    [['create', '--scopes'], "option '--scopes' needs a value"],
    [['create', '--json=yes'], "option '--json' takes no value"],
    [['show'], 'missing argument <apiKey>'],
    [['show', 'a', 'b'], 'unexpected argument "b"'],
    [['import'], 'missing argument <file>'],
    [['create', '--ttl', 'soon'], '--ttl: expected a duration like 30d, 12h, 90m, got soon'],
    [['create', '--ttl', '1d', '--expires-at', '2030-01-01'], 'use only one of --expires-at, --ttl, --no-expiry'],
    [['create', '--expires-at', 'someday'], '--expires-at: not a date: someday'],
    [['create', '--burst', '3'], '--burst needs --rate-limit'],
    [['create', '--burst', 'many', '--rate-limit', '1/s'], '--burst: expected a whole number of requests, got many'],
    [['update', 'active', '--rate-limit', 'none', '--burst', '2'], '--burst cannot go with --rate-limit none'],
    [['update', 'active'], /^nothing to change/],
    [['create', '--binding', 'strict'], '--binding: expected off or required, got strict'],
    [['list', '--state', 'dormant'], '--state must be active, revoked or expired'],
    [['list', '--sort', 'name'], /^--sort: only "last-used"/],
    [['list', '--limit', '0'], '--limit: a whole number from 1 to 500'],
    [['list', '--limit', '501'], '--limit: a whole number from 1 to 500'],
    [['list', '--cursor', 'YWN0aXZl'], '--cursor: a cursor printed by a list with --limit, given with --limit'],
    [
      ['list', '--limit', '1', '--cursor', 'a.b'],
      '--cursor: a cursor printed by a list with --limit, given with --limit',
    ],
    [['list', '--limit', '1', '--sort', 'last-used'], '--sort orders the whole list: not with --limit'],
    [['usage', 'active', '--days', '36'], /^--days: a whole number from 1 to 35/],
    [['rotate', 'active', '--grace', 'long'], '--grace: expected a duration like 300s or 10m, got long'],
  ])('%j', async (args, message) => {
    const r = await keys(...args);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    const [first = '', second] = r.err.split('\n');
    const text = first.slice(`keygate keys ${args[0]}: `.length);
    expect(first.startsWith(`keygate keys ${args[0]}: `), r.err).toBe(true);
    if (typeof message === 'string') expect(text).toBe(message);
    else expect(text).toMatch(message);
    expect(second).toBe(`See "keygate keys ${args[0]} --help".`);
  });

  it.each<[string, string[], RegExp]>([
    [
      'a key the record parser refuses',
      ['create', '--allow-ip', '10.0.0.0/33'],
      /^keygate keys create: \n {2}- key\.allowIps/,
    ],
    [
      'a rate the record parser refuses',
      ['update', 'active', '--rate-limit', '10/d'],
      /^keygate keys update: \n {2}- key\.rateLimit/,
    ],
    [
      'an invalid keys file, nothing imported',
      ['import', BROKEN_FILE],
      /^keygate keys import: nothing imported: \S+broken\.yaml: keys\[1\]\.apiSecret: required\n$/,
    ],
    [
      'reencrypt without an encryption key',
      ['reencrypt'],
      /^keygate keys reencrypt: KEYGATE_SECRET_ENCRYPTION_KEY is not set\n$/,
    ],
    ['an unknown action', ['frobnicate'], /^keygate keys: unknown command "frobnicate"\n/],
    ['an unknown option before the action', ['--jsn'], /^keygate keys: unknown option '--jsn'\n/],
  ])('%s', async (_name, args, message) => {
    const r = await keys(...args);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(await store.getKey('fine-key')).toBeNull();
  });

  it('no action: the keys help, on stderr', async () => {
    const r = await keys();
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err).toMatch(/^Usage: keygate keys <command>/);
  });
});

describe('keygate keys: text that would rewrite the terminal', () => {
  // A tenant's label forging a row of the operator's table (stored before the rule, or written around it).
  const FORGED = 'ok\r\u001b[2Kkg_forged  key_x  active\u009b31m\u202eevil\u2066';

  it.each([['list'], ['list', '--json'], ['show', 'tenant']])('keys %s prints it escaped', async (...args) => {
    await store.putKey({ ...makeKey({ apiKey: 'tenant' }), label: FORGED });
    const r = await keys(...args);
    expect(r.code).toBe(0);
    // eslint-disable-next-line no-control-regex -- what must not reach the terminal raw
    expect(r.out).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    expect(r.out).toContain('\\u001b[2K');
    expect(r.out).toContain('\\u202eevil');
    if (args.includes('--json') || args[0] === 'show') expect(JSON.stringify(JSON.parse(r.out))).toContain('tenant');
  });

  it.each<[string, string[]]>([
    ['create --label', ['create', '--label', '\u001b[31mred']],
    ['update --label', ['update', 'active', '--label', 'line\nbreak']],
    ['revoke --reason', ['revoke', 'active', '--reason', '\u202eesrever']],
  ])('%s with a control or bidi character: usage error (exit 2), nothing written', async (_name, args) => {
    const before = await store.listKeys({ limit: 500 });
    const r = await keys(...args);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/key\.(label|reason): must not contain control characters/);
    expect(await store.listKeys({ limit: 500 })).toEqual(before);
  });
});

describe('keygate keys <action> --help', () => {
  it.each(KEY_ACTIONS.map((a) => [a.spec.name, a] as const))(
    '%s: its own usage and every one of its options, on stdout',
    async (name, action) => {
      for (const args of [
        [name, '--help'],
        [name, '-h'],
      ]) {
        const r = await keys(...args);
        expect(r).toMatchObject({ code: 0, err: '' });
        expect(r.out.split('\n')[0]).toBe(
          `Usage: keygate keys ${[name, ...(action.spec.args ?? []), ...(action.spec.options.length > 0 ? ['[options]'] : [])].join(' ')}`,
        );
        for (const o of action.spec.options) expect(r.out).toMatch(new RegExp(`^ {2}--${o.name}\\b.* {2}\\S`, 'm'));
        expect(r.out).toContain('--json');
      }
    },
  );

  it('keygate keys --help lists every action with its summary', async () => {
    const r = await keys('--help');
    expect(r.code).toBe(0);
    for (const a of KEY_ACTIONS)
      expect(r.out).toMatch(new RegExp(`^ {2}${a.spec.name} +${a.spec.summary.replace(/[()]/g, '\\$&')}$`, 'm'));
  });
});

describe('keygate keys: binding (issue 43) through create, update, export and import', () => {
  it('create --binding required stores it and shows it; update --binding off removes it', async () => {
    const made = await keys('create', '--binding', 'required', '--json');
    expect(made.code).toBe(0);
    const { apiKey, binding } = JSON.parse(made.out) as { apiKey: string; binding?: string };
    expect(binding).toBe('required');
    expect(await store.getKey(apiKey)).toMatchObject({ binding: 'required' });
    const text = await keys('create', '--binding', 'required');
    expect(text.out).toMatch(/^ {2}binding: {3}required$/m);
    const off = await keys('update', apiKey, '--binding', 'off');
    expect(off.code).toBe(0);
    expect((JSON.parse(off.out) as { binding?: string }).binding).toBeUndefined();
    expect((await store.getKey(apiKey))?.binding).toBeUndefined();
    await keys('update', apiKey, '--binding', 'required');
    expect(JSON.parse((await keys('show', apiKey, '--json')).out)).toMatchObject({ binding: 'required' });
  });

  it('export carries it and import brings it back', async () => {
    await keys('update', 'active', '--binding', 'required');
    const out = join(dir, 'bound-export.json');
    const r = await keys('export', '--with-secrets', '--out', out);
    expect(r.code, r.err).toBe(0);
    const exported = JSON.parse(readFileSync(out, 'utf8')) as { keys: Array<{ apiKey: string; binding?: string }> };
    expect(exported.keys.find((k) => k.apiKey === 'active')?.binding).toBe('required');
    await keys('delete', 'active');
    const imported = await keys('import', out);
    expect(imported.code, imported.err).toBe(0);
    expect(await store.getKey('active')).toMatchObject({ binding: 'required' });
  });
});

describe('export --out', () => {
  it('writes a new 0600 file, JSON for .json, and says so on stderr', async () => {
    const out = join(dir, 'exported.json');
    const r = await keys('export', '--with-secrets', '--out', out);
    expect(r.code).toBe(0);
    expect(r.out).toBe('');
    expect(r.err).toContain(`exported 2 keys to ${out} with secrets`);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect((JSON.parse(readFileSync(out, 'utf8')) as { keys: Array<{ apiSecret: string }> }).keys[0]?.apiSecret).toBe(
      'secret-for-active-0123456789',
    );
  });
});
