/**
 * A fixture generator of ours: writes a devshardctl escrow state store (gonka 8a35022
 * devshard/storage/sqlite.go; tables as sqlite_epoch_migrate.go and sqlite_meta_migrate.go create
 * them) for an escrow that exists on the devnet, holding the signed diffs devshardctl would have
 * applied while serving `requests` chat requests: diff k starts inference k and carries the
 * confirm and finish of inference k-1 (a finish rides on a later diff); with `closeLast` a last
 * diff without a start carries the last finish. Roots come from the protocol replica, the user
 * signatures from the creator key, the receipts and finishes from the devnet hosts' keys.
 * `version` is the state-root tag the roots are hashed with (the hosts' build stamp); the sessions
 * table's version column is what devshardctl bound the session to (`sessionVersion`: by default the
 * version itself, and devshardctl's v2-era stamp "v1" for a v2 store).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import Database from 'better-sqlite3';
import { utf8 } from '../../src/protocol/bytes.js';
import { signDiff } from '../../src/protocol/compose.js';
import { DevshardTxSchema, DiffContentSchema, type DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { MsgFinishInferenceSchema } from '../../src/protocol/gen/devshard/v1/tx_pb.js';
import { executorReceiptBytes, finishProposerBytes } from '../../src/protocol/preimages.js';
import { Replica } from '../../src/protocol/replica.js';
import { defaultSessionConfig, type SessionConfig } from '../../src/protocol/session-config.js';
import { signMessage } from '../../src/protocol/signatures.js';

export interface StoreSpec {
  dir: string;
  escrowId: string;
  epochId: number;
  creator: string;
  creatorPrivateKeyHex: string;
  amount: bigint;
  /** Slot id → cold address (the chain's slots), and the key of each address. */
  slots: string[];
  keyOf: (address: string) => Uint8Array;
  requests: number;
  closeLast?: boolean;
  config?: Partial<SessionConfig>;
  /** Leave this diff out of the store (a gap). */
  dropNonce?: number;
  /** Write no _meta.db (devshardctl repairs it from the epoch files; so do we). */
  noMeta?: boolean;
  /** The state-root tag the roots are hashed with (default 'v2', a store of devshardctl at 8a35022). */
  version?: string;
  /** The sessions.version column; default `version` ('v1', devshardctl's v2-era stamp, for 'v2'). */
  sessionVersion?: string;
}

export interface WrittenStore {
  lastNonce: number;
  balance: bigint;
  fees: bigint;
  stateRoot: string;
  diffs: number;
}

const EPOCH_SCHEMA = [
  `CREATE TABLE schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)`,
  `CREATE TABLE sessions (escrow_id TEXT PRIMARY KEY, version TEXT, creator_addr TEXT NOT NULL, config_json TEXT NOT NULL, group_json TEXT NOT NULL,
     initial_balance INTEGER NOT NULL, latest_nonce INTEGER NOT NULL DEFAULT 0, last_finalized INTEGER NOT NULL DEFAULT 0,
     status TEXT NOT NULL DEFAULT 'active', settled_at INTEGER)`,
  `CREATE TABLE diffs (escrow_id TEXT NOT NULL, nonce INTEGER NOT NULL, txs_proto BLOB NOT NULL, user_sig BLOB, post_state_root BLOB,
     state_hash BLOB, warm_keys_json TEXT, created_at INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (escrow_id, nonce))`,
  `CREATE TABLE signatures (escrow_id TEXT NOT NULL, nonce INTEGER NOT NULL, slot_id INTEGER NOT NULL, sig BLOB NOT NULL, PRIMARY KEY (escrow_id, nonce, slot_id))`,
  `CREATE TABLE snapshots (escrow_id TEXT PRIMARY KEY, nonce INTEGER NOT NULL, state_data BLOB NOT NULL, created_at INTEGER NOT NULL DEFAULT 0)`,
];

/** Go's encoding/json of types.SessionConfig (no tags: the field names as declared). */
function goConfigJson(c: SessionConfig): string {
  return JSON.stringify({
    RefusalTimeout: Number(c.refusalTimeout),
    ExecutionTimeout: Number(c.executionTimeout),
    TokenPrice: Number(c.tokenPrice),
    CreateDevshardFee: Number(c.createDevshardFee),
    FeePerNonce: Number(c.feePerNonce),
    VoteThreshold: c.voteThreshold,
    ValidationRate: c.validationRate,
    InferenceSealGraceNonces: c.inferenceSealGraceNonces,
    InferenceSealGraceSeconds: c.inferenceSealGraceSeconds,
    AutoSealEveryNNonces: c.autoSealEveryNNonces,
  });
}

export function writeDevshardctlStore(spec: StoreSpec): WrittenStore {
  mkdirSync(spec.dir, { recursive: true });
  const config: SessionConfig = { ...defaultSessionConfig(spec.slots.length), tokenPrice: 1000n, createDevshardFee: 10_000n, feePerNonce: 1_000n, ...spec.config };
  const version = spec.version ?? 'v2';
  const replica = Replica.create({ escrowId: spec.escrowId, slots: spec.slots, amount: spec.amount, userAddress: spec.creator, config, version });
  const userKey = Uint8Array.from(Buffer.from(spec.creatorPrivateKeyHex, 'hex'));
  const starts = new Map<bigint, { promptHash: Uint8Array; model: string; inputLength: bigint; maxTokens: bigint; startedAt: bigint }>();
  const slotOf = (id: bigint) => Number(id % BigInt(spec.slots.length));

  const start = (id: bigint): DevshardTx => {
    const s = { promptHash: utf8(`prompt ${id}`), model: 'Qwen/Qwen3-235B-A22B-Instruct-2507-FP8', inputLength: 120n, maxTokens: 64n, startedAt: 1_760_000_000n + id };
    starts.set(id, s);
    return create(DevshardTxSchema, { tx: { case: 'startInference', value: { inferenceId: id, ...s } } });
  };
  const confirm = (id: bigint): DevshardTx => {
    const confirmedAt = 1_760_000_001n + id;
    const executorSig = signMessage(executorReceiptBytes({ inferenceId: id, escrowId: spec.escrowId, confirmedAt, ...starts.get(id)! }), spec.keyOf(spec.slots[slotOf(id)]!));
    return create(DevshardTxSchema, { tx: { case: 'confirmStart', value: { inferenceId: id, executorSig, confirmedAt } } });
  };
  const finish = (id: bigint): DevshardTx => {
    const slot = slotOf(id);
    const msg = create(MsgFinishInferenceSchema, { inferenceId: id, responseHash: utf8(`response ${id}`), inputTokens: 100n + id, outputTokens: 20n + id, executorSlot: slot, escrowId: spec.escrowId });
    msg.proposerSig = signMessage(finishProposerBytes(msg), spec.keyOf(spec.slots[slot]!));
    return create(DevshardTxSchema, { tx: { case: 'finishInference', value: msg } });
  };

  const rows: { nonce: bigint; txs: Uint8Array; sig: Uint8Array; root: Uint8Array; warm: string | null }[] = [];
  const total = spec.requests + (spec.closeLast ? 1 : 0);
  for (let n = 1n; n <= BigInt(total); n++) {
    const txs: DevshardTx[] = [];
    if (n > 1n) txs.push(confirm(n - 1n), finish(n - 1n));
    if (n <= BigInt(spec.requests)) txs.push(start(n));
    const applied = replica.applyLocal(n, txs);
    const d = signDiff(spec.escrowId, n, txs, applied.root, userKey);
    const warm = applied.warmKeyBindings.length ? JSON.stringify(Object.fromEntries(applied.warmKeyBindings.map((b) => [String(b.slot), b.warm]))) : null;
    rows.push({ nonce: n, txs: toBinary(DiffContentSchema, create(DiffContentSchema, { txs })), sig: d.userSig, root: applied.root, warm });
  }

  const epochFile = join(spec.dir, `epoch_${spec.epochId}.db`);
  const db = new Database(epochFile);
  for (const s of EPOCH_SCHEMA) db.exec(s);
  db.prepare('INSERT INTO schema_migrations (id, name) VALUES (1, ?)').run('epoch_initial');
  const group = JSON.stringify(spec.slots.map((a, i) => ({ SlotID: i, ValidatorAddress: a })));
  db.prepare('INSERT INTO sessions (escrow_id, version, creator_addr, config_json, group_json, initial_balance, latest_nonce) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
    spec.escrowId,
    spec.sessionVersion ?? (version === 'v2' ? 'v1' : version),
    spec.creator,
    goConfigJson(config),
    group,
    spec.amount,
    total,
  );
  const insert = db.prepare('INSERT INTO diffs (escrow_id, nonce, txs_proto, user_sig, post_state_root, state_hash, warm_keys_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
  for (const r of rows) {
    if (spec.dropNonce !== undefined && Number(r.nonce) === spec.dropNonce) continue;
    insert.run(spec.escrowId, r.nonce, Buffer.from(r.txs), Buffer.from(r.sig), Buffer.from(r.root), Buffer.from(r.root), r.warm, 1_760_000_000 + Number(r.nonce));
  }
  db.close();
  if (!spec.noMeta) {
    const meta = new Database(join(spec.dir, '_meta.db'));
    meta.exec('CREATE TABLE escrow_epoch (escrow_id TEXT PRIMARY KEY, epoch_id INTEGER NOT NULL)');
    meta.exec('CREATE INDEX escrow_epoch_by_epoch ON escrow_epoch(epoch_id)');
    meta.prepare('INSERT INTO escrow_epoch (escrow_id, epoch_id) VALUES (?, ?)').run(spec.escrowId, spec.epochId);
    meta.close();
  }
  return { lastNonce: total, balance: replica.balance, fees: replica.fees, stateRoot: Buffer.from(replica.stateRoot()).toString('hex'), diffs: rows.length };
}
