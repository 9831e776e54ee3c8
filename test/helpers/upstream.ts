// Kept only for test/process/keys-cli-lifecycle.test.ts (owned by the `cli` branch while it is rewritten):
// import startRecordingUpstream from ./recording-upstream.js there, then delete this file.
export { startRecordingUpstream as startUpstream, type RecordingUpstream } from './recording-upstream.js';
