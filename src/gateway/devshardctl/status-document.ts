/**
 * GET /v1/status and GET /v1/admin/devshards as documents: devshardctl's shapes with ours beside
 * them, so operators' scripts written for devshardctl work unchanged (gonka devshard/cmd/devshardctl
 * at 8a35022; docs/http.md lists the fields and their sources).
 */
import { statfsSync } from 'node:fs';
import { escrowStream, type EscrowRole, type GatewaySettings } from '../../events/catalog.js';
import { logWhere } from '../../events/log-where.js';
import type { GatewayMode } from '../../config/load.js';
import type { DevshardPhase, StatusDocument } from '../../projections/status.js';
import type { GatewayContext, LogCheckState } from '../context.js';
import type { KeyOrigin } from '../keyring.js';
import type { LimiterCounts } from '../write/limiter.js';
import { devshardView, type DevshardView } from '../escrows/view.js';
import { pruneInfo, settleWindowClosedAt, type PruneInfo } from '../workers/prune-watch.js';
import { pocBlock } from '../chat/poc-gate.js';
import { knownEpoch } from '../workers/prune-watch.js';
import { escrowProtocol } from '../escrows/protocol.js';
import { applyChainBindParams, sessionConfigFromEscrow } from '../../protocol/session-config.js';

/**
 * devshardctl's chain phase fields (phase_gate.go ChainPhaseSnapshot, copied into runtimeStatus and
 * statusResponse): `chain_phase` the public API's epoch phase, `confirmation_poc_phase` the active
 * confirmation PoC event's phase. From the epoch the prune watch last read; absent before its first
 * read (devshardctl: before its gate's first poll). Where devshardctl omits `confirmation_poc_phase`
 * (no event active) we say CONFIRMATION_POC_INACTIVE, the chain enum's name for that.
 */
export interface ChainPhaseFields {
  chain_phase?: string;
  confirmation_poc_phase?: string;
}

function chainPhase(ctx: GatewayContext): ChainPhaseFields {
  const e = knownEpoch(ctx);
  if (!e) return {};
  return { ...(e.phase ? { chain_phase: e.phase } : {}), confirmation_poc_phase: e.confirmationPocPhase ?? 'CONFIRMATION_POC_INACTIVE' };
}

/**
 * proxy.go statusSessionConfig (JSON numbers): the session config as a host binds it
 * (types.SessionConfigFromEscrow + ApplyChainSessionBindParams), from the chain's params this
 * gateway holds (token price, fees, bind params); seal settings the params do not carry are the
 * protocol's defaults, as for an escrow that carries none.
 */
export interface StatusSessionConfig {
  refusal_timeout: number;
  execution_timeout: number;
  token_price: number;
  create_devshard_fee: number;
  fee_per_nonce: number;
  vote_threshold: number;
  validation_rate: number;
  inference_seal_grace_nonces: number;
  inference_seal_grace_seconds: number;
  auto_seal_every_n_nonces: number;
}

function sessionConfig(ctx: GatewayContext, groupSize: number): StatusSessionConfig {
  const p = ctx.chainInfo.params;
  const n = Math.max(1, groupSize);
  const c = applyChainBindParams(sessionConfigFromEscrow(n, { tokenPrice: p.tokenPrice, createDevshardFee: p.createDevshardFee, feePerNonce: p.feePerNonce }), n, p.bind ?? {});
  return {
    refusal_timeout: Number(c.refusalTimeout),
    execution_timeout: Number(c.executionTimeout),
    token_price: Number(c.tokenPrice),
    create_devshard_fee: Number(c.createDevshardFee),
    fee_per_nonce: Number(c.feePerNonce),
    vote_threshold: c.voteThreshold,
    validation_rate: c.validationRate,
    inference_seal_grace_nonces: c.inferenceSealGraceNonces,
    inference_seal_grace_seconds: c.inferenceSealGraceSeconds,
    auto_seal_every_n_nonces: c.autoSealEveryNNonces,
  };
}

/** An escrow's protocol as operators see it, and a host's refusal of it (host-refusals.ts) while it stands. */
export interface ProtocolFields {
  protocol_version: string;
  route_prefix: string;
  state_root_version: string;
  hosts_applied?: { host: string; nonce: number }[];
  height_seed?: { state: string; seeded: number; slots: number; slot_outcomes: { host: string; verdict: string; reason: string }[] };
  protocol_error?: { rule: string; host: string; status: number; message: string; at: string };
}

function protocolFields(ctx: GatewayContext, escrowId: string): ProtocolFields {
  const p = escrowProtocol(ctx.engine, escrowId);
  const refused = ctx.network.routeRefusal?.(escrowId);
  const applied = ctx.network.acknowledged?.(escrowId);
  const seed = ctx.network.heightSeed?.(escrowId);
  return {
    protocol_version: p.version,
    route_prefix: p.route,
    state_root_version: p.tag,
    // How far each host applied the diffs we composed (this run's receipts); absent before the session opens.
    ...(applied ? { hosts_applied: applied.map((a) => ({ host: a.host, nonce: a.nonce })) } : {}),
    // v5: the session's height seed (devshardctl's /v1/status height_seed: state, seeded, slots, per-host verdicts).
    ...(seed ? { height_seed: { state: seed.state, seeded: seed.seeded, slots: seed.slots, slot_outcomes: seed.outcomes } } : {}),
    ...(refused ? { protocol_error: { rule: refused.rule, host: refused.host, status: refused.status, message: refused.message, at: new Date(refused.at).toISOString() } } : {}),
  };
}

/**
 * Free space of the SQLite log's file system (statfs: blocks available to this user), and whether
 * it is under GATEWAY_STORAGE_LOW_BYTES. `free_bytes` null when it cannot be read, and on a
 * PostgreSQL log: its disk is the database server's, which the gateway cannot see (watch it there).
 */
export interface StorageSpace {
  log: 'sqlite' | 'postgres';
  free_bytes: number | null;
  low: boolean;
}

export function storageSpace(config: { storage: { mode: 'sqlite' | 'postgres' }; server: { storageDir: string; storageLowBytes: number } }): StorageSpace {
  if (config.storage.mode === 'postgres') return { log: 'postgres', free_bytes: null, low: false };
  try {
    const s = statfsSync(config.server.storageDir);
    const free = Number(s.bavail) * Number(s.bsize);
    return { log: 'sqlite', free_bytes: free, low: free < config.server.storageLowBytes };
  } catch {
    return { log: 'sqlite', free_bytes: null, low: false };
  }
}

/**
 * One devshard of /v1/status: the projection's runtime status (devshardctl's runtimeStatus) with
 * its protocol, the chain phase, and its prune point (withPrune); once past its settle window, shown
 * expired and blocked.
 */
export type StatusDevshard = StatusDocument['devshards'][number] & ProtocolFields & ChainPhaseFields & Partial<PruneInfo> & { expired?: true };

/** The pooled /v1/status (gateway.go handlePooledStatus) with ours beside it. */
export interface PooledStatus extends Omit<StatusDocument, 'devshards'> {
  devshards: StatusDevshard[];
  instance: string;
  chain_id: string;
  mode: GatewayMode['kind'];
  limiter: LimiterCounts;
  storage: StorageSpace;
  event_log_check?: LogCheckState;
  /** The single mode's escrow, when it is not (or not the only one) loaded. */
  escrow_id?: string;
}

/** With exactly one devshard loaded, also that runtime's own fields (proxy.go statusResponse). */
export interface SingleRuntimeStatus extends PooledStatus, ChainPhaseFields {
  escrow_id: string;
  nonce: number;
  phase: DevshardPhase;
  balance: number;
  requests_blocked: boolean;
  block_reason?: string;
  config: StatusSessionConfig;
}

/**
 * devshardctl's two /v1/status shapes in one: the pooled one always (gateway.go
 * handlePooledStatus: mode, devshards, limiter, capacity, runtimes), and, with exactly one devshard
 * loaded, also that runtime's own top-level fields (proxy.go handleStatus, statusResponse:
 * escrow_id, nonce, phase, balance, requests_blocked, block_reason, config).
 */
export type StatusAnswer = PooledStatus | SingleRuntimeStatus;

export function statusDocument(ctx: GatewayContext): StatusAnswer {
  const price = ctx.chainInfo.tokenPrice;
  const snapshot = ctx.projections.status.snapshot(price);
  // Each unsettled escrow's prune point (prune-watch.ts): when the chain pays its deposit to its hosts.
  // DEVSHARD_POC_REQUEST_MODE=off during PoC: every devshard's chat is blocked (poc-gate.ts).
  const poc = pocBlock(ctx);
  const chain = chainPhase(ctx);
  // runtimeStatus's protocol_version and chain phase fields beside the projection's fields; with
  // the version, its route and state-root tag, and the latest refusal of them by a host.
  // Instances sharing a log: who holds each escrow's lease, as of this instance's last lease pass.
  const owners = ctx.ownership.shared ? ctx.ownership.view() : undefined;
  const doc = {
    ...snapshot,
    devshards: snapshot.devshards.map((d) =>
      withPrune(ctx, {
        ...d,
        ...(owners ? { owner: owners.owners[d.id] ?? null } : {}),
        ...protocolFields(ctx, d.id),
        ...chain,
        ...(poc && !d.requests_blocked ? { requests_blocked: true, block_reason: poc.reason } : {}),
      }),
    ),
  };
  const limiter = ctx.limiter.counts();
  const devshards = doc.devshards;
  const base = {
    ...doc,
    // The limiter counts every admitted chat request, including those still reserving a nonce.
    active_requests: Math.max(doc.active_requests, limiter.active_requests),
    instance: ctx.config.server.instanceName,
    chain_id: ctx.config.chain.chainId,
    mode: ctx.config.mode.kind,
    limiter,
    // Disk space of the event log's file system: a full disk makes appends fail (chat 503).
    storage: storageSpace(ctx.config),
    // The background re-hash of the log before the start's anchor (failed: chat answers 503).
    ...(ctx.logCheck ? { event_log_check: ctx.logCheck } : {}),
    // Every instance on the log: alive (a heartbeat within the lease time), stopping, leader, escrows held.
    ...(owners ? { leader: owners.leader ?? null, instances: owners.instances } : {}),
  };
  const only = devshards.length === 1 ? devshards[0]! : undefined;
  const singleId = ctx.config.mode.kind === 'single' ? ctx.config.mode.escrowId : only?.id;
  if (!only || singleId !== only.id) return singleId === undefined ? base : { ...base, escrow_id: singleId };
  return {
    ...base,
    // proxy.go statusResponse: escrow_id is a string there (`EscrowID string`), as is ours.
    escrow_id: only.id,
    nonce: only.nonce,
    phase: only.phase ?? 'active',
    balance: only.balance,
    ...chain,
    requests_blocked: only.requests_blocked,
    ...(only.block_reason ? { block_reason: only.block_reason } : {}),
    config: sessionConfig(ctx, ctx.engine.escrow(only.id)?.context.slots.length ?? 0),
  };
}

function withPrune<D extends { id: string }>(ctx: GatewayContext, d: D): D & Partial<PruneInfo> & { expired?: true } {
  const c = ctx.engine.escrow(d.id)?.context;
  const info = c ? pruneInfo(ctx, c.epoch, c.settled) : null;
  if (!info) return d;
  // Past its settle window (prune-watch.ts): shown expired, and no longer routed to.
  const expired = c!.settled !== true && settleWindowClosedAt(ctx, c!.epoch);
  return expired ? { ...d, ...info, expired: true, routable: false, requests_blocked: true, block_reason: 'settle_window_closed' } : { ...d, ...info };
}

/**
 * GET /v1/admin/devshards: devshardctl's admin state (gateway.go handleAdminState: `settings`,
 * `devshards` each a GatewayDevshardState of gateway_store.go with its `runtime` status, `limiter`,
 * `capacity`), with ours beside it (`object: 'list'`, `data`: our devshard views). Never a private
 * key (devshardctl returns RuntimeConfig's `private_key`; we give `private_key_env`, the variable's name, only).
 */
export interface DevshardListDocument {
  object: 'list';
  /** Our views, each with its prune point (null once settled). */
  data: (DevshardView & { prune: PruneInfo | null })[];
  settings: GatewaySettings;
  devshards: AdminDevshardState[];
  limiter: LimiterCounts;
  capacity: StatusDocument['capacity'];
}

/** devshardctl's GatewayDevshardState (gateway_store.go) of one devshard, with ours beside it. */
export interface AdminDevshardState extends ProtocolFields {
  id: string;
  private_key_env: string | null;
  private_key_source: KeyOrigin['kind'];
  model: string;
  storage_path: string;
  active: boolean;
  rotation_role: EscrowRole;
  rotation_epoch?: number;
  created_at?: string;
  updated_at?: string;
  runtime?: StatusDevshard;
}

export async function devshardListDocument(ctx: GatewayContext): Promise<DevshardListDocument> {
  const status = statusDocument(ctx);
  const runtimeOf = new Map(status.devshards.map((d) => [d.id, d]));
  const listed = ctx.projections.pool.all().filter((e) => e.state !== 'removed');
  const store = ctx.engine.store;
  const storagePath = logWhere(ctx.config);
  return {
    object: 'list' as const,
    // `prune`: when the chain prunes it unsettled (prune-watch.ts); null once settled. Not part of
    // the devshard view itself, which is also the export document's `escrow`.
    data: await Promise.all(listed.map(async (e) => {
      const view = await devshardView(ctx, e.escrowId);
      const c = ctx.engine.escrow(e.escrowId)?.context;
      return { ...view, prune: c ? pruneInfo(ctx, c.epoch, c.settled) : null };
    })),
    settings: ctx.projections.settings.effective(),
    devshards: await Promise.all(listed.map(async (e) => {
      const c = ctx.engine.escrow(e.escrowId)?.context;
      const runtime = runtimeOf.get(e.escrowId);
      // created_at / updated_at: the commit times of the escrow stream's first and last events.
      const stream = escrowStream(e.escrowId);
      const last = store.streamVersion(stream);
      const first = last >= 0 ? (await store.readStream(stream, 0, 1))[0] : undefined;
      const latest = last >= 0 ? (await store.readStream(stream, last, 1))[0] : undefined;
      // RuntimeConfig.private_key_env: the env variable this gateway holds the creator's key from;
      // null when only a request gave it (held in memory until the process ends) or it is not held,
      // `private_key_source` says which. RuntimeConfig.private_key is never served.
      const origin = c?.creator ? ctx.keyring.originOf(c.creator) : ({ kind: 'not_held' } as const);
      return {
        id: e.escrowId,
        private_key_env: origin.kind === 'env' ? origin.name : null,
        private_key_source: origin.kind,
        model: e.model,
        // Where its state is kept: every escrow's events are in the gateway's one event log (the SQLite
        // file, or the PostgreSQL database without its password).
        storage_path: storagePath,
        // RuntimeConfig.protocol_version: the escrow's version; beside it its route and state-root tag.
        ...protocolFields(ctx, e.escrowId),
        active: e.state === 'active',
        rotation_role: e.role,
        ...(c && c.epoch !== undefined && c.epoch !== null ? { rotation_epoch: c.epoch } : {}),
        ...(first ? { created_at: first.time } : {}),
        ...(latest ? { updated_at: latest.time } : {}),
        ...(runtime ? { runtime } : {}),
      };
    })),
    limiter: status.limiter,
    capacity: status.capacity,
  };
}
