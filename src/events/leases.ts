/**
 * Leases of a log shared by several gateway instances (issue 42): who may write an escrow's
 * streams (its nonces), and who runs the background tasks. Each lease is a row with its holder, an
 * expiry and a fencing token that grows by one at every taking; appends carry the token
 * (AppendOptions.fence) and the store refuses them once it is no longer the one in force, inside
 * the commit itself. Times are the database's clock; the holder's own view of its deadline is kept
 * by the holder (gateway/scale), started before each renewal was asked, so it always ends first.
 */

export interface LeaseRow {
  name: string;
  /** Undefined: released (free to take at once). */
  owner: string | undefined;
  token: number;
  /** Milliseconds until it expires by the database's clock (negative: expired). */
  expiresInMs: number;
  /** An instance that asked the holder to hand it over. */
  wantedBy: string | undefined;
}

export interface InstanceRow {
  name: string;
  url: string | undefined;
  startedAt: string;
  /** Milliseconds since its last heartbeat, by the database's clock. */
  seenAgoMs: number;
  /** It said it is stopping (SIGTERM): it hands its leases over and takes no new ones. */
  stopping: boolean;
}

export interface HeldLease {
  name: string;
  token: number;
}

export interface TakenLease extends HeldLease {
  /** The log's tail when it was taken: every write of the previous holder is at or below it. */
  tail: number;
}

export interface LeaseTable {
  /**
   * Takes the lease when it is free, released, expired, or already this owner's (a restart under
   * the same name); a new fencing token either way. Serialized with the log's commits, so the
   * returned tail bounds what the previous holder wrote. Undefined when another holds it.
   */
  acquire(name: string, owner: string, ttlMs: number): Promise<TakenLease | undefined>;
  /** Extends the leases still held with these tokens; answers which were renewed and which are wanted by another. */
  renew(owner: string, held: readonly HeldLease[], ttlMs: number): Promise<{ renewed: Set<string>; wanted: Set<string> }>;
  /**
   * Gives leases back; answers which were still held. One another instance asked for (`want`) goes
   * to it for `ttlMs` (it takes it as its own); any other is free at once.
   */
  release(owner: string, held: readonly HeldLease[], ttlMs?: number): Promise<Set<string>>;
  /** Asks the holder of `name` to hand it over (it does at its next renewal, once idle on it). */
  want(name: string, requester: string): Promise<void>;
  list(): Promise<LeaseRow[]>;
  /** Records that the instance is alive (and whether it is stopping). */
  beat(instance: { name: string; url: string | undefined; stopping: boolean }): Promise<void>;
  instances(): Promise<InstanceRow[]>;
}
