/**
 * The diffs of the devshard protocol sessions in the log (stream `devshard-session-<escrowId>`,
 * event DevshardDiffSent): recorded as each is composed, before the request that first carries it
 * leaves; read back to rebuild an escrow's replica with `replay` (src/protocol/replay.ts) after a
 * restart, or to audit the roots the hosts signed.
 */
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { devshardSessionStream, newEvent, type EventDataMap } from '../../events/catalog.js';
import type { RecordedEvent } from '../../events/envelope.js';
import { DevshardTxSchema, DiffContentSchema, type DevshardTx } from '../../protocol/gen/devshard/v1/diff_pb.js';
import { LEGACY_PROTOCOL, type ChainBindParams, type EscrowSessionFields, type RecordedDiff } from '../../protocol/index.js';
import { isLegacyProtocol, protocolData } from '../escrows/protocol.js';
import type { SessionEscrow } from '../../network/devshard/session.js';
import { wireTxs } from '../../network/devshard/request-body.js';
import { canonicalJson } from '../../events/canonical-json.js';
import { REQUEST_RECORD_WITHIN_MS, type Engine } from '../write/engine.js';

const b64 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');
const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'base64'));

/** A sent diff as the event's data (its wire bytes cached per diff object, shared with the request body). */
export function diffEventData(escrowId: string, d: RecordedDiff): EventDataMap['DevshardDiffSent'] {
  // Keys in sorted order: the store then writes the data with JSON.stringify (canonicalJson's fast path).
  return {
    escrowId,
    nonce: d.nonce.toString(),
    postStateRoot: b64(d.postStateRoot),
    txs: b64(wireTxs(d)),
    userSig: b64(d.userSig),
    warmKeyBindings: d.warmKeyBindings.map((w) => ({ slot: w.slot, warm: w.warm })),
  };
}

/** The event's data as the diff `replay` takes. */
export function recordedDiffOf(data: EventDataMap['DevshardDiffSent']): RecordedDiff {
  const nonce = BigInt(data.nonce);
  const content = fromBinary(DiffContentSchema, bytes(data.txs));
  if (content.nonce !== nonce) throw new Error(`recorded diff ${data.nonce} of escrow ${data.escrowId} holds txs of nonce ${content.nonce}`);
  return { nonce, txs: content.txs, postStateRoot: bytes(data.postStateRoot), userSig: bytes(data.userSig), warmKeyBindings: data.warmKeyBindings.map((w) => ({ ...w })) };
}

/** Records one diff (resolves once durable). */
export function recordDiff(engine: Engine, escrowId: string, d: RecordedDiff): Promise<RecordedEvent[]> {
  return engine.appendOrdered(devshardSessionStream(escrowId), [newEvent('DevshardDiffSent', diffEventData(escrowId, d), { actor: { kind: 'chat' } })]);
}

/** The escrow's recorded diffs in nonce order (reads SQL: once per escrow, when its session opens). */
export async function recordedDiffs(engine: Engine, escrowId: string): Promise<RecordedDiff[]> {
  const out: RecordedDiff[] = [];
  for (const r of await engine.readStream(devshardSessionStream(escrowId))) {
    if (r.type === 'DevshardDiffSent') out.push(recordedDiffOf(r.data));
  }
  return out;
}

type OpenedData = EventDataMap['DevshardSessionOpened'];

/** The chain facts a session is bound to, as the event's data (bigints as decimal strings). */
export function sessionOpenedData(e: SessionEscrow): OpenedData {
  const f = e.session;
  const str = (v: bigint | undefined) => (v === undefined ? undefined : v.toString());
  const session: OpenedData['session'] = dropUndefined({
    tokenPrice: str(f.tokenPrice),
    createDevshardFee: str(f.createDevshardFee),
    feePerNonce: str(f.feePerNonce),
    inferenceSealGraceNonces: f.inferenceSealGraceNonces,
    inferenceSealGraceSeconds: f.inferenceSealGraceSeconds,
    autoSealEveryNNonces: f.autoSealEveryNNonces,
  });
  const b = e.bind;
  return {
    escrowId: e.escrowId,
    creator: e.creator,
    amount: e.amount.toString(),
    slots: e.slots.map((s) => ({ host: s.host, url: s.url })),
    session,
    ...(b
      ? { bind: dropUndefined({ refusalTimeout: str(b.refusalTimeout), executionTimeout: str(b.executionTimeout), validationRate: b.validationRate, voteThresholdFactor: b.voteThresholdFactor }) }
      : {}),
    // Left out for v2 on the legacy route, what a session without it speaks (older logs stay as they were).
    ...(e.protocol && !isLegacyProtocol(e.protocol) ? { protocol: protocolData(e.protocol) } : {}),
  };
}

/** The event's data as the transport's SessionEscrow (what `replay` needs: creator, amount, slots, config inputs). */
export function sessionEscrowOf(d: OpenedData): SessionEscrow {
  const big = (v: string | undefined) => (v === undefined ? undefined : BigInt(v));
  const session: EscrowSessionFields = dropUndefined({
    tokenPrice: big(d.session.tokenPrice),
    createDevshardFee: big(d.session.createDevshardFee),
    feePerNonce: big(d.session.feePerNonce),
    inferenceSealGraceNonces: d.session.inferenceSealGraceNonces,
    inferenceSealGraceSeconds: d.session.inferenceSealGraceSeconds,
    autoSealEveryNNonces: d.session.autoSealEveryNNonces,
  });
  const bind: ChainBindParams | undefined = d.bind
    ? dropUndefined({ refusalTimeout: big(d.bind.refusalTimeout), executionTimeout: big(d.bind.executionTimeout), validationRate: d.bind.validationRate, voteThresholdFactor: d.bind.voteThresholdFactor })
    : undefined;
  return { escrowId: d.escrowId, creator: d.creator, amount: BigInt(d.amount), slots: d.slots.map((s) => ({ ...s })), session, ...(bind ? { bind } : {}), protocol: d.protocol ? { ...d.protocol } : LEGACY_PROTOCOL };
}

/** The facts the escrow's session was last opened with (its latest DevshardSessionOpened), if any. */
export async function boundSessionFacts(engine: Engine, escrowId: string): Promise<SessionEscrow | undefined> {
  const last = (await engine.readStream(devshardSessionStream(escrowId)))
    .filter((r) => r.type === 'DevshardSessionOpened')
    .at(-1);
  return last ? sessionEscrowOf(last.data as OpenedData) : undefined;
}

/**
 * Records the facts a session opens with (once per escrow and run, off the request path: the
 * transport asks for them when it opens the session), unless the stream's latest
 * DevshardSessionOpened holds the same. Resolves once durable, before any diff of this run.
 */
export async function recordSessionOpened(engine: Engine, escrow: SessionEscrow): Promise<void> {
  const data = sessionOpenedData(escrow);
  const last = (await engine.readStream(devshardSessionStream(escrow.escrowId)))
    .filter((r) => r.type === 'DevshardSessionOpened')
    .at(-1);
  if (last && canonicalJson(last.data) === canonicalJson(data)) return;
  await engine.appendOrdered(devshardSessionStream(escrow.escrowId), [newEvent('DevshardSessionOpened', data, { actor: { kind: 'chat' } })]);
}

function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** Records host txs taken from a host's answer (not awaited by the request: best effort, in order). */
export function recordHostTxs(engine: Engine, escrowId: string, host: string, txs: readonly DevshardTx[]): Promise<RecordedEvent[]> {
  const data = { escrowId, host, txs: txs.map((tx) => b64(toBinary(DevshardTxSchema, tx))) };
  return engine.appendOrdered(devshardSessionStream(escrowId), [newEvent('DevshardHostTxsReceived', data, { actor: { kind: 'chat' } })], { withinMs: REQUEST_RECORD_WITHIN_MS });
}

/** The host txs the log holds for an escrow, in the order taken (read once, when its session opens). */
export async function recordedHostTxs(engine: Engine, escrowId: string): Promise<DevshardTx[]> {
  const out: DevshardTx[] = [];
  for (const r of await engine.readStream(devshardSessionStream(escrowId))) {
    if (r.type === 'DevshardHostTxsReceived') for (const t of r.data.txs) out.push(fromBinary(DevshardTxSchema, bytes(t)));
  }
  return out;
}

/** Records a v5 session's height seed as it moves (ok, missed). Best effort: the seed goes on either way. */
export function recordHeightSeed(engine: Engine, escrowId: string, s: { state: 'ok' | 'missed' | 'pending'; seeded: number; slots: number; outcomes: { host: string; verdict: string; reason: string }[] }): Promise<RecordedEvent[]> {
  const data = { escrowId, outcomes: s.outcomes.map((o) => ({ host: o.host, reason: o.reason.slice(0, 500), verdict: o.verdict })), seeded: s.seeded, slots: s.slots, state: s.state };
  return engine.appendOrdered(devshardSessionStream(escrowId), [newEvent('DevshardHeightSeeded', data, { actor: { kind: 'chat' } })]);
}
