/**
 * The gateway as the HTTP layer sees it: every operation a route calls, and nothing else (no
 * engine, store or chain client). Routes translate HTTP to these calls and answers back; the use
 * cases behind them raise GatewayError, which src/http maps to statuses. The answers are declared
 * beside the use cases that produce them; gateway-port.ts wires each operation to its use case.
 */
import type { EventMetadata } from '../events/envelope.js';
import type { GatewaySettings, SettingsPatch } from '../events/catalog.js';
import type { PoolEscrow } from '../projections/index.js';
import type { ProtocolChoice } from '../protocol/versions.js';
import type { Usage } from '../network/port.js';
import type { ChatCommand, ChatSession } from './chat/chat.js';
import type { GatewayError } from './errors.js';
import type { DevshardView } from './escrows/view.js';
import type { OperatorCreateAnswer, OperatorCreateCommand } from './escrows/operator-create.js';
import type { OperatorKey } from './escrows/operator-key.js';
import type { OperatorSettleAnswer } from './escrows/operator-settle.js';
import type { OperatorTxOptions } from './escrows/tx-options.js';
import type { RemoveAnswer } from './escrows/remove.js';
import type { SettlementFile } from './escrows/settlement.js';
import type { TimelineAnswer } from './escrows/timeline.js';
import type { ExportDocument, ImportBody } from './escrows/transfer.js';
import type { DevshardctlImportAnswer, DevshardctlImportBody } from './devshardctl/import.js';
import type { RotationDebugAnswer } from './devshardctl/rotation-statuses.js';
import type { DevshardListDocument, StatusAnswer } from './devshardctl/status-document.js';
import type { LimiterCounts } from './write/limiter.js';

export type { ImportBody, DevshardctlImportBody };
export type { ChatSession };
export type { DevshardView, OperatorKey, StatusAnswer };

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
  createEscrow(cmd: OperatorCreateCommand): Promise<OperatorCreateAnswer>;
  devshards(): Promise<DevshardView[]>;
  /** One escrow's view, after what was decided is committed (its state and its money read alike). */
  devshard(id: string): Promise<DevshardView>;
  /** Registers an on-chain escrow, or re-activates a deactivated one (devshardctl's POST /v1/admin/devshards). */
  registerEscrow(id: string, metadata: EventMetadata, expectedModel?: string, key?: OperatorKey, protocol?: ProtocolChoice): Promise<DevshardView>;
  importEscrow(id: string, body: ImportBody, metadata: EventMetadata): Promise<DevshardView>;
  /** Migration: adopt an escrow from devshardctl's state store (its import body). */
  importFromDevshardctl(id: string, body: DevshardctlImportBody, metadata: EventMetadata): Promise<DevshardctlImportAnswer>;
  exportEscrow(id: string): Promise<ExportDocument>;
  timeline(id: string): Promise<TimelineAnswer>;
  activateEscrow(id: string, metadata: EventMetadata): Promise<DevshardView>;
  /**
   * The key is `privateKey` (held in memory, never recorded), or env variable `keyEnv`, or
   * DEVSHARD_PRIVATE_KEY; `tx`: devshardctl's chain_id (checked) and fee/gas override of the settle tx.
   */
  settleEscrow(id: string, key: OperatorKey, metadata: EventMetadata, tx?: OperatorTxOptions): Promise<OperatorSettleAnswer>;
  deactivateEscrow(id: string, metadata: EventMetadata): Promise<DevshardView>;
  removeEscrow(id: string, metadata: EventMetadata): Promise<RemoveAnswer>;
  /** The settlement document the hosts signed. */
  finalizeEscrow(id: string, metadata: EventMetadata): Promise<SettlementFile>;
  /** POST /v1/finalize: the only configured escrow; refused when there is not exactly one. */
  finalizeOnlyEscrow(metadata: EventMetadata): Promise<SettlementFile>;
  /** GET /devshard/{id}/v1/finalize: the settlement document once finalized (409 before). */
  finalizedEscrow(id: string): SettlementFile;
  /** GET /v1/finalize: the same for the only configured escrow. */
  finalizedOnlyEscrow(): SettlementFile;

  /** Where this gateway keeps escrow state (the event log: its SQLite file, or its PostgreSQL URL without the password), devshardctl's `storage_path`. */
  storagePath(): string;

  // Operator: settings, status, debug
  settings(): GatewaySettings;
  changeSettings(patch: SettingsPatch, metadata: EventMetadata): Promise<GatewaySettings>;
  /** The kill switch as HTTP serves it (read per request, in memory). */
  disabled(): GatewaySettings['disabled'];
  status(): StatusAnswer;
  /** GET /v1/admin/devshards: devshardctl's admin state with our views beside it. */
  devshardList(): Promise<DevshardListDocument>;
  /** Escrows not removed (metrics gauges). */
  liveEscrows(): PoolEscrow[];
  admission(): LimiterCounts;
  rotationDebug(): Promise<RotationDebugAnswer>;
}
