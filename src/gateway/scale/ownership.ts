/**
 * Which escrows this gateway instance may serve and write, and whether it runs the background
 * tasks. One process on its own log (SQLite) owns everything (`soleOwnership`); instances sharing
 * a PostgreSQL log hold leases (lease-keeper.ts). The engine fences each escrow's appends with the
 * lease's token, chat routes only to owned escrows, and every other command on an escrow claims it
 * first (engine.serial), so one instance at a time decides an escrow's nonces.
 */
import type { Fence } from '../../events/store.js';

export interface OwnershipView {
  instance: string;
  /** Several instances share the log. */
  shared: boolean;
  leader: string | undefined;
  /** Escrow id → the instance holding its lease (shared logs only). */
  owners: Record<string, string>;
  instances: { name: string; url: string | undefined; live: boolean; stopping: boolean; seen_ago_ms: number; escrows: number; leader: boolean }[];
}

export interface Ownership {
  readonly instance: string;
  readonly shared: boolean;
  /** Chat may be routed to the escrow here (its lease held, taken over, not being handed over). */
  owns(escrowId: string): boolean;
  /** The fence an append to this stream carries (undefined: a stream no lease covers, or a sole owner). */
  fenceOf(streamId: string): Fence | undefined;
  /** Makes this instance the escrow's owner before a command on it (hand-over when another holds it). */
  claim(escrowId: string): Promise<void>;
  /** This instance runs the background tasks (rotation, depletion, prune watch, settle retries). */
  isLeader(): boolean;
  view(): OwnershipView;
}

/** One process owns the whole log. */
export function soleOwnership(instance: string): Ownership {
  return {
    instance,
    shared: false,
    owns: () => true,
    fenceOf: () => undefined,
    claim: () => Promise.resolve(),
    isLeader: () => true,
    view: () => ({ instance, shared: false, leader: instance, owners: {}, instances: [] }),
  };
}

export const ESCROW_LEASE_PREFIX = 'escrow:';
export const LEADER_LEASE = 'leader';
export const escrowLease = (escrowId: string): string => `${ESCROW_LEASE_PREFIX}${escrowId}`;

/** The escrow whose lease covers a stream: its own stream and its devshard session's. */
export function escrowOfStream(streamId: string): string | undefined {
  if (streamId.startsWith('escrow-create-')) return undefined;
  if (streamId.startsWith('escrow-')) return streamId.slice('escrow-'.length);
  if (streamId.startsWith('devshard-session-')) return streamId.slice('devshard-session-'.length);
  return undefined;
}
