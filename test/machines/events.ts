/** Catalog event builders for machine and projection tests. */
import type { CatalogEvent, CatalogEventOf, ChainInputs, EscrowRole, EventType } from '../../src/events/catalog.js';
import type { RecordedEvent } from '../../src/events/envelope.js';

const usage = { promptTokens: 10, completionTokens: 5, totalTokens: 15 };
export const chain = (epoch = 7, height = 1000): ChainInputs => ({ height, epoch, nextBoundaryHeight: height + 300, blocksUntilBoundary: 300, pocActive: false });
const err = { kind: 'insufficient_funds' as const, message: 'insufficient funds', rawLog: 'spendable balance 0' };

type E<K extends EventType> = CatalogEventOf<K>;
export const ev = {
  createRequested: (intentId = 'i1', model = 'm1', amount = '10000000'): E<'EscrowCreateRequested'> => ({
    type: 'EscrowCreateRequested',
    data: { intentId, model, amount, creator: 'gonka1creator', keySource: { kind: 'env', name: 'KEY' }, role: 'regular', epoch: 7, register: true, origin: 'admin', txHash: 'AA' },
  }),
  created: (escrowId = 'e1', model = 'm1', amount = '10000000', intentId?: string): E<'EscrowCreated'> => ({
    type: 'EscrowCreated',
    data: { escrowId, intentId, txHash: 'AA', height: 10, epoch: 7, creator: 'gonka1creator', amount, model, role: 'regular', slots: [] },
  }),
  createFailed: (intentId = 'i1'): E<'EscrowCreateFailed'> => ({ type: 'EscrowCreateFailed', data: { intentId, model: 'm1', role: 'regular', epoch: 7, error: err } }),
  registered: (escrowId = 'e1', model = 'm1'): E<'EscrowRegistered'> => ({ type: 'EscrowRegistered', data: { escrowId, model } }),
  imported: (escrowId = 'e1', nonce = 5, spent = '100'): E<'EscrowImported'> => ({
    type: 'EscrowImported',
    data: { escrowId, model: 'm1', creator: 'c', amount: '10000000', epoch: 7, role: 'temporary', nonce, spent, slots: [], active: false },
  }),
  activated: (escrowId = 'e1'): E<'EscrowActivated'> => ({ type: 'EscrowActivated', data: { escrowId } }),
  started: (requestId: string, nonce: number, reservedCost = '1000'): E<'InferenceStarted'> => ({
    type: 'InferenceStarted',
    data: { requestId, nonce, clientKeyId: 'k1', reservedCost, inputTokens: 10, maxTokens: 100 },
  }),
  noncesReserved: (upTo: number): E<'NoncesReserved'> => ({ type: 'NoncesReserved', data: { upTo } }),
  noncesSkipped: (from: number, upTo: number): E<'NoncesSkipped'> => ({ type: 'NoncesSkipped', data: { from, upTo, reason: 'restart' } }),
  noncesReleased: (upTo: number): E<'NoncesReleased'> => ({ type: 'NoncesReleased', data: { upTo } }),
  usageRecovered: (cost = '100', slotId = 1): E<'UsageRecovered'> => ({ type: 'UsageRecovered', data: { slotId, cost, reason: 'host reported' } }),
  finished: (requestId: string, nonce: number, cost = '500'): E<'InferenceFinished'> => ({ type: 'InferenceFinished', data: { requestId, nonce, usage, cost } }),
  failed: (requestId: string, nonce: number, cost = '0'): E<'InferenceFailed'> => ({ type: 'InferenceFailed', data: { requestId, nonce, reason: 'upstream', usage, cost } }),
  /** Starts and ends recorded together, as the gateway records them (entries: built with started/finished/failed). */
  recorded: (...entries: E<'InferenceStarted' | 'InferenceFinished' | 'InferenceFailed'>[]): E<'InferencesRecorded'> => ({
    type: 'InferencesRecorded',
    data: { entries: entries.map((e) => ({ data: e.data, type: e.type }) as never) },
  }),
  depleted: (): E<'EscrowDepleted'> => ({ type: 'EscrowDepleted', data: { balance: '999', threshold: '1000000' } }),
  routingStopped: (nonce = 19_799): E<'EscrowRoutingStopped'> => ({ type: 'EscrowRoutingStopped', data: { nonce, routingStop: 19_800 } }),
  finalized: (nonce = 0): E<'EscrowFinalized'> => ({
    type: 'EscrowFinalized',
    data: { settlement: { escrowId: 'e1', nonce, stateRoot: 'ab', restHash: 'cd', hostStats: [], signatures: [], fees: '10', version: 1 } },
  }),
  settleRequested: (): E<'EscrowSettleRequested'> => ({ type: 'EscrowSettleRequested', data: { txHash: 'BB', keySource: { kind: 'env', name: 'KEY' }, origin: 'admin' } }),
  settleDeferred: (inFlight = 1): E<'EscrowSettleDeferred'> => ({ type: 'EscrowSettleDeferred', data: { inFlight, origin: 'rotation' } }),
  settled: (): E<'EscrowSettled'> => ({ type: 'EscrowSettled', data: { txHash: 'BB', height: 20, refund: '9000' } }),
  settleFailed: (): E<'EscrowSettleFailed'> => ({ type: 'EscrowSettleFailed', data: { reason: 'timeout' } }),
  /** A drained settle's attempt failed: transient (retried from `retryAtHeight`) when that is given. */
  drainedSettleFailed: (o: { attempt?: number; retryAtHeight?: number; windowClosed?: boolean; height?: number } = {}): E<'EscrowSettleFailed'> => ({
    type: 'EscrowSettleFailed',
    data: {
      reason: o.retryAtHeight !== undefined ? 'chain RPC unreachable' : 'settlement outside the escrow epoch window',
      error: o.retryAtHeight !== undefined ? { kind: 'unreachable', message: 'chain RPC unreachable' } : { kind: 'wrong_epoch', message: 'settlement outside the escrow epoch window', code: 1107 },
      attempt: o.attempt ?? 1,
      height: o.height ?? 1000,
      ...(o.retryAtHeight !== undefined ? { retryAtHeight: o.retryAtHeight } : {}),
      ...(o.windowClosed ? { windowClosed: true } : {}),
    },
  }),
  deactivated: (): E<'EscrowDeactivated'> => ({ type: 'EscrowDeactivated', data: {} }),
  removed: (): E<'EscrowRemoved'> => ({ type: 'EscrowRemoved', data: {} }),

  accessMode: (model: string, mode: 'admin_only' | 'api_key', previous: 'admin_only' | 'api_key' = mode === 'api_key' ? 'admin_only' : 'api_key'): E<'ModelAccessModeChanged'> => ({
    type: 'ModelAccessModeChanged',
    data: { model, mode, previous },
  }),
  disabled: (message = 'moved', newUrl = 'https://new.example/v1'): E<'GatewayDisabled'> => ({ type: 'GatewayDisabled', data: { message, newUrl } }),
  enabled: (): E<'GatewayEnabled'> => ({ type: 'GatewayEnabled', data: {} }),

  phaseStarted: (phase: 1 | 2, epoch = 7, model = 'm1'): E<'RotationPhaseStarted'> => ({ type: 'RotationPhaseStarted', data: { model, phase, chain: chain(epoch), target: 2, existing: 1 } }),
  phaseCompleted: (phase: 1 | 2, epoch = 7, model = 'm1'): E<'RotationPhaseCompleted'> => ({
    type: 'RotationPhaseCompleted',
    data: { model, phase, chain: chain(epoch), created: 0, promoted: 0, settleDecided: 0 },
  }),
  createDecided: (role: EscrowRole, epoch = 7, intentIds = ['t1'], model = 'm1'): E<'RotationCreateDecided'> => ({
    type: 'RotationCreateDecided',
    data: { model, role, chain: chain(epoch), target: 2, existing: 1, intentIds },
  }),
  createSuppressed: (role: EscrowRole, epoch = 7, model = 'm1'): E<'RotationCreateSuppressed'> => ({ type: 'RotationCreateSuppressed', data: { model, role, chain: chain(epoch), reason: 'insufficient_funds' } }),
  promoted: (escrowIds = ['e1'], epoch = 7, model = 'm1'): E<'RotationPromoted'> => ({ type: 'RotationPromoted', data: { model, chain: chain(epoch), escrowIds } }),
  settleDecided: (role: EscrowRole, escrowIds = ['e1'], epoch = 7, model = 'm1'): E<'RotationSettleDecided'> => ({ type: 'RotationSettleDecided', data: { model, role, chain: chain(epoch), escrowIds } }),
  rotationFailed: (step: 'create_temporary' | 'create_target' | 'settle' | 'read_chain' | 'promote', role?: EscrowRole, epoch = 7, suppress = true, model = 'm1'): E<'RotationFailed'> => ({
    type: 'RotationFailed',
    data: { model, step, role, chain: chain(epoch), error: err, suppress },
  }),
  /** A settle failure of escrow `escrowId`: transient (retried from `retryAtHeight`) when that is given. */
  rotationSettleFailed: (escrowId = 'e1', o: { attempt?: number; retryAtHeight?: number; windowClosed?: boolean; height?: number; model?: string } = {}): E<'RotationFailed'> => ({
    type: 'RotationFailed',
    data: {
      model: o.model ?? 'm1',
      step: 'settle',
      role: 'regular',
      chain: chain(7, o.height ?? 1000),
      error: o.retryAtHeight !== undefined ? { kind: 'unreachable', message: 'chain RPC unreachable' } : { kind: 'wrong_epoch', message: 'settlement outside the escrow epoch window', code: 1107 },
      suppress: false,
      escrowId,
      ...(o.attempt !== undefined ? { attempt: o.attempt } : {}),
      ...(o.retryAtHeight !== undefined ? { retryAtHeight: o.retryAtHeight } : {}),
      ...(o.windowClosed ? { windowClosed: true } : {}),
    },
  }),
  replacementDecided: (model = 'm1'): E<'DepletionReplacementDecided'> => ({ type: 'DepletionReplacementDecided', data: { model, escrowId: 'e1', reason: 'depleted', chain: chain(), intentId: 'r1' } }),
  replacementFailed: (model = 'm1', suppress = true): E<'DepletionReplacementFailed'> => ({
    type: 'DepletionReplacementFailed',
    data: { model, escrowId: 'e1', reason: 'depleted', chain: chain(), error: err, suppress },
  }),
  /** The settle of a replaced escrow failed: transient (retried from `retryAtHeight`) when that is given. */
  replacementSettleFailed: (escrowId = 'e1', o: { attempt?: number; retryAtHeight?: number; windowClosed?: boolean; height?: number } = {}): E<'DepletionReplacementFailed'> => ({
    type: 'DepletionReplacementFailed',
    data: {
      model: 'm1',
      escrowId,
      reason: 'depleted',
      chain: chain(7, o.height ?? 1000),
      error: o.retryAtHeight !== undefined ? { kind: 'unreachable', message: 'chain RPC unreachable' } : { kind: 'wrong_epoch', message: 'settlement outside the escrow epoch window', code: 1107 },
      suppress: false,
      step: 'settle',
      ...(o.attempt !== undefined ? { attempt: o.attempt } : {}),
      ...(o.retryAtHeight !== undefined ? { retryAtHeight: o.retryAtHeight } : {}),
      ...(o.windowClosed ? { windowClosed: true } : {}),
    },
  }),
};

/** Wraps events as committed records (positions from 1, times a second apart). */
export function record(events: { streamId: string; event: CatalogEvent }[], from = 1): RecordedEvent[] {
  const versions = new Map<string, number>();
  return events.map(({ streamId, event }, i) => {
    const v = (versions.get(streamId) ?? -1) + 1;
    versions.set(streamId, v);
    return {
      position: from + i,
      streamId,
      streamVersion: v,
      type: event.type,
      schemaVersion: 1,
      data: event.data,
      metadata: { actor: { kind: 'admin' } },
      time: new Date(Date.UTC(2026, 0, 1, 0, 0, from + i)).toISOString(),
      prevHash: '',
      hash: '',
    };
  });
}
