/**
 * src/protocol: the devshard protocol versions we speak (versions.ts), pure. The host state machine replica (one per escrow), its
 * roots and settlement, the user-side composition of a diff, signatures and their preimages, the
 * Go-canonical prompt hash. See docs/protocol.md.
 */
export * from './errors.js';
export * from './bytes.js';
export * from './signatures.js';
export * from './preimages.js';
export * from './canonical-json.js';
export * from './session-config.js';
export * from './inference-record.js';
export * from './hashes.js';
export * from './seal.js';
export * from './stamps.js';
export * from './floor.js';
export * from './height-turns.js';
export * from './height-sync-flags.js';
export * from './height-sync.js';
export * from './log-plane.js';
export * from './error-miss.js';
export * from './replica.js';
export * from './compose.js';
export * from './replay.js';
export * from './settlement.js';
export * from './charges.js';
export * from './versions.js';
