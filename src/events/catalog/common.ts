/**
 * Value shapes shared by several events. Amounts are decimal strings of the smallest coin unit:
 * JSON has no bigint, and the hash chain needs one canonical text for every amount.
 */
import type { ChainErrorKind } from '../../chain/port.js';

/** Decimal string of a non-negative integer amount in the smallest coin unit, e.g. "1000000". */
export type Amount = string;

/** Escrow role: regular escrows carry traffic; temporary ones bridge an epoch transition. */
export type EscrowRole = 'regular' | 'temporary';

/**
 * Where the creator key came from. The key itself never enters the log (docs/architecture.md, principle 5):
 * either the name of the environment variable that holds it, or "it was in the request body".
 */
export type KeySource = { kind: 'env'; name: string } | { kind: 'request' };

/** A chain failure as recorded: the typed kind plus what the chain said, for diagnosis. */
export interface ChainErrorInfo {
  kind: ChainErrorKind;
  message: string;
  code?: number;
  codespace?: string;
  rawLog?: string;
  txHash?: string;
}

/** A host slot of an escrow (copy of the chain's EscrowSlot). */
export interface SlotInfo {
  slotId: number;
  host: string;
  url: string;
}

/** What one host slot served on an escrow: the cost billed to it and the requests it ran. */
export interface SlotTally {
  slotId: number;
  cost: Amount;
  requests: number;
}

/** Token usage as reported by the upstream (OpenAI naming, camel-cased). */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

/** The chain's Settlement with amounts as strings. */
export interface SettlementData {
  escrowId: string;
  nonce: number;
  stateRoot: string;
  restHash: string;
  hostStats: { slotId: number; missed: number; invalid: number; cost: Amount; requests: number }[];
  signatures: { slotId: number; signature: string }[];
  fees: Amount;
  /** The settlement encoding (2: the devshard protocol's). */
  version: number;
  /**
   * The session's state-root tag, hashed into the root and sent as `state_root_and_protocol_version`.
   * Absent in settlements recorded before versions were recorded: then it is `v${version}` ("v2").
   */
  stateRootVersion?: string;
}

/** The settlement's state-root tag (an older record has none: "v2"). */
export const settlementTag = (s: Pick<SettlementData, 'version' | 'stateRootVersion'>): string => s.stateRootVersion ?? `v${s.version}`;

/**
 * The devshard protocol an escrow's session speaks (src/protocol/versions.ts `EscrowProtocol`):
 * recorded when the escrow is created, registered or imported. Absent in escrows recorded before
 * versions were: those speak v2 on `/v1/devshard` with the tag "v2".
 */
export interface ProtocolData {
  /** The approved-version name ("v4.1"). */
  version: string;
  /** The host route prefix (`/devshard/v4.1`, `/v1/devshard`). */
  route: string;
  /** The state-root tag. */
  tag: string;
}
