/**
 * The verdicts of the log anchor (log-anchor.ts says what it catches and why), as pure functions
 * over what a backend read: the anchor row, the hash stored at its position, the tail, the key.
 * SQLite (log-anchor.ts) and PostgreSQL (postgres/log-anchor.ts) only read and write; the answer,
 * its warnings and its failure texts are decided here, once, so the two backends cannot drift.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface LogAnchor {
  position: number;
  hash: string;
  /** Hex HMAC over position and hash; null when it was recorded without a key. */
  mac: string | null;
}

export interface StartCheckOk {
  ok: true;
  /** Where verification started (0: the whole log, e.g. the first start after this check existed). */
  from: number;
  /** The new anchor (the tail). */
  to: number;
  /** Events re-hashed by this check. */
  checked: number;
  /** True when the anchor was recorded with a MAC (a key is set). */
  keyed: boolean;
  /** Worth a log line, not a refusal (e.g. a key set for the first time: the old anchor had no MAC). */
  warnings: string[];
}

export interface StartCheckFailure {
  ok: false;
  /** The first position found wrong (the anchor's position when the anchor itself does not hold). */
  position: number;
  reason: string;
}

export type StartCheckResult = StartCheckOk | StartCheckFailure;

export type AnchorVerdict =
  | { state: 'none' }
  | { state: 'holds'; position: number; keyed: 'checked' | 'unkeyed' | 'key-unset' }
  | { state: 'failed'; position: number; reason: string };

/**
 * What a start read before re-hashing. With an anchor: the hash stored at its position ('' at 0,
 * undefined when that event is gone). Without one: the log's tail.
 */
export type StartReads = { anchor: LogAnchor; hashAtAnchor: string | undefined } | { anchor: undefined; tail: number };

/** Where the re-hash starts (the anchor, or 0), or why the start is refused before it. */
export type StartPoint = { ok: true; from: number; fromHash: string; warnings: string[] } | StartCheckFailure;

const ADOPT_REMEDY =
  'If DEVSHARD_LOG_HMAC_KEY was just set for this log, run `shardgate verify --anchor` once (it re-hashes the whole log and keys its anchor); otherwise the log may have been rewritten';

export function anchorMac(key: string, position: number, hash: string): string {
  return createHmac('sha256', key).update(`shardgate-log-anchor\n${position}\n${hash}`).digest('hex');
}

function macMatches(key: string, a: LogAnchor): boolean {
  if (a.mac === null) return false;
  const want = Buffer.from(anchorMac(key, a.position, a.hash), 'hex');
  const got = Buffer.from(a.mac, 'hex');
  return got.length === want.length && timingSafeEqual(got, want);
}

const missingReason = (position: number): string => `the last verified event (position ${position}) is missing: the log was truncated or replaced`;
const macMismatchReason = (position: number): string =>
  `the log anchor at position ${position} does not match DEVSHARD_LOG_HMAC_KEY: the log was rewritten, or the key changed`;

/** The start check's look at the anchor: where to re-hash from, or the refusal. */
export function startPoint(reads: StartReads, key: string | undefined): StartPoint {
  const { anchor } = reads;
  if (!anchor) {
    // With a key, a log that has events and no anchor had it deleted, or predates the key.
    if (key !== undefined && reads.tail > 0) return { ok: false, position: reads.tail, reason: `the log has no anchor recorded under DEVSHARD_LOG_HMAC_KEY. ${ADOPT_REMEDY}` };
    return { ok: true, from: 0, fromHash: '', warnings: [] };
  }
  const stored = reads.hashAtAnchor;
  if (stored === undefined) return { ok: false, position: anchor.position, reason: missingReason(anchor.position) };
  if (stored !== anchor.hash) return { ok: false, position: anchor.position, reason: `the hash at the last verified position ${anchor.position} changed: events up to it were rewritten` };
  const warnings: string[] = [];
  if (key !== undefined) {
    // A stripped MAC and a key set for the first time look alike: the operator says which.
    if (anchor.mac === null) return { ok: false, position: anchor.position, reason: `the log anchor at position ${anchor.position} was recorded without DEVSHARD_LOG_HMAC_KEY. ${ADOPT_REMEDY}` };
    if (!macMatches(key, anchor)) return { ok: false, position: anchor.position, reason: macMismatchReason(anchor.position) };
  } else if (anchor.mac !== null) {
    warnings.push('the log anchor is keyed but DEVSHARD_LOG_HMAC_KEY is unset: a rewrite of the whole log is not detected at this start');
  }
  return { ok: true, from: anchor.position, fromHash: anchor.hash, warnings };
}

/** The start check's answer once the chain re-hashed from `start` up to the tail `to`. */
export function startCheckOk(start: { from: number; warnings: string[] }, chain: { position: number; checked: number }, key: string | undefined): StartCheckOk {
  return { ok: true, from: start.from, to: chain.position, checked: chain.checked, keyed: key !== undefined, warnings: start.warnings };
}

/**
 * `shardgate verify`'s look at the anchor, after the whole chain re-hashed: the event at the
 * anchor's position still has the recorded hash, and with `key` the MAC holds. A log rewritten
 * whole with a consistent chain passes the re-hash and fails here (with the key).
 */
export function anchorVerdict(anchor: LogAnchor | undefined, hashAtAnchor: string | undefined, key: string | undefined): AnchorVerdict {
  if (!anchor) return { state: 'none' };
  if (hashAtAnchor === undefined) return { state: 'failed', position: anchor.position, reason: missingReason(anchor.position) };
  if (hashAtAnchor !== anchor.hash) {
    return { state: 'failed', position: anchor.position, reason: `the hash at the last verified position ${anchor.position} differs from the one a start recorded: events up to it were rewritten` };
  }
  if (key === undefined) return { state: 'holds', position: anchor.position, keyed: anchor.mac === null ? 'unkeyed' : 'key-unset' };
  if (anchor.mac === null) return { state: 'holds', position: anchor.position, keyed: 'unkeyed' };
  if (!macMatches(key, anchor)) return { state: 'failed', position: anchor.position, reason: macMismatchReason(anchor.position) };
  return { state: 'holds', position: anchor.position, keyed: 'checked' };
}
