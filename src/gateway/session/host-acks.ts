/**
 * What each host did with an escrow's diffs, into the log: how far it applied them (its latest
 * receipt's nonce and state_hash, DevshardHostAcknowledged) and what it refused
 * (DevshardHostRefused). Off the request path: acknowledgements are coalesced per host and
 * written at most once per `everyMs` (the latest one wins), and a refusal is written when it
 * differs from that host's previous one, so a host that refuses every request is one event.
 */
import { devshardSessionStream, newEvent, type NewCatalogEvent as NewEvent } from '../../events/catalog.js';
import type { Logger } from 'pino';
import { REQUEST_RECORD_WITHIN_MS, type Engine } from '../write/engine.js';

const key = (escrowId: string, host: string) => `${escrowId}\u0000${host}`;

export class HostAckRecorder {
  private readonly pending = new Map<string, { escrowId: string; host: string; nonce: number; stateHash: string }>();
  private readonly lastRefusal = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly engine: Engine,
    private readonly logger: Pick<Logger, 'warn'>,
    private readonly everyMs = 1_000,
  ) {}

  ack(escrowId: string, host: string, nonce: bigint, stateHash: Uint8Array): void {
    const k = key(escrowId, host);
    this.pending.set(k, { escrowId, host, nonce: Number(nonce), stateHash: Buffer.from(stateHash).toString('hex') });
    // A host that applies again has recovered: its next refusal, even the same one, is news.
    this.lastRefusal.delete(k);
    if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.everyMs);
      this.timer.unref();
    }
  }

  refused(escrowId: string, host: string, status: number, message: string, rule?: string): void {
    const k = key(escrowId, host);
    const what = `${status} ${rule ?? ''} ${message}`;
    if (this.lastRefusal.get(k) === what) return;
    this.lastRefusal.set(k, what);
    // The acknowledgement it had reached comes first, so the log reads in the order it happened.
    const ack = this.pending.get(k);
    this.pending.delete(k);
    const events: [string, NewEvent][] = [];
    if (ack) events.push([escrowId, newEvent('DevshardHostAcknowledged', ack, { actor: { kind: 'chat' } })]);
    events.push([escrowId, newEvent('DevshardHostRefused', { escrowId, host, status, message: message.slice(0, 2000), ...(rule ? { rule } : {}) }, { actor: { kind: 'chat' } })]);
    this.write(events);
  }

  /** Writes the pending acknowledgements now (resolves once they are durable). */
  flush(): Promise<unknown> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const events: [string, NewEvent][] = [...this.pending.values()].map((a) => [a.escrowId, newEvent('DevshardHostAcknowledged', a, { actor: { kind: 'chat' } })]);
    this.pending.clear();
    if (events.length > 0) this.write(events);
    return this.writing;
  }

  private write(events: [string, NewEvent][]): void {
    const byEscrow = new Map<string, NewEvent[]>();
    for (const [id, e] of events) byEscrow.set(id, [...(byEscrow.get(id) ?? []), e]);
    const writes = [...byEscrow].map(([id, evs]) =>
      this.engine.appendOrdered(devshardSessionStream(id), evs, { withinMs: REQUEST_RECORD_WITHIN_MS }).catch((err: unknown) => this.logger.warn({ err, escrow_id: id }, 'could not record what the hosts acknowledged; the next acknowledgement is recorded again')),
    );
    this.writing = Promise.all([this.writing, ...writes]);
  }

  close(): Promise<unknown> {
    return this.flush();
  }
}
