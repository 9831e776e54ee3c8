export { freePort, portIsFree } from '../../scripts/harness/free-port.mjs';
