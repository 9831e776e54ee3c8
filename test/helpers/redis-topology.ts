// Real Redis topologies started by a test (a Cluster, or a master + replica + sentinel), on free
// ports: scripts/harness/redis-topology.mjs, shared with the benchmark scripts
// (scripts/bench-key-changes.mjs). Fails loudly, never skips, when redis-server or redis-cli is missing.
export {
  CLUSTER_NODE_TIMEOUT_MS,
  client,
  startRedisCluster,
  startRedisSentinel,
  until,
} from '../../scripts/harness/redis-topology.mjs';
export type { TestCluster, TestSentinel } from '../../scripts/harness/redis-topology.mjs';
export type { TcpRelay } from '../../scripts/harness/tcp-relay.mjs';
