/**
 * Everything a use case needs, built once by the composition root (src/main/start.ts) and passed in.
 * Use cases are functions of this context, so tests can assemble one around a devnet.
 */
import type { Logger } from 'pino';
import type { ChainPort } from '../chain/port.js';
import type { GatewayConfig } from '../config/index.js';
import type { InferencePort } from '../network/port.js';
import type { Projections } from '../projections/index.js';
import type { ChainInfo } from './escrows/chain-info.js';
import type { Engine } from './write/engine.js';
import type { Keyring } from './keyring.js';
import type { Limiter } from './write/limiter.js';
import type { NonceLeases } from './write/nonce-lease.js';
import type { ProtocolBilling } from './session/billing.js';
import type { Ownership } from './scale/ownership.js';

export interface GatewayContext {
  config: GatewayConfig;
  engine: Engine;
  /** Which escrows this instance serves and whether it runs the background tasks (gateway/scale). */
  ownership: Ownership;
  /** Nonce reservations in blocks, taken ahead of use by the chat path. */
  nonces: NonceLeases;
  projections: Projections;
  chain: ChainPort;
  chainInfo: ChainInfo;
  network: InferencePort;
  keyring: Keyring;
  limiter: Limiter;
  logger: Logger;
  /** Depletion threshold: usable balance below it makes an escrow depleted (spec: 1,000,000). */
  depletionThreshold: bigint;
  /** Called after a request ends on an escrow (settle reactor, depletion replacement). */
  afterRequest(escrowId: string): void;
  /** Over the devshard protocol: matches the log's bill of each inference with its host's charge. */
  billing?: ProtocolBilling;
  /** Over the protocol: writes what the hosts acknowledged so far (devshard-host-acks.ts) before a settlement is recorded. */
  hostAcks?: { flush(): Promise<unknown> };
  /** Called after a settings change is durable (rotation reconfigures itself). */
  onSettingsChanged?: () => void;
  /**
   * The background re-hash of the log before the start's anchor (log-anchor.ts): while it runs or
   * once it passed, chat is served; once it failed, chat answers 503 naming the position.
   */
  logCheck?: LogCheckState;
}

export type LogCheckState =
  | { state: 'checking'; until: number }
  | { state: 'ok'; checked: number }
  | { state: 'failed'; position: number; reason: string };
