/**
 * Bringing a host to the session's latest nonce (catch-up syncs, in chunks after a restart) and
 * checking the receipt a host answers a request with.
 */
import { HostError } from '../../port.js';
import { SseParser, type SseEvent } from '../../sse.js';
import { readHostEvent, type HostReceipt } from '../host-events.js';
import { ReceiptMismatch, type DevshardSession } from '../session.js';
import type { TransportContext } from './context.js';
import { postSessionRoute, refused } from './host-requests.js';

/** Most diffs one catch-up request carries (gonka user/session.go catchUpChunkSize). */
export const CATCH_UP_CHUNK = 200;

/**
 * Brings host `url` to our latest nonce: a catch-up longer than CATCH_UP_CHUNK diffs goes first in
 * chunks of that many (as devshardctl's sendCatchUpWith), each answer read whole, its receipt
 * checked (which moves the host's acknowledged nonce), its meta taken.
 */
export async function syncHost(ctx: TransportContext, s: DevshardSession, url: string): Promise<void> {
  await catchUpInChunks(ctx, s, url);
  await syncOnce(ctx, s, url, Infinity);
}

/** Sends host `url` its catch-up in chunks until at most CATCH_UP_CHUNK diffs are left for it. */
export async function catchUpInChunks(ctx: TransportContext, s: DevshardSession, url: string): Promise<void> {
  for (let left = s.catchUpCount(url); left > CATCH_UP_CHUNK; ) {
    await syncOnce(ctx, s, url, CATCH_UP_CHUNK);
    const now = s.catchUpCount(url);
    if (now >= left) throw new HostError('bad_response', `host ${url} did not acknowledge a catch-up chunk (${now} diffs still unacknowledged)`);
    left = now;
  }
}

async function syncOnce(ctx: TransportContext, s: DevshardSession, url: string, maxDiffs: number): Promise<void> {
  const { body, upTo } = s.syncBody(url, maxDiffs);
  let status: number;
  let text: string;
  try {
    ({ status, text } = await postSessionRoute(ctx, s, url, 'chat/completions', body, { stream: true }));
  } catch (err) {
    throw new HostError('unreachable', `host ${url} unreachable: ${(err as Error)?.message ?? String(err)}`);
  }
  if (status !== 200) throw refused(ctx, s, url, status, text, `host ${url}`);
  const events: SseEvent[] = [];
  const parser = new SseParser();
  parser.push(Buffer.from(text, 'utf8'), events);
  parser.end(events);
  for (const e of events) {
    const ev = readHostEvent(e.data);
    if (ev.kind === 'receipt') receiptOf(s, url, ev.receipt, upTo);
    else if (ev.kind === 'meta') s.onMempool(ev.mempool, url);
  }
}

/**
 * The receipt of the request for `nonce`. Its `nonce` is the host's latest after applying the
 * request's diffs: past ours when a later request to the same host (carrying our diff as catch-up)
 * got there first, which concurrent calls on one escrow do. Never below ours.
 */
export function receiptOf(s: DevshardSession, url: string, r: HostReceipt, nonce: bigint): void {
  if (r.nonce < nonce) throw new HostError('bad_response', `host ${url} sent a receipt for nonce ${r.nonce}, the request was nonce ${nonce}`);
  try {
    s.onReceipt(url, r, nonce);
  } catch (err) {
    if (err instanceof ReceiptMismatch) throw new HostError('bad_response', err.message);
    throw err;
  }
}
