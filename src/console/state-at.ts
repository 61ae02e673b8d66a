/**
 * Time travel for one escrow: its statechart's state at a chosen position, as `shardgate replay
 * --escrow <id> --until <position>` computes it (src/projections/replay.ts), folding only the
 * escrow's own streams (its intent, itself, its devshard session) up to that position.
 */
import type { RecordedEvent } from '../events/envelope.js';
import { machinesAt, replay, type ReplayRow } from '../projections/replay.js';
import type { ConsoleLog } from './log-source.js';

const PAGE = 2_000;

export interface EscrowStateAt {
  escrow_id: string;
  position: number;
  /** The escrow as the projections hold it then (null: not created yet at that position). */
  state: { state: string; model: string | null; nonce: number; inFlight: number; balance: string; reserved: string } | null;
  /** The last rows of the replay up to that position. */
  last: ReplayRow[];
  events: number;
}

async function* upTo(log: ConsoleLog, streams: string[], position: number): AsyncGenerator<RecordedEvent[]> {
  for (const s of streams) {
    for (let from = 0; ; from += PAGE) {
      const page = (await log.readStream(s, from, PAGE)).filter((r) => r.position <= position);
      yield page;
      if (page.length < PAGE) break;
    }
  }
}

export async function escrowStateAt(log: ConsoleLog, escrowId: string, streams: string[], position: number): Promise<EscrowStateAt> {
  const records: RecordedEvent[] = [];
  for await (const page of upTo(log, streams, position)) records.push(...page);
  records.sort((a, b) => a.position - b.position);
  const it = replay(records, { escrow: escrowId, until: position });
  const rows: ReplayRow[] = [];
  let next = it.next();
  while (!next.done) {
    rows.push(next.value);
    if (rows.length > 20) rows.shift();
    next = it.next();
  }
  const machines = machinesAt(next.value);
  return { escrow_id: escrowId, position, state: machines.escrows[escrowId] ?? null, last: rows, events: records.length };
}
