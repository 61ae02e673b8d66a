/** What a devshard session (session.ts) is bound to and hands out: the escrow, the replica's params, sent diffs, prepared requests. */
import {
  applyChainBindParams,
  LEGACY_PROTOCOL,
  rulesOf,
  sessionConfigFromEscrow,
  type ChainBindParams,
  type Diff,
  type EscrowProtocol,
  type EscrowSessionFields,
  type ReplicaParams,
  type WarmKeyBinding,
} from '../../protocol/index.js';

/** What a session is bound to: the escrow as the chain created it, and the chain's bind params. */
export interface SessionEscrow {
  escrowId: string;
  /** The escrow creator: signs every diff and every request. */
  creator: string;
  amount: bigint;
  /** Slot id → host address and inference URL, in slot order. */
  slots: readonly { host: string; url: string }[];
  /** Values frozen on the escrow (token price, fees); the compiled defaults fill the rest. */
  session: EscrowSessionFields;
  /** The chain's session params read at bind (absent: the protocol defaults). */
  bind?: ChainBindParams;
  /** The version, route and state-root tag the escrow speaks (absent: v2 on `/v1/devshard`, an older log's). */
  protocol?: EscrowProtocol;
}

/**
 * The replica a session of `escrow` binds, as a host binds it: the config from the escrow's frozen
 * fields and the chain's bind params, the state-root tag of the escrow's protocol. One reading for
 * the live session, an import's replay and the log's audit, so they cannot drift apart.
 */
export function replicaParamsOf(escrow: SessionEscrow): ReplicaParams {
  const n = escrow.slots.length;
  const config = applyChainBindParams(sessionConfigFromEscrow(n, escrow.session), n, escrow.bind ?? {});
  const protocol = escrow.protocol ?? LEGACY_PROTOCOL;
  // A version we do not speak cannot open a session (rulesOf throws).
  return { escrowId: escrow.escrowId, slots: escrow.slots.map((s) => s.host), amount: escrow.amount, userAddress: escrow.creator, config, version: protocol.tag, rules: rulesOf(protocol) };
}

/** Signs sha256(message), 65 bytes R‖S‖V (the creator's key, held by the signer). */
export type ProtocolSign = (message: Uint8Array) => Uint8Array;

/** Whether `cold` granted `warm` its warm-key marker (ChainPort.warmKeyGranted); rejects when not known. */
export type WarmKeyGrantLookup = (cold: string, warm: string) => Promise<boolean>;

/** One diff as sent (what the log would record to rebuild the replica with `replay`). */
export interface SentDiff extends Diff {
  warmKeyBindings: readonly WarmKeyBinding[];
}

/** A request ready to go: its executor, the exact body bytes and their header signature input. */
export interface PreparedRequest {
  nonce: bigint;
  /** The executor's inference URL (slots[nonce % n]). */
  hostUrl: string;
  body: Uint8Array;
  /** The diffs the body carries (catch-up and the new one). */
  diffs: number;
  /** What `onDiff` answered for the diffs composed here (their recording): settle before sending. */
  recorded: Promise<unknown>[];
}

/** A receipt that disagrees with our replica: the host's state is not ours. */
export class ReceiptMismatch extends Error {
  override name = 'ReceiptMismatch';
}

