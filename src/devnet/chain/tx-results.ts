/** A delivered tx's gas, its standard events and a failure's result, as the chain's ante and delivery report them (chain.ts). */
import { DENOM } from '../../chain/keys.js';
import { MsgCreateDevshardEscrowType } from '../../chain/messages.js';
import type { CheckedTx, TxFailure } from './ante.js';
import type { TxEvent, TxResult } from './state.js';

/** Fixed gas costs: enough that the reference limit (700000) always suffices, as on the network. */
const GAS = { base: 60_000n, create: 40_000n, settle: 60_000n, perSignature: 5_000n };

export function gasOf(tx: CheckedTx): bigint {
  let gas = GAS.base;
  for (const m of tx.msgs) {
    gas += m.typeUrl === MsgCreateDevshardEscrowType.typeUrl ? GAS.create : GAS.settle + GAS.perSignature * BigInt(m.value.signatures.length);
  }
  return gas;
}

export function standardEvents(tx: CheckedTx, sequence: number): TxEvent[] {
  return [
    { type: 'tx', attributes: [{ key: 'fee', value: tx.fee > 0n ? `${tx.fee}${DENOM}` : '' }, { key: 'fee_payer', value: tx.signer }] },
    { type: 'tx', attributes: [{ key: 'acc_seq', value: `${tx.signer}/${sequence}` }] },
  ];
}

export function failed(f: TxFailure, gasWanted: bigint, gasUsed: bigint, events: TxEvent[] = []): TxResult {
  return { code: f.code, codespace: f.codespace, log: f.log, data: '', gasWanted: String(gasWanted), gasUsed: String(gasUsed), events };
}
