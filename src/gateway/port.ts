/**
 * The gateway as the HTTP layer sees it: every operation a route calls, and nothing else (no
 * engine, store or chain client). Routes translate HTTP to these calls and answers back; the use
 * cases behind them raise GatewayError, which src/http maps to statuses. Per-escrow commands run
 * one at a time per escrow stream (engine.serial), here rather than in each route.
 */
import type { EventMetadata } from '../events/envelope.js';
import { eventsFile } from '../events/storage-path.js';
import { escrowStream, type GatewaySettings, type KeySource, type SettingsPatch } from '../events/catalog.js';
import type { PoolEscrow } from '../projections/index.js';
import { readEscrowTimeline, type Timeline } from '../projections/timeline.js';
import { hostFailure, openChat, usageAtFailure, type ChatCommand, type ChatSession } from './chat/chat.js';
import type { GatewayContext } from './context.js';
import { refuse, type GatewayError } from './errors.js';
import { createEscrowForOperator, type OperatorCreate, type OperatorCreateOutcome } from './escrows/operator-create.js';
import { operatorTxFee, type OperatorTxOptions } from './escrows/tx-options.js';
import { deactivateEscrow, devshardView, escrowOr404, finalizeEscrow, finalizedDocument, operatorSettleAnswer, registerEscrow, removeEscrow, settleEscrow } from './escrows/lifecycle.js';
import type { ProtocolChoice } from '../protocol/versions.js';
import { DEFAULT_KEY_ENV, holdRequestKey, oneKeyOf, operatorCreateKey } from './escrows/operator-key.js';
import { importFromDevshardctl, type DevshardctlImportBody } from './devshardctl/import.js';
import { activateEscrow, exportEscrow, importEscrow, type ImportBody } from './escrows/transfer.js';
import type { LimiterCounts } from './write/limiter.js';
import { isServedModel, servedModels } from './chat/models.js';
import { rotationDebugAnswer } from './devshardctl/rotation-statuses.js';
import { devshardListDocument, statusDocument, type StatusAnswer } from './devshardctl/status-document.js';
import { changeSettingsChecked } from './settings/settings.js';
import type { Usage } from '../network/port.js';

export type { ImportBody, DevshardctlImportBody };
export type { ChatSession };

type Answer<F extends (...args: never[]) => unknown> = Awaited<ReturnType<F>>;

export type DevshardView = Awaited<ReturnType<typeof devshardView>>;
export type { StatusAnswer };

/** devshardctl's key fields of a body: `private_key` or `private_key_env` (one of them). */
export interface OperatorKey {
  privateKey?: string | undefined;
  keyEnv?: string | undefined;
}

export interface GatewayPort {
  // The OpenAI-compatible surface
  servedModels(): string[];
  /** Whether a model id is one this gateway serves (bounds metric labels). */
  isServedModel(model: string): boolean;
  /** The settings a chat request is normalized with (max_tokens default and cap). */
  chatSettings(): Readonly<GatewaySettings>;
  openChat(cmd: ChatCommand): Promise<ChatSession>;
  /** A failure while streaming, as the client sees it, and the usage it bills. */
  streamFailure(err: unknown, usageSoFar: Usage): { error: GatewayError; usage: Usage };

  // Operator: escrows
  /** The key is `privateKey`, or env variable `keyEnv`, or DEVSHARD_PRIVATE_KEY (operator-key.ts). */
  createEscrow(cmd: Omit<OperatorCreate, 'privateKeyHex' | 'keySource'> & { privateKey?: string | undefined; keyEnv?: string | undefined }): Promise<OperatorCreateOutcome & { storagePath: string }>;
  devshards(): Promise<DevshardView[]>;
  /** One escrow's view, after what was decided is committed (its state and its money read alike). */
  devshard(id: string): Promise<DevshardView>;
  /** Registers an on-chain escrow, or re-activates a deactivated one (devshardctl's POST /v1/admin/devshards). */
  registerEscrow(id: string, metadata: EventMetadata, expectedModel?: string, key?: OperatorKey, protocol?: ProtocolChoice): Promise<Answer<typeof registerEscrow>>;
  importEscrow(id: string, body: ImportBody, metadata: EventMetadata): Promise<Answer<typeof importEscrow>>;
  /** Migration: adopt an escrow from devshardctl's state store (its import body). */
  importFromDevshardctl(id: string, body: DevshardctlImportBody, metadata: EventMetadata): Promise<Answer<typeof importFromDevshardctl>>;
  exportEscrow(id: string): Promise<Answer<typeof exportEscrow>>;
  timeline(id: string): Promise<{ escrow_id: string } & Partial<Timeline>>;
  activateEscrow(id: string, metadata: EventMetadata): Promise<Answer<typeof activateEscrow>>;
  /**
   * The key is `privateKey` (held in memory, never recorded), or env variable `keyEnv`, or
   * DEVSHARD_PRIVATE_KEY; `tx`: devshardctl's chain_id (checked) and fee/gas override of the settle tx.
   */
  settleEscrow(id: string, key: OperatorKey, metadata: EventMetadata, tx?: OperatorTxOptions): Promise<ReturnType<typeof operatorSettleAnswer>>;
  deactivateEscrow(id: string, metadata: EventMetadata): Promise<Answer<typeof deactivateEscrow>>;
  removeEscrow(id: string, metadata: EventMetadata): Promise<Answer<typeof removeEscrow>>;
  finalizeEscrow(id: string, metadata: EventMetadata): Promise<Answer<typeof finalizeEscrow>>;
  /** POST /v1/finalize: the only configured escrow; refused when there is not exactly one. */
  finalizeOnlyEscrow(metadata: EventMetadata): Promise<Answer<typeof finalizeEscrow>>;
  /** GET /devshard/{id}/v1/finalize: the settlement document once finalized (409 before). */
  finalizedEscrow(id: string): Answer<typeof finalizedDocument>;
  /** GET /v1/finalize: the same for the only configured escrow. */
  finalizedOnlyEscrow(): Answer<typeof finalizedDocument>;

  /** Where this gateway keeps escrow state (the event log), devshardctl's `storage_path`. */
  storagePath(): string;

  // Operator: settings, status, debug
  settings(): GatewaySettings;
  changeSettings(patch: SettingsPatch, metadata: EventMetadata): Promise<GatewaySettings>;
  /** The kill switch as HTTP serves it (read per request, in memory). */
  disabled(): GatewaySettings['disabled'];
  status(): StatusAnswer;
  /** GET /v1/admin/devshards: devshardctl's admin state with our views beside it. */
  devshardList(): Promise<Answer<typeof devshardListDocument>>;
  /** Escrows not removed (metrics gauges). */
  liveEscrows(): PoolEscrow[];
  admission(): LimiterCounts;
  rotationDebug(): ReturnType<typeof rotationDebugAnswer>;
}

export function gatewayPort(ctx: GatewayContext): GatewayPort {
  const perEscrow = <T>(id: string, f: () => Promise<T>) => ctx.engine.serial(escrowStream(id), f);
  const live = () => ctx.projections.pool.all().filter((e) => e.state !== 'removed');
  // devshardctl answers 400 on the bare /v1/finalize unless exactly one devshard is loaded
  // (gateway.go handleSingleOnly): the request names no devshard, so it is the request that is wrong.
  const onlyEscrow = (method: string): string => {
    const escrows = live();
    if (escrows.length !== 1) {
      throw refuse.invalid(`${method} /v1/finalize works only with exactly one configured devshard (this gateway has ${escrows.length}); use ${method} /devshard/{id}/v1/finalize.`, null, 'not_single_escrow');
    }
    return escrows[0]!.escrowId;
  };
  return {
    servedModels: () => servedModels(ctx),
    isServedModel: (model) => isServedModel(ctx, model),
    chatSettings: () => ctx.projections.settings.current(),
    openChat: (cmd) => openChat(ctx, cmd),
    streamFailure: (err, usageSoFar) => ({ error: hostFailure(err), usage: usageAtFailure(err, usageSoFar) }),

    createEscrow: async ({ privateKey, keyEnv, ...cmd }) => ({
      ...(await createEscrowForOperator(ctx, { ...cmd, ...(await operatorCreateKey(ctx, privateKey, keyEnv)) })),
      // devshardctl's per-escrow state store; ours is the one event log every escrow is kept in.
      storagePath: eventsFile(ctx.config.server.storageDir),
    }),
    devshards: () => Promise.all(live().map((e) => devshardView(ctx, e.escrowId))),
    devshard: async (id) => {
      escrowOr404(ctx, id);
      // The state is the decided one, the money is read from the committed log: wait for the
      // commit, or a settle decided a moment ago shows "settled" with the log's money.
      await ctx.engine.idle();
      return devshardView(ctx, id);
    },
    registerEscrow: (id, metadata, expectedModel, key = {}, protocol = {}) =>
      perEscrow(id, async () => {
        oneKeyOf(key.privateKey, key.keyEnv);
        const known = ctx.engine.escrow(id);
        if (known?.value === 'deactivated') {
          if (expectedModel !== undefined && known.context.model !== expectedModel) {
            throw refuse.invalid(`Devshard ${id} serves model '${known.context.model}', not '${expectedModel.slice(0, 256)}'.`, 'model', 'model_mismatch');
          }
          if (key.privateKey !== undefined) await holdRequestKey(ctx, key.privateKey, id, known.context.creator, 'wrong_creator_key');
          if (key.keyEnv !== undefined) await ctx.keyring.fromEnv(key.keyEnv);
          return activateEscrow(ctx, id, metadata);
        }
        return registerEscrow(ctx, id, metadata, expectedModel, key.keyEnv, key.privateKey, protocol);
      }),
    importEscrow: (id, body, metadata) => perEscrow(id, () => importEscrow(ctx, id, body, metadata)),
    importFromDevshardctl: (id, body, metadata) => perEscrow(id, () => importFromDevshardctl(ctx, id, body, metadata)),
    exportEscrow: (id) => exportEscrow(ctx, id),
    timeline: async (id) => {
      escrowOr404(ctx, id);
      return { escrow_id: id, ...(await readEscrowTimeline((stream, from, limit) => ctx.engine.store.readStream(stream, from, limit), id)) };
    },
    activateEscrow: (id, metadata) => perEscrow(id, () => activateEscrow(ctx, id, metadata)),
    settleEscrow: (id, key, metadata, tx = {}) =>
      perEscrow(id, async () => {
        oneKeyOf(key.privateKey, key.keyEnv);
        const txFee = operatorTxFee(ctx, tx);
        let keySource: KeySource = { kind: 'env', name: key.keyEnv ?? DEFAULT_KEY_ENV };
        if (key.privateKey !== undefined) {
          const s = escrowOr404(ctx, id);
          // A settled one answers its settlement again; no key is needed (or held) for that.
          if (!s.context.settled) await holdRequestKey(ctx, key.privateKey, id, s.context.creator, 'wrong_settler');
          keySource = { kind: 'request' };
        }
        return operatorSettleAnswer(ctx, id, await settleEscrow(ctx, id, { keySource, origin: 'admin', metadata, ...(txFee ? { txFee } : {}) }));
      }),
    deactivateEscrow: (id, metadata) => perEscrow(id, () => deactivateEscrow(ctx, id, metadata)),
    removeEscrow: (id, metadata) => perEscrow(id, () => removeEscrow(ctx, id, metadata)),
    finalizeEscrow: (id, metadata) => perEscrow(id, () => finalizeEscrow(ctx, id, metadata)),
    finalizeOnlyEscrow: (metadata) => {
      const id = onlyEscrow('POST');
      return perEscrow(id, () => finalizeEscrow(ctx, id, metadata));
    },
    finalizedEscrow: (id) => finalizedDocument(ctx, id),
    finalizedOnlyEscrow: () => finalizedDocument(ctx, onlyEscrow('GET')),

    storagePath: () => eventsFile(ctx.config.server.storageDir),
    settings: () => ctx.projections.settings.effective(),
    changeSettings: async (patch, metadata) => {
      const effective = await changeSettingsChecked(ctx, patch, metadata);
      ctx.onSettingsChanged?.();
      return effective;
    },
    disabled: () => ctx.projections.settings.current().disabled,
    status: () => statusDocument(ctx),
    devshardList: () => devshardListDocument(ctx),
    liveEscrows: live,
    admission: () => ctx.limiter.counts(),
    rotationDebug: () => rotationDebugAnswer(ctx),
  };
}
