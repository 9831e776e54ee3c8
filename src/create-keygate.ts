// Tested in test/e2e/admin-endpoints.test.ts, test/e2e/forwarding.test.ts and every e2e test (startKeygate in test/helpers/keygate.ts builds Keygate with it), test/deploy/observability-assets.test.ts.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config/load-config.js';
import { createAdminServer } from './observe/admin-server.js';
import { createForwarder } from './gateway/upstream/forwarder.js';
import { createGateway } from './gateway/create-gateway.js';
import { createManagementApi } from './management/create-management-api.js';
import { createMetrics, exposeExemplars, LABEL_VALUES, type Metrics } from './observe/metrics.js';
import { createStreamMetrics } from './observe/stream-metrics.js';
import { createStreamRegistry, type SharedStreamCount } from './gateway/streams/stream-registry.js';
import { createReadiness, type NotReady } from './observe/readiness.js';
import { createAuthenticator } from './pipeline/authenticate.js';
import { createIpBudget } from './pipeline/ip-budget.js';
import { createBlockedRequestLog } from './gateway/blocked-request-log.js';
import { createKeyCache } from './store/key-cache.js';
import { createKeysFileSource, type KeysFileSource } from './keys/keys-file-source.js';
import type { OwnerRecord } from './keys/owner-record.js';
import type { KeyRecord } from './keys/key-record.js';
import { createPolicySource, type PolicySource } from './policy/policy-source.js';
import { createReplayFence } from './store/replay-fence.js';
import { createStoreFromConfig, isMemoryStore, openWebhookRedis } from './open-store.js';
import { largestRouteCost } from './policy/routes.js';
import type { Store } from './store/store.js';
import { createAssertionKeysSource, type AssertionKeysSource } from './assertion/assertion-keys-source.js';
import { createAssertionSigner } from './assertion/assertion-signer.js';
import type { TracerSlot, Tracing } from './observe/tracer.js';
import { packageVersion } from './observe/package-version.js';
import { createWebhookDelivery, type WebhookDelivery } from './observe/webhook-delivery.js';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';

export interface KeygateDeps {
  logger: Logger;
  clock?: Clock;
  metrics?: Metrics;
  /** Supply a store (tests); otherwise one is built from the config. */
  store?: Store;
  /**
   * The keys file's records when the caller has read them already (serve reads the file first to
   * report every problem before starting): read once, not twice, at start. Otherwise the file is read here.
   */
  keys?: readonly KeyRecord[];
  /** The keys file's `owners:` read with `keys`. */
  owners?: readonly OwnerRecord[];
  /** A worker's streams counted with every other worker's (serve-workers.ts), so KEYGATE_MAX_STREAMS_PER_KEY is per instance. */
  sharedStreams?: SharedStreamCount;
}

export interface Keygate {
  readonly proxy: Server;
  readonly admin: Server;
  /** The management API and console (KEYGATE_MANAGEMENT_PORT); undefined when not configured. */
  readonly management: Server | undefined;
  readonly store: Store;
  readonly metrics: Metrics;
  /** What /readyz answers: undefined when ready, otherwise the reason (NOT_READY_REASONS) and its cause. */
  ready(): Promise<NotReady | undefined>;
  /**
   * Embedded mode: re-reads KEYGATE_KEYS_FILE (what SIGHUP does) on a worker thread; resolves once the
   * new set is in force (true) or the file was rejected (false).
   */
  reloadKeys(): Promise<boolean>;
  /** Re-reads the policy file (KEYGATE_CONFIG; SIGHUP does this too). Returns false if the file was rejected. */
  reloadPolicy(): boolean;
  /** Re-reads KEYGATE_MANAGEMENT_TOKENS_FILE (SIGHUP does this too); false if rejected or not configured. */
  reloadManagementTokens(): boolean;
  /** Re-reads KEYGATE_ASSERTION_KEYS_FILE (SIGHUP does this too); false if rejected or the assertion is off. */
  reloadAssertionKeys(): boolean;
  /** Binds the ports; resolves with the actual ports (0 in config = any free port). */
  listen(): Promise<{ port: number; adminPort: number; managementPort?: number }>;
  /** Stops accepting, lets in-flight requests finish up to the shutdown timeout, closes the store. */
  close(): Promise<void>;
}

export function createKeygate(config: Config, deps: KeygateDeps): Keygate {
  const clock = deps.clock ?? systemClock();
  const metrics = deps.metrics ?? createMetrics();
  const logger = deps.logger;
  // One fence per process, raised by the store that sees a failover (KEYGATE_REPLAY_FENCE) or an emptied
  // keystore (always: that loss is certain), checked by the authenticator.
  const fence = config.redis ? createReplayFence({ clock }) : undefined;
  const late: { policy?: PolicySource } = {};
  // Until a Redis connection reports, it is down: /metrics never shows a connection that was never tried as up.
  if (config.redis && !deps.store)
    for (const connection of LABEL_VALUES.redisConnection) metrics.redisUp.set({ connection }, 0);
  const store =
    deps.store ??
    createStoreFromConfig(config, {
      logger,
      clock,
      metrics,
      ...(fence && { fence }),
      // The policy source is made below: read through it once it is there (a reload may change the window).
      maxRecvWindowMs: () => (late.policy?.policy() ?? config.policy).maxRecvWindowSeconds * 1_000,
      ...(deps.keys && { keys: deps.keys }),
      ...(deps.owners && { owners: deps.owners }),
    });
  // Regions: the staleness gauge and the remote admits' histogram exist only then.
  if (config.regions && 'keystoreStalenessSeconds' in store)
    metrics.enableRegions(() =>
      (store as { keystoreStalenessSeconds(): number | undefined }).keystoreStalenessSeconds(),
    );
  const refusedLogged = new Set<string>();
  const keys = createKeyCache(
    {
      ttlMs: config.limits.keyCacheTtlMs,
      negativeTtlMs: config.limits.keyCacheNegativeTtlMs,
      maxEntries: config.limits.keyCacheMaxEntries,
    },
    {
      store,
      clock,
      events: {
        onHit: () => metrics.keyCache.inc({ event: 'hit' }),
        onMiss: () => metrics.keyCache.inc({ event: 'miss' }),
        onEvict: (cause) => metrics.keyCache.inc({ event: `evict_${cause}` }),
        onRefusedCredentials: (keyId, problems) => {
          metrics.refusedPublicKeys.inc(problems.length);
          // One line per key and process, not per cache fill: the metric counts every refusal.
          if (refusedLogged.size >= 10_000 || refusedLogged.has(keyId)) return;
          refusedLogged.add(keyId);
          logger.error(
            { keyId, problems },
            'stored public key refused (weak): tokens for this key fail until it is rotated to a sound key with --grace 0, or revoked',
          );
        },
      },
    },
  );
  const unsubscribe = store.onKeyChange((apiKey) => {
    metrics.invalidations.inc({ scope: apiKey === null ? 'all' : 'key' });
    logger.debug({ apiKeyPrefix: apiKey?.slice(0, 8) ?? '*' }, 'key change received; cache entry dropped');
  });
  let watcher: KeysFileSource | undefined;
  if (config.keysFile && isMemoryStore(store)) {
    const memory = store;
    watcher = createKeysFileSource({ file: config.keysFile }, { logger, stage: () => memory.stageKeys() });
  }
  // The assertion keys: read (and checked) here at start; a broken file throws, as loadStartupConfig reported.
  const assertionKeys: AssertionKeysSource | undefined =
    config.assertion &&
    createAssertionKeysSource({ file: config.assertion.keysFile, signingKid: config.assertion.signingKid }, { logger });
  const assertion =
    config.assertion &&
    assertionKeys &&
    createAssertionSigner(
      { ...config.assertion, maxEntries: config.limits.keyCacheMaxEntries },
      {
        clock,
        keys: assertionKeys.current,
        events: {
          onSigned: (mode) => metrics.bound.assertionsSigned[mode].inc(),
          onCacheHit: () => metrics.assertionCacheHits.inc(),
        },
      },
    );
  const policy = createPolicySource({ file: config.configFile, initial: config.policy }, { logger });
  late.policy = policy;
  const authenticate = createAuthenticator(
    {
      maxTokenBytes: config.limits.maxTokenBytes,
      // Getters, so a reloaded policy's recv_window limits apply from the next token on.
      get defaultRecvWindowSeconds() {
        return policy.policy().defaultRecvWindowSeconds;
      },
      get maxRecvWindowSeconds() {
        return policy.policy().maxRecvWindowSeconds;
      },
      get defaultRateLimit() {
        return policy.policy().defaultRateLimit;
      },
      get defaultOwnerRateLimit() {
        return policy.policy().defaultOwnerRateLimit;
      },
      // The asking proxy never sends the body: a body_sha256 claim cannot be checked there.
      bodyUnseen: config.mode === 'forward-auth',
    },
    // An owner's own limit before the policy's default: the store's table, no store call.
    { keys, store, clock, ...(fence && { fence }), ownerLimits: (owner) => store.ownerLimit(owner) },
  );
  // The failed-authentication budget per client IP: the request path checks and spends it (its steps
  // checkIpBudget and spendIpBudget), under the policy's failedAuthLimit.
  const ipBudget = createIpBudget({ store, clock, logger });
  // A blocked IP is refused by the request path before anything else it reads; its refusals are summed up in the log.
  const blockedLog = createBlockedRequestLog({}, { logger });
  // Forward-auth mode never proxies: no forwarder, no upstream connections.
  const forwarder =
    config.upstream &&
    createForwarder(
      {
        upstream: config.upstream,
        timeoutMs: config.limits.upstreamTimeoutMs,
        maxSockets: config.limits.upstreamMaxSockets,
        queueTimeoutMs: config.limits.upstreamQueueTimeoutMs,
        minBodyBytesPerSecond: config.limits.minBodyBytesPerSecond,
        bodyRateGraceMs: config.limits.bodyRateGraceMs,
      },
      { logger, clock },
    );
  // WebSocket streams (proxy mode only): registered per key, closed when the key stops being good.
  const streamMetrics = createStreamMetrics(metrics.registry);
  const streams =
    config.upstream &&
    createStreamRegistry(
      { maxPerKey: config.limits.maxStreamsPerKey, idleTimeoutMs: config.limits.streamIdleTimeoutMs },
      { store, clock, logger, metrics: streamMetrics, ...(deps.sharedStreams && { shared: deps.sharedStreams }) },
    );
  // Tracing: its OpenTelemetry packages are loaded only when it is configured (an OTLP endpoint is set),
  // by this dynamic import; listen() waits for them, so the first request is traced. Off, the gateway
  // gets no slot at all and loads and allocates nothing for it.
  const tracing: TracerSlot | undefined = config.tracing && { tracer: undefined };
  const tracingSettings = config.tracing;
  const loadingTracing: Promise<Tracing> | undefined =
    tracingSettings &&
    import('./observe/tracing/otel-tracing.js').then((m) =>
      m.createTracing(
        tracingSettings,
        { redisAdmit: store.kind === 'redis', upstream: config.upstream },
        {
          version: packageVersion(),
          onDropped: (reason, count) => metrics.spansDropped.inc({ reason }, count),
        },
      ),
    );
  // Awaited by listen() (which reports a failure) and close(); never an unhandled rejection meanwhile.
  loadingTracing?.catch(() => {});
  if (tracing) exposeExemplars(metrics);
  const proxy = createGateway(config, {
    logger,
    clock,
    metrics,
    authenticate,
    policy: policy.policy,
    ipBlocks: { blockedMs: ipBudget.blockedMs, spend: ipBudget.spend, log: blockedLog },
    ...(forwarder && { forwarder }),
    ...(assertion && { assertion }),
    ...(streams && { streams: { registry: streams, metrics: streamMetrics } }),
    ...(tracing && { tracing }),
  });
  let closing = false;
  const ready = createReadiness({ requireKeys: config.readyRequiresKeys }, { store, closing: () => closing });
  const admin = createAdminServer(
    { limits: config.limits },
    { metrics, ready, ...(assertionKeys && { jwks: () => assertionKeys.current().jwks }) },
  );
  const management =
    config.management &&
    createManagementApi(
      {
        tokensFile: config.management.tokensFile,
        limits: config.limits,
        secretPrefix: config.secretPrefix,
        githubScanningKeysFile: config.management.githubScanningKeysFile,
        ...(config.regions && {
          regions: {
            self: config.regions.self,
            names: config.regions.groups.map((g) => g.name),
            defaultHome: config.regions.defaultHome,
          },
        }),
      },
      {
        store,
        logger,
        now: () => clock.nowMs(),
        defaultOwnerRateLimit: () => policy.policy().defaultOwnerRateLimit,
        costliestRoute: () => largestRouteCost(policy.policy().routes),
        registry: metrics.registry,
      },
    );
  const webhooks = config.webhook && config.redis && startWebhooks(config.webhook, config.redis);
  // While draining, every response closes its connection so keep-alive clients reconnect elsewhere.
  proxy.prependListener('request', (_req, res) => {
    if (closing) res.setHeader('connection', 'close');
  });

  /**
   * Signed webhooks from the audit stream, on a Redis connection of their own (a blocking read never
   * holds a request's command). With KEYGATE_WORKERS > 1 every worker is a consumer: the consumer group
   * hands each event to one of them, so that is as safe as one and needs no election.
   */
  function startWebhooks(settings: NonNullable<Config['webhook']>, connection: NonNullable<Config['redis']>) {
    // A read blocks up to 1 s: the command deadline covers that and a slow answer.
    const client = openWebhookRedis(connection, 1_000 + config.limits.redisCommandTimeoutMs + 2_000);
    client.on('error', (err: Error) => logger.debug({ err: err.message }, 'webhooks: redis connection error'));
    const delivery: WebhookDelivery = createWebhookDelivery(
      { ...settings, consumer: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}` },
      { logger, clock, metrics, redis: client },
    );
    return {
      async close() {
        await delivery.close();
        client.disconnect();
      },
    };
  }

  const listenOn = (server: Server, port: number, host: string) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      // A deep accept queue: a burst of thousands of connections waits to be accepted instead
      // of having its SYNs dropped and retried seconds later (the kernel caps it at somaxconn).
      server.listen({ port, host, backlog: 4_096 }, () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });

  return {
    proxy,
    admin,
    management: management?.server,
    store,
    metrics,
    ready,
    reloadKeys: () => watcher?.reload('reload requested') ?? Promise.resolve(false),
    reloadPolicy: () => policy.reload('reload requested'),
    reloadManagementTokens: () => {
      management?.scanningKeys?.reload('reload requested');
      return management?.tokens.reload('reload requested') ?? false;
    },
    reloadAssertionKeys: () => assertionKeys?.reload('reload requested') ?? false,
    async listen() {
      if (tracing && loadingTracing) tracing.tracer = (await loadingTracing).tracer;
      const port = await listenOn(proxy, config.port, config.host);
      const adminPort = await listenOn(admin, config.adminPort, config.adminHost);
      if (!management || !config.management) return { port, adminPort };
      const managementPort = await listenOn(management.server, config.management.port, config.management.host);
      return { port, adminPort, managementPort };
    },
    async close() {
      closing = true;
      const closed = new Promise<boolean>((resolve) => proxy.close(() => resolve(true)));
      // Keep-alive connections go idle once their in-flight response is done: close them as they do.
      // Streams never end by themselves: once no request is in flight they get 1001 (the server's
      // close waits for their connections too).
      let streamsClosed: Promise<void> | undefined;
      const sweep = setInterval(() => {
        proxy.closeIdleConnections();
        if (metrics.inflight.value === 0) streamsClosed ??= streams?.closeAll();
      }, 50);
      proxy.closeIdleConnections();
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<boolean>(
        (resolve) => (timer = setTimeout(() => resolve(false), config.limits.shutdownTimeoutMs)),
      );
      const drained = await Promise.race([closed, deadline]);
      clearInterval(sweep);
      clearTimeout(timer);
      await (streamsClosed ?? streams?.closeAll());
      streams?.close();
      if (!drained) {
        const open = await new Promise<number>((resolve) => proxy.getConnections((_err, n) => resolve(n ?? 0)));
        logger.warn(
          { deadlineMs: config.limits.shutdownTimeoutMs, connections: open },
          'shutdown deadline reached: cutting connections still in flight',
        );
      }
      proxy.closeAllConnections();
      admin.closeAllConnections();
      await new Promise<void>((resolve) => admin.close(() => resolve()));
      if (management) {
        management.server.closeAllConnections();
        await new Promise<void>((resolve) => management.server.close(() => resolve()));
        management.tokens.close();
        management.scanningKeys?.close();
      }
      await forwarder?.close();
      watcher?.close();
      assertionKeys?.close();
      policy.close();
      keys.close();
      unsubscribe();
      ipBudget.close();
      // Every response has closed: the refusals of blocked IPs not yet summed up in a line are, now.
      blockedLog.flush();
      await webhooks?.close();
      await store.close();
      // Spans still queued are sent (bounded by OTEL_BSP_EXPORT_TIMEOUT); a collector that is down costs no more.
      await loadingTracing?.then((t) => t.shutdown()).catch(() => {});
    },
  };
}
