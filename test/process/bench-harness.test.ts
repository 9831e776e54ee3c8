import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { nginxLuaMissing } from '../../scripts/bench/nginx.mjs';
import { REQUEST_STEPS } from '../../src/gateway/request-path.js';
import { guard } from '../helpers/slowdown.js';

const run = promisify(execFile);

/**
 * The benchmark harness in its short mode. No throughput thresholds here
 * (benchmarks are not timed tests); this checks the harness runs end to end
 * and that what it measured is what it claims: every forwarded request got a
 * 2xx, the mixed load was refused in the expected share, rejections were all refused.
 */
describe('benchmark harness (short mode)', () => {
  it('measures every target side by side and writes a result file', { timeout: guard(180_000) }, async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'keygate-bench-test-')), 'result.json');
    const { stdout } = await run(
      'node',
      ['scripts/bench.mjs', '--short', '--duration', '1', '--connections', '20', '--out', out],
      { timeout: guard(170_000), maxBuffer: 10_000_000 },
    );
    const r = JSON.parse(readFileSync(out, 'utf8'));
    // The nginx+lua peer runs where its Debian packages are (scripts/test-all.sh installs them); elsewhere the run says so.
    const peer = nginxLuaMissing() === undefined ? ['nginx-lua'] : [];
    if (peer.length === 0) expect(stdout).toContain('the nginx+lua peer is not measured');
    for (const name of [
      'upstream-direct',
      'bare-http-proxy',
      'bare-undici',
      'keygate-redis',
      'keygate-embedded',
      ...peer,
    ]) {
      expect(r.forward[name].rps, name).toBeGreaterThan(0);
      expect(r.forward[name].non2xx, name).toBe(0);
      expect(r.forward[name].errors, name).toBe(0);
      expect(r.forward[name].peakRssMb, name).toBeGreaterThan(0);
    }
    expect(r.ratios['keygate-redis'].throughputVsBare).toBeGreaterThan(0);
    // The peer's Redis commands are counted like Keygate's: one SET NX per forwarded request.
    if (peer.length) expect(r.forward['nginx-lua'].redisCallsPerRequest.set).toBeGreaterThan(0.9);
    for (const name of ['bare-undici', 'keygate-redis', 'keygate-embedded'])
      expect(r.forward[name].bytesPerRequest, `${name} bytesPerRequest`).toBeGreaterThan(0);
    expect(r.loadAverage.before).toHaveLength(3);
    expect(r.loadAverage.after).toHaveLength(3);
    for (const name of ['keygate-redis', 'keygate-embedded']) {
      // 10% replays + 10% bad signatures: about 20% refused (the token file's spread is deterministic).
      expect(r.mixed10pctReplay10pctBad[name].non2xxShare).toBeGreaterThan(0.15);
      expect(r.mixed10pctReplay10pctBad[name].non2xxShare).toBeLessThan(0.25);
      expect(r.pureRejection[name].non2xxShare).toBe(1);
    }
    // A difference of Redis's used_memory before and after the run: it is measured, but Redis frees and
    // defragments on its own schedule, so on a busy machine it can come out negative. Reported, not bounded.
    expect(Number.isFinite(r.redisNonceBytesPerRequest), 'redisNonceBytesPerRequest is a number').toBe(true);
  });

  it(
    'A/B: builds the baseline revision in a worktree and measures both builds side by side',
    { timeout: guard(180_000) },
    async () => {
      const out = join(mkdtempSync(join(tmpdir(), 'keygate-bench-ab-test-')), 'ab.json');
      await run(
        'node',
        [
          'scripts/bench-ab.mjs',
          '--baseline',
          'HEAD',
          '--rate',
          '300',
          '--duration',
          '1',
          '--rounds',
          '1',
          '--stores',
          'embedded,redis',
          // One setting on against off, on the Redis targets only (it is refused without Redis).
          '--env',
          'KEYGATE_REPLAY_FENCE=on',
          '--baseline-env',
          'KEYGATE_REPLAY_FENCE=off',
          '--public',
          '--out',
          out,
        ],
        {
          timeout: guard(170_000),
          maxBuffer: 10_000_000,
        },
      );
      const r = JSON.parse(readFileSync(out, 'utf8'));
      expect(r.builds.baseline).toMatch(/^HEAD \([0-9a-f]{7,}\) KEYGATE_REPLAY_FENCE=off$/);
      expect(r.builds.current).toMatch(/ KEYGATE_REPLAY_FENCE=on$/);
      const targets = ['bare-http-proxy', 'current:embedded', 'baseline:embedded', 'current:redis', 'baseline:redis'];
      for (const name of [...targets, 'bare-undici', 'current:public']) {
        expect(r.targets[name].cpuUsPerRequest, name).toBeGreaterThan(0);
        // Issue 39: each target's collections, read from its --trace-gc-nvp lines.
        expect(Number.isFinite(r.targets[name].scavengesPer10k), `${name} scavengesPer10k`).toBe(true);
      }
      // Bytes per request are counted between a window's first and last collection: a 1 s window of 300
      // requests may hold fewer than two (JSON null, from NaN), which the report must say rather than invent.
      for (const name of targets.slice(1)) {
        const bytes = r.targets[name].bytesPerRequest as number | null;
        expect(bytes === null || bytes > 0, `${name} bytesPerRequest ${bytes}`).toBe(true);
      }
      expect(r.settings.logLevel).toBe('info');
      for (const store of ['embedded', 'redis']) {
        expect(r.comparison[store].cpuCurrentVsBaseline, store).toBeGreaterThan(0);
        const { min, max } = r.comparison[store].cpuCurrentVsBaselinePerRound;
        expect(min, store).toBeGreaterThan(0);
        expect(max, store).toBeGreaterThanOrEqual(min);
      }
      // Its worktree is removed afterwards (other checkouts of this repository may have their own).
      const { stdout } = await run('git', ['worktree', 'list', '--porcelain']);
      expect(r.baselineWorktree).toContain('keygate-bench-ab-');
      expect(stdout).not.toContain(r.baselineWorktree);
    },
  );

  it(
    'key changes: measures each topology, the Keygate set to wait beside the one that does not, and counts their WAITs',
    { timeout: guard(120_000) },
    async () => {
      const out = join(mkdtempSync(join(tmpdir(), 'keygate-bench-key-changes-test-')), 'key-changes.json');
      const [ops, rounds] = [2, 1];
      await run(
        'node',
        [
          'scripts/bench-key-changes.mjs',
          '--topologies',
          'single,replica',
          '--ops',
          String(ops),
          '--rounds',
          String(rounds),
          '--out',
          out,
        ],
        { timeout: guard(110_000), maxBuffer: 10_000_000 },
      );
      const r = JSON.parse(readFileSync(out, 'utf8'));
      const expected = { single: ['minReplicas=0'], replica: ['minReplicas=1', 'minReplicas=0'] };
      for (const [topology, keygates] of Object.entries(expected)) {
        expect(Object.keys(r.topologies[topology].keygates), topology).toEqual(keygates);
        for (const name of keygates)
          for (const op of ['create', 'patch', 'revoke']) {
            const s = r.topologies[topology].keygates[name][op];
            expect(s.n, `${topology} ${name} ${op}`).toBe(ops * rounds);
            expect(s.p50Ms, `${topology} ${name} ${op}`).toBeGreaterThan(0);
            expect(s.p95Ms, `${topology} ${name} ${op}`).toBeGreaterThanOrEqual(s.p50Ms);
          }
      }
      // One WAIT per key change of the Keygate that waits (in the measured rounds), none from the other.
      expect(r.topologies.single.waitCommands).toBe(0);
      expect(r.topologies.replica.keyChangesThatWait).toBe(rounds * ops * 3);
      expect(r.topologies.replica.waitCommands).toBe(r.topologies.replica.keyChangesThatWait);
      expect(r.topologies.replica.p50WaitVsNoWait.revoke).toBeGreaterThan(0);
      expect(r.loadAverage.before).toHaveLength(3);
    },
  );

  it(
    'the ledger: every step of the request path, then the response head and the record, per path, beside the whole request',
    { timeout: guard(300_000) },
    async () => {
      const out = join(mkdtempSync(join(tmpdir(), 'keygate-ledger-test-')), 'ledger.json');
      const { stdout } = await run(
        'node',
        ['scripts/bench.mjs', '--ledger', '--short', '--duration', '1', '--rounds', '1', '--rate', '200', '--out', out],
        { timeout: guard(290_000), maxBuffer: 10_000_000 },
      );
      const { ledger } = JSON.parse(readFileSync(out, 'utf8'));
      const names = [...REQUEST_STEPS.map((s) => s.name), 'responseHead', 'record'];
      expect(ledger.loadAverage.before).toHaveLength(3);
      expect(ledger.bareUndici.cpuUs).toBeGreaterThan(0);
      for (const path of ['public', 'embedded', 'redis']) {
        const p = ledger[path];
        expect(
          p.steps.map((r: { step: string }) => r.step),
          path,
        ).toEqual(names);
        for (const r of p.steps) {
          expect(Number.isFinite(r.cpuNs), `${path} ${r.step} cpu`).toBe(true);
          expect(r.bytes, `${path} ${r.step} bytes`).toBeGreaterThanOrEqual(0);
        }
        // The work a path does shows in its steps: a token is decoded, verified and admitted off the public route.
        const authenticate = p.steps.find((r: { step: string }) => r.step === 'authenticate');
        // (A few bytes of the process's own timers can land in any batch.)
        if (path === 'public') expect(authenticate.bytes).toBeLessThan(64);
        else expect(authenticate.bytes).toBeGreaterThan(200);
        expect(p.whole.cpuUs, path).toBeGreaterThan(0);
        // Bytes from a real run need two collections inside it: a 1 s run may have had fewer (null: not measured).
        if (p.whole.bytes !== null) expect(p.whole.bytes, path).toBeGreaterThan(0);
        // Printed as a table per path, one row per step, with the whole request and the bare hop beside it.
        const table = stdout.slice(stdout.indexOf(`\n${path}\n`));
        for (const step of names) expect(table, `${path} ${step}`).toContain(`| ${step} |`);
        expect(table).toContain('| **whole request** (real run) |');
        expect(table).toContain('| bare undici hop, whole request |');
      }
    },
  );
});
