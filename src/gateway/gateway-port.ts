/**
 * The gateway port (port.ts) wired to the use cases: each operation is one call. Per-escrow
 * commands run one at a time per escrow stream (engine.serial), here rather than in each route.
 */
import { escrowStream } from '../events/catalog.js';
import { logWhere } from '../events/log-where.js';
import { hostFailure, openChat, usageAtFailure } from './chat/chat.js';
import { isServedModel, servedModels } from './chat/models.js';
import type { GatewayContext } from './context.js';
import { importFromDevshardctl } from './devshardctl/import.js';
import { rotationDebugAnswer } from './devshardctl/rotation-statuses.js';
import { devshardListDocument, statusDocument } from './devshardctl/status-document.js';
import { deactivateEscrow } from './escrows/deactivate.js';
import { finalizedDocument, finalizeEscrow } from './escrows/finalize.js';
import { liveEscrows, onlyEscrow } from './escrows/live-escrows.js';
import { operatorCreateEscrow } from './escrows/operator-create.js';
import { operatorSettle } from './escrows/operator-settle.js';
import { registerOrReactivate } from './escrows/register.js';
import { removeEscrow } from './escrows/remove.js';
import { escrowTimeline } from './escrows/timeline.js';
import { activateEscrow, exportEscrow, importEscrow } from './escrows/transfer.js';
import { committedDevshardView, devshardViews } from './escrows/view.js';
import type { GatewayPort } from './port.js';
import { operatorChangeSettings } from './settings/settings.js';

export function gatewayPort(ctx: GatewayContext): GatewayPort {
  const perEscrow = <T>(id: string, f: () => Promise<T>) => ctx.engine.serial(escrowStream(id), f);
  return {
    servedModels: () => servedModels(ctx),
    isServedModel: (model) => isServedModel(ctx, model),
    chatSettings: () => ctx.projections.settings.current(),
    openChat: (cmd) => openChat(ctx, cmd),
    streamFailure: (err, usageSoFar) => ({ error: hostFailure(err), usage: usageAtFailure(err, usageSoFar) }),

    createEscrow: (cmd) => operatorCreateEscrow(ctx, cmd),
    devshards: () => devshardViews(ctx),
    devshard: (id) => committedDevshardView(ctx, id),
    registerEscrow: (id, metadata, expectedModel, key = {}, protocol = {}) => perEscrow(id, () => registerOrReactivate(ctx, id, metadata, expectedModel, key, protocol)),
    importEscrow: (id, body, metadata) => perEscrow(id, () => importEscrow(ctx, id, body, metadata)),
    importFromDevshardctl: (id, body, metadata) => perEscrow(id, () => importFromDevshardctl(ctx, id, body, metadata)),
    exportEscrow: (id) => exportEscrow(ctx, id),
    timeline: (id) => escrowTimeline(ctx, id),
    activateEscrow: (id, metadata) => perEscrow(id, () => activateEscrow(ctx, id, metadata)),
    settleEscrow: (id, key, metadata, tx = {}) => perEscrow(id, () => operatorSettle(ctx, id, key, metadata, tx)),
    deactivateEscrow: (id, metadata) => perEscrow(id, () => deactivateEscrow(ctx, id, metadata)),
    removeEscrow: (id, metadata) => perEscrow(id, () => removeEscrow(ctx, id, metadata)),
    finalizeEscrow: (id, metadata) => perEscrow(id, () => finalizeEscrow(ctx, id, metadata)),
    finalizeOnlyEscrow: (metadata) => {
      const id = onlyEscrow(ctx, 'POST');
      return perEscrow(id, () => finalizeEscrow(ctx, id, metadata));
    },
    finalizedEscrow: (id) => finalizedDocument(ctx, id),
    finalizedOnlyEscrow: () => finalizedDocument(ctx, onlyEscrow(ctx, 'GET')),

    storagePath: () => logWhere(ctx.config),
    settings: () => ctx.projections.settings.effective(),
    changeSettings: (patch, metadata) => operatorChangeSettings(ctx, patch, metadata),
    disabled: () => ctx.projections.settings.current().disabled,
    status: () => statusDocument(ctx),
    devshardList: () => devshardListDocument(ctx),
    liveEscrows: () => liveEscrows(ctx),
    admission: () => ctx.limiter.counts(),
    rotationDebug: () => rotationDebugAnswer(ctx),
  };
}
