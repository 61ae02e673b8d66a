/**
 * The ante handler: what a Cosmos SDK v0.53 node checks before running a tx's messages. Decodes the
 * signed TxRaw (proto/cosmos, strict as Go), verifies the secp256k1 signature over the
 * SIGN_MODE_DIRECT SignDoc (account number, chain id), and then either
 * - an **ordered** tx: its sequence (SDK code 32 on mismatch), or
 * - an **unordered** tx (ADR 070, TxBody.unordered): timeout_timestamp set, not passed, at most
 *   MAX_UNORDERED_TTL_MS ahead, and the pair (signer, timeout_timestamp) not used while unexpired
 *   (the SDK's texts, x/auth/ante sigverify.go; SDK code 18 invalid request);
 * and that the fee is payable in ngonka. Used twice, as a node does: at broadcast (CheckTx, against
 * the mempool's view) and when the block runs the tx (DeliverTx).
 */
import { Secp256k1, Secp256k1Signature, sha256 } from '@cosmjs/crypto';
import { toBase64 } from '@cosmjs/encoding';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { decodeTx, secp256k1KeyOf, signDocBytes, SECP256K1_PUBKEY_TYPE_URL, type DecodedTx } from '../../chain/tx.js';
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

/** The SDK's default max TTL of an unordered tx (DefaultMaxTimeoutDuration, 10 minutes). */
export const MAX_UNORDERED_TTL_MS = 10 * 60_000;

export interface CheckedTx {
  signer: string;
  pubKey: Uint8Array;
  sequence: number;
  /** Unordered: the replay key `signer/timeout-ms` and the timeout (ms); ordered: undefined. */
  unordered?: { key: string; timeoutMs: number };
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

function decodeMsgs(tx: DecodedTx): DevnetMsg[] | TxFailure {
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

export interface AnteView {
  /** The sequence an ordered tx must carry (mempool view at CheckTx, committed at DeliverTx). */
  expectedSequence?: (account: AccountState) => number;
  /** Time the checks run at (ms): the block's time. */
  blockTimeMs: number;
  /** Whether an unordered replay key is taken (committed, or pending in the mempool at CheckTx). */
  usedUnordered: (key: string) => boolean;
}

export function checkTx(state: ChainState, txBytes: Uint8Array, view: AnteView): CheckedTx | TxFailure {
  let tx: DecodedTx;
  try {
    tx = decodeTx(txBytes);
  } catch (e) {
    return fail(SDK_CODES.txDecode, `${(e as Error).message}: tx parse error`);
  }
  const msgs = decodeMsgs(tx);
  if (!Array.isArray(msgs)) return msgs;

  const signerInfo = tx.authInfo.signerInfos[0];
  if (tx.authInfo.signerInfos.length !== 1 || tx.signatures.length !== 1 || !signerInfo?.publicKey) {
    return fail(SDK_CODES.unauthorized, 'devnet accepts exactly one signer with a public key: unauthorized');
  }
  if (signerInfo.publicKey.typeUrl !== SECP256K1_PUBKEY_TYPE_URL) {
    return fail(SDK_CODES.invalidPubKey, `unsupported public key type ${signerInfo.publicKey.typeUrl}: invalid pubkey`);
  }
  let pubKey: Uint8Array;
  try {
    pubKey = secp256k1KeyOf(signerInfo.publicKey)!;
  } catch (e) {
    return fail(SDK_CODES.txDecode, `${(e as Error).message}: tx parse error`);
  }
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
  let unordered: CheckedTx['unordered'];
  if (tx.body.unordered) {
    const ts = tx.body.timeoutTimestamp;
    if (!ts || ts.seconds === 0n) {
      return fail(SDK_CODES.invalidRequest, 'unordered transaction must have timeout_timestamp set: invalid request');
    }
    const timeoutMs = timestampMs(ts);
    if (timeoutMs < view.blockTimeMs) {
      return fail(SDK_CODES.invalidRequest, 'unordered transaction has a timeout_timestamp that has already passed: invalid request');
    }
    if (timeoutMs > view.blockTimeMs + MAX_UNORDERED_TTL_MS) {
      return fail(SDK_CODES.invalidRequest, 'unordered tx ttl exceeds 10m0s: invalid request');
    }
    const key = `${signer}/${ts.seconds}.${String(ts.nanos).padStart(9, '0')}`;
    if (view.usedUnordered(key)) {
      return fail(SDK_CODES.invalidRequest, `failed to add unordered nonce: already used timeout (${timeoutMs}) for ${signer}: invalid request`);
    }
    unordered = { key, timeoutMs };
  } else {
    const expected = view.expectedSequence ? view.expectedSequence(account) : account.sequence;
    if (sequence !== expected) {
      return fail(
        SDK_CODES.wrongSequence,
        `account sequence mismatch, expected ${expected}, got ${sequence}: incorrect account sequence`,
      );
    }
  }

  const signBytes = signDocBytes(tx.bodyBytes, tx.authInfoBytes, state.chainId, BigInt(account.accountNumber));
  const sigBytes = tx.signatures[0]!;
  let valid: boolean;
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
    if (!/^\d+$/.test(coin.amount)) return fail(SDK_CODES.invalidRequest, `invalid fee amount ${JSON.stringify(coin.amount)}: invalid coins`);
    fee += BigInt(coin.amount);
  }
  if (account.balance < fee) {
    return fail(SDK_CODES.insufficientFunds, `spendable balance ${account.balance}${DENOM} is smaller than ${fee}${DENOM}: insufficient funds`);
  }
  return { signer, pubKey, sequence, ...(unordered ? { unordered } : {}), fee, gasLimit: tx.authInfo.fee?.gasLimit ?? 0n, msgs };
}

export function isFailure(x: CheckedTx | TxFailure): x is TxFailure {
  return 'code' in x;
}
