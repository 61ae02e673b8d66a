import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { eventHash } from './hash.js';
import { missingGuards } from './guards.js';
import { EVENT_COLUMNS, type EventRow } from './rows.js';

export interface VerifyOk {
  ok: true;
  events: number;
  lastPosition: number;
  /** "" for an empty log. */
  lastHash: string;
  /** Things that do not make the log wrong but deserve a look (e.g. a guard trigger was dropped). */
  warnings: string[];
}

export interface VerifyFailure {
  ok: false;
  /** First position found wrong (0 when the problem is not tied to one event). */
  position: number;
  reason: string;
}

export type VerifyResult = VerifyOk | VerifyFailure;

/** What extra checks get: the read-only connection and the log's verified summary. */
export interface VerifyContext {
  db: Database.Database;
  file: string;
  summary: Omit<VerifyOk, 'ok' | 'warnings'>;
}

/**
 * An extra check run after the log itself verified (e.g. "rebuilt projections equal stored
 * checkpoints"). Return a failure to fail verification, or nothing to pass.
 */
export type VerifyCheck = (
  ctx: VerifyContext,
) => Omit<VerifyFailure, 'ok'> | undefined | void | Promise<Omit<VerifyFailure, 'ok'> | undefined | void>;

/**
 * Checks, through a fresh read-only connection: positions gapless from 1; stream versions gapless
 * from 0 per stream; each prev_hash equals the previous hash; each hash recomputes; the streams
 * table agrees with the log. Reports the first bad position.
 *
 * The hash is recomputed over the stored data/metadata text, which the store writes as canonical
 * JSON; so any change to the stored bytes shows, even one that would parse to the same value.
 */
export async function verifyLog(filePath: string, checks: readonly VerifyCheck[] = []): Promise<VerifyResult> {
  if (!existsSync(filePath)) return { ok: false, position: 0, reason: `no event log at ${filePath}` };
  const db = new Database(filePath, { readonly: true, fileMustExist: true });
  try {
    const tables = new Set(db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).pluck().all() as string[]);
    if (!tables.has('events')) return { ok: false, position: 0, reason: 'not an event log (no events table)' };

    const nextVersion = new Map<string, number>();
    let expectedPos = 1;
    let prevHash = '';
    const rows = db.prepare(`SELECT ${EVENT_COLUMNS} FROM events ORDER BY position`).raw().iterate() as IterableIterator<EventRow>;
    for (const r of rows) {
      const [position, streamId, streamVersion, type, schemaVersion, data, metadata, time, storedPrev, hash] = r;
      const fail = (reason: string): VerifyFailure => {
        rows.return?.();
        return { ok: false, position, reason };
      };
      if (position !== expectedPos) {
        return fail(position > expectedPos ? `gap: position ${expectedPos} is missing` : `position out of order (expected ${expectedPos})`);
      }
      const wantVersion = nextVersion.get(streamId) ?? 0;
      if (streamVersion !== wantVersion) {
        return fail(`stream ${JSON.stringify(streamId)}: version ${streamVersion}, expected ${wantVersion}`);
      }
      if (storedPrev !== prevHash) return fail('prev_hash does not match the previous event hash');
      const recomputed = eventHash(prevHash, {
        position,
        streamId,
        streamVersion,
        type,
        schemaVersion,
        dataJson: data,
        metadataJson: metadata,
        time,
      });
      if (recomputed !== hash) return fail(`hash mismatch: the event was altered after it was written (${describeEvent(type, streamId, data)})`);
      nextVersion.set(streamId, streamVersion + 1);
      prevHash = hash;
      expectedPos++;
    }
    const summary = { events: expectedPos - 1, lastPosition: expectedPos - 1, lastHash: prevHash };

    if (tables.has('streams')) {
      const heads = db.prepare('SELECT stream_id, version FROM streams').raw().all() as [string, number][];
      const seen = new Set<string>();
      for (const [streamId, version] of heads) {
        seen.add(streamId);
        const logVersion = (nextVersion.get(streamId) ?? 0) - 1;
        if (version !== logVersion) {
          return { ok: false, position: 0, reason: `streams table says ${JSON.stringify(streamId)} is at ${version}, the log at ${logVersion}` };
        }
      }
      for (const streamId of nextVersion.keys()) {
        if (!seen.has(streamId)) return { ok: false, position: 0, reason: `stream ${JSON.stringify(streamId)} missing from the streams table` };
      }
    }

    for (const check of checks) {
      const failure = await check({ db, file: filePath, summary });
      if (failure) return { ok: false, ...failure };
    }
    const missing = missingGuards(db);
    const warnings = missing.length > 0 ? [`guard triggers missing (reopening the store restores them): ${missing.join(', ')}`] : [];
    return { ok: true, ...summary, warnings };
  } finally {
    db.close();
  }
}

/** "DevshardDiffSent in devshard-session-7, nonce 3": which event a failure is about (both logs' verify says it so). */
export function describeEvent(type: string, streamId: string, dataJson: string): string {
  let nonce: unknown;
  try {
    nonce = (JSON.parse(dataJson) as { nonce?: unknown } | null)?.nonce;
  } catch {
    nonce = undefined;
  }
  return `${type} in ${streamId}${typeof nonce === 'string' || typeof nonce === 'number' ? `, nonce ${nonce}` : ''}`;
}
