export { claimPort, freePort, HARNESS_PORTS_END, portIsFree } from '../../scripts/harness/free-port.mjs';
