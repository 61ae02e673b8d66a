/**
 * How the escrows are spread over the live instances: pure, so each instance decides from the same
 * rows (the lease table at its tick) what it takes and what it asks for, and the test can say why.
 *
 * Each live instance aims at its fair share, ceil(escrows / live instances). It takes escrows with
 * no holder (released, expired, never taken) up to it, in an order of its own (a hash of its name
 * and the escrow's), so instances starting together mostly pick different ones. One that holds
 * fewer than floor(escrows / live) asks the most loaded instance for one (a hand-over request),
 * one at a time, so a new or restarted instance gets its share without anyone losing a request.
 */
import { createHash } from 'node:crypto';
import type { LeaseRow } from '../../events/leases.js';
import { escrowLease } from './ownership.js';

export interface ShareInput {
  me: string;
  /** This instance is stopping: it takes and asks for nothing. */
  stopping: boolean;
  /** Escrows that need an owner (not settled, not removed). */
  escrows: readonly string[];
  leases: readonly LeaseRow[];
  /** Live instances (heartbeat within the lease time, not stopping), this one included unless stopping. */
  live: readonly string[];
}

export interface ShareDecision {
  take: string[];
  want: string | undefined;
  fair: number;
  /** Escrow → its holder now (unexpired leases only). */
  holders: Map<string, string>;
}

export function decideShare(input: ShareInput): ShareDecision {
  const rows = new Map(input.leases.map((l) => [l.name, l]));
  const holders = new Map<string, string>();
  for (const id of input.escrows) {
    const row = rows.get(escrowLease(id));
    if (row?.owner !== undefined && row.expiresInMs > 0) holders.set(id, row.owner);
  }
  const live = Math.max(1, input.live.length);
  const fair = Math.ceil(input.escrows.length / live);
  if (input.stopping) return { take: [], want: undefined, fair, holders };
  const mine = [...holders.values()].filter((o) => o === input.me).length;
  const order = (id: string) => createHash('sha256').update(`${input.me}\u0000${id}`).digest('hex');
  const free = input.escrows.filter((id) => !holders.has(id)).sort((a, b) => (order(a) < order(b) ? -1 : 1));
  const take = free.slice(0, Math.max(0, fair - mine));
  let want: string | undefined;
  if (mine + take.length < Math.floor(input.escrows.length / live)) {
    const counts = new Map<string, string[]>();
    for (const [id, owner] of holders) if (owner !== input.me) counts.set(owner, [...(counts.get(owner) ?? []), id]);
    const [, most] = [...counts].sort((a, b) => b[1].length - a[1].length || (a[0] < b[0] ? -1 : 1))[0] ?? [];
    if (most && most.length > mine + take.length + 1) want = most.sort((a, b) => (order(a) < order(b) ? -1 : 1))[0];
  }
  return { take, want, fair, holders };
}
