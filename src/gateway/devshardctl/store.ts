/**
 * Reading devshardctl's escrow state store (gonka 8a35022 devshard/storage/sqlite.go, schema in
 * sqlite_epoch_migrate.go and sqlite_meta_migrate.go), read only, for the migration import:
 *
 *   <storage_path>/_meta.db        escrow_epoch(escrow_id, epoch_id)
 *   <storage_path>/epoch_<id>.db   sessions(escrow_id, version, creator_addr, config_json,
 *                                  group_json, initial_balance, latest_nonce, last_finalized, status)
 *                                  diffs(escrow_id, nonce, txs_proto, user_sig, post_state_root,
 *                                  state_hash, warm_keys_json, created_at)
 *
 * config_json is Go's encoding of types.SessionConfig (field names as declared, no tags);
 * group_json of []types.SlotAssignment ({SlotID, ValidatorAddress}); txs_proto a DiffContent
 * message holding the diff's txs; warm_keys_json the bindings the diff made ({"<slot>": "<warm>"}).
 * `storage_path` may name the directory or a `state.db` in it (devshardctl's normalizeStorageDir),
 * and must lie inside DEVSHARD_IMPORT_DIR once symlinks and `..` are resolved (`storeDirWithin`): an
 * admin body cannot make the gateway probe any path of the machine (issue 39).
 * Every refusal is an `invalid` naming what is wrong with the store and what to do.
 */
import { existsSync, lstatSync, readdirSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fromBinary } from '@bufbuild/protobuf';
import Database from 'better-sqlite3';
import { DiffContentSchema } from '../../protocol/gen/devshard/v1/diff_pb.js';
import type { RecordedDiff } from '../../protocol/replay.js';
import type { SessionConfig } from '../../protocol/session-config.js';
import { refuse } from '../errors.js';

export interface DevshardctlSession {
  escrowId: string;
  epochId: number;
  /** The bind/runtime version column (not the state-root tag). */
  version: string | null;
  creator: string;
  config: SessionConfig;
  /** Slot id → validator (cold) address, slot ids 0..n-1. */
  group: string[];
  initialBalance: bigint;
  latestNonce: number;
  lastFinalized: number;
  status: string;
}

export interface DevshardctlStore {
  dir: string;
  session: DevshardctlSession;
  diffs: RecordedDiff[];
}

const META_DB = '_meta.db';
const EPOCH_FILE = /^epoch_(\d+)\.db$/;

const bad = (message: string, rule: string) => refuse.invalid(message, 'storage_path', rule);

/** `storage_path` as devshardctl normalizes it: a `state.db` names its directory. */
export function storageDir(storagePath: string): string {
  const clean = storagePath.trim().replace(/\/+$/, '');
  return basename(clean) === 'state.db' ? dirname(clean) : clean;
}

/**
 * The real path of absolute `p`: its deepest existing ancestor's real path, then the rest as
 * written; a dangling symlink on the way is followed to where it points. Undefined when symlinks
 * loop (more than 40 followed, as ELOOP).
 */
function realpathOrNearest(p: string, links = 0): string | undefined {
  const rest: string[] = [];
  let head = p;
  for (;;) {
    try {
      return join(realpathSync(head), ...rest);
    } catch {
      let link: string | undefined;
      try {
        if (lstatSync(head).isSymbolicLink()) link = readlinkSync(head);
      } catch {
        // absent: go up
      }
      if (link !== undefined) return links >= 40 ? undefined : realpathOrNearest(join(resolve(dirname(head), link), ...rest), links + 1);
      const parent = dirname(head);
      if (parent === head) return p;
      rest.unshift(basename(head));
      head = parent;
    }
  }
}

const inside = (base: string, p: string) => {
  const rel = relative(base, p);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
};

/**
 * The store directory `storagePath` names (`dir`, as given, for answers and the log) and its real
 * path (`real`, what is read), once checked to lie inside `importDir` (DEVSHARD_IMPORT_DIR) after
 * resolving symlinks and `..`. A relative storage_path is resolved from `importDir`. The same 400
 * answers a path outside whether or not it exists, so nothing outside can be probed.
 */
export function storeDirWithin(importDir: string | undefined, storagePath: string): { dir: string; real: string } {
  if (importDir === undefined) {
    throw bad(
      "Imports from a storage_path are off on this gateway: DEVSHARD_IMPORT_DIR is unset. Set DEVSHARD_IMPORT_DIR to the directory you copy devshardctl's escrow stores into, restart the gateway, and give a storage_path inside it.",
      'import_dir_unset',
    );
  }
  let base: string;
  try {
    base = realpathSync(importDir);
  } catch {
    throw bad(`DEVSHARD_IMPORT_DIR (${importDir}) does not exist on this machine; create it, copy devshardctl's escrow store into it, and give a storage_path inside it.`, 'import_dir_unset');
  }
  const dir = storageDir(resolve(importDir, storagePath.trim()));
  const real = realpathOrNearest(dir);
  if (real === undefined || !inside(base, real)) {
    throw bad(
      `storage_path is outside DEVSHARD_IMPORT_DIR (${importDir}) once symlinks and '..' are resolved; copy devshardctl's escrow store directory into ${importDir} and give its path there.`,
      'storage_path_outside_import_dir',
    );
  }
  return { dir, real };
}

function open(file: string): Database.Database {
  try {
    return new Database(file, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw bad(`devshardctl store file ${file} cannot be opened: ${(err as Error).message}.`, 'store_unreadable');
  }
}

function query<T>(db: Database.Database, file: string, sql: string, ...params: unknown[]): T[] {
  try {
    return db.prepare(sql).all(...params) as T[];
  } catch (err) {
    throw bad(`devshardctl store file ${file} is not in devshardctl's schema (${(err as Error).message}); give the storage_path of a devshardctl SQLite escrow store.`, 'store_corrupt');
  }
}

/** The epoch file holding `escrowId`: from _meta.db, else by looking in each epoch file. */
function epochOf(dir: string, escrowId: string): number {
  const meta = join(dir, META_DB);
  if (existsSync(meta)) {
    const db = open(meta);
    try {
      const rows = query<{ epoch_id: number }>(db, meta, 'SELECT epoch_id FROM escrow_epoch WHERE escrow_id = ?', escrowId);
      if (rows.length > 0) return Number(rows[0]!.epoch_id);
    } finally {
      db.close();
    }
  }
  for (const name of readdirSync(dir)) {
    const m = EPOCH_FILE.exec(name);
    if (!m) continue;
    const file = join(dir, name);
    const db = open(file);
    try {
      if (query(db, file, 'SELECT 1 FROM sessions WHERE escrow_id = ?', escrowId).length > 0) return Number(m[1]);
    } finally {
      db.close();
    }
  }
  const held = sessionsIn(dir);
  throw bad(
    `The devshardctl store at ${dir} holds no session for escrow ${escrowId}${held.length ? ` (it holds ${held.slice(0, 10).join(', ')})` : ''}; check id and storage_path.`,
    'escrow_id_mismatch',
  );
}

function sessionsIn(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (!EPOCH_FILE.test(name)) continue;
    const file = join(dir, name);
    const db = open(file);
    try {
      out.push(...query<{ escrow_id: string }>(db, file, 'SELECT escrow_id FROM sessions').map((r) => r.escrow_id));
    } catch {
      // A file that is not in the schema is reported when it is read for the escrow.
    } finally {
      db.close();
    }
  }
  return out;
}

const big = (v: unknown, what: string): bigint => {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  if (typeof v === 'bigint' && v >= 0n) return v;
  throw new Error(`${what} is not a non-negative integer`);
};
const u32 = (v: unknown, what: string): number => Number(big(v ?? 0, what));

function parseConfig(json: string): SessionConfig {
  const c = JSON.parse(json) as Record<string, unknown>;
  return {
    refusalTimeout: big(c.RefusalTimeout ?? 0, 'RefusalTimeout'),
    executionTimeout: big(c.ExecutionTimeout ?? 0, 'ExecutionTimeout'),
    tokenPrice: big(c.TokenPrice, 'TokenPrice'),
    createDevshardFee: big(c.CreateDevshardFee ?? 0, 'CreateDevshardFee'),
    feePerNonce: big(c.FeePerNonce ?? 0, 'FeePerNonce'),
    voteThreshold: u32(c.VoteThreshold, 'VoteThreshold'),
    validationRate: u32(c.ValidationRate, 'ValidationRate'),
    inferenceSealGraceNonces: u32(c.InferenceSealGraceNonces, 'InferenceSealGraceNonces'),
    inferenceSealGraceSeconds: u32(c.InferenceSealGraceSeconds, 'InferenceSealGraceSeconds'),
    autoSealEveryNNonces: u32(c.AutoSealEveryNNonces, 'AutoSealEveryNNonces'),
  };
}

function parseGroup(json: string): string[] {
  const g = JSON.parse(json) as Array<{ SlotID: number; ValidatorAddress: string }>;
  if (!Array.isArray(g) || g.length === 0) throw new Error('group_json is not a non-empty array');
  return g.map((s, i) => {
    if (s.SlotID !== i || typeof s.ValidatorAddress !== 'string') throw new Error(`group_json[${i}] is not slot ${i} with a ValidatorAddress`);
    return s.ValidatorAddress;
  });
}

interface SessionRow {
  escrow_id: string;
  version: string | null;
  creator_addr: string;
  config_json: string;
  group_json: string;
  initial_balance: number | bigint;
  latest_nonce: number | bigint;
  last_finalized: number | bigint;
  status: string;
}

interface DiffRow {
  nonce: number | bigint;
  txs_proto: Buffer;
  user_sig: Buffer | null;
  post_state_root: Buffer | null;
  warm_keys_json: string | null;
}

/**
 * Reads escrow `escrowId`'s session and every diff from devshardctl's store at `storagePath`, which
 * must lie inside `importDir` (DEVSHARD_IMPORT_DIR; `storeDirWithin`).
 */
export function readDevshardctlStore(storagePath: string, escrowId: string, importDir: string | undefined): DevshardctlStore {
  const { dir: given, real: dir } = storeDirWithin(importDir, storagePath);
  if (!existsSync(dir)) throw bad(`storage_path ${given} does not exist on this machine; copy devshardctl's escrow store directory here (with the gateway stopped or the devshard deactivated) and give its path.`, 'store_not_found');
  if (!statSync(dir).isDirectory()) throw bad(`storage_path ${given} is not a directory; give devshardctl's escrow store directory (the one holding _meta.db and epoch_<n>.db).`, 'store_not_found');
  if (!readdirSync(dir).some((n) => EPOCH_FILE.test(n))) {
    throw bad(`storage_path ${given} holds no epoch_<n>.db file: it is not a devshardctl SQLite escrow store (a Postgres-backed devshardctl cannot be imported from a path).`, 'store_not_found');
  }
  const epochId = epochOf(dir, escrowId);
  const file = join(dir, `epoch_${epochId}.db`);
  if (!existsSync(file)) throw bad(`_meta.db maps escrow ${escrowId} to epoch ${epochId}, but ${file} is missing (pruned?); the store is incomplete.`, 'store_corrupt');
  const db = open(file);
  db.defaultSafeIntegers(true);
  try {
    const rows = query<SessionRow>(
      db,
      file,
      'SELECT escrow_id, version, creator_addr, config_json, group_json, initial_balance, latest_nonce, last_finalized, status FROM sessions WHERE escrow_id = ?',
      escrowId,
    );
    if (rows.length === 0) throw bad(`${file} holds no session for escrow ${escrowId}; check id and storage_path.`, 'escrow_id_mismatch');
    const r = rows[0]!;
    let session: DevshardctlSession;
    try {
      session = {
        escrowId,
        epochId,
        version: r.version,
        creator: r.creator_addr,
        config: parseConfig(r.config_json),
        group: parseGroup(r.group_json),
        initialBalance: big(r.initial_balance, 'initial_balance'),
        latestNonce: Number(r.latest_nonce),
        lastFinalized: Number(r.last_finalized),
        status: r.status,
      };
    } catch (err) {
      throw bad(`The session row of escrow ${escrowId} in ${file} cannot be read: ${(err as Error).message}.`, 'store_corrupt');
    }
    const diffRows = query<DiffRow>(db, file, 'SELECT nonce, txs_proto, user_sig, post_state_root, warm_keys_json FROM diffs WHERE escrow_id = ? ORDER BY nonce', escrowId);
    const diffs: RecordedDiff[] = [];
    let expected = 1n;
    for (const d of diffRows) {
      const nonce = BigInt(d.nonce);
      if (nonce !== expected) {
        throw bad(
          `The diffs of escrow ${escrowId} in ${file} have a gap: nonce ${expected}${nonce > expected + 1n ? `..${nonce - 1n}` : ''} is missing before ${nonce}. The state cannot be rebuilt without every diff; import from a complete store (not a pruned or partial copy).`,
          'nonce_gap',
        );
      }
      let txs;
      try {
        txs = d.txs_proto.length === 0 ? [] : fromBinary(DiffContentSchema, new Uint8Array(d.txs_proto)).txs;
      } catch (err) {
        throw bad(`Diff ${nonce} of escrow ${escrowId} in ${file} has txs_proto that is not a DiffContent message (${(err as Error).message}).`, 'store_corrupt');
      }
      let warm: Record<string, string> = {};
      try {
        if (d.warm_keys_json) warm = JSON.parse(d.warm_keys_json) as Record<string, string>;
      } catch {
        throw bad(`Diff ${nonce} of escrow ${escrowId} in ${file} has warm_keys_json that is not JSON.`, 'store_corrupt');
      }
      diffs.push({
        nonce,
        txs,
        userSig: new Uint8Array(d.user_sig ?? []),
        postStateRoot: new Uint8Array(d.post_state_root ?? []),
        warmKeyBindings: Object.entries(warm).map(([slot, w]) => ({ slot: Number(slot), warm: w })),
      });
      expected++;
    }
    const last = diffs.length;
    if (session.latestNonce !== last) {
      throw bad(
        `The session of escrow ${escrowId} says its latest nonce is ${session.latestNonce}, but the store holds diffs 1..${last}; the store is incomplete (copied while devshardctl was writing?). Copy it again with devshardctl stopped.`,
        'nonce_gap',
      );
    }
    return { dir: given, session, diffs };
  } finally {
    db.close();
  }
}
