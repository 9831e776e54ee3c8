/**
 * The folder layering of src/, checked by `npm run check:deps` (in CI too).
 * A folder imports only from folders below it, never from one above or beside it:
 *
 *   cli/                          the `keygate` command (serve/, keys/, credentials/: one folder per command group)
 *   create-keygate.ts  index.ts   wiring: builds the store, cipher, servers from a Config
 *   open-store.ts                 opens the store (Redis or memory) for serve and for `keygate keys`
 *   gateway/      management/     the proxy port (request path, proxy and forward-auth modes; upstream/: the
 *                                 forwarder; streams/: WebSocket streams)
 *                                 | the management API and its console
 *   operations/                   the key operations (create, update, rotate, revoke, delete, import) that
 *                                 the management API and `keygate keys` share: below both, above the store
 *   pipeline/     observe/        pure request steps (verdicts) | logs, metrics, readiness, the admin port
 *   store/        assertion/      the Store interface, memory and Redis stores, key cache, rate-limit state
 *                                 | Keygate's own signing keys and the identity assertion it signs for the upstream
 *   keys/         config/         the key model (record, usage, prepared key, keys file, cipher)
 *                                 | environment settings: read once, plain data, frozen
 *   policy/                       the routes/policy file: types, load, compile, match, lint, reload
 *   files/                        reading, validating and reloading an operator's data files
 *   net/                          IP addresses, CIDRs, X-Forwarded-For
 *   errors.ts, clock.ts           shared leaves
 *
 * Inside store/: store/*.ts is what both backends share (the Store interface, key writes, key cache, rate-limit
 * math, replay fence); store/memory/ and store/redis/ are one backend each (store/redis/connection/: the clients
 * and their health; store/redis/scripts/: the Lua scripts), never importing each other, and the
 * shared files import neither. A backend is chosen in one place: only open-store.ts imports a backend's folder
 * (create-keygate.ts and the CLI's `keygate keys` both open their store through it); everything else sees only the
 * Store interface. The CLI names why Redis did not answer with redis-reachability.ts's words, which load no client.
 *
 * client/ (the `keygate/client` export) stands alone: it loads nothing of the server.
 * index.ts is the package entry and may re-export anything but cli/.
 * And no module-level cycle anywhere in src/.
 *
 * Type-only imports count (tsPreCompilationDeps): a type that points up is the
 * same design knot as a value, even if it compiles away.
 */
const WIRING = '|^src/(create-keygate|open-store|index)\\.ts$';
const ABOVE = {
  files: `^src/(policy|keys|assertion|config|store|pipeline|observe|operations|gateway|management|cli)/${WIRING}`,
  policy: `^src/(keys|assertion|config|store|pipeline|observe|operations|gateway|management|cli)/${WIRING}`,
  keys: `^src/(assertion|config|store|pipeline|observe|operations|gateway|management|cli)/${WIRING}`,
  config: `^src/(keys|assertion|store|pipeline|observe|operations|gateway|management|cli)/${WIRING}`,
  store: `^src/(assertion|pipeline|observe|operations|gateway|management|cli)/${WIRING}`,
  assertion: `^src/(config|store|pipeline|observe|operations|gateway|management|cli)/${WIRING}`,
  pipeline: `^src/(observe|operations|gateway|management|cli)/${WIRING}`,
  observe: `^src/(pipeline|operations|gateway|management|cli)/${WIRING}`,
  operations: `^src/(pipeline|observe|gateway|management|cli)/${WIRING}`,
  gateway: `^src/(operations|management|cli)/${WIRING}`,
  management: `^src/(gateway|cli)/${WIRING}`,
};

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle means neither module can be read, tested or moved without the other.',
      from: {},
      to: {
        circular: true,
      },
    },
    {
      name: 'net-imports-nothing-of-ours',
      severity: 'error',
      comment: 'net/ is address arithmetic over node:net; everything may use it, it uses nothing of ours.',
      from: { path: '^src/net/' },
      to: { path: '^src/', pathNot: '^src/net/' },
    },
    {
      name: 'leaves-import-nothing-of-ours',
      severity: 'error',
      comment: 'errors.ts (the one error catalogue) and clock.ts are imported from every layer.',
      from: { path: '^src/(errors|clock)\\.ts$' },
      to: { path: '^src/', pathNot: '^src/(errors|clock)\\.ts$' },
    },
    ...Object.entries(ABOVE).map(([folder, above]) => ({
      name: `${folder}-imports-only-below`,
      severity: 'error',
      comment: `${folder}/ may not import a layer above it (see the layering at the top of this file).`,
      from: { path: `^src/${folder}/` },
      to: { path: above },
    })),
    {
      name: 'store-shared-imports-no-backend',
      severity: 'error',
      comment: 'store/*.ts is what both backends share: it knows neither store/memory/ nor store/redis/.',
      from: { path: '^src/store/[^/]+\\.ts$' },
      to: { path: '^src/store/(memory|redis)/' },
    },
    {
      name: 'store-backends-apart',
      severity: 'error',
      comment: 'store/memory/ and store/redis/ are one backend each; what both need belongs in store/.',
      from: { path: '^src/store/(memory|redis)/' },
      to: { path: '^src/store/(memory|redis)/', pathNot: '^src/store/$1/' },
    },
    {
      name: 'redis-store-only-from-the-assembly',
      severity: 'error',
      comment:
        'The Redis store is opened in open-store.ts alone (for serve and keygate keys); everything else sees the Store interface. redis-reachability.ts is words (causes and hints), no client.',
      from: { pathNot: '^src/(store/redis/|open-store\\.ts$)' },
      to: { path: '^src/store/redis/', pathNot: '^src/store/redis/connection/redis-reachability\\.ts$' },
    },
    {
      name: 'memory-store-only-from-the-assembly',
      severity: 'error',
      comment: 'The memory store is opened in open-store.ts alone; everything else sees the Store interface.',
      from: { pathNot: '^src/(store/memory/|open-store\\.ts$)' },
      to: { path: '^src/store/memory/' },
    },
    {
      name: 'wiring-not-cli',
      severity: 'error',
      comment: 'create-keygate.ts and index.ts are the library; the CLI is built on them, not the other way.',
      from: { path: '^src/(create-keygate|open-store|index)\\.ts$' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'client-stands-alone',
      severity: 'error',
      comment: '`import ... from "keygate/client"` must load nothing of the server (no Redis, metrics, logger).',
      from: { path: '^src/client/' },
      to: { path: '^src/', pathNot: '^src/client/' },
    },
  ],
  options: {
    includeOnly: '^src/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    // Resolve `./x.js` in a .ts import to ./x.ts, as tsc does with NodeNext.
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
