/**
 * One simulated host's view of one escrow under the real protocol (gonka 8a35022 devshard/host/
 * host.go `Host`, mempool.go): its replica of the state machine, the diffs it applied (with the
 * root after each), the state signatures it made, its mempool and the inferences it executes.
 * Node runs each request's synchronous part without interleaving, so no lock is needed.
 *
 * A session belongs to one protocol version: a real host runs one devshardd per version behind
 * versiond, each stamped with its version and with storage of its own (59b1ee7e
 * versioned/internal/process/manager.go: `--data-dir <DataDir>/<version name>` per child;
 * decentralized-api/cmd/devshardd/main.go binds its runtime version at start), so sessions are keyed
 * by (version, escrow) and the replica hashes the version's name as its state-root tag (Z5
 * types/domain.go: the tag is the route's version).
 */
import { toBinary } from '@bufbuild/protobuf';
import { sha256, toHex } from '../../../protocol/bytes.js';
import { DevshardError } from '../../../protocol/errors.js';
import { DevshardTxSchema, type DevshardTx } from '../../../protocol/gen/devshard/v1/diff_pb.js';
import { stateSignatureBytes } from '../../../protocol/preimages.js';
import { Replica, STATE_ROOT_VERSION } from '../../../protocol/replica.js';
import type { RuleSet } from '../../../protocol/versions.js';
import { applyChainBindParams, bindParamsAtBind, sessionConfigFromEscrow } from '../../../protocol/session-config.js';
import { signMessage } from '../../../protocol/signatures.js';
import type { DevnetChainView, DevnetEscrowView, HostIdentity } from '../chain-view.js';
import { PeerSeen } from './peer-seen.js';
import { hostRules, hostVersionOrder } from './host-versions.js';
import { decodeTimeoutDiffs, HostHttpError, type ReceivedDiff } from './wire.js';

/**
 * Where hosts keep the diffs they applied (the devnet's DEVNET_STATE file), as a real host keeps its
 * storage: keyed by the host's address, the protocol version (each version's devshardd has its own
 * storage) and the escrow, each diff as its wire JSON. `version` omitted is "v2", the only version
 * before versions were kept (the legacy `/v1/devshard` route's sessions).
 */
export interface HostSessionStore {
  /** The diffs `host` applied in `escrowId` under `version`, ascending by nonce. */
  load(host: string, escrowId: string, version?: string): ReceivedDiff['json'][];
  /** Called once per diff applied, before the host answers the request that carried it. */
  save(host: string, escrowId: string, diff: ReceivedDiff['json'], version?: string): void;
}

/** The version of the legacy route's sessions (`/v1/devshard`, tag "v2"), and of stored rows without one. */
export const LEGACY_SESSION_VERSION = STATE_ROOT_VERSION;

interface MempoolEntry {
  tx: DevshardTx;
  /** Nonce when proposed. */
  proposedAt: bigint;
}

/** `types.TxHash`: mempool entries are keyed by the hash of their proto bytes. */
const txKey = (tx: DevshardTx): string => toHex(sha256(toBinary(DevshardTxSchema, tx)));

export class HostSession {
  readonly replica: Replica;
  /** The rule set of its version (v5: height sync, the log plane, Z5's host behaviour). */
  readonly rules: RuleSet;
  /** v5: the slots this host holds a fresh height claim from (an ack's `peer_seen`). */
  readonly peerSeen: PeerSeen;
  /** The slots this host holds in the escrow, ascending (the first is its `PrimarySlot`). */
  readonly ownSlots: number[];
  /** Applied diffs by nonce, with the state root after each (storage `DiffRecord`). */
  readonly applied = new Map<bigint, { diff: ReceivedDiff; stateHash: Uint8Array }>();
  /** Signatures per nonce, slot id → signature (storage `AddSignature`). */
  readonly signatures = new Map<bigint, Map<number, Uint8Array>>();
  private readonly mempool = new Map<string, MempoolEntry>();
  /** Sees every diff this host is sent (a witness for tests: what reached the host, and what it did). */
  observe: ((diff: ReceivedDiff, outcome: 'applied' | 'known' | 'refused', why?: string) => void) | undefined;
  /** Inferences being executed here (dedup of a retried request). */
  readonly executing = new Set<bigint>();
  /** Completed answers, replayed to a client that asks again (evicted once Finish or Timeout applies). */
  readonly completed = new Map<bigint, string>();
  /** Called with each diff applied (the devnet writes it through to its state file). */
  onApplied: ((diff: ReceivedDiff) => void) | undefined;

  constructor(
    readonly host: HostIdentity,
    readonly escrow: DevnetEscrowView,
    chain: DevnetChainView,
    /** The protocol version it is served under; its name is the state-root tag. */
    readonly version: string = LEGACY_SESSION_VERSION,
  ) {
    if (escrow.amount === undefined) throw new HostHttpError(500, `escrow ${escrow.id}: amount unknown to the simulated host`);
    const slots = escrow.slots.map((s) => s.host);
    const n = slots.length;
    const config = applyChainBindParams(sessionConfigFromEscrow(n, escrow.session ?? { tokenPrice: chain.tokenPrice() }), n, bindParamsAtBind(escrow.frozen, chain.sessionBindParams?.()) ?? {});
    this.rules = hostRules(version);
    this.replica = Replica.create({ escrowId: escrow.id, slots, amount: escrow.amount, userAddress: escrow.creator, config, version, rules: this.rules });
    this.peerSeen = new PeerSeen(n);
    this.ownSlots = escrow.slots.flatMap((s, i) => (s.host === host.address ? [i] : []));
    if (this.ownSlots.length === 0) throw new HostHttpError(500, `host not in group: ${host.address}`);
  }

  get escrowId(): string {
    return this.escrow.id;
  }
  get latestNonce(): bigint {
    return this.replica.latestNonce;
  }
  get groupAddresses(): readonly string[] {
    return this.replica.slots;
  }
  get primarySlot(): number {
    return this.ownSlots[0]!;
  }

  /**
   * `applyAndPersist` for each diff in order: at or below the latest nonce, skipped; otherwise applied
   * (user signature, sequence, txs, root). A refusal stops there (the diffs before it stay applied),
   * answered 500 `apply diff nonce N: <the state machine's text>` (host.go HandleRequest → server.go).
   * v5 (Z5 host.go `applyAndPersist` with storage, reconcile.go `applyAndPersistReconciling`): the
   * diff is validated before it is persisted, so the text is `validate diff nonce N: …` (the log
   * plane's `INVALID(…)` refusals included), and a diff beyond the next nonce is
   * `cannot reconcile nonce gap from store: escrow E need A..B have 0 record(s)` (the host's store
   * holds nothing it has not applied).
   * Returns the last diff's txs and the diffs newly applied (a v5 host acks their heartbeats).
   */
  applyDiffs(diffs: readonly ReceivedDiff[]): { lastTxs: readonly DevshardTx[] | undefined; applied: ReceivedDiff[] } {
    let lastTxs: readonly DevshardTx[] | undefined;
    const applied: ReceivedDiff[] = [];
    for (const diff of diffs) {
      if (diff.nonce <= this.replica.latestNonce) {
        this.observe?.(diff, 'known');
        continue;
      }
      if (this.rules === 'v5' && diff.nonce > this.replica.latestNonce + 1n) {
        const why = `cannot reconcile nonce gap from store: escrow ${this.escrowId} need ${this.replica.latestNonce + 1n}..${diff.nonce - 1n} have 0 record(s)`;
        this.observe?.(diff, 'refused', why);
        throw new HostHttpError(500, why);
      }
      let root: Uint8Array;
      try {
        root = this.replica.applyDiff(diff).root;
      } catch (e) {
        if (e instanceof DevshardError) {
          this.observe?.(diff, 'refused', e.message);
          throw new HostHttpError(500, `${this.rules === 'v5' ? 'validate' : 'apply'} diff nonce ${diff.nonce}: ${e.message}`);
        }
        throw e;
      }
      this.observe?.(diff, 'applied');
      for (const tx of diff.txs) {
        this.mempool.delete(txKey(tx));
        if (tx.tx.case === 'finishInference' || tx.tx.case === 'timeoutInference' || tx.tx.case === 'errorMiss') this.completed.delete(tx.tx.value.inferenceId);
      }
      this.applied.set(diff.nonce, { diff, stateHash: root });
      this.onApplied?.(diff);
      lastTxs = diff.txs;
      applied.push(diff);
    }
    return { lastTxs, applied };
  }

  /** `ApplyCatchUpDiffs` (verify-timeout): refusals are ignored. */
  applyCatchUp(diffs: readonly ReceivedDiff[]): void {
    for (const d of diffs) {
      try {
        this.applyDiffs([d]);
      } catch (e) {
        if (!(e instanceof HostHttpError)) throw e;
      }
    }
  }

  /**
   * `signIfAccepted`: the root at the latest nonce, signed over StateSignatureContent and stored for
   * every slot this host holds, unless withheld.
   */
  signState(withhold: boolean): { nonce: bigint; root: Uint8Array; stateSig?: Uint8Array } {
    const nonce = this.replica.latestNonce;
    const root = this.replica.stateRoot();
    if (withhold) return { nonce, root };
    const stateSig = signMessage(stateSignatureBytes(root, this.escrowId, nonce), this.host.privateKey);
    if (this.applied.has(nonce)) {
      const m = this.signatures.get(nonce) ?? new Map<number, Uint8Array>();
      for (const slot of this.ownSlots) m.set(slot, stateSig);
      this.signatures.set(nonce, m);
    }
    return { nonce, root, stateSig };
  }

  addToMempool(tx: DevshardTx, proposedAt: bigint): void {
    this.mempool.set(txKey(tx), { tx, proposedAt });
  }

  mempoolTxs(): DevshardTx[] {
    return [...this.mempool.values()].map((e) => e.tx);
  }

  /** The mempool as the wire has it: std base64 of each DevshardTx's proto bytes. */
  mempoolWire(): string[] {
    return this.mempoolTxs().map((tx) => Buffer.from(toBinary(DevshardTxSchema, tx)).toString('base64'));
  }
}

const sessionKey = (hostIndex: number, version: string, escrowId: string): string => `${hostIndex}/${version}/${escrowId}`;

/** Sessions of every simulated host, per (version, escrow), created on first use from the chain's escrow. */
export class HostSessions {
  private readonly map = new Map<string, HostSession>();
  /** Sees every diff any host is sent (tests: the wire as the hosts saw it). */
  observer:
    | ((host: HostIdentity, escrowId: string, diff: ReceivedDiff, outcome: 'applied' | 'known' | 'refused', why: string | undefined, version: string) => void)
    | undefined;

  constructor(
    private readonly chain: DevnetChainView,
    private readonly store?: HostSessionStore,
  ) {}

  /**
   * The session under `version` (the route's version; "v2" for the legacy route), or 500 (the real
   * resolver's errors are 500 too: server/routes.go sessionHTTPError).
   */
  get(host: HostIdentity, escrowId: string, version: string = LEGACY_SESSION_VERSION): HostSession {
    const key = sessionKey(host.index, version, escrowId);
    let s = this.map.get(key);
    if (!s) {
      const escrow = this.chain.escrow(escrowId);
      if (!escrow) throw new HostHttpError(500, `escrow ${escrowId} not found`);
      s = new HostSession(host, escrow, this.chain, version);
      if (this.store) this.resume(s, this.store);
      s.observe = (d, o, why) => this.observer?.(host, escrowId, d, o, why, version);
      this.map.set(key, s);
    }
    return s;
  }

  /**
   * A session opened after a restart resumes from the store: the stored diffs are applied again, with
   * every check a received diff gets (user signature, sequence, root), so a damaged or foreign record
   * stops the replay there (the diffs before it stay applied). Then new diffs are written through.
   * Not kept: the mempool (the gateway took it from each answer's meta), state signatures (made again
   * when the host next answers at its latest nonce) and completed answers.
   */
  private resume(s: HostSession, store: HostSessionStore): void {
    const stored = store.load(s.host.address, s.escrowId, s.version);
    if (stored.length > 0) {
      try {
        s.applyDiffs(decodeTimeoutDiffs(stored));
      } catch (e) {
        if (!(e instanceof HostHttpError)) throw e;
      }
    }
    s.onApplied = (diff) => store.save(s.host.address, s.escrowId, diff.json, s.version);
  }

  /** The chain's escrow (what a host binds a new session to). */
  escrowOf(escrowId: string): DevnetEscrowView | undefined {
    return this.chain.escrow(escrowId);
  }

  /**
   * A session already bound on this host (`SessionServerExisting`: in memory, or recovered from the
   * host's store), never a new one: what a v5 host's routes other than chat and the seed resolve.
   */
  existing(host: HostIdentity, escrowId: string, version: string): HostSession | undefined {
    const s = this.map.get(sessionKey(host.index, version, escrowId));
    if (s) return s;
    if (this.store && this.store.load(host.address, escrowId, version).length > 0) return this.get(host, escrowId, version);
    return undefined;
  }

  /**
   * An existing session (no creation), for peer lookups and tests: the one under `version`, or
   * without it the escrow's session under the newest version that has one on that host.
   */
  peek(hostIndex: number, escrowId: string, version?: string): HostSession | undefined {
    if (version !== undefined) return this.map.get(sessionKey(hostIndex, version, escrowId));
    return this.versionsOf(hostIndex, escrowId).map((v) => this.map.get(sessionKey(hostIndex, v, escrowId))!)[0];
  }

  /** The versions under which `hostIndex` has a session of `escrowId`, newest first (known versions first, then any other). */
  versionsOf(hostIndex: number, escrowId: string): string[] {
    const order = hostVersionOrder;
    const found = [...this.map.values()].filter((s) => s.host.index === hostIndex && s.escrowId === escrowId).map((s) => s.version);
    return found.sort((a, b) => order(b) - order(a));
  }
}
