/**
 * An escrow's devshard session moving into this gateway's log: from another gateway's export (hot
 * swap, escrows/transfer.ts) or from devshardctl's store (migration, escrows/devshardctl-import.ts).
 * The session is the replica the hosts hold, so the diffs that built it must be here before any
 * chat: the transport rebuilds the session from this log's `devshard-session-<escrowId>` stream
 * (devshard-diffs.ts) and sends the hosts every recorded diff once as catch-up.
 *
 * The diffs brought in are evidence, never trusted: they are replayed against the chain's facts for
 * the escrow, the ones the session binds to (`boundSessionEscrow`: creator, amount, slots, the
 * escrow's session fields, the chain's bind params), each user signature recovered to the creator
 * and each post_state_root compared. A diff that does not replay refuses the import with a 400
 * naming its nonce. Accepted, they are recorded as this gateway's own events (its positions and
 * hashes), after the DevshardSessionOpened of those facts, before the escrow's EscrowImported.
 */
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import type { ChainEscrow } from '../../chain/port.js';
import { devshardSessionStream, newEvent, type EventDataMap } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import { canonicalJson } from '../../events/canonical-json.js';
import { replicaParamsOf, type SessionEscrow } from '../../network/devshard/session.js';
import { DevshardTxSchema, type DevshardTx } from '../../protocol/gen/devshard/v1/diff_pb.js';
import { bindParamsAtBind, Replica, type EscrowProtocol, type RecordedDiff } from '../../protocol/index.js';
import { escrowProtocol } from '../escrows/protocol.js';
import type { GatewayContext } from '../context.js';
import { diffEventData, recordedDiffOf, sessionOpenedData } from './diffs.js';
import { refuse } from '../errors.js';
import { hostUrlOf } from '../chat/host-urls.js';

type DiffData = EventDataMap['DevshardDiffSent'];
type HostTxsData = EventDataMap['DevshardHostTxsReceived'];

/**
 * The facts a session of `escrowId` binds to, as a host binds them: creator, amount and slots as
 * recorded from the chain, the price, fees and seal settings frozen on the escrow (`onChain`, read
 * when not given), and the chain's bind params. One reading for the transport (src/main/start.ts)
 * and for an import, so a session opened after an import binds the facts its diffs were checked
 * against (and its DevshardSessionOpened is not recorded again).
 */
export async function boundSessionEscrow(
  ctx: GatewayContext,
  escrowId: string,
  recorded: { creator: string; amount: bigint; slots: readonly { host: string; url: string }[] },
  onChain?: ChainEscrow | null,
  /** What the session speaks; default: what the escrow recorded (an import names the one it brings). */
  protocol: EscrowProtocol = escrowProtocol(ctx.engine, escrowId),
): Promise<SessionEscrow> {
  const [chainEscrow, params] = await Promise.all([onChain !== undefined ? onChain : ctx.chain.escrow(escrowId), ctx.chain.params()]);
  return {
    escrowId,
    creator: recorded.creator,
    amount: recorded.amount,
    // A host that moved (its participant's inference_url refreshed after a failure, host-urls.ts) is
    // called at its new URL by a session opened after the refresh.
    slots: recorded.slots.map((s) => ({ host: s.host, url: hostUrlOf(ctx, s) })),
    session: chainEscrow?.session ?? { tokenPrice: ctx.chainInfo.tokenPrice },
    protocol,
    // The chain params frozen on the escrow win over the live ones (session-config.ts bindParamsAtBind).
    ...((bind) => (bind ? { bind } : {}))(bindParamsAtBind(chainEscrow?.frozen, params.bind)),
  };
}

export interface ReplayRefusal {
  /** Names the member holding diff i (`devshard_session.diffs[3]`); the 400's `param`. */
  param: (i: number) => string;
  /** Where the diffs came from, for the message ("the export's", "devshardctl's"). */
  whose: string;
  rule?: string;
  /** Appended to the message: what to do. */
  hint?: string;
}

/**
 * Replays `diffs` against `escrow`'s facts, every user signature checked (as gonka's replay, each
 * diff's recorded warm-key bindings are the only ones approved). Answers the replica and the diffs
 * with the bindings applying them made (what the log records). Throws a 400 naming the first nonce
 * that does not replay (signature, sequence, a tx the hosts' rules refuse, or a root that differs).
 */
export function replayAgainstFacts(escrow: SessionEscrow, diffs: readonly RecordedDiff[], how: ReplayRefusal): { replica: Replica; diffs: RecordedDiff[] } {
  const params = replicaParamsOf(escrow);
  const replica = Replica.create(params);
  const made: RecordedDiff[] = [];
  for (const [i, d] of diffs.entries()) {
    const allowed = d.warmKeyBindings.map((b) => ({ warm: b.warm, cold: params.slots[b.slot] }));
    try {
      const r = replica.applyDiff(d, { checkUserSig: true, warmKeys: (warm, cold) => allowed.some((a) => a.warm === warm && a.cold === cold) });
      made.push({ ...d, warmKeyBindings: r.warmKeyBindings });
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw refuse.invalid(
        `${how.whose} diff of nonce ${d.nonce} (${how.param(i)}) does not replay against the chain's facts for escrow ${escrow.escrowId} (creator, amount, slots, session fields, bind params): ${why}.${how.hint ? ` ${how.hint}` : ''}`,
        how.param(i),
        how.rule ?? 'replay_diverged',
      );
    }
  }
  return { replica, diffs: made };
}

/** Decodes exported DevshardDiffSent data (a 400 naming `param(i)` when one does not decode). */
export function diffsOfData(escrowId: string, data: readonly DiffData[], param: (i: number) => string): RecordedDiff[] {
  return data.map((d, i) => {
    if (d.escrowId !== escrowId) throw refuse.invalid(`${param(i)}.escrowId '${d.escrowId}' is not escrow ${escrowId}.`, `${param(i)}.escrowId`);
    try {
      return recordedDiffOf(d);
    } catch (err) {
      throw refuse.invalid(`${param(i)} does not decode: ${err instanceof Error ? err.message : String(err)}.`, param(i));
    }
  });
}

/** Decodes exported DevshardHostTxsReceived data (a 400 naming the tx that does not decode). */
export function hostTxsOfData(escrowId: string, data: readonly HostTxsData[], param: (i: number) => string): { host: string; txs: DevshardTx[] }[] {
  return data.map((h, i) => {
    if (h.escrowId !== escrowId) throw refuse.invalid(`${param(i)}.escrowId '${h.escrowId}' is not escrow ${escrowId}.`, `${param(i)}.escrowId`);
    return {
      host: h.host,
      txs: h.txs.map((t, k) => {
        try {
          return fromBinary(DevshardTxSchema, new Uint8Array(Buffer.from(t, 'base64')));
        } catch (err) {
          throw refuse.invalid(`${param(i)}.txs[${k}] is not a DevshardTx: ${err instanceof Error ? err.message : String(err)}.`, `${param(i)}.txs[${k}]`);
        }
      }),
    };
  });
}

const b64 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');
const txB64 = (tx: DevshardTx): string => b64(toBinary(DevshardTxSchema, tx));

/**
 * The escrow's session as an export carries it: every recorded diff (DevshardDiffSent data, nonce
 * order), and the host txs taken from answers that no recorded diff carried yet (the session's
 * pending set: DevshardHostTxsReceived data, in the order taken, the carried txs left out).
 */
export async function exportedSession(ctx: Pick<GatewayContext, 'engine'>, escrowId: string): Promise<{ diffs: DiffData[]; host_txs: HostTxsData[] }> {
  const diffs: DiffData[] = [];
  const hostTxs: HostTxsData[] = [];
  for (const r of await ctx.engine.readStream(devshardSessionStream(escrowId))) {
    if (r.type === 'DevshardDiffSent') diffs.push(r.data);
    else if (r.type === 'DevshardHostTxsReceived') hostTxs.push(r.data);
  }
  const carried = new Set<string>();
  for (const d of diffs) for (const tx of recordedDiffOf(d).txs) carried.add(txB64(tx));
  const pending = hostTxs.map((h) => ({ ...h, txs: h.txs.filter((t) => !carried.has(t)) })).filter((h) => h.txs.length > 0);
  return { diffs, host_txs: pending };
}

/**
 * Records an imported session as this gateway's own events, in one append (all or nothing):
 * DevshardSessionOpened with `escrow`'s facts (unless the stream's latest holds the same), every
 * diff as DevshardDiffSent, the pending host txs as DevshardHostTxsReceived. When the stream
 * already holds exactly these diffs (an earlier import that failed after this step), nothing is
 * appended; any other recorded diff refuses (409).
 */
export async function recordImportedSession(
  ctx: Pick<GatewayContext, 'engine'>,
  escrow: SessionEscrow,
  diffs: readonly RecordedDiff[],
  hostTxs: readonly { host: string; txs: readonly DevshardTx[] }[],
  metadata: EventMetadata,
): Promise<void> {
  const { escrowId } = escrow;
  const stream = await ctx.engine.readStream(devshardSessionStream(escrowId));
  const here = stream.filter((r) => r.type === 'DevshardDiffSent');
  const incoming = diffs.map((d) => diffEventData(escrowId, d));
  if (here.length > 0) {
    const same = here.length === incoming.length && here.every((r, i) => canonicalJson(r.data) === canonicalJson(incoming[i]));
    if (same) return;
    throw refuse.conflict(
      `This gateway's log already holds ${here.length} diff(s) of escrow ${escrowId}'s devshard session (up to nonce ${(here.at(-1)!.data as DiffData).nonce}), not the ones imported; it cannot hold two sessions of one escrow.`,
      'session_exists',
    );
  }
  const opened = sessionOpenedData(escrow);
  const lastOpened = stream.filter((r) => r.type === 'DevshardSessionOpened').at(-1);
  const events = [
    ...(lastOpened && canonicalJson(lastOpened.data) === canonicalJson(opened) ? [] : [newEvent('DevshardSessionOpened', opened, metadata)]),
    ...incoming.map((d) => newEvent('DevshardDiffSent', d, metadata)),
    ...hostTxs.filter((h) => h.txs.length > 0).map((h) => newEvent('DevshardHostTxsReceived', { escrowId, host: h.host, txs: h.txs.map(txB64) }, metadata)),
  ];
  if (events.length > 0) await ctx.engine.appendOrdered(devshardSessionStream(escrowId), events);
}
