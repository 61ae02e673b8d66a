/**
 * The account sequence a signed (recorded) tx carries, read from its bytes. The reconciler re-sends
 * recorded txs in this order. shardgate's own txs are unordered (sequence 0, tx.ts), so their order
 * does not matter; an ordered tx recorded by an older version still goes in sequence order.
 */
import { fromBase64 } from '@cosmjs/encoding';
import { decodeTx } from './tx.js';

/** The first signer's sequence; undefined for bytes that are not a signed Cosmos tx. */
export function txSequence(txBytes: string | undefined): number | undefined {
  if (!txBytes) return undefined;
  try {
    const seq = decodeTx(fromBase64(txBytes)).authInfo.signerInfos[0]?.sequence;
    return seq === undefined ? undefined : Number(seq);
  } catch {
    return undefined;
  }
}
