/**
 * A test gateway on a fast devnet (50 ms blocks, short epochs) with the rotation task and the
 * depletion check attached, plus chat load and log helpers.
 */
import { expect } from 'vitest';
import { runExplainRotation } from '../../src/cli/commands/explain.js';
import { escrowStream, upcast, type RecordedCatalogEvent } from '../../src/events/catalog.js';
import { verifyLog } from '../../src/events/verify.js';
import { settleRetryDelay } from '../../src/gateway/workers/rotation/settle-retry.js';
import type { DepletionCheck, RotationTask } from '../../src/gateway/workers/rotation/index.js';
import { projectionsCheck } from '../../src/projections/verify-check.js';
import { settleTxsOnChain, streamTypes } from '../faults/helpers.js';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway, type TestGatewayOptions } from '../helpers/gateway.js';

export { MODEL };

export interface RotationGateway extends Omit<TestGateway, 'restart'> {
  rotation: RotationTask;
  depletion: DepletionCheck;
  restart(): Promise<RotationGateway>;
}

export const FAST_CHAIN = { DEVNET_BLOCK_TIME_MS: '50', DEVNET_EPOCH_BLOCKS: '60', DEVNET_POC_BLOCKS: '6' };

/** The gateway's own rotation and depletion tasks, exposed for tests. */
export function attach(gw: TestGateway): RotationGateway {
  const r: RotationGateway = {
    ...gw,
    rotation: gw.tasks.rotation,
    depletion: gw.tasks.depletion,
    async restart() {
      return attach(await gw.restart());
    },
  };
  return r;
}

export async function startRotationGateway(opts: TestGatewayOptions = {}): Promise<RotationGateway> {
  const gw = await startTestGateway({
    ...opts,
    env: { GATEWAY_ROTATION_INTERVAL_MS: '100', GATEWAY_BALANCE_CHECK_INTERVAL_MS: '300', ...FAST_CHAIN, ...opts.env },
  });
  return attach(gw);
}

export async function enableRotation(gw: TestGateway, o: { temp_count?: number; target_count?: number; pre_poc_blocks?: number; amount?: string; enabled?: boolean } = {}) {
  const r = await gw.call('/v1/admin/settings', {
    body: {
      model_limits: [{ model_id: MODEL, access_mode: 'api_key' }],
      escrow_rotation: {
        enabled: o.enabled ?? true,
        pre_poc_blocks: o.pre_poc_blocks ?? 20,
        models: [{ model_id: MODEL, temp_count: o.temp_count ?? 1, target_count: o.target_count ?? 1, amount: o.amount ?? '1000000000', private_key_env: 'DEVSHARD_PRIVATE_KEY' }],
      },
    },
  });
  if (r.status !== 200) throw new Error(`settings: ${r.status} ${r.text}`);
  (gw as RotationGateway).rotation?.reconfigure();
}

export function events(gw: TestGateway): RecordedCatalogEvent[] {
  return [...gw.store.readAll(0)].map((r) => upcast(r)).filter((e): e is RecordedCatalogEvent => e !== null);
}

export const ofType = <K extends RecordedCatalogEvent['type']>(gw: TestGateway, type: K) =>
  events(gw).filter((e): e is Extract<RecordedCatalogEvent, { type: K }> => e.type === type);

export async function waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 20_000, everyMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Continuous chat from `workers` clients; `stop()` answers the statuses seen. */
export function chatLoad(gw: TestGateway, workers = 4, maxTokens = 8) {
  let running = true;
  const statuses: number[] = [];
  const failures: string[] = [];
  const loops = Array.from({ length: workers }, async (_, w) => {
    while (running) {
      try {
        const r = await gw.call('/v1/chat/completions', { key: 'client', body: { model: MODEL, messages: [{ role: 'user', content: `worker ${w} says hi` }], max_tokens: maxTokens } });
        statuses.push(r.status);
        if (r.status !== 200) failures.push(`${r.status} ${r.text.slice(0, 200)}`);
      } catch (err) {
        // The gateway went away under the load (a failed test tearing it down): a failure, not an unhandled rejection.
        failures.push(`no answer: ${(err as Error).message}`);
        if (!running) break;
        await new Promise((r) => setTimeout(r, 10)); // not a tight loop of refused connections
      }
    }
  });
  return {
    statuses,
    failures,
    async stop() {
      running = false;
      await Promise.all(loops);
      return { total: statuses.length, failures };
    },
  };
}

/** Log lines (parsed) with a marker, about one escrow. */
export const marked = (gw: TestGateway, msg: string, escrowId: string) =>
  gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === msg && l.escrow_id === escrowId);

/** `shardgate explain rotation` of the gateway's log, for MODEL. */
export function explainText(gw: TestGateway): string {
  let text = '';
  runExplainRotation(gw.store, { model: MODEL }, (s) => (text += s));
  return text;
}

/** Runs `tick` (as a timer would, but faster) until the devnet passed `blocks` more blocks: longer than any backoff. */
export async function tickFor(gw: TestGateway, blocks: number, tick: () => Promise<void>): Promise<void> {
  const until = gw.devnet!.chain.state.height + blocks;
  await waitFor(`${blocks} blocks of ticks`, async () => {
    await tick();
    return gw.devnet!.chain.state.height >= until;
  }, 20_000, 20);
}

/** Runs `tick` until the escrow is settled. */
export const tickUntilSettled = (gw: TestGateway, escrowId: string, tick: () => Promise<void>): Promise<void> =>
  waitFor(`escrow ${escrowId} settled`, async () => {
    await tick();
    return gw.ctx.engine.escrow(escrowId)?.value === 'settled';
  }, 20_000, 20);

/**
 * Failed settle attempts 1, 2, … in order, each made at `height` and scheduling the next after the
 * block backoff, each made at or after the height the previous one set.
 */
export function expectBackoff(failures: { attempt?: number; height: number; retryAtHeight?: number }[]): void {
  for (const [i, f] of failures.entries()) {
    expect(f.attempt).toBe(i + 1);
    expect(f.retryAtHeight! - f.height).toBe(settleRetryDelay(i + 1));
    if (i > 0) expect(f.height).toBeGreaterThanOrEqual(failures[i - 1]!.retryAtHeight!);
  }
}

/** A projections checkpoint written now equals the rebuild from the log (what `shardgate verify` checks). */
export async function expectCheckpointVerified(gw: TestGateway): Promise<void> {
  await gw.ctx.projections.checkpoint(gw.store);
  expect(await verifyLog(`${gw.storageDir}/events.sqlite`, [projectionsCheck()])).toMatchObject({ ok: true });
}

/**
 * Left unsettled until the window closed: the chain pruned it (k/devshard_pruning.go, the devnet's
 * default), so it is gone from the chain and its deposit went to the hosts.
 */
export async function expectPruned(gw: TestGateway, escrowId: string): Promise<void> {
  expect(await gw.ctx.chain.escrow(escrowId)).toBeNull();
}

/** A settle given up without a tx: nothing was ever signed, the chain pruned it unsettled, the gateway finalized. */
export async function expectNeverSent(gw: TestGateway, escrowId: string): Promise<void> {
  expect(streamTypes(gw, escrowId)).not.toContain('EscrowSettleRequested');
  await expectPruned(gw, escrowId);
  expect((await gw.call(`/v1/admin/devshards/${escrowId}`)).json.state).toBe('finalized');
}

/**
 * A settle after its window closed, refused once and not retried: the chain has pruned the escrow
 * (k/devshard_pruning.go; hosts and keeper would answer `escrow N not found`), so the gateway
 * refuses it before asking the hosts to sign or spending a fee (escrows/pruned.ts): `failures`
 * (the recorded ones) is one `wrong_epoch` naming the prune, without a retry; no settle tx was signed.
 * `state`: 'finalized' when the hosts signed its settlement before the prune; 'deactivated' when it
 * was pruned before it was finalized (no host can sign a settlement of an escrow gone from the
 * chain, so it never gets one: it only stops taking chat, escrows/settle.ts refuseIfPruned).
 */
export async function expectRefusedOnce(gw: TestGateway, escrowId: string, failures: { attempt?: number; retryAtHeight?: number }[], state: 'finalized' | 'deactivated' = 'finalized'): Promise<void> {
  expect(failures).toHaveLength(1);
  expect(failures[0]).toMatchObject({ attempt: 1, error: { kind: 'wrong_epoch', message: expect.stringContaining('was pruned by the chain') } });
  expect(failures[0]!.retryAtHeight).toBeUndefined();
  expect(streamTypes(gw, escrowId)).not.toContain('EscrowSettleRequested');
  expect(settleTxsOnChain(gw.devnet!, escrowId)).toBe(0);
  await expectPruned(gw, escrowId);
  const view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
  expect(view).toMatchObject({ state, routable: false });
  if (state === 'deactivated') expect(streamTypes(gw, escrowId)).not.toContain('EscrowFinalized');
}

/** The escrow's settle intents (EscrowSettleRequested), in order. */
export const settleRequests = (g: TestGateway, escrowId: string) =>
  g.store
    .readStream(escrowStream(escrowId))
    .map((r) => upcast(r))
    .flatMap((e) => (e?.type === 'EscrowSettleRequested' ? [e] : []));

/**
 * Another client of the creator's key (another gateway, a CLI) sends a tx: it takes the account
 * sequence a lost, never-included settle tx carried, so the chain refuses that tx when it is sent
 * again (bad_sequence).
 */
/**
 * The lost tx comes back too late: the next broadcast (the reconciler's re-send of the recorded
 * tx) reaches the devnet after the tx's timeout_timestamp, so the chain refuses it as stale; the
 * gateway's own retry signs a new tx. (With ordered txs this was another tool taking the sequence;
 * unordered txs no longer fail that way.)
 */
export function staleOnResend(g: TestGateway): void {
  g.devnet!.chain.faults.lateArrivalMs = 10 * 60_000;
}

/** The depletion check's recorded settle failures of the escrow it replaced, in order. */
export const depletionSettleFailures = (g: TestGateway, escrowId: string) =>
  ofType(g, 'DepletionReplacementFailed').filter((e) => e.data.step === 'settle' && e.data.escrowId === escrowId);

/** Tears a gateway down after a test that may have left its devnet's RPC down (the fault is cleared first). */
export async function disposeFaultyGateway(gw: RotationGateway | undefined): Promise<void> {
  if (gw?.devnet) gw.devnet.chain.faults.rpcDown = false;
  await disposeTestGateway(gw);
}

/** One depletion check with its threshold above a 1,000,000,000 deposit, so it finds the escrow depleted; the threshold is restored after. */
export async function depletionTickAboveDeposit(g: RotationGateway): Promise<void> {
  g.ctx.depletionThreshold = 2_000_000_000n;
  try {
    await g.depletion.tick();
  } finally {
    g.ctx.depletionThreshold = 1_000_000n;
  }
}
