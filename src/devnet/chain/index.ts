export { startDevnet, type Devnet } from './start.js';
export { resolveDevnetConfig, parseExternalHosts, DEFAULT_MODEL, type DevnetConfig, type DevnetOptions, type ExternalHost } from './config.js';
export { DevnetChain, type DevnetFaults } from './chain.js';
export { epochAt, type EpochPosition } from './epochs.js';
export type { FundedKey } from './genesis.js';
