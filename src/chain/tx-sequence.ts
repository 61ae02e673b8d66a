/**
 * The account sequence a signed (recorded) tx carries, read from its bytes. The reconciler re-sends
 * recorded txs in this order: a node takes an account's txs only in sequence order, so re-sending a
 * later one first would have it refused (bad_sequence) although it is valid.
 */
import { fromBase64 } from '@cosmjs/encoding';
import { AuthInfo, TxRaw } from 'cosmjs-types/cosmos/tx/v1beta1/tx';

/** The first signer's sequence; undefined for bytes that are not a signed Cosmos tx. */
export function txSequence(txBytes: string | undefined): number | undefined {
  if (!txBytes) return undefined;
  try {
    const seq = AuthInfo.decode(TxRaw.decode(fromBase64(txBytes)).authInfoBytes).signerInfos[0]?.sequence;
    return seq === undefined ? undefined : Number(seq);
  } catch {
    return undefined;
  }
}
