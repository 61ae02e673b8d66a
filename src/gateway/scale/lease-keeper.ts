/**
 * The leases of one instance among several sharing a PostgreSQL log (ownership.ts says what they
 * guard). Every third of the lease time it beats (its liveness row), renews what it holds, hands
 * over what another asked for once it is idle on it, takes the leader lease when free, and takes
 * or asks for its share of the escrows (share.ts).
 *
 * Its own deadline: a renewal asked at local time t gives it until t + ttl (less a tenth for clock
 * rates), never more than the database granted. Past it, or once a renewal comes back without a
 * lease, chat is no longer routed to that escrow here; anything this instance still appends under
 * the old token is refused by the store (LeaseLostError), so the new holder's nonces are never
 * decided twice.
 *
 * Taking an escrow over: the lease (a new token, and the log's tail at that moment), then the log
 * read up to that tail, the old session dropped, and what the previous holder left in flight
 * reconciled as after a restart (takenOver); only then is chat routed to it.
 */
import type { Logger } from 'pino';
import type { InstanceRow, LeaseRow, LeaseTable } from '../../events/leases.js';
import type { Fence } from '../../events/store.js';
import { GatewayError } from '../errors.js';
import { escrowLease, escrowOfStream, ESCROW_LEASE_PREFIX, LEADER_LEASE, type Ownership, type OwnershipView } from './ownership.js';
import { decideShare } from './share.js';

export interface LeaseKeeperDeps {
  table: LeaseTable;
  instance: string;
  /** Where this instance answers (shown to the others and in /v1/status), once it listens. */
  url(): string | undefined;
  ttlMs: number;
  logger: Logger;
  /** Follows the shared log until this instance has heard up to `position`. */
  catchUpTo(position: number): Promise<void>;
  /** Escrows that need an owner (not settled or removed). */
  escrows(): string[];
  /** Nothing of this instance is in flight or committing on the escrow. */
  idle(escrowId: string): boolean;
  /** Right after taking it over: what the previous holder left under way is ended (reconcile). */
  takenOver(escrowId: string): Promise<void>;
  /** Right before handing it over, under the lease still held: unused nonces given back. */
  handingOver(escrowId: string): Promise<void>;
  /** The lease is gone from here: forget what memory holds of it (its devshard session). */
  dropped(escrowId: string): void;
  /** Runs `f` alone on the escrow, after its other commands (engine.serial, without claiming). */
  exclusive<T>(escrowId: string, f: () => Promise<T>): Promise<T>;
}

interface Held {
  token: number;
  /** Local time (ms) until which this instance may act on it. */
  validUntil: number;
}

export interface LeaseKeeper extends Ownership {
  /** Takes the leader lease and this instance's share now (the first pass, before serving). */
  start(): Promise<void>;
  /** One pass now (tests; the timer runs it every third of the lease time). */
  tick(): Promise<void>;
  /** SIGTERM: no new escrow, every lease handed back (after the caller drained the requests). */
  handOverAll(): Promise<void>;
  stop(): Promise<void>;
}

export function createLeaseKeeper(d: LeaseKeeperDeps): LeaseKeeper {
  const held = new Map<string, Held>();
  /** Escrows taken over and reconciled: chat may go to them. */
  const ready = new Set<string>();
  /** Escrows another instance asked for: no new chat here, handed over once idle. */
  const leaving = new Set<string>();
  let stopping = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let seen: { leases: LeaseRow[]; instances: InstanceRow[] } = { leases: [], instances: [] };
  const margin = Math.floor(d.ttlMs / 10);
  /** One taking or hand-over at a time per escrow, whoever asks (a command's claim, the tick). */
  const locks = new Map<string, Promise<unknown>>();
  /**
   * Escrow work a pass starts and does not wait for (a take-over, a hand-over): it may queue behind
   * a long command on the escrow (a settle), and the renewals must go on meanwhile.
   */
  const busy = new Map<string, Promise<void>>();
  const background = (escrowId: string, what: string, f: () => Promise<unknown>): void => {
    if (busy.has(escrowId)) return;
    const p = f()
      .then(() => undefined)
      .catch((err: unknown) => log.warn({ err, escrow_id: escrowId }, `${what} failed; retried at the next pass`))
      .finally(() => busy.delete(escrowId));
    busy.set(escrowId, p);
  };
  const locked = <T>(escrowId: string, f: () => Promise<T>): Promise<T> => {
    const run = (locks.get(escrowId) ?? Promise.resolve()).then(f, f);
    const tail = run.catch(() => undefined);
    locks.set(escrowId, tail);
    void tail.then(() => locks.get(escrowId) === tail && locks.delete(escrowId));
    return run;
  };
  const log = d.logger.child({ component: 'leases', instance: d.instance });

  const valid = (name: string) => {
    const h = held.get(name);
    return h !== undefined && Date.now() < h.validUntil;
  };
  const holds = (escrowId: string) => ready.has(escrowId) && valid(escrowLease(escrowId));

  function drop(escrowId: string, why: string): void {
    if (!held.delete(escrowLease(escrowId)) && !ready.has(escrowId)) return;
    ready.delete(escrowId);
    leaving.delete(escrowId);
    d.dropped(escrowId);
    log.info({ escrow_id: escrowId }, `escrow lease ${why}`);
  }

  /** Holding the new lease: read up to where the previous holder stopped, then reconcile. */
  async function takeOver(escrowId: string, token: number, tail: number, t0: number): Promise<void> {
    held.set(escrowLease(escrowId), { token, validUntil: t0 + d.ttlMs - margin });
    ready.delete(escrowId);
    d.dropped(escrowId);
    await d.catchUpTo(tail);
    await d.takenOver(escrowId);
    ready.add(escrowId);
    log.info({ escrow_id: escrowId, token }, 'escrow lease taken');
  }

  /** Inside the escrow's exclusive section. Undefined: another holds it. */
  async function tryTake(escrowId: string): Promise<boolean> {
    if (holds(escrowId)) return true;
    const t0 = Date.now();
    const taken = await d.table.acquire(escrowLease(escrowId), d.instance, d.ttlMs);
    if (!taken) return false;
    try {
      await takeOver(escrowId, taken.token, taken.tail, t0);
    } catch (err) {
      // Not reconciled: give it back so another instance (or the next tick) takes it over properly.
      held.delete(escrowLease(escrowId));
      await d.table.release(d.instance, [{ name: escrowLease(escrowId), token: taken.token }]).catch(() => undefined);
      throw err;
    }
    return true;
  }

  async function handOver(escrowId: string): Promise<void> {
    const name = escrowLease(escrowId);
    const h = held.get(name);
    // Kept after all: no longer asked for (a command here claimed it since), or busy again.
    if (!h || (!stopping && (!leaving.has(escrowId) || !d.idle(escrowId)))) return;
    if (valid(name)) await d.handingOver(escrowId).catch((err: unknown) => log.warn({ err, escrow_id: escrowId }, 'could not give back unused nonces before the hand-over; the next holder reconciles them'));
    held.delete(name);
    ready.delete(escrowId);
    leaving.delete(escrowId);
    d.dropped(escrowId);
    await d.table.release(d.instance, [{ name, token: h.token }], d.ttlMs);
    log.info({ escrow_id: escrowId }, 'escrow lease handed over');
  }

  async function pass(): Promise<void> {
    await d.table.beat({ name: d.instance, url: d.url(), stopping });
    const t0 = Date.now();
    const list = [...held].map(([name, h]) => ({ name, token: h.token }));
    const { renewed, wanted } = await d.table.renew(d.instance, list, d.ttlMs);
    for (const { name, token } of list) {
      const h = held.get(name);
      // Changed while the renewal was asked (taken anew under another token, or handed over): not this one's to judge.
      if (!h || h.token !== token) continue;
      if (renewed.has(name)) h.validUntil = t0 + d.ttlMs - margin;
      else if (name === LEADER_LEASE) {
        held.delete(name);
        log.warn('leader lease lost: the background tasks run elsewhere');
      } else drop(name.slice(ESCROW_LEASE_PREFIX.length), 'lost (expired or taken over): no more chat routed to it here');
    }
    for (const name of wanted) {
      const id = name.slice(ESCROW_LEASE_PREFIX.length);
      if (!name.startsWith(ESCROW_LEASE_PREFIX) || leaving.has(id)) continue;
      leaving.add(id);
      log.info({ escrow_id: id }, 'another instance asked for the escrow: no new chat routed to it here, handed over once its requests ended');
    }
    for (const id of [...leaving]) if (d.idle(id)) background(id, 'hand-over', () => d.exclusive(id, () => locked(id, () => handOver(id))));
    if (!stopping && !held.has(LEADER_LEASE)) {
      const t = Date.now();
      const taken = await d.table.acquire(LEADER_LEASE, d.instance, d.ttlMs);
      if (taken) {
        held.set(LEADER_LEASE, { token: taken.token, validUntil: t + d.ttlMs - margin });
        log.info({ token: taken.token }, 'leader lease taken: this instance runs the background tasks');
      }
    }
    const [leases, instances] = await Promise.all([d.table.list(), d.table.instances()]);
    seen = { leases, instances };
    const live = instances.filter((i) => i.seenAgoMs < d.ttlMs && !i.stopping).map((i) => i.name);
    const share = decideShare({ me: d.instance, stopping, escrows: d.escrows(), leases, live });
    // Leases the table gives this instance that it does not hold: handed over to it on its request,
    // or held by its previous process under the same name. Taken over first.
    const mine = stopping ? [] : [...share.holders].filter(([id, owner]) => owner === d.instance && !held.has(escrowLease(id))).map(([id]) => id);
    for (const id of [...mine, ...share.take]) background(id, 'taking the escrow over', () => d.exclusive(id, () => locked(id, () => tryTake(id))));
    if (share.want) await d.table.want(escrowLease(share.want), d.instance);
  }

  /** Takes the escrow, asking its holder to hand it over and waiting (bounded) when another holds it. */
  async function claimNow(escrowId: string): Promise<void> {
    const deadline = Date.now() + 3 * d.ttlMs;
    for (;;) {
      if (stopping) throw new GatewayError('unavailable', 'instance_stopping', `This gateway instance (${d.instance}) is stopping and takes no escrow over.`, { remedy: 'Send the command to another instance.', retryAfterSeconds: 1 });
      if (await tryTake(escrowId)) return;
      if (Date.now() > deadline) {
        const holder = seen.leases.find((l) => l.name === escrowLease(escrowId))?.owner;
        throw new GatewayError('unavailable', 'escrow_held_elsewhere', `Escrow ${escrowId} is served by instance ${holder ?? 'another instance'}, which did not hand it over within ${3 * d.ttlMs} ms (an instance hands an escrow over once its requests on it ended).`, { remedy: 'Retry shortly, or send the command to that instance.', retryAfterSeconds: 1 });
      }
      await d.table.want(escrowLease(escrowId), d.instance);
      await new Promise((r) => setTimeout(r, Math.max(50, Math.floor(d.ttlMs / 6))));
    }
  }

  const tick = (): Promise<void> =>
    (running ??= pass()
      .catch((err: unknown) => log.error({ err }, 'lease pass failed; retried at the next tick (leases held stay valid until their deadline)'))
      .finally(() => (running = undefined)));

  return {
    instance: d.instance,
    shared: true,
    owns: (escrowId) => holds(escrowId) && !leaving.has(escrowId) && !stopping,
    fenceOf(streamId): Fence | undefined {
      const escrowId = escrowOfStream(streamId);
      if (escrowId === undefined) return undefined;
      const lease = escrowLease(escrowId);
      // Not held: a token never in force, so the store refuses it rather than let two instances write.
      return { lease, token: held.get(lease)?.token ?? 0 };
    },
    claim: (escrowId) => (holds(escrowId) ? Promise.resolve() : locked(escrowId, () => claimNow(escrowId))),
    isLeader: () => !stopping && valid(LEADER_LEASE),
    view(): OwnershipView {
      const owners: Record<string, string> = {};
      for (const l of seen.leases) if (l.name.startsWith(ESCROW_LEASE_PREFIX) && l.owner !== undefined && l.expiresInMs > 0) owners[l.name.slice(ESCROW_LEASE_PREFIX.length)] = l.owner;
      const leaderRow = seen.leases.find((l) => l.name === LEADER_LEASE);
      const leader = leaderRow?.owner !== undefined && leaderRow.expiresInMs > 0 ? leaderRow.owner : undefined;
      return {
        instance: d.instance,
        shared: true,
        leader,
        owners,
        instances: seen.instances.map((i) => ({
          name: i.name,
          url: i.url,
          live: i.seenAgoMs < d.ttlMs && !i.stopping,
          stopping: i.stopping,
          seen_ago_ms: i.seenAgoMs,
          escrows: Object.values(owners).filter((o) => o === i.name).length,
          leader: leader === i.name,
        })),
      };
    },
    async start() {
      await tick();
      // The first pass's take-overs are done before the instance serves.
      await Promise.all(busy.values());
      timer = setInterval(() => void tick(), Math.max(50, Math.floor(d.ttlMs / 3)));
      timer.unref();
    },
    tick,
    async handOverAll() {
      stopping = true;
      if (timer) clearInterval(timer);
      await running;
      await Promise.all(busy.values());
      for (const name of [...held.keys()]) {
        if (name.startsWith(ESCROW_LEASE_PREFIX)) {
          const id = name.slice(ESCROW_LEASE_PREFIX.length);
          await d.exclusive(id, () => handOver(id)).catch((err: unknown) => log.warn({ err, escrow_id: id }, 'hand-over at stop failed; the lease expires instead'));
        }
      }
      const leader = held.get(LEADER_LEASE);
      if (leader) {
        held.delete(LEADER_LEASE);
        await d.table.release(d.instance, [{ name: LEADER_LEASE, token: leader.token }]).catch(() => undefined);
      }
      await d.table.beat({ name: d.instance, url: d.url(), stopping: true }).catch(() => undefined);
    },
    async stop() {
      stopping = true;
      if (timer) clearInterval(timer);
      await running;
      await Promise.all(busy.values());
    },
  };
}
