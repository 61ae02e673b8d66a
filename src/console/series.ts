/**
 * An escrow's balance, reserved amount and nonce over time, for the console's chart: read from its
 * stream page by page (a turn of the event loop between pages), one point per request batch,
 * thinned to at most `MAX_POINTS`. Arithmetic over the recorded costs, the same the pool
 * projection does: balance = deposit − costs of ended requests − recovered usage; a settled
 * escrow's balance is the chain's refund.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { escrowStream } from '../events/catalog.js';
import { eachRequestEvent } from '../events/request-data.js';
import type { ConsoleLog } from './log-source.js';

export const MAX_POINTS = 1_000;
const PAGE = 2_000;

export interface SeriesPoint {
  position: number;
  /** Unix seconds (uPlot's x axis). */
  t: number;
  balance: string;
  reserved: string;
  nonce: number;
  in_flight: number;
}

export interface BalanceSeries {
  escrow_id: string;
  deposit: string;
  points: SeriesPoint[];
  /** Points before thinning. */
  total: number;
}

export async function balanceSeries(log: ConsoleLog, escrowId: string): Promise<BalanceSeries> {
  const stream = escrowStream(escrowId);
  let deposit = 0n;
  let spent = 0n;
  let reserved = 0n;
  let nonce = 0;
  const open = new Map<number, bigint>();
  const all: SeriesPoint[] = [];
  const point = (position: number, time: string, balance?: bigint) =>
    all.push({ position, t: Date.parse(time) / 1000, balance: (balance ?? deposit - spent).toString(), reserved: reserved.toString(), nonce, in_flight: open.size });
  for (let from = 0; ; from += PAGE) {
    const page = await log.readStream(stream, from, PAGE);
    for (const r of page) {
      const d = r.data as { amount?: string; spent?: string; nonce?: number; cost?: string; refund?: string };
      if (r.type === 'EscrowCreated' || r.type === 'EscrowImported') {
        deposit = BigInt(d.amount ?? '0');
        spent = BigInt(d.spent ?? '0');
        nonce = d.nonce ?? 0;
        point(r.position, r.time);
      } else if (r.type === 'InferencesRecorded' || r.type === 'InferenceStarted' || r.type === 'InferenceFinished' || r.type === 'InferenceFailed') {
        for (const e of eachRequestEvent([r])) {
          const x = e.data as { nonce: number; reservedCost?: string; cost?: string };
          if (e.type === 'InferenceStarted') {
            const cost = BigInt(x.reservedCost ?? '0');
            open.set(x.nonce, cost);
            reserved += cost;
            nonce = Math.max(nonce, x.nonce);
          } else {
            reserved -= open.get(x.nonce) ?? 0n;
            open.delete(x.nonce);
            spent += BigInt(x.cost ?? '0');
          }
        }
        point(r.position, r.time);
      } else if (r.type === 'UsageRecovered') {
        spent += BigInt(d.cost ?? '0');
        point(r.position, r.time);
      } else if (r.type === 'EscrowSettled') {
        point(r.position, r.time, BigInt(d.refund ?? '0'));
      }
    }
    if (page.length < PAGE) break;
    await nextTurn();
  }
  const step = Math.ceil(all.length / MAX_POINTS);
  const points = step <= 1 ? all : all.filter((_, i) => i % step === 0 || i === all.length - 1);
  return { escrow_id: escrowId, deposit: deposit.toString(), points, total: all.length };
}
