/** What the escrow pool (escrow-pool.ts) hands out and keeps: router summaries, checkpoint state, partition shares. */
import type { Amount, EscrowRole } from '../events/catalog.js';
import type { EscrowSnapshot, EscrowState, PersistedMachineState } from '../machines/index.js';

/** What the router needs of one routable escrow. */
export interface PoolEscrow {
  escrowId: string;
  model: string;
  role: EscrowRole;
  state: EscrowState;
  nonce: number;
  balance: Amount;
  reserved: Amount;
  inFlight: number;
}

/** An intent not yet resolved (a restart must reconcile it with the chain by tx hash). */
export interface PendingCreate {
  intentId: string;
  model: string;
  role: EscrowRole;
  epoch: number;
  txHash: string;
  position: number;
}

export interface EscrowPoolState {
  escrows: Record<string, PersistedMachineState>;
  intents: Record<string, PersistedMachineState>;
  pendingCreates: Record<string, PendingCreate>;
}

/**
 * Some escrows of a pool, for putting a pool together from partitions of a fold (`merge`): each
 * with the position that orders it (its first event; negative for escrows restored from a
 * checkpoint, in restore order), and the routable ones with the position they became routable at.
 */
export interface PoolPart {
  escrows: [escrowId: string, state: PersistedMachineState, firstAt: number][];
  routable: [model: string, escrowId: string, since: number][];
}

/** What every partition of a fold has alike: the creation intents, in their order. */
export interface PoolShared {
  intents: [intentId: string, state: PersistedMachineState][];
  pendingCreates: [intentId: string, pending: PendingCreate][];
}

/** What a batch fold needs of one folded escrow event: the state value after it and whether it was accepted. */
export interface FoldStep {
  value: EscrowSnapshot['value'];
  accepted: boolean;
}

/** The router's summary of an escrow snapshot. */
export const summary = (escrowId: string, snapshot: EscrowSnapshot): PoolEscrow => {
  const c = snapshot.context;
  return {
    escrowId,
    model: c.model ?? '',
    role: c.role,
    state: snapshot.value as EscrowState,
    nonce: c.nonce,
    balance: c.balance,
    reserved: c.reserved,
    inFlight: c.inFlight,
  };
};
