/**
 * What the parts of one protocol transport (protocol-transport.ts) share: its options and settings,
 * the HTTP agent, and the state kept per escrow (sessions, height seeds, route refusals, drains).
 */
import type { Agent } from 'undici';
import type { DevshardSession } from '../session.js';
import type { HeightSeed } from '../height-seed.js';
import type { RouteRefusal } from '../host-refusals.js';
import type { Exchange, ProtocolTransportOptions } from './types.js';

export interface TransportContext {
  readonly opts: ProtocolTransportOptions;
  readonly agent: Agent;
  readonly now: () => number;
  readonly stallTimeoutMs: number;
  readonly timeoutMs: number;
  readonly drainMs: number;
  /** The traffic listener now (setExchangeListener replaces it). */
  onExchange: ((x: Exchange) => void) | undefined;
  /** The escrows' open sessions. */
  readonly sessions: Map<string, DevshardSession>;
  /** Host streams still read after their client (drain.ts), awaited (bounded) on close. */
  readonly drains: Set<Promise<void>>;
  /** Escrow → when its session last composed a diff (ms). */
  readonly lastDiffAt: Map<string, number>;
  /** v5 sessions' height seeds, by escrow. */
  readonly seeds: Map<string, HeightSeed>;
  /** Escrow → the latest answer that says its protocol, not a request, is wrong (host-refusals.ts). */
  readonly routeRefusals: Map<string, RouteRefusal>;
}
