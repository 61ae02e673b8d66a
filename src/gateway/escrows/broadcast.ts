/**
 * Broadcasting a recorded (write-ahead) tx when the answer may get lost. The tx's bytes and hash
 * are fixed once recorded, so sending them again can never create or settle twice: the node
 * answers a known tx from its cache and the outcome is looked up by hash. An unreachable node is
 * retried a few times (ask by hash first); a timeout (the tx was accepted but not included in
 * time) is not re-sent, only looked up. What stays unknown is left to the intent reconciler.
 */
import type { PreparedTx, TxOutcome } from '../../chain/port.js';
import type { GatewayContext } from '../context.js';
import { outcomeUnknown } from './chain-errors.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Tx hashes a command is broadcasting right now (the background reconciler leaves them alone). */
const busyHashes = new WeakMap<GatewayContext, Set<string>>();

export function busyWith(ctx: GatewayContext): Set<string> {
  let s = busyHashes.get(ctx);
  if (!s) busyHashes.set(ctx, (s = new Set()));
  return s;
}

export interface RetryOptions {
  /** Broadcast attempts while the node is unreachable (default 3). */
  attempts?: number;
  /** Pause before the next attempt, ms, times the attempt number (default 300). */
  backoffMs?: number;
}

/**
 * Broadcasts `tx` and answers its outcome; throws the last ChainError when it is still unknown
 * (unreachable / timeout) after the retries, or the chain's refusal.
 */
export async function broadcastByHash(ctx: GatewayContext, tx: PreparedTx, options: RetryOptions = {}): Promise<TxOutcome> {
  const attempts = options.attempts ?? 3;
  const backoff = options.backoffMs ?? 300;
  const busy = busyWith(ctx);
  busy.add(tx.txHash);
  try {
    let last: unknown;
    for (let i = 1; i <= attempts; i++) {
      try {
        return await ctx.chain.broadcast(tx);
      } catch (err) {
        if (!outcomeUnknown(err)) throw err;
        last = err;
      }
      // The answer was lost: the chain may have the tx all the same.
      const found = await ctx.chain.findTx(tx.txHash).catch(() => null);
      if (found) return found;
      if ((last as { kind?: string }).kind === 'timeout' || i === attempts) break;
      await sleep(backoff * i);
    }
    throw last;
  } finally {
    busy.delete(tx.txHash);
  }
}

/**
 * The outcome of a recorded tx: looked up by hash, else its recorded bytes broadcast again (same
 * hash, so it cannot act twice). 'unknown' while the chain cannot tell; `{ error }` when it refuses.
 */
export async function recordedTxOutcome(ctx: GatewayContext, tx: PreparedTx): Promise<TxOutcome | { error: unknown } | 'unknown'> {
  try {
    const found = await ctx.chain.findTx(tx.txHash);
    if (found) return found;
  } catch {
    return 'unknown';
  }
  if (!tx.txBytes) return { error: new Error('the chain has no such tx and its bytes were not recorded') };
  try {
    return await ctx.chain.broadcast(tx);
  } catch (error) {
    return outcomeUnknown(error) ? 'unknown' : { error };
  }
}
