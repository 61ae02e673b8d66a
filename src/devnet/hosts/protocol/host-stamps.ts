/**
 * The height a v5 host stamps on what it signs (zpoken/gonka@86cff503 devshard/host/heightsync.go
 * `headerStamp`, `referenceStamp`; host.go `signReceipt`, `RunExecution`; repair.go `observedTip`):
 * its block oracle's latest (height, hash), lifted to the floor F(m) of the producing nonce m when
 * the floor stands above it. A stamp is never below F(m), so an honest host never costs a diff L0.
 * Producing nonces: the inference id for a receipt / ConfirmStart and a Finish, ref_nonce + 1 for a
 * heartbeat's ack.
 */
import type { BlockHeader, DevnetChainView } from '../chain-view.js';
import type { Stamp } from '../../../protocol/stamps.js';
import type { HostSession } from './session.js';

/** What one request read from the oracle (read once, as Z5 reads it once per request). */
export interface OracleRead {
  /** Undefined: the host has no oracle, or the chain has no block yet. */
  header?: BlockHeader;
}

export function readOracle(chain: DevnetChainView): OracleRead {
  const header = chain.latestBlock?.();
  return header ? { header } : {};
}

/** Whether this host runs with a block oracle at all (Z5: DEVSHARD_CHAINORACLE_URL set). */
export const hasOracle = (chain: DevnetChainView): boolean => typeof chain.latestBlock === 'function';

/** `headerStamp`: the header's (height, hash), or nothing for a missing header, height 0 or no hash. */
export function headerStamp(read: OracleRead): Stamp {
  const h = read.header;
  if (!h || h.height <= 0n || h.hash.length === 0) return { height: 0n, hash: new Uint8Array(0) };
  return { height: h.height, hash: h.hash };
}

/** `referenceStamp`: max(own stamp, F(m)), the floor's hash going with it when it wins. */
export function referenceStamp(session: HostSession, producingNonce: bigint, own: Stamp): Stamp {
  const f = session.replica.floorAt(producingNonce);
  if (!f.known || f.height <= own.height || f.hash.length === 0) return own;
  return { height: f.height, hash: f.hash };
}

/**
 * The fault `subFloorStamps`: a host that signs one block below the floor F(m) (with that block's
 * real hash when the chain has it), which L0 refuses. No floor above height 1 yet: the honest stamp
 * (nothing lies below it).
 */
export function subFloorStamp(session: HostSession, producingNonce: bigint, honest: Stamp, chain: DevnetChainView): Stamp {
  const f = session.replica.floorAt(producingNonce);
  if (!f.known || f.height <= 1n) return honest;
  const height = f.height - 1n;
  const hash = chain.blockAt?.(height)?.hash ?? f.hash;
  return { height, hash };
}

/** The stamp a host signs for producing nonce `m`: honest, or below the floor when the fault says so. */
export function hostStamp(session: HostSession, m: bigint, own: Stamp, o: { chain: DevnetChainView; belowFloor: boolean }): Stamp {
  const honest = referenceStamp(session, m, own);
  return o.belowFloor ? subFloorStamp(session, m, honest, o.chain) : honest;
}
