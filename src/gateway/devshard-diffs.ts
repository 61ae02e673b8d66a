/**
 * The diffs of the devshard protocol sessions in the log (stream `devshard-session-<escrowId>`,
 * event DevshardDiffSent): recorded as each is composed, before the request that first carries it
 * leaves; read back to rebuild an escrow's replica with `replay` (src/protocol/replay.ts) after a
 * restart, or to audit the roots the hosts signed.
 */
import { fromBinary } from '@bufbuild/protobuf';
import { devshardSessionStream, newEvent, type EventDataMap } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import { DiffContentSchema } from '../protocol/gen/devshard/v1/diff_pb.js';
import type { RecordedDiff } from '../protocol/index.js';
import { wireTxs } from '../network/devshard/request-body.js';
import type { Engine } from './engine.js';

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
export function recordedDiffs(engine: Engine, escrowId: string): RecordedDiff[] {
  const out: RecordedDiff[] = [];
  for (const r of engine.readStream(devshardSessionStream(escrowId))) {
    if (r.type === 'DevshardDiffSent') out.push(recordedDiffOf(r.data));
  }
  return out;
}
