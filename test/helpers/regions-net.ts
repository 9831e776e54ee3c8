// The regions tier needs root (network namespaces, TUN devices), iproute2 and python3. Without them it fails
// with a message naming what is missing: it never skips.
import { regionsNetUnavailable } from '../../scripts/harness/regions-net.mjs';

export function requireRegionsNet(): void {
  const why = regionsNetUnavailable();
  if (why) throw new Error(`the regions tier cannot run: ${why}`);
}
