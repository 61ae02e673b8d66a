/**
 * The ante handler: what a Cosmos node checks before running a tx's messages. Decodes the real
 * signed TxRaw, verifies the secp256k1 signature over the SIGN_MODE_DIRECT SignDoc (account number,
 * chain id), the sequence (SDK code 32 on mismatch) and that the fee is payable in ngonka.
 * Used twice, as a node does: at broadcast (CheckTx, against the mempool's view of sequences) and
 * when the block runs the tx (DeliverTx).
 */
import { Secp256k1, Secp256k1Signature, sha256 } from '@cosmjs/crypto';
import { toBase64 } from '@cosmjs/encoding';
import { decodeTxRaw, makeSignBytes, makeSignDoc, type DecodedTxRaw } from '@cosmjs/proto-signing';
import { PubKey } from 'cosmjs-types/cosmos/crypto/secp256k1/keys';
import { TxRaw } from 'cosmjs-types/cosmos/tx/v1beta1/tx';
import { SDK_CODES } from '../../chain/devshard-errors.js';
import { addressOfPubKey, DENOM } from '../../chain/keys.js';
import {
  MsgCreateDevshardEscrowType,
  MsgSettleDevshardEscrowType,
  type MsgCreateDevshardEscrow,
  type MsgSettleDevshardEscrow,
} from '../../chain/messages.js';
import type { AccountState, ChainState } from './state.js';

export type DevnetMsg =
  | { typeUrl: '/inference.inference.MsgCreateDevshardEscrow'; value: MsgCreateDevshardEscrow }
  | { typeUrl: '/inference.inference.MsgSettleDevshardEscrow'; value: MsgSettleDevshardEscrow };

export interface CheckedTx {
  signer: string;
  pubKey: Uint8Array;
  sequence: number;
  fee: bigint;
  gasLimit: bigint;
  msgs: DevnetMsg[];
}

export interface TxFailure {
  code: number;
  codespace: string;
  log: string;
}

const fail = (code: number, log: string, codespace = 'sdk'): TxFailure => ({ code, codespace, log });

function decodeMsgs(tx: DecodedTxRaw): DevnetMsg[] | TxFailure {
  const msgs: DevnetMsg[] = [];
  for (const any of tx.body.messages) {
    try {
      if (any.typeUrl === MsgCreateDevshardEscrowType.typeUrl) {
        msgs.push({ typeUrl: '/inference.inference.MsgCreateDevshardEscrow', value: MsgCreateDevshardEscrowType.decode(any.value) });
        continue;
      }
      if (any.typeUrl === MsgSettleDevshardEscrowType.typeUrl) {
        msgs.push({ typeUrl: '/inference.inference.MsgSettleDevshardEscrow', value: MsgSettleDevshardEscrowType.decode(any.value) });
        continue;
      }
    } catch (e) {
      // As Go's decoder: malformed bytes (a field number 0, a truncated varint) fail the whole tx.
      return fail(SDK_CODES.txDecode, `${(e as Error).message}: tx parse error`);
    }
    {
      return fail(SDK_CODES.txDecode, `unable to resolve type URL ${any.typeUrl}: tx parse error`);
    }
  }
  if (msgs.length === 0) return fail(SDK_CODES.invalidRequest, 'must contain at least one message: invalid request');
  return msgs;
}

const signerOf = (msg: DevnetMsg): string =>
  msg.typeUrl === MsgCreateDevshardEscrowType.typeUrl ? msg.value.creator : msg.value.settler;

/**
 * @param expectedSequence the sequence the tx must carry (mempool view at CheckTx, committed at
 *   DeliverTx); the account's own sequence when undefined.
 */
export function checkTx(
  state: ChainState,
  txBytes: Uint8Array,
  expectedSequence?: (account: AccountState) => number,
): CheckedTx | TxFailure {
  let raw: TxRaw;
  let tx: DecodedTxRaw;
  try {
    raw = TxRaw.decode(txBytes);
    tx = decodeTxRaw(txBytes);
  } catch (e) {
    return fail(SDK_CODES.txDecode, `${(e as Error).message}: tx parse error`);
  }
  const msgs = decodeMsgs(tx);
  if (!Array.isArray(msgs)) return msgs;

  const signerInfo = tx.authInfo.signerInfos[0];
  if (tx.authInfo.signerInfos.length !== 1 || tx.signatures.length !== 1 || !signerInfo?.publicKey) {
    return fail(SDK_CODES.unauthorized, 'devnet accepts exactly one signer with a public key: unauthorized');
  }
  if (signerInfo.publicKey.typeUrl !== '/cosmos.crypto.secp256k1.PubKey') {
    return fail(SDK_CODES.invalidPubKey, `unsupported public key type ${signerInfo.publicKey.typeUrl}: invalid pubkey`);
  }
  const pubKey = PubKey.decode(signerInfo.publicKey.value).key;
  if (pubKey.length !== 33) return fail(SDK_CODES.invalidPubKey, 'public key must be 33 bytes: invalid pubkey');
  const signer = addressOfPubKey(pubKey);
  for (const msg of msgs) {
    if (signerOf(msg) !== signer) {
      return fail(SDK_CODES.invalidPubKey, `pubKey does not match signer address ${signerOf(msg)} with signer index: 0: invalid pubkey`);
    }
  }

  const account = state.accounts[signer];
  if (!account) return fail(SDK_CODES.unknownAddress, `account ${signer} does not exist: unknown address`);
  if (account.pubKey !== undefined && account.pubKey !== toBase64(pubKey)) {
    return fail(SDK_CODES.invalidPubKey, 'public key does not match the account: invalid pubkey');
  }

  const sequence = Number(signerInfo.sequence);
  const expected = expectedSequence ? expectedSequence(account) : account.sequence;
  if (sequence !== expected) {
    return fail(
      SDK_CODES.wrongSequence,
      `account sequence mismatch, expected ${expected}, got ${sequence}: incorrect account sequence`,
    );
  }

  const signBytes = makeSignBytes(makeSignDoc(raw.bodyBytes, raw.authInfoBytes, state.chainId, account.accountNumber));
  const sigBytes = tx.signatures[0]!;
  let valid = false;
  try {
    valid = sigBytes.length === 64 && Secp256k1.verifySignature(Secp256k1Signature.fromFixedLength(sigBytes), sha256(signBytes), pubKey);
  } catch {
    valid = false;
  }
  if (!valid) {
    return fail(
      SDK_CODES.unauthorized,
      `signature verification failed; please verify account number (${account.accountNumber}) and chain-id (${state.chainId}): unauthorized`,
    );
  }

  const feeCoins = tx.authInfo.fee?.amount ?? [];
  let fee = 0n;
  for (const coin of feeCoins) {
    if (coin.denom !== DENOM) return fail(SDK_CODES.insufficientFee, `fee denom ${coin.denom} not accepted, use ${DENOM}: insufficient fee`);
    fee += BigInt(coin.amount);
  }
  if (account.balance < fee) {
    return fail(SDK_CODES.insufficientFunds, `spendable balance ${account.balance}${DENOM} is smaller than ${fee}${DENOM}: insufficient funds`);
  }
  return { signer, pubKey, sequence, fee, gasLimit: tx.authInfo.fee?.gasLimit ?? 0n, msgs };
}

export function isFailure(x: CheckedTx | TxFailure): x is TxFailure {
  return 'code' in x;
}
