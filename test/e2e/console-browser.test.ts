import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR } from '../../src/management/management-server.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { managementClient, writeTokensFile, type ManagementClient, type TokensFile } from '../helpers/management.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { claims, signWithKey, token } from '../helpers/tokens.js';
import { manualClock } from '../../src/clock.js';
import { guard } from '../helpers/slowdown.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { startRegions } from '../helpers/regions.js';

/** How long the page may take to show what the API already did: a hang guard (a busy machine renders slowly), not a bound under test. */
const UI_WAIT = { timeout: guard(5_000) };

/** Debian's chromium (npm run test:all installs it); driven through the DevTools protocol by playwright-core. */
const CHROMIUM = '/usr/bin/chromium';
/** Where the screenshot in docs/management-api.md lives; rewritten only when KEYGATE_WRITE_SCREENSHOT=1. */
const SCREENSHOT = join(CONSOLE_DIR, '..', 'docs', 'console-keys.png');
/** The usage chart's screenshot in docs/keys.md; rewritten only when KEYGATE_WRITE_SCREENSHOT=1. */
const USAGE_SCREENSHOT = join(CONSOLE_DIR, '..', 'docs', 'console-usage.png');

describe('operator console in a real browser', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let tokens: TokensFile;
  let api: ManagementClient;
  let context: BrowserContext;
  let page: Page;
  let userDataDir: string;
  const apiRequests: Array<{ url: string; headers: Record<string, string> }> = [];
  /** Every answer of 400 or more the page got (a missing favicon included). */
  const failedLoads: string[] = [];
  const signIn = async (name: 'operator' | 'viewer') => {
    await page.fill('#token', tokens.tokens[name] as string);
    await page.click('#sign-in-form button[type=submit]');
    await page.waitForSelector('#key-table tbody tr');
  };
  type Listed = { apiKey: string; id: string; createdAt: string; lastUsedAt: string | null; alg: string };
  const listed = async () => ((await api.call('GET', '/v1/keys')).json() as { keys: Listed[] }).keys;
  const shownKeys = () =>
    page.locator('#key-table tbody tr').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.apiKey));
  const newestFirst = (keys: Listed[]) =>
    [...keys]
      .sort((a, b) =>
        a.createdAt === b.createdAt ? (a.apiKey < b.apiKey ? -1 : 1) : a.createdAt < b.createdAt ? 1 : -1,
      )
      .map((k) => k.apiKey);

  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (npm run test:all does)`);
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    tokens = writeTokensFile([
      { name: 'operator', access: 'write' },
      { name: 'viewer', access: 'read' },
    ]);
    gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      env: { KEYGATE_MANAGEMENT_PORT: '0', KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file },
    });
    api = managementClient(gate.managementUrl as string, tokens.tokens.operator as string);
    // Keys already there, so the list (and its screenshot) shows what an operator sees.
    await api.call('POST', '/v1/keys', {
      json: { owner: 'acct_1042', label: 'billing export', scopes: ['accounts:read'], allowIps: ['10.0.0.0/8'] },
    });
    await api.call('POST', '/v1/keys', {
      json: {
        owner: 'acct_1042',
        label: 'mobile app',
        scopes: ['accounts:read', 'orders:read'],
        expiresAt: '2027-06-30T00:00:00Z',
      },
    });
    const old = (
      await api.call('POST', '/v1/keys', {
        json: { owner: 'acct_2077', label: 'old laptop', scopes: ['accounts:read'] },
      })
    ).json() as { apiKey: string };
    await api.call('POST', `/v1/keys/${old.apiKey}/revoke`, { json: { reason: 'laptop lost' } });
    userDataDir = mkdtempSync(join(tmpdir(), 'keygate-chromium-'));
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1360, height: 560 },
    });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gate.managementUrl as string });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('request', (r) => {
      if (new URL(r.url()).pathname.startsWith('/v1/')) apiRequests.push({ url: r.url(), headers: r.headers() });
    });
    page.on('response', (r) => {
      if (r.status() >= 400) failedLoads.push(`${r.status()} ${new URL(r.url()).pathname}`);
    });
  }, guard(60_000));
  afterAll(async () => {
    await context?.close();
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
    await gate?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('the console is files served by Keygate under CSP default-src self, with no inline script', async () => {
    const res = await page.goto(`${gate.managementUrl}/console/`);
    expect(res?.status()).toBe(200);
    expect(res?.headers()['content-security-policy']).toMatch(/^default-src 'self'(;|$)/);
    const html = readFileSync(join(CONSOLE_DIR, 'index.html'), 'utf8');
    // Every script has a src on this origin; no event-handler attributes, no javascript: URLs.
    expect([...html.matchAll(/<script\b([^>]*)>/g)].map((m) => m[1])).toEqual([' type="module" src="console.js"']);
    expect(html).not.toMatch(/\son[a-z]+=|javascript:|https?:\/\//i);
    for (const asset of ['console.js', 'console.css']) {
      const r = await send(gate.managementUrl as string, `/console/${asset}`);
      expect([r.status, String(r.headers['content-security-policy']).startsWith("default-src 'self'")]).toEqual([
        200,
        true,
      ]);
    }
  });

  it('has an icon: the page names its own, /favicon.ico leads to it, and loading the page gets no error answer', async () => {
    const icon = await send(gate.managementUrl as string, '/favicon.ico');
    expect([icon.status, icon.headers.location]).toEqual([308, '/console/favicon.svg']);
    const svg = await send(gate.managementUrl as string, '/console/favicon.svg');
    expect([svg.status, svg.headers['content-type']]).toEqual([200, 'image/svg+xml']);
    expect(await page.getAttribute('link[rel=icon]', 'href')).toBe('favicon.svg');
    await page.reload();
    await page.waitForLoadState('load');
    expect(failedLoads).toEqual([]);
  });

  it('a read-only token sees the keys and no button that would change one', async () => {
    await signIn('viewer');
    expect(await page.textContent('#who')).toBe('signed in as viewer (read-only)');
    expect(await page.isVisible('#read-only')).toBe(true);
    expect(await page.textContent('#read-only')).toContain('read keys only');
    expect(await page.isVisible('#new-key')).toBe(false);
    expect(await page.locator('#key-table tbody tr').count()).toBe(3);
    // History only reads the audit log, Usage the counts; nothing that would change a key.
    expect(await page.locator('#key-table td.actions button:not(.history):not(.usage)').count()).toBe(0);
    expect(await page.locator('#key-table td.actions button.history').count()).toBe(3);
    expect(await page.locator('#key-table td.actions button.usage').count()).toBe(3);
    await page.click('#sign-out');
    expect(failedLoads).toEqual([]); // no refused call on the way (nothing offered that would be refused)
  });

  it('shows each key id (what upstreams get in X-Api-Key-Id) and lists newest first, or by API key', async () => {
    await signIn('operator');
    expect(await page.textContent('#who')).toBe('signed in as operator (read and write)');
    expect(await page.isVisible('#read-only')).toBe(false);
    const keys = await listed();
    expect(await shownKeys()).toEqual(newestFirst(keys));
    for (const k of keys)
      expect(await page.locator(`#key-table tbody tr[data-api-key="${k.apiKey}"] .key-id`).textContent()).toBe(k.id);
    await page.selectOption('#sort', 'api-key');
    expect(await shownKeys()).toEqual(keys.map((k) => k.apiKey).sort());
    await page.selectOption('#sort', 'created');
    expect(await shownKeys()).toEqual(newestFirst(keys));
    await page.click('#sign-out');
  });

  it(
    'sign in, create a key and read its secret once, sign a request with it, revoke it, the next request gets 404 10013',
    { timeout: guard(120_000) },
    async () => {
      await signIn('operator');
      expect(await page.locator('#key-table tbody tr').count()).toBe(3);

      await page.click('#new-key');
      // Hints sit beside the fields, never inside them where they would read as values already filled in.
      expect(await page.locator('#create-form input[placeholder]').count()).toBe(0);
      await page.fill('#create-form input[name=owner]', 'acct_3141');
      await page.fill('#create-form input[name=label]', 'console demo');
      await page.fill('#create-form input[name=scopes]', 'accounts:read');
      await page.click('#create-form button[type=submit]');
      await page.waitForSelector('#secret-dialog[open]');
      const apiKey = (await page.textContent('#secret-api-key')) as string;
      const secret = (await page.textContent('#secret-value')) as string;
      expect(secret).toMatch(/^kgs_[0-9A-Za-z]{46}$/);
      await page.click('#copy-secret');
      await expect.poll(() => page.textContent('#copy-secret'), UI_WAIT).toBe('Copied');
      expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(secret);
      expect(await page.textContent('#secret-title')).toBe('Key created');
      await page.click('#secret-done');
      // Shown once: gone from the page, and no later answer carries it.
      expect(await page.content()).not.toContain(secret);
      // The new key is on top (newest first), with its id.
      await expect.poll(shownKeys, UI_WAIT).toEqual(newestFirst(await listed()));
      expect(newestFirst(await listed())[0]).toBe(apiKey);

      const t1 = token(apiKey, secret);
      const before = upstream.received.length;
      const ok = await send(gate.url, ACCOUNTS_PATH, { headers: { ...bearer(t1), 'X-Api-Key-Owner': 'acct_forged' } });
      expect(ok.status).toBe(200);
      expect([upstream.received[before]?.headers['x-api-key-owner'], upstream.received.length - before]).toEqual([
        'acct_3141',
        1,
      ]);

      const row = page.locator(`#key-table tbody tr[data-api-key="${apiKey}"]`);
      await expect.poll(() => row.locator('.owner').textContent(), UI_WAIT).toBe('acct_3141');
      // The list was drawn before the request: filtering draws it again, with the key's last use.
      await page.click('#filter button[type=submit]');
      await expect.poll(() => row.locator('.last-used').textContent(), UI_WAIT).not.toBe('never');
      // By last use: the only key ever used comes first whatever its age.
      await page.selectOption('#sort', 'last-used');
      expect((await shownKeys())[0]).toBe(apiKey);
      if (process.env.KEYGATE_WRITE_SCREENSHOT === '1') await page.locator('main').screenshot({ path: SCREENSHOT });

      // Change scopes and allow-list: the proxy applies them at once.
      await row.locator('button', { hasText: 'Change' }).click();
      await page.fill('#edit-form input[name=scopes]', 'accounts:read, orders:read');
      await page.fill('#edit-form input[name=allowIps]', '127.0.0.1/32, ::1');
      await page.click('#edit-form button[type=submit]');
      await expect.poll(() => row.locator('.allow-ips').textContent(), UI_WAIT).toBe('127.0.0.1/32, ::1');
      expect(await row.locator('.scopes').textContent()).toBe('accounts:read, orders:read');
      await page.click('#new-key');
      await page.fill('#create-form input[name=scopes]', 'bad scope');
      await page.fill('#create-form input[name=allowIps]', 'not-a-cidr');
      await page.click('#create-form button[type=submit]');
      await expect.poll(() => page.textContent('#create-form .error'), UI_WAIT).toContain('invalid scope "bad scope"');
      // In the form's words: the field's label, never the request's internal path (body.allowIps).
      const error = (await page.textContent('#create-form .error')) as string;
      expect(error).toMatch(/^Scopes: /);
      expect(error).toContain('Allow-list: ');
      expect(error).not.toMatch(/body\.|key\./);
      await page.click('#create-form .cancel');

      // Expiry and rate limit from the New key dialog.
      await page.click('#new-key');
      await page.fill('#create-form input[name=label]', 'limited');
      await page.fill('#create-form input[name=scopes]', 'accounts:read');
      await page.fill('#create-form input[name=expiresAt]', '2031-01-15');
      await page.fill('#create-form input[name=rate]', '20/m');
      await page.fill('#create-form input[name=burst]', '5');
      await page.selectOption('#create-form select[name=binding]', 'required');
      await page.click('#create-form button[type=submit]');
      await page.waitForSelector('#secret-dialog[open]');
      const limitedKey = (await page.textContent('#secret-api-key')) as string;
      await page.click('#secret-done');
      expect((await api.call('GET', `/v1/keys/${limitedKey}`)).json()).toMatchObject({
        expiresAt: '2031-01-15T00:00:00.000Z',
        rateLimit: { rate: '20/m', burst: 5 },
        binding: 'required',
      });
      await page.click('#new-key');
      await page.fill('#create-form input[name=rate]', 'fast');
      await page.click('#create-form button[type=submit]');
      await expect.poll(() => page.textContent('#create-form .error'), UI_WAIT).toMatch(/^Rate limit: /);
      await page.click('#create-form .cancel');

      // Rotate: the operator picks the grace period and gives a reason; the audit records both.
      await row.locator('button', { hasText: 'Rotate' }).click();
      await page.waitForSelector('#rotate-dialog[open]');
      await page.selectOption('#rotate-form select[name=grace]', '3600');
      await page.fill('#rotate-form input[name=reason]', 'scheduled rotation');
      await page.click('#rotate-form button[type=submit]');
      await page.waitForSelector('#secret-dialog[open]');
      expect(await page.textContent('#secret-title')).toBe('Secret rotated');
      const rotatedSecret = (await page.textContent('#secret-value')) as string;
      await page.click('#secret-done');
      expect(rotatedSecret).not.toBe(secret);
      const raw = new Redis(redis.url);
      const audit = (await raw.xrange('keygate:{keystore}:audit', '-', '+')).map(
        ([, f]) => JSON.parse(f[1] as string) as { action: string; apiKey: string; detail?: string; reason?: string },
      );
      raw.disconnect();
      expect(
        audit.filter((e) => e.apiKey === apiKey && e.action === 'rotate').map((e) => [e.detail, e.reason]),
      ).toEqual([['grace=3600000ms', 'scheduled rotation']]);
      // Within the grace period both secrets sign requests that pass.
      expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(apiKey, rotatedSecret)) })).status).toBe(200);
      expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(apiKey, secret)) })).status).toBe(200);

      await row.locator('button', { hasText: 'Revoke' }).click();
      await page.waitForSelector('#confirm-dialog[open]');
      await page.fill('#confirm-dialog input[name=reason]', 'demo over');
      await page.click('#confirm-dialog button[value=yes]');
      await expect.poll(() => row.locator('.status').textContent(), UI_WAIT).toBe('revoked');
      const refused = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(apiKey, secret)) });
      expect([refused.status, JSON.parse(refused.body)]).toEqual([404, { code: 10013, message: 'Resource not found' }]);
      const stored = (await api.call('GET', `/v1/keys/${apiKey}`)).json() as { revokeReason: string };
      expect(stored.revokeReason).toBe('demo over');
      // The key's history, from the audit log: each change with its reason, never a secret.
      await row.locator('button', { hasText: 'History' }).click();
      await page.waitForSelector('#history-dialog[open]');
      await expect
        .poll(() => page.locator('#history-dialog tbody tr .action').allTextContents(), UI_WAIT)
        .toEqual(expect.arrayContaining(['create', 'rotate', 'revoke']));
      const historyText = (await page.textContent('#history-dialog tbody')) as string;
      expect(historyText).toContain('reason: scheduled rotation');
      expect(historyText).toContain('reason: demo over');
      expect(historyText).not.toContain(secret);
      expect(historyText).not.toContain(rotatedSecret);
      await page.click('#history-dialog .cancel');
    },
  );

  /** Signed in as `name` from whatever state the previous test left. */
  const signInAgain = async (name: 'operator' | 'viewer') => {
    if (await page.isVisible('#sign-out')) await page.click('#sign-out');
    await signIn(name);
  };

  it.each(['EdDSA', 'ES256'] as const)(
    'a write token creates an %s key from a pasted public key: no secret shown, its fingerprint is, and the private key signs',
    async (alg) => {
      await signInAgain('operator');
      const { publicKey, privateKey } =
        alg === 'EdDSA' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
      const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
      await page.click('#new-key');
      // The field is offered only for the algs that need it.
      expect(await page.isVisible('#create-form textarea[name=publicKey]')).toBe(false);
      await page.selectOption('#create-form select[name=alg]', alg);
      expect(await page.isVisible('#create-form textarea[name=publicKey]')).toBe(true);
      // The other curve's key is refused, in the form's words, and nothing is created.
      const before = (await listed()).length;
      const other = (
        alg === 'EdDSA' ? generateKeyPairSync('ec', { namedCurve: 'prime256v1' }) : generateKeyPairSync('ed25519')
      ).publicKey
        .export({ type: 'spki', format: 'pem' })
        .toString();
      await page.fill('#create-form textarea[name=publicKey]', other);
      await page.fill('#create-form input[name=scopes]', 'accounts:read');
      await page.click('#create-form button[type=submit]');
      await expect.poll(() => page.textContent('#create-form .error'), UI_WAIT).toMatch(/^Public key: /);
      expect((await listed()).length).toBe(before);

      await page.fill('#create-form input[name=label]', `pasted ${alg}`);
      await page.fill('#create-form textarea[name=publicKey]', pem);
      await page.click('#create-form button[type=submit]');
      await page.waitForSelector('#secret-dialog[open]');
      const apiKey = (await page.textContent('#secret-api-key')) as string;
      const stored = (await api.call('GET', `/v1/keys/${apiKey}`)).json() as {
        alg: string;
        publicKeyFingerprint: string;
        label: string;
      };
      expect(stored).toMatchObject({ alg, label: `pasted ${alg}` });
      // No secret row, no copy button: the fingerprint of the key Keygate holds instead.
      expect(await page.isVisible('#secret-row')).toBe(false);
      expect(await page.isVisible('#copy-secret')).toBe(false);
      expect(await page.textContent('#secret-fingerprint')).toBe(`${alg} ${stored.publicKeyFingerprint}`);
      expect(await page.textContent('#secret-intro')).toContain('no secret to copy');
      await page.click('#secret-done');
      const row = page.locator(`#key-table tbody tr[data-api-key="${apiKey}"]`);
      await expect.poll(() => row.locator('.alg').textContent(), UI_WAIT).toMatch(new RegExp(`^${alg} sha256:`));

      const signed = signWithKey({ alg, typ: 'JWT' }, claims(apiKey), privateKey);
      const seen = upstream.received.length;
      expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(signed) })).status).toBe(200);
      expect(upstream.received.length - seen).toBe(1);

      // The next HS256 key shows its secret again: the dialog is not left in the public-key form.
      await page.click('#new-key');
      await page.fill('#create-form input[name=scopes]', 'accounts:read');
      await page.click('#create-form button[type=submit]');
      await page.waitForSelector('#secret-dialog[open]');
      expect(await page.isVisible('#secret-row')).toBe(true);
      expect((await page.textContent('#secret-value')) as string).toMatch(/^kgs_[0-9A-Za-z]{46}$/);
      await page.click('#secret-done');
    },
  );

  it('a write token deletes a key only once the key is typed; a read token is offered no Delete', async () => {
    const { apiKey, apiSecret } = (
      await api.call('POST', '/v1/keys', {
        json: { owner: 'acct_9001', label: 'to delete', scopes: ['accounts:read'] },
      })
    ).json() as { apiKey: string; apiSecret: string };
    expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(apiKey, apiSecret)) })).status).toBe(200);
    await signInAgain('viewer');
    expect(await page.locator('#key-table td.actions button', { hasText: 'Delete' }).count()).toBe(0);
    await signInAgain('operator');
    const row = page.locator(`#key-table tbody tr[data-api-key="${apiKey}"]`);
    const submit = page.locator('#delete-form button[type=submit]');

    // Cancel keeps the key.
    await row.locator('button', { hasText: 'Delete' }).click();
    await page.waitForSelector('#delete-dialog[open]');
    expect(await page.textContent('#delete-form .which')).toBe(apiKey);
    await page.click('#delete-form .cancel');
    expect((await api.call('GET', `/v1/keys/${apiKey}`)).status).toBe(200);

    await row.locator('button', { hasText: 'Delete' }).click();
    await page.waitForSelector('#delete-dialog[open]');
    expect(await submit.isDisabled()).toBe(true);
    // Another key's name, or a prefix of this one, does not arm the button; Enter does not get round it.
    await page.fill('#delete-form input[name=confirm]', apiKey.slice(0, -1));
    expect(await submit.isDisabled()).toBe(true);
    await page.press('#delete-form input[name=confirm]', 'Enter');
    // Submitting anyway (as a script or an older browser could) is refused by the page itself.
    await page.evaluate(() => (document.querySelector('#delete-form') as HTMLFormElement).requestSubmit());
    await expect.poll(() => page.textContent('#delete-form .error'), UI_WAIT).toContain('Type the API key');
    expect(await page.isVisible('#delete-dialog')).toBe(true);
    expect((await api.call('GET', `/v1/keys/${apiKey}`)).status).toBe(200);

    await page.fill('#delete-form input[name=confirm]', apiKey);
    expect(await submit.isDisabled()).toBe(false);
    await submit.click();
    await expect.poll(() => row.count(), UI_WAIT).toBe(0);
    expect(await page.isVisible('#delete-dialog')).toBe(false);
    expect((await api.call('GET', `/v1/keys/${apiKey}`)).status).toBe(404);
    const refused = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(apiKey, apiSecret)) });
    expect([refused.status, JSON.parse(refused.body)]).toEqual([404, { code: 10013, message: 'Resource not found' }]);
    // Audited, with the console's token as the actor.
    const raw = new Redis(redis.url);
    const audit = (await raw.xrange('keygate:{keystore}:audit', '-', '+')).map(
      ([, f]) => JSON.parse(f[1] as string) as { action: string; apiKey: string; actor: string },
    );
    raw.disconnect();
    expect(audit.filter((e) => e.apiKey === apiKey && e.action === 'delete').map((e) => e.actor)).toEqual(['operator']);
  });

  it("shows each key's owner budget and what is left of it (issue 42): the owner's own limit, spent by its keys' requests", async () => {
    await api.call('PUT', '/v1/owners/acct_2078', { json: { rateLimit: { rate: '5/h', burst: 5 } } });
    const made = (
      await api.call('POST', '/v1/keys', { json: { owner: 'acct_2078', label: 'budgeted', scopes: ['accounts:read'] } })
    ).json() as { apiKey: string; apiSecret: string };
    for (let i = 0; i < 2; i++)
      expect(
        (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(made.apiKey, made.apiSecret)) })).status,
      ).toBe(200);
    // A reload signs out (the token lives in page memory only), whatever the test before left.
    await page.reload();
    await signIn('viewer');
    const budget = page.locator(`#key-table tbody tr[data-api-key="${made.apiKey}"] small.budget`);
    await expect.poll(() => budget.textContent(), UI_WAIT).toBe('budget 5/h burst 5: 3 of 5 left');
    // An owner without a limit of its own, and no policy default: no owner budget. Made here, so the case
    // does not depend on which keys earlier cases left (a key without an owner shows no budget line at all).
    const other = (
      await api.call('POST', '/v1/keys', {
        json: { owner: 'acct_nolimit', label: 'unbudgeted', scopes: ['accounts:read'] },
      })
    ).json() as { apiKey: string };
    await page.reload();
    await signIn('viewer');
    const otherBudget = page.locator(`#key-table tbody tr[data-api-key="${other.apiKey}"] small.budget`);
    await expect.poll(() => otherBudget.textContent(), UI_WAIT).toBe('no owner budget');
    await api.call('DELETE', `/v1/keys/${made.apiKey}`);
    await api.call('DELETE', `/v1/keys/${other.apiKey}`);
    // Left signed in, as the test before left it: the next one signs out first.
  });

  it("draws a key's and its owner's usage by outcome as SVG bars, one bar per bucket with its counts; credits shown only when the record has them", async () => {
    // A second instance on the same Redis, on a manual clock: its requests land in past hours as a client's would.
    const clock = manualClock(Date.now());
    const past = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, clock });
    try {
      const make = async (json: Record<string, unknown>) =>
        (
          await api.call('POST', '/v1/keys', { json: { owner: 'acct_usage', scopes: ['accounts:read'], ...json } })
        ).json() as { apiKey: string; apiSecret: string };
      const k1 = await make({ label: 'usage chart', rateLimit: { rate: '6/h', burst: 6 } });
      const k2 = await make({ label: 'wrong network', allowIps: ['10.0.0.0/8'] });
      const HOUR = 3_600_000;
      const now = Date.now();
      /** What each request should count: [hours ago, key, outcome, status]. */
      const plan: Array<[number, { apiKey: string; apiSecret: string }, string, number]> = [
        [4, k1, 'forwarded', 200],
        [4, k1, 'forwarded', 200],
        [4, k1, 'forwarded', 200],
        [2, k1, 'forwarded', 200],
        [2, k1, 'forwarded', 200],
        [2, k1, 'replay', 401],
        [1, k2, 'other_refusals', 403],
        [1, k2, 'other_refusals', 403],
        [0, k1, 'forwarded', 200],
        [0, k1, 'rate_limited', 429],
        [0, k1, 'rate_limited', 429],
      ];
      let last = '';
      for (const step of plan) {
        const [ago, k, outcome, status] = step;
        clock.set(now - ago * HOUR);
        // Signed at the instance's time (its nonce window is checked against that clock).
        const nonce = (BigInt(clock.nowMs()) * 1_000_000n + BigInt(plan.indexOf(step))).toString();
        const signed = outcome === 'replay' ? last : token(k.apiKey, k.apiSecret, { nonce });
        last = signed;
        expect((await send(past.url, ACCOUNTS_PATH, { headers: bearer(signed) })).status).toBe(status);
      }
      await past.keygate.store.flushUsage();
      /** The bars the plan should draw at a granularity: bucket start → counts, only the buckets shown. */
      const expected = (g: 'minute' | 'hour' | 'day', keys: string[]) => {
        const ms = { minute: 60_000, hour: HOUR, day: 24 * HOUR }[g];
        const shown = { minute: 60, hour: 48, day: 30 }[g];
        const first = Math.floor(Date.now() / ms) - shown + 1;
        const bars = new Map<string, Record<string, number>>();
        for (const [ago, k, outcome] of plan) {
          const b = Math.floor((now - ago * HOUR) / ms);
          if (!keys.includes(k.apiKey) || b < first) continue;
          const start = new Date(b * ms).toISOString();
          const bar = bars.get(start) ?? {};
          bar[outcome] = (bar[outcome] ?? 0) + 1;
          bars.set(start, bar);
        }
        return { shown, bars: Object.fromEntries(bars) };
      };
      const drawn = (section: string) =>
        page.locator(`#usage-dialog ${section} svg.usage-chart g.bar`).evaluateAll((bars) =>
          bars.map((b) => {
            const counts: Record<string, number> = {};
            for (const o of ['forwarded', 'replay', 'rate-limited', 'credits-exhausted', 'other-refusals']) {
              const n = Number(b.getAttribute(`data-${o}`));
              if (n > 0) counts[o.replace(/-/g, '_')] = n;
            }
            return { start: b.getAttribute('data-start') as string, counts, rects: b.querySelectorAll('rect').length };
          }),
        );
      const check = async (g: 'minute' | 'hour' | 'day') => {
        for (const [section, keys] of [
          ['.usage-key', [k1.apiKey]],
          ['.usage-owner', [k1.apiKey, k2.apiKey]],
        ] as const) {
          const want = expected(g, [...keys]);
          const bars = await drawn(section);
          expect(bars).toHaveLength(want.shown);
          const busy = bars.filter((b) => b.rects > 0);
          expect(Object.fromEntries(busy.map((b) => [b.start, b.counts]))).toEqual(want.bars);
          // One rect per outcome a bar counted: the stack is drawn, not only described.
          for (const b of busy) expect(b.rects).toBe(Object.keys(b.counts).length);
        }
      };
      await page.goto(`${gate.managementUrl}/console/`); // signed out: the token lives in page memory only
      await signIn('viewer');
      await page.click(`#key-table tbody tr[data-api-key="${k1.apiKey}"] button.usage`);
      await page.waitForSelector('#usage-dialog[data-drawn=hour]', UI_WAIT);
      await check('hour');
      expect(await page.textContent('#usage-dialog .usage-key h3')).toContain(`Key ${k1.apiKey}`);
      expect(await page.textContent('#usage-dialog .usage-owner h3')).toContain('Owner acct_usage (all its keys)');
      expect(await page.locator('#usage-dialog .usage-key li[data-outcome=rate_limited]').textContent()).toBe(
        'rate limited: 2',
      );
      // No credits on these records (unlimited): no credits line at all.
      expect(await page.locator('#usage-dialog p.credits:visible').count()).toBe(0);
      if (process.env.KEYGATE_WRITE_SCREENSHOT === '1') {
        await page.setViewportSize({ width: 1360, height: 900 });
        await page.locator('#usage-dialog').screenshot({ path: USAGE_SCREENSHOT });
        await page.setViewportSize({ width: 1360, height: 560 });
      }
      for (const g of ['day', 'minute'] as const) {
        await page.selectOption('#usage-dialog select[name=granularity]', g);
        await page.waitForSelector(`#usage-dialog[data-drawn=${g}]`, UI_WAIT);
        await check(g);
      }
      await page.click('#usage-dialog .cancel');
      await api.call('DELETE', `/v1/keys/${k1.apiKey}`);
      await api.call('DELETE', `/v1/keys/${k2.apiKey}`);
    } finally {
      await past.close();
    }
  });

  it("a write token sets a key's credits and tops up the key and its owner; the page reads what is left after each", async () => {
    const made = (
      await api.call('POST', '/v1/keys', {
        json: { owner: 'acct_credits', label: 'metered', scopes: ['accounts:read'] },
      })
    ).json() as { apiKey: string; apiSecret: string };
    await api.call('PUT', '/v1/owners/acct_credits', { json: { credits: { remaining: 100 } } });
    const spend = async (n: number) => {
      for (let i = 0; i < n; i++)
        expect(
          (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(made.apiKey, made.apiSecret)) })).status,
        ).toBe(200);
    };
    const keyCredits = () => page.textContent('#credits-dialog .key-credits');
    const ownerCredits = () => page.textContent('#credits-dialog .owner-credits-left');
    const row = page.locator(`#key-table tbody tr[data-api-key="${made.apiKey}"]`);
    await page.reload();
    await signIn('viewer');
    expect(await row.locator('button.credits').count()).toBe(0); // read access: no Credits button
    await page.click('#sign-out');
    await signIn('operator');

    await row.locator('button.credits').click();
    await page.waitForSelector('#credits-dialog[open]');
    expect(await page.textContent('#credits-dialog .which')).toBe(made.apiKey);
    await expect.poll(keyCredits, UI_WAIT).toBe('no credits: unlimited');
    await expect.poll(ownerCredits, UI_WAIT).toBe('credits left: 100');

    // Set: remaining and a daily refill, through PATCH /v1/keys/{apiKey}.
    await page.fill('#credits-set-form input[name=remaining]', '5');
    await page.fill('#credits-set-form input[name=refillAmount]', '50');
    await page.selectOption('#credits-set-form select[name=refillInterval]', 'day');
    await page.click('#credits-set-form button[type=submit]');
    await expect.poll(keyCredits, UI_WAIT).toMatch(/^credits left: 5, refilled to 50 every day \(next \S+ \S+Z\)$/);
    expect((await api.call('GET', `/v1/keys/${made.apiKey}`)).json()).toMatchObject({
      credits: { remaining: 5, refill: { amount: 50, interval: 'day' } },
    });
    await expect.poll(() => row.locator('small.credits-left').textContent(), UI_WAIT).toBe('credits: 5 left');

    // Two requests spend from both; a top-up adds to what is left, not to what was set.
    await spend(2);
    await page.fill('#credits-add-form input[name=add]', '10');
    await page.click('#credits-add-form button[type=submit]');
    await expect.poll(keyCredits, UI_WAIT).toMatch(/^credits left: 13, /);
    await page.fill('#owner-credits-add-form input[name=add]', '7');
    await page.click('#owner-credits-add-form button[type=submit]');
    await expect.poll(ownerCredits, UI_WAIT).toBe('credits left: 105');
    await expect.poll(() => row.locator('small.credits-left').textContent(), UI_WAIT).toBe('credits: 13 left');
    expect(((await api.call('GET', '/v1/owners/acct_credits')).json() as { credits: unknown }).credits).toMatchObject({
      remaining: 105,
    });

    // A refused change is shown in the form's words, and changes nothing.
    await page.fill('#credits-add-form input[name=add]', '');
    await page.click('#credits-add-form button[type=submit]');
    await expect
      .poll(() => page.textContent('#credits-dialog .error'), UI_WAIT)
      .toMatch(/^Add: must be a whole number/);
    await page.fill('#credits-set-form input[name=remaining]', '');
    await page.click('#credits-set-form button[type=submit]');
    await expect.poll(() => page.textContent('#credits-dialog .error'), UI_WAIT).toMatch(/^Remaining: /);
    expect((await api.call('GET', `/v1/keys/${made.apiKey}`)).json()).toMatchObject({
      credits: { remaining: 13, refill: { amount: 50, interval: 'day' } },
    });
    await spend(2);
    await page.fill('#credits-add-form input[name=add]', '1');
    await page.click('#credits-add-form button[type=submit]');
    await expect.poll(keyCredits, UI_WAIT).toMatch(/^credits left: 12, /); // 13 - 2 + 1
    expect(await page.textContent('#credits-dialog .error')).toBe('');

    // Remove: unlimited again, and the table's line goes.
    await page.click('#credits-dialog .remove-credits');
    await expect.poll(keyCredits, UI_WAIT).toBe('no credits: unlimited');
    await expect.poll(() => row.locator('small.credits-left').count(), UI_WAIT).toBe(0);
    await page.click('#credits-dialog .cancel');
    // Audited with the console's token as the actor.
    const raw = new Redis(redis.url);
    const audit = (await raw.xrange('keygate:{keystore}:audit', '-', '+')).map(
      ([, f]) => JSON.parse(f[1] as string) as { action: string; apiKey: string; actor: string },
    );
    raw.disconnect();
    expect(audit.filter((e) => e.apiKey === made.apiKey && e.action === 'credits-add').map((e) => e.actor)).toEqual([
      'operator',
      'operator',
    ]);
    await api.call('DELETE', `/v1/keys/${made.apiKey}`);
  });

  it("a write token sets and removes an owner's credits (PUT keeps its rate limit); a refused value shows its error and changes nothing", async () => {
    const made = (
      await api.call('POST', '/v1/keys', { json: { owner: 'acct_pool', label: 'pooled', scopes: ['accounts:read'] } })
    ).json() as { apiKey: string; apiSecret: string };
    const limit = { rate: '50/h', burst: 50 };
    await api.call('PUT', '/v1/owners/acct_pool', { json: { rateLimit: limit, credits: { remaining: 20 } } });
    const owner = async () => (await api.call('GET', '/v1/owners/acct_pool')).json() as Record<string, unknown>;
    const ownerCredits = () => page.textContent('#credits-dialog .owner-credits-left');
    const row = page.locator(`#key-table tbody tr[data-api-key="${made.apiKey}"]`);
    await page.goto(`${gate.managementUrl}/console/`); // signed out: the token lives in page memory only
    await signIn('operator');
    // Regions off: the API sends no home, and the page draws none.
    expect(await page.locator('#key-table small.home').count()).toBe(0);
    await row.locator('button.credits').click();
    await page.waitForSelector('#credits-dialog[open]');
    await expect.poll(ownerCredits, UI_WAIT).toBe('credits left: 20');
    expect(await page.isVisible('#credits-dialog .owner-home')).toBe(false);
    // The owner's form starts from the owner's credits as they stand.
    await expect.poll(() => page.inputValue('#owner-credits-set-form input[name=remaining]'), UI_WAIT).toBe('20');
    expect(await page.inputValue('#owner-credits-set-form input[name=refillAmount]')).toBe('');

    // Set: the owner's balance starts again from remaining, with a monthly refill; the key's own stay unlimited.
    await page.fill('#owner-credits-set-form input[name=remaining]', '300');
    await page.fill('#owner-credits-set-form input[name=refillAmount]', '1000');
    await page.selectOption('#owner-credits-set-form select[name=refillInterval]', 'month');
    await page.click('#owner-credits-set-form button[type=submit]');
    await expect
      .poll(ownerCredits, UI_WAIT)
      .toMatch(/^credits left: 300, refilled to 1000 every month \(next \S+-01 00:00:00Z\)$/);
    expect(await page.textContent('#credits-dialog .key-credits')).toBe('no credits: unlimited');
    expect(await owner()).toMatchObject({
      rateLimit: limit,
      credits: { remaining: 300, refill: { amount: 1000, interval: 'month' } },
    });
    // A request spends from the owner's credits, and the page reads what is left after the next change.
    expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(made.apiKey, made.apiSecret)) })).status).toBe(
      200,
    );

    // Refused: a refill without a remaining. Named in the form's words; nothing changes.
    await page.fill('#owner-credits-set-form input[name=remaining]', '');
    await page.fill('#owner-credits-set-form input[name=refillAmount]', '5');
    await page.click('#owner-credits-set-form button[type=submit]');
    await expect.poll(() => page.textContent('#credits-dialog .error'), UI_WAIT).toMatch(/^Remaining: /);
    expect(await page.textContent('#credits-dialog .error')).not.toMatch(/owner\.|body\./);
    expect(await owner()).toMatchObject({
      rateLimit: limit,
      credits: { remaining: 299, refill: { amount: 1000, interval: 'month' } },
    });
    expect(await ownerCredits()).toMatch(/^credits left: 300, /); // not drawn again: nothing changed

    // Set without a refill: the refill goes; then remove: unlimited, the rate limit still kept.
    await page.fill('#owner-credits-set-form input[name=remaining]', '40');
    await page.fill('#owner-credits-set-form input[name=refillAmount]', '');
    await page.click('#owner-credits-set-form button[type=submit]');
    await expect.poll(ownerCredits, UI_WAIT).toBe('credits left: 40');
    expect(await page.textContent('#credits-dialog .error')).toBe('');
    expect(await owner()).toMatchObject({ rateLimit: limit, credits: { remaining: 40, refill: null } });
    await page.click('#credits-dialog .remove-owner-credits');
    await expect.poll(ownerCredits, UI_WAIT).toBe('no credits: unlimited');
    expect(await owner()).toMatchObject({ rateLimit: limit, credits: null });
    await page.click('#credits-dialog .cancel');
    await api.call('DELETE', `/v1/keys/${made.apiKey}`);
  });

  it("shows each key's alg, and for an EdDSA/ES256 key the fingerprint of the public key it holds", async () => {
    const created: Array<{ apiKey: string; alg: string; publicKeyFingerprint: string }> = [];
    for (const alg of ['EdDSA', 'ES256'] as const) {
      const { publicKey } =
        alg === 'EdDSA' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
      const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
      const { apiKey } = (
        await api.call('POST', '/v1/keys', {
          json: { label: `signed ${alg}`, scopes: ['accounts:read'], alg, publicKey: pem },
        })
      ).json() as { apiKey: string };
      created.push((await api.call('GET', `/v1/keys/${apiKey}`)).json() as (typeof created)[number]);
    }
    await page.click('#sign-out');
    await signIn('viewer');
    for (const k of created) {
      expect(k.publicKeyFingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
      const alg = page.locator(`#key-table tbody tr[data-api-key="${k.apiKey}"] .alg`);
      expect(await alg.textContent()).toBe(`${k.alg} ${k.publicKeyFingerprint.slice(0, 19)}…`);
      expect(await alg.locator('.fingerprint').getAttribute('title')).toBe(k.publicKeyFingerprint);
    }
    const hs = (await listed()).filter((k) => k.alg === 'HS256');
    expect(hs.some((k) => created.some((c) => c.apiKey === k.apiKey))).toBe(false);
    expect(hs.length).toBeGreaterThan(0);
    for (const k of hs) {
      const alg = page.locator(`#key-table tbody tr[data-api-key="${k.apiKey}"] .alg`);
      expect([await alg.textContent(), await alg.locator('.fingerprint').count()]).toEqual(['HS256', 0]);
    }
  });

  it("with regions on, shows a key's home under its API key and the owner's in the Credits dialog", async () => {
    // A Keygate of its own on two regions (test/helpers/regions.ts): keystore, its replica, one Redis per region.
    const topo = await startRegions(['fra', 'tyo']);
    let regional: RunningKeygate | undefined;
    try {
      regional = await startKeygate({
        upstream: upstream.url,
        env: {
          ...topo.envOf('fra', { replica: false }),
          KEYGATE_MANAGEMENT_PORT: '0',
          KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file,
        },
      });
      const regionalApi = managementClient(regional.managementUrl as string, tokens.tokens.operator as string);
      // The owner lives in tyo, so its key does; a key without an owner lives where it was made (fra).
      await regionalApi.call('PUT', '/v1/owners/acct_tokyo', { json: { home: 'tyo' } });
      const create = async (json: Record<string, unknown>) =>
        (await regionalApi.call('POST', '/v1/keys', { json: { scopes: ['accounts:read'], ...json } })).json() as {
          apiKey: string;
          home?: string;
        };
      const owned = await create({ owner: 'acct_tokyo', label: 'tokyo app' });
      const loose = await create({ label: 'no owner' });
      expect([owned.home, loose.home]).toEqual(['tyo', 'fra']);
      await page.goto(`${regional.managementUrl}/console/`);
      await signIn('operator');
      const home = (apiKey: string) => page.locator(`#key-table tbody tr[data-api-key="${apiKey}"] small.home`);
      await expect.poll(() => home(owned.apiKey).textContent(), UI_WAIT).toBe('home tyo');
      expect(await home(loose.apiKey).textContent()).toBe('home fra');
      await page.click(`#key-table tbody tr[data-api-key="${owned.apiKey}"] button.credits`);
      await page.waitForSelector('#credits-dialog[open]');
      await expect.poll(() => page.textContent('#credits-dialog .owner-home'), UI_WAIT).toBe('home tyo');
      expect(await page.isVisible('#credits-dialog .owner-home')).toBe(true);
      await page.click('#credits-dialog .cancel');
    } finally {
      // Back to the console of the Keygate the other cases use (signed out: the token lives in page memory only).
      await page.goto(`${gate.managementUrl}/console/`);
      await regional?.close();
      await topo.stop();
    }
  });

  it('the token lives in page memory only: sent as Authorization, never in storage, a cookie or a URL; a reload signs out', async () => {
    const issued = Object.values(tokens.tokens);
    expect(apiRequests.length).toBeGreaterThan(3);
    for (const r of apiRequests) {
      expect(issued.map((t) => `Bearer ${t}`)).toContain(r.headers.authorization);
      for (const t of issued) expect(r.url).not.toContain(t);
      expect(r.headers.cookie).toBeUndefined();
    }
    const stored = await page.evaluate(() => ({
      local: localStorage.length,
      session: sessionStorage.length,
      cookie: document.cookie,
      url: location.href,
      input: (document.querySelector('#token') as HTMLInputElement).value,
    }));
    expect(stored).toEqual({ local: 0, session: 0, cookie: '', url: `${gate.managementUrl}/console/`, input: '' });
    await page.reload();
    expect(await page.isVisible('#sign-in')).toBe(true);
    expect(await page.isVisible('#keys')).toBe(false);
  });
});
