/** The escrow's pending reservations as a persistent map: the fast path's (escrow-fast.ts) representation. */
import type { Amount } from '../events/catalog.js';

// ---- a persistent map (Baker's rerooting) ------------------------------------------------------

type PendingNode = { map: Map<string, Amount> } | { next: PendingMap; key: string; value: Amount | undefined };

/**
 * Adds after which a pending map is copied into a fresh one instead of being edited further (here,
 * and in the rebuild's escrow runs, escrow-run.ts). Why: an escrow's map lives long (old space)
 * and rebuilds its table every few requests; V8 links each old table to the next (for iterators),
 * so every request id a table held stays reachable from old space and is promoted, until a full
 * GC. A map renewed this often dies young with its tables; the copy costs (requests in flight) / 8
 * entries per request. Measured: the rebuild's runs promoted ~90 MB per partition of the soak's log
 * without it, ~10 MB with it (every 32 adds); the live gateway at 1,000 req/s, 55 → 42 KB promoted
 * per scavenge with 32. At 8, the map of an escrow taking ~250 req/s lives ~30 ms, under the
 * scavenge interval: old-space growth at 1,000 req/s went from ~320 to ~200 KB/s (session 6).
 * Here, versions made before a renewal keep their own (no longer edited) map.
 */
export const PENDING_RENEW = 8;

/**
 * A persistent string → Amount map. Exactly one version in a family owns the mutable `Map`; every
 * other version is a one-entry difference from a neighbour. Reading a version moves ownership to it
 * (O(distance), 1 in the usual linear fold), so every version always reads as it was made.
 */
export class PendingMap {
  private node: PendingNode;
  private record: Record<string, Amount> | undefined;

  private constructor(
    node: PendingNode,
    readonly size: number,
    /** Adds made on this version's map since it was created (see PENDING_RENEW). */
    private readonly adds = 0,
  ) {
    this.node = node;
  }

  static from(record: Record<string, Amount>): PendingMap {
    const map = new Map<string, Amount>();
    for (const key of Object.keys(record)) map.set(key, record[key]!);
    const version = new PendingMap({ map }, map.size);
    version.record = record;
    return version;
  }

  /** A version that owns `map` (taken over, not copied): where a batch of mutations ends. */
  static fromMap(map: Map<string, Amount>): PendingMap {
    return new PendingMap({ map }, map.size);
  }

  /** A mutable copy of this version's entries, in its order. */
  toMap(): Map<string, Amount> {
    return new Map(this.own());
  }

  /** Makes this version own the map and returns it. */
  private own(): Map<string, Amount> {
    if ('map' in this.node) return this.node.map;
    const path: PendingMap[] = [];
    // A cursor that starts at this version and walks to the one holding the map (not an alias).
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    let root: PendingMap = this;
    while (!('map' in root.node)) {
      path.push(root);
      root = root.node.next;
    }
    const map = root.node.map;
    for (let i = path.length - 1; i >= 0; i--) {
      const version = path[i]!;
      const diff = version.node as { next: PendingMap; key: string; value: Amount | undefined };
      const old = map.get(diff.key);
      if (diff.value === undefined) map.delete(diff.key);
      else map.set(diff.key, diff.value);
      root.node = { next: version, key: diff.key, value: old };
      version.node = { map };
      root = version;
    }
    return map;
  }

  get(key: string): Amount | undefined {
    return this.own().get(key);
  }

  has(key: string): boolean {
    return this.own().has(key);
  }

  /** A new version with `key → value`; this one is unchanged. */
  set(key: string, value: Amount): PendingMap {
    const map = this.own();
    if (this.adds >= PENDING_RENEW) {
      // A new family: this version keeps the old map, unedited from now on.
      const fresh = new Map(map);
      fresh.set(key, value);
      return new PendingMap({ map: fresh }, fresh.size);
    }
    const old = map.get(key);
    map.set(key, value);
    const next = new PendingMap({ map }, old === undefined ? this.size + 1 : this.size, this.adds + 1);
    this.node = { next, key, value: old };
    return next;
  }

  /** A new version without `key`; this one is unchanged. */
  delete(key: string): PendingMap {
    const map = this.own();
    const old = map.get(key);
    if (old === undefined) return this;
    map.delete(key);
    const next = new PendingMap({ map }, this.size - 1, this.adds);
    this.node = { next, key, value: old };
    return next;
  }

  /** This version as a plain record (built once, then cached). */
  toRecord(): Record<string, Amount> {
    if (this.record) return this.record;
    const record: Record<string, Amount> = {};
    for (const [key, value] of this.own()) {
      if (key === '__proto__') Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
      else record[key] = value;
    }
    return (this.record = record);
  }
}
