// Tested in test/process/client-module.test.ts (import "keygate": the package entry, built).
export { createToken, nonceNow, withKeygateAuth, type CreateTokenOptions } from './client/create-token.js';
export { createKeygate, type Keygate, type KeygateDeps } from './create-keygate.js';
export { loadConfig, type Config } from './config/load-config.js';
export { ConfigError } from './files/config-error.js';
export { ERRORS, REASONS, type ErrorCode, type Reason } from './errors.js';
export { systemClock, manualClock, type Clock } from './clock.js';
