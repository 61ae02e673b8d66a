/** What the devnet chain (chain.ts) is told and answers: its fault switches, its state store, a broadcast's answer. */
import type { TxFailure } from './ante.js';
import type { ChainState } from './state.js';

export interface DevnetFaults {
  /**
   * Answer HTTP 503 on the RPC and on every REST route a tx needs (accounts, node info, broadcast,
   * tx lookup): the node cannot take or report txs. Module queries (params, escrows, epochs) still answer.
   */
  rpcDown: boolean;
  /** Accept broadcasts but never include them (stuck mempool). */
  holdMempool: boolean;
  /**
   * Accept (and later include) broadcast txs but lose the answer: 'error' answers HTTP 503,
   * 'reset' drops the connection, 'hang' never answers. The client cannot tell whether the tx
   * reached the chain; it must look it up by hash.
   */
  dropBroadcastResponse: false | 'error' | 'reset' | 'hang';
  /**
   * One shot: the next broadcast reaches the node this many ms late (CheckTx runs as if the clock
   * were that far ahead), so a recorded unordered tx re-sent after its timeout is refused, as a
   * real node refuses a stale one. Cleared by that broadcast.
   */
  lateArrivalMs: number;
}

export interface StateStore {
  save(state: ChainState): void;
  close(): void;
}

export type BroadcastAnswer = { inCache: true; hash: string } | { inCache: false; hash: string; failure?: TxFailure };
