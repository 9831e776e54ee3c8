#!/usr/bin/env node
// @ts-check
// npm run regions: three simulated regions on this machine (network namespaces joined by a delay line, 45, 75 and
// 100 ms one way), each with its request-state Sentinel group, its copy of the keystore and two Keygate instances;
// runs the six measurements of docs/regions.md and prints each as a table with the load average beside it.
// Needs root (namespaces, TUN devices). Every process runs niced, at most --rate requests a second per region,
// and everything stops by itself at the deadline.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startRegionsNet, regionsNetUnavailable } from './harness/regions-net.mjs';
import { startRegionsTopology } from './harness/regions-topology.mjs';
import {
  createClient,
  makeKeys,
  measureKeystoreCut,
  measureLatency,
  measureLimits,
  measurePartition,
  measureReplay,
  measureRevocation,
  waitServed,
} from './harness/regions-measure.mjs';

const HELP = `npm run regions -- [options]
  --revokes <n>             revocation: keys revoked one after another (default 50)
  --replay-tokens <n>       replay: tokens each sent to all six instances at once (default 1000; the issue's full run: 10000)
  --limit-seconds <s>       limits: how long six senders send to one key at 50/s burst 50 (default 120)
  --limit-sender-rate <n>   limits: requests a second each of the six senders sends (default 10: 60/s against 50/s;
                            the issue's 60 each would be 120/s per region, over --rate)
  --partition-seconds <s>   partition: how long one region is cut off (default 30)
  --keystore-cut-seconds <s> the keystore master's region cut off (default 30)
  --latency-requests <n>    latency: requests per instance and key (default 200)
  --rate <n>                requests a second per region, at most (default 100)
  --only <a,b>              run only these: revocation, replay, limits, partition, keystore, latency
  --json                    print the results as one JSON document too
  --help`;

const { values: opts } = parseArgs({
  options: {
    revokes: { type: 'string', default: '50' },
    'replay-tokens': { type: 'string', default: '1000' },
    'limit-seconds': { type: 'string', default: '120' },
    'limit-sender-rate': { type: 'string', default: '10' },
    'partition-seconds': { type: 'string', default: '30' },
    'keystore-cut-seconds': { type: 'string', default: '30' },
    'latency-requests': { type: 'string', default: '200' },
    rate: { type: 'string', default: '100' },
    only: { type: 'string' },
    json: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (opts.help) {
  console.log(HELP);
  process.exit(0);
}
const why = regionsNetUnavailable();
if (why) {
  console.error(`npm run regions: ${why}`);
  process.exit(1);
}
const num = (/** @type {string} */ name) => {
  const v = Number(/** @type {Record<string, unknown>} */ (opts)[name]);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name}: a positive number`);
  return v;
};
const only = new Set((opts.only ?? 'revocation,replay,limits,partition,keystore,latency').split(','));

const REGIONS = ['fra', 'iad', 'tyo'];
const DELAYS = { 'fra-iad': 45, 'iad-tyo': 75, 'fra-tyo': 100 };
// Whether this build knows regions (KEYGATE_REGION): without them every instance runs on the keystore alone.
const regionsOn = readFileSync(new URL('../dist/config/env-names.js', import.meta.url), 'utf8').includes(
  'KEYGATE_REGION',
);
const load = () =>
  execFileSync('uptime', { encoding: 'utf8' })
    .trim()
    .replace(/^.*load average/, 'load average');
/** @param {number | null | undefined} v */
const ms = (v) => (v === null || v === undefined || Number.isNaN(v) ? '-' : `${Math.round(v)}`);
/**
 * @param {string} title
 * @param {string[]} head
 * @param {Array<Array<string | number>>} rows
 */
function table(title, head, rows) {
  const cells = [head, ...rows.map((r) => r.map(String))];
  const widths = head.map((_, c) => Math.max(...cells.map((r) => (r[c] ?? '').length)));
  const line = (/** @type {string[]} */ r) => `| ${r.map((v, c) => v.padEnd(widths[c] ?? 0)).join(' | ')} |`;
  console.log(`\n### ${title}  (${load()})\n`);
  console.log(line(head));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of cells.slice(1)) console.log(line(r));
}
const fmt = (/** @type {Record<string, number | string | null>} */ o) =>
  Object.entries(o)
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ') || '-';

const seconds =
  (only.has('revocation') ? num('revokes') * 3 : 0) +
  (only.has('replay') ? (num('replay-tokens') * 3 * 6) / num('rate') / 3 : 0) +
  (only.has('limits') ? num('limit-seconds') + 60 : 0) +
  (only.has('partition') ? num('partition-seconds') + 60 : 0) +
  (only.has('keystore') ? num('keystore-cut-seconds') + 60 : 0) +
  (only.has('latency') ? num('latency-requests') : 0) +
  300;
console.log(
  `[regions] ${REGIONS.join(', ')}; one way ${Object.entries(DELAYS)
    .map(([k, v]) => `${k} ${v} ms`)
    .join(
      ', ',
    )}; regions in Keygate: ${regionsOn ? 'on' : 'off (this build has no KEYGATE_REGION)'}; deadline ${Math.round(seconds)} s`,
);
const net = await startRegionsNet({ regions: REGIONS, delaysMs: DELAYS, deadlineSeconds: Math.round(seconds) });
/** @type {import('./harness/regions-topology.mjs').RegionsTopology | undefined} */
let topo;
/** @type {Record<string, unknown>} */
const results = { regionsOn, delaysMs: DELAYS };
const stopAll = async () => {
  await topo?.stop();
  await net.stop();
};
for (const sig of /** @type {const} */ (['SIGINT', 'SIGTERM']))
  process.once(sig, () => void stopAll().finally(() => process.exit(130)));
try {
  const started = Date.now();
  topo = await startRegionsTopology(net, { keystoreRegion: 'fra', regionsOn, timeoutMs: 120_000 });
  console.log(`[regions] ${topo.instances.length} instances up in ${Date.now() - started} ms (${load()})`);
  const client = createClient(topo, { perRegionRate: num('rate') });
  const t = topo;

  if (only.has('latency')) {
    const r = await measureLatency(t, client, { requests: num('latency-requests') });
    results.latency = r;
    table(
      'Latency through Keygate (ms, from a client next to the instance)',
      ['instance', 'key homed in', 'p50', 'p99', 'RTT to home'],
      r.rows.map((x) => [x.instance, x.home, ms(x.p50), ms(x.p99), x.rttToHomeMs]),
    );
  }

  if (only.has('revocation')) {
    const r = await measureRevocation(t, client, { region: 'fra', count: num('revokes') });
    results.revocation = r;
    table(
      `Revocation: ${r.count} revokes at fra (keystore master in ${r.keystoreRegion}), ms from acknowledgement to the first refused probe`,
      ['region', 'max', 'median', 'one-way delay from keystore master'],
      Object.entries(r.byRegion).map(([reg, v]) => [reg, ms(v.max), ms(v.median), v.delayFromKeystoreMs]),
    );
    if (r.failures.length) console.log(`failures: ${r.failures.join('; ')}`);
  }

  if (only.has('limits')) {
    const r = await measureLimits(t, client, {
      rate: 50,
      burst: 50,
      senderRate: num('limit-sender-rate'),
      seconds: num('limit-seconds'),
      home: 'iad',
    });
    results.limits = r;
    table(
      'Limits: one key homed in iad at 50/s burst 50, one sender per instance',
      ['senders', 'each', 'seconds', 'admitted', 'exact', 'error', '429', 'other'],
      [
        [
          r.senders,
          `${r.senderRate}/s`,
          r.seconds.toFixed(2),
          r.admitted,
          r.exact.toFixed(1),
          `${r.errorPct.toFixed(2)}%`,
          r.limited,
          fmt(r.other),
        ],
      ],
    );
  }

  if (only.has('replay')) {
    const n = num('replay-tokens');
    const keys = await makeKeys(t, 'replay', 4, 'iad');
    for (const k of keys) await waitServed(client, t.instances, k, 30_000);
    const plain = await measureReplay(client, t.instances, keys, n);
    const killed = await measureReplay(client, t.instances, keys, n, {
      during: {
        at: Math.floor(n / 2),
        action: () => t.killRequestMaster('iad'),
      },
    });
    await makeKeysSeparately(t, keys);
    const separate = await t.startSeparateGates();
    const control = await measureReplay(client, separate, keys, Math.min(n, 200));
    await Promise.all(separate.map((g) => g.stop()));
    results.replay = { plain, killed, control };
    table(
      'Replay: each token sent to every instance at once',
      ['run', 'tokens', 'admitted', 'tokens with more than one 200', 'answers'],
      [
        ['homes on', plain.tokens, plain.admitted, plain.duplicates, fmt(plain.answers)],
        [
          "iad's request-state master SIGKILLed mid-run",
          killed.tokens,
          killed.admitted,
          killed.duplicates,
          fmt(killed.answers),
        ],
        [
          'control: each region its own Redis (3 instances)',
          control.tokens,
          control.admitted,
          control.duplicates,
          fmt(control.answers),
        ],
      ],
    );
  }

  if (only.has('partition')) {
    const r = await measurePartition(t, client, { region: 'tyo', seconds: num('partition-seconds') });
    results.partition = r;
    table(
      `Partition: tyo cut off for ${r.seconds} s (revoke during the cut: ${r.revokeDuringCut})`,
      [
        'instance',
        'traffic',
        'before',
        'during',
        'after heal',
        'all 503 from (ms after cut)',
        'p99 before',
        'p99 during',
      ],
      r.rows.map((x) => [
        x.instance,
        x.what,
        fmt(x.before),
        fmt(x.during),
        fmt(x.after),
        ms(x.all503AfterMs),
        ms(x.p99BeforeMs),
        ms(x.p99DuringMs),
      ]),
    );
    console.log(`refusals during the cut (code reason): ${fmt(r.rejectionsDuringCut)}`);
    console.log(`serving the cut region's key again, ms after the heal: ${fmt(r.recoveredAfterHealMs)}`);
    console.log(`pre-cut tokens sent again after the heal: ${fmt(r.replayedAfterHeal)}`);
    console.log(`key revoked during the cut, after the heal: ${fmt(r.revokedAfterHeal)}`);
  }

  if (only.has('keystore')) {
    const r = await measureKeystoreCut(t, client, { seconds: num('keystore-cut-seconds') });
    results.keystore = r;
    table(
      `Keystore master's region (${r.region}) cut off for ${r.seconds} s: new master ${r.newMaster} after ${ms(r.promotedAfterMs)} ms; revoke there: ${r.revokeDuringCut} after ${ms(r.revokeDuringAckAfterMs)} ms`,
      [
        'instance',
        'before',
        'during',
        'after heal',
        'first 503 (ms after cut)',
        'all 503 from',
        'last 503 after heal (ms)',
      ],
      r.rows.map((x) => [
        x.instance,
        fmt(x.before),
        fmt(x.during),
        fmt(x.after),
        ms(x.first503AfterMs),
        ms(x.all503AfterMs),
        ms(x.last503AfterHealMs),
      ]),
    );
    console.log(`refusals during the cut (code reason): ${fmt(r.rejectionsDuringCut)}`);
    console.log(`serving again, ms after the heal: ${fmt(r.recoveredAfterHealMs)}`);
    console.log(`revoked keys after the heal: ${fmt(r.revokedAfterHeal)}`);
  }
  console.log(
    `\n[regions] ${client.sentCount()} requests in ${Math.round((Date.now() - started) / 1000)} s (${load()})`,
  );
  if (opts.json) console.log(JSON.stringify(results));
} finally {
  await stopAll();
}

/**
 * @param {import('./harness/regions-topology.mjs').RegionsTopology} t
 * @param {Array<{ apiKey: string, apiSecret: string }>} keys
 */
async function makeKeysSeparately(t, keys) {
  await t.importKeysSeparately(
    keys.map((k) => ({ apiKey: k.apiKey, apiSecret: k.apiSecret, scopes: ['accounts:read'] })),
  );
}
