/**
 * The composition root: opens the log, restores projections, connects the chain (a real node, or
 * the embedded devnet when NODE_RPC is unset) and the network, reconciles what was under way,
 * then serves HTTP over the gateway's port. `stop()` stops accepting, drains in-flight requests,
 * checkpoints and closes. The only module that knows every layer; src/cli calls it.
 */
import { startPruneWatch } from '../gateway/workers/prune-watch.js';
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { createCosmosChainClient, type CosmosChainClient } from '../chain/cosmos-client.js';
import { startDevnet, type Devnet } from '../devnet/chain/index.js';
import type { ChainPort } from '../chain/port.js';
import type { GatewayConfig } from '../config/index.js';
import type { EventStore } from '../events/store.js';
import { storageSpace } from '../gateway/devshardctl/status-document.js';
import { createHttpApp } from '../http/app.js';
import { createLogger } from '../http/logger.js';
import { countRecordedFailures, createGatewayMetrics } from '../http/metrics.js';
import { registerRoutes } from '../http/routes/index.js';
import { createAuthenticator } from '../http/auth.js';
import { registerConsole } from '../console/index.js';
import { createProtocolTransport, type ProtocolTransport } from '../network/devshard/protocol-transport.js';
import type { SessionEscrow } from '../network/devshard/session.js';
import type { InferencePort } from '../network/port.js';
import { createUpstreamPort } from '../network/upstream.js';
import { followProjections } from '../projections/index.js';
import { bootstrap } from '../gateway/bootstrap.js';
import { ChainInfo } from '../gateway/escrows/chain-info.js';
import type { GatewayContext } from '../gateway/context.js';
import { Engine } from '../gateway/write/engine.js';
import { Keyring } from '../gateway/keyring.js';
import { Limiter } from '../gateway/write/limiter.js';
import { NonceLeases } from '../gateway/write/nonce-lease.js';
import { gatewayPort } from '../gateway/gateway-port.js';
import { boundSessionEscrow } from '../gateway/session/import.js';
import { HostAckRecorder } from '../gateway/session/host-acks.js';
import type { QuickStart } from '../gateway/bootstrap.js';
import { escrowProtocol, isLegacyProtocol, loadRecordedProtocols } from '../gateway/escrows/protocol.js';
import { boundSessionFacts, recordDiff, recordHeightSeed, recordedDiffs, recordedHostTxs, recordHostTxs, recordSessionOpened } from '../gateway/session/diffs.js';
import { hostUrlOf } from '../gateway/chat/host-urls.js';
import { ProtocolBilling } from '../gateway/session/billing.js';
import { createDrainReactor, type DrainTask } from '../gateway/workers/reactors.js';
import { reconcile, releaseUnusedNonces, startIntentReconciler } from '../gateway/workers/reconcile.js';
import { onRequestEnded, startDepletionCheck, startRotation } from '../gateway/workers/rotation/index.js';
import { disabledBootstrapRefusal, recordStartupSettings } from '../gateway/settings/startup-settings.js';
import { openLog } from './open-log.js';
import { createOwnership } from './ownership.js';
import { startHeartbeats, type HeartbeatTask } from '../gateway/workers/heartbeats.js';

/** Spec: usable balance below 1,000,000 (smallest unit) makes an escrow depleted. */
export const DEPLETION_THRESHOLD = 1_000_000n;

export interface GatewayOptions {
  logger?: Logger;
  /** Options for the embedded devnet (tests: fast blocks, ephemeral port). */
  devnet?: Parameters<typeof startDevnet>[0];
  /** Replace the chain port (tests). */
  chain?: ChainPort;
  /** Replace the inference port (tests). */
  network?: InferencePort;
  /** Create a first escrow on an empty log with the embedded devnet (the quick start). */
  quickStartEscrow?: boolean;
  /**
   * With that first escrow, turn escrow rotation on for its model (the quick start with nothing
   * configured): the escrow is settled and replaced around each epoch switch instead of being
   * pruned with its deposit two epochs after it was made.
   */
  quickStartRotation?: boolean;
}

export interface RunningGateway {
  /** What the quick start made (the first escrow, and whether rotation replaces it). */
  quickStart?: QuickStart;
  /** The background tasks (tests drive them with tick()). */
  tasks: { rotation: ReturnType<typeof startRotation>; depletion: ReturnType<typeof startDepletionCheck>; drain: DrainTask; pruneWatch: ReturnType<typeof startPruneWatch>; /** The background re-hash of the log before the start's anchor; resolves when it ended. */ logCheck: Promise<void>; heartbeats: HeartbeatTask };
  url: string;
  app: FastifyInstance;
  ctx: GatewayContext;
  store: EventStore;
  devnet: Devnet | undefined;
  stop(): Promise<void>;
}

export async function startGateway(config: GatewayConfig, options: GatewayOptions = {}): Promise<RunningGateway> {
  const logger = options.logger ?? createLogger({ level: config.server.logLevel });
  mkdirSync(config.server.storageDir, { recursive: true, mode: 0o700 });
  // The log (SQLite or PostgreSQL), locked to this gateway and checked (open-log.ts); everything
  // past this line sees only the store port.
  let firstStart = false;
  const log = await openLog(config, logger, (first) => {
    // The spec's "first gateway start" (DEVSHARD_GATEWAY_DISABLED*): the log did not exist yet.
    firstStart = first;
    const refusal = disabledBootstrapRefusal(config, first);
    if (refusal) throw refusal;
  });
  if (!firstStart && config.disabledBootstrap.enabled) logger.info('DEVSHARD_GATEWAY_DISABLED has no effect after the first start: the kill switch is set by POST /v1/admin/settings');
  const { store, check } = log;
  const emptyLog = store.lastPosition() === 0;
  const { projections, detach } = await followProjections(store);
  const engine = new Engine(store, projections);
  // Each escrow's protocol is read once, here: the chat path asks it from memory.
  await loadRecordedProtocols(engine, projections.pool.all().map((e) => e.escrowId));
  // Before the chain is reached: a first start that fails there (node unreachable) has created the
  // database, so the next start would no longer apply the bootstrap.
  await recordStartupSettings({ engine, projections }, config, { firstStart, logger });

  let devnet: Devnet | undefined;
  let chain = options.chain;
  let ownedClient: CosmosChainClient | undefined;
  if (!chain) {
    let rpc = config.chain.rpc;
    let rest = config.chain.chainRest ?? config.chain.chainApi;
    let nodeBase = config.chain.nodeBase;
    // No chain endpoint: the embedded devnet (the CLI only gets here with `serve --devnet`).
    if (!rest) {
      // An older log's escrows speak v2 on /v1/devshard, which the simulated hosts answer 410 like the
      // live ones: the embedded devnet keeps that route for them unless DEVNET_LEGACY_ROUTE says otherwise.
      const legacy = config.env.DEVNET_LEGACY_ROUTE === undefined ? projections.pool.all().filter((e) => e.state !== 'removed' && e.state !== 'settled' && isLegacyProtocol(escrowProtocol(engine, e.escrowId))) : [];
      if (legacy.length > 0) logger.info({ escrows: legacy.map((e) => e.escrowId) }, 'the log holds v2 escrows on /v1/devshard (recorded before protocol versions): the embedded devnet keeps that route for them (DEVNET_LEGACY_ROUTE=1)');
      devnet = await startDevnet({
        env: legacy.length > 0 ? { ...config.env, DEVNET_LEGACY_ROUTE: '1' } : config.env,
        chainId: config.chain.chainId,
        creators: config.keys.creatorPrivateKey ? [config.keys.creatorPrivateKey] : undefined,
        statePath: config.env.DEVNET_STATE ?? `${config.server.storageDir}/devnet.sqlite`,
        port: config.env.DEVNET_PORT !== undefined ? Number(config.env.DEVNET_PORT) : 0,
        ...options.devnet,
      });
      // Its block timer's write failures (disk full) are logged once per kind, never fatal.
      const devnetError = onceByKind(logger);
      devnet.chain.onError = (message, _kind, err) => devnetError(message, err);
      rpc = devnet.rpcUrl;
      rest = devnet.url;
      nodeBase = devnet.url;
    }
    ownedClient = createCosmosChainClient({
      rpcUrl: rpc,
      restUrl: rest!,
      nodeBaseUrl: nodeBase ?? rest,
      txQueryRestUrl: config.chain.txQueryRest,
      chainId: config.chain.chainId,
      publicApiUrl: devnet ? devnet.url : config.compatibility.publicApi,
      gasLimit: config.chain.txGasLimit,
      feeAmount: config.chain.txFeeAmount,
      feeDenom: config.chain.txFeeDenom,
    });
    chain = ownedClient;
  }

  const keyring = new Keyring(config.env, (k) => chain!.addressOf(k));
  if (config.keys.creatorPrivateKey) await keyring.add(config.keys.creatorPrivateKey, 'DEVSHARD_PRIVATE_KEY');
  const chainInfo = new ChainInfo(chain);
  await chainInfo.load();
  chainInfo.follow(60_000);

  // The devshard protocol transport reads each escrow's chain facts from the engine's decided state.
  const late: { ctx?: GatewayContext } = {};
  let billing: ProtocolBilling | undefined;
  const hostAcks = new HostAckRecorder(engine, logger);
  const protocol: ProtocolTransport | undefined =
    !options.network && !config.network.upstreamUrl
      ? createProtocolTransport({
            escrowOf: (id) => (late.ctx ? protocolEscrow(late.ctx, id) : undefined),
            // Each diff is in the log before a request carries it; a restart rebuilds the session from them.
            // The Finishes and Timeouts it applies are what the inferences cost (protocol-billing.ts).
            onDiff: (escrowId, d) => {
              // The charges first: a UsageRecovered it decides is queued ahead of the diff, so a diff
              // in the log implies the usage it charged is too (one writer, in order).
              const s = protocol!.session(escrowId);
              if (billing && s) billing.diffApplied(escrowId, d.txs, s.replica);
              return recordDiff(engine, escrowId, d);
            },
            recordedDiffs: (escrowId) => recordedDiffs(engine, escrowId),
            // Host txs not yet in a diff survive a restart of the gateway (and of the hosts).
            onHostTxs: (escrowId, host, txs) =>
              void recordHostTxs(engine, escrowId, host, txs).catch((err: unknown) => logger.warn({ err, escrow_id: escrowId }, 'could not record host txs taken from a host answer; the host resends them while they are in its mempool')),
            recordedHostTxs: (escrowId) => recordedHostTxs(engine, escrowId),
            // The log's bills are matched against the recorded charges again (protocol-billing.ts).
            onSessionOpened: (escrowId, s) => billing?.restore(escrowId, s.recordedCharges),
            // Logged once per escrow, rule and host; /v1/status shows the latest (protocol_error).
            onRouteRefused: (r) => logger.error({ escrow_id: r.escrowId, host: r.host, status: r.status, rule: r.rule }, r.message),
            // How far each host applied the diffs, and what it refused (devshard-host-acks.ts).
            onHostAck: (escrowId, host, nonce, stateHash) => hostAcks.ack(escrowId, host, nonce, stateHash),
            onHostRefused: (escrowId, host, status, message, rule) => hostAcks.refused(escrowId, host, status, message, rule),
            stallTimeoutMs: config.limits.stallTimeoutMs,
            timeoutMs: config.limits.requestTimeoutMs,
            // Host txs signed by a warm key are taken once the slot's address is seen to have granted it.
            warmKeyGranted: (cold, warm) => chain!.warmKeyGranted(cold, warm),
            // v5: the reference gateway's seed gate, and the seed's moves in the log.
            requireHeightSeed: config.behaviour.requireHeightSeed,
            // v5 error-miss: a claim queued, short of votes (nothing sent), or never asked.
            onErrorMiss: (escrowId, o) => {
              const fields = { escrow_id: escrowId, inference_id: String(o.inferenceId), weight: o.weight, threshold: o.threshold, rejects: o.rejects };
              if (o.outcome === 'queued') logger.info(fields, `error-miss of inference ${o.inferenceId}: votes in; its Finish and MsgErrorMiss go into the next diff`);
              else logger.warn(fields, `error-miss of inference ${o.inferenceId} not sent (${o.outcome}${o.reason ? `: ${o.reason}` : ''}); its Finish goes alone`);
            },
            onHostTxDropped: (escrowId, kind, reason) => logger.warn({ escrow_id: escrowId, tx: kind }, `a host tx the v5 log plane refuses was kept out of the diffs: ${reason}`),
            onHeightSeed: (escrowId, st) => {
              if (st.state === 'missed') logger.error({ escrow_id: escrowId, seeded: st.seeded, slots: st.slots, outcomes: st.outcomes }, `height seed missed: ${st.seeded}/${st.slots} hosts returned a height anchor; chat on escrow ${escrowId} answers 503 height_seed_incomplete until they do`);
              void recordHeightSeed(engine, escrowId, st).catch((err: unknown) => logger.warn({ err, escrow_id: escrowId }, 'could not record the height seed'));
            },
          })
      : undefined;
  const network: InferencePort =
    options.network ??
    protocol ??
    createUpstreamPort({ url: config.network.upstreamUrl!, ...(config.network.upstreamKey ? { apiKey: config.network.upstreamKey } : {}), stallTimeoutMs: config.limits.stallTimeoutMs, timeoutMs: config.limits.requestTimeoutMs });

  const metrics = createGatewayMetrics();
  metrics.registry.onCollect(() => {
    const space = storageSpace(config);
    if (space.free_bytes !== null) metrics.storageFreeBytes.set(space.free_bytes);
  });
  // Create, settle and rotation failures by reason, as the log records them from here on.
  countRecordedFailures(metrics, store.subscribe(store.lastPosition()));
  const limiter = new Limiter({ maxConcurrentRequests: config.limits.maxConcurrentRequests, maxInputTokensInFlight: config.limits.maxInputTokensInFlight });
  const drain = createDrainReactor();
  // Instances sharing a PostgreSQL log hold escrow leases; a sole process owns the whole log.
  let listening: string | undefined = undefined; // set once the server listens (read by the lease keeper)
  const { ownership, keeper } = createOwnership(config, store, logger, () => ctx, () => listening);
  engine.ownership = keeper;
  const ctx: GatewayContext = {
    config,
    engine,
    ownership,
    nonces: new NonceLeases({ engine, projections, logger }),
    ...(protocol ? { billing: (billing = new ProtocolBilling({ engine, logger })), hostAcks } : {}),
    projections,
    chain,
    chainInfo,
    network,
    keyring,
    limiter,
    logger,
    depletionThreshold: DEPLETION_THRESHOLD,
    afterRequest: (escrowId) => {
      drain.afterRequest(ctx, escrowId);
      onRequestEnded(ctx, escrowId);
    },
  };

  late.ctx = ctx;
  // What the start check took on trust from the anchor (positions 1..check.from) is re-hashed in
  // the background while the gateway serves; a failure stops chat (503 event_log_tampered).
  let stoppingLogCheck = false;
  ctx.logCheck = { state: 'checking', until: check.from };
  const logCheck = log.checkPrefix(() => stoppingLogCheck).then(
    (r) => {
      if (!r) return;
      if (r.ok) {
        ctx.logCheck = { state: 'ok', checked: r.checked };
        logger.info({ component: 'event_log', events_checked: r.checked }, 'event_log_prefix_verified');
      } else {
        ctx.logCheck = { state: 'failed', position: r.position, reason: r.reason };
        logger.fatal({ component: 'event_log', position: r.position }, `event_log_verification_failed: position ${r.position}: ${r.reason}. Chat is refused from now on (503 event_log_tampered); run \`shardgate verify\` and restore the log from a backup.`);
      }
    },
    (err: unknown) => logger.error({ err, component: 'event_log' }, 'the background check of the event log could not run'),
  );
  // Its share of the escrows (each reconciled as it is taken over) and, when free, the leader lease.
  await keeper?.start();
  const report = await reconcile(ctx);
  if (report.creates.length || report.settles.length || report.orphanedRequests || report.noncesSkipped.length || report.noncesReleased.length) logger.info({ reconcile: report }, 'reconciled recorded chain intents');
  // Outcomes still unknown (node unreachable, tx not yet included) are asked for by hash until known.
  const stopIntentReconciler = startIntentReconciler(ctx, config.behaviour.reconcileIntervalMs);
  if (ownership.isLeader()) await drain.resumeDeferred(ctx);
  // Retries of drained settles that failed, on the balance check's period.
  const drainTask = drain.start(ctx);
  // v5 escrows' idle heartbeat spans (heartbeats.ts).
  const heartbeats = startHeartbeats(ctx, { idleMs: config.behaviour.heartbeatIdleMs });
  const quickStart = await bootstrap(ctx, { quickStartEscrow: options.quickStartEscrow === true && devnet !== undefined && emptyLog, quickStartRotation: options.quickStartRotation === true });
  const rotation = startRotation(ctx);
  const depletion = startDepletionCheck(ctx);
  const pruneWatch = startPruneWatch(ctx);
  ctx.onSettingsChanged = () => rotation.reconfigure();

  const { maxConnections, headersTimeoutMs, requestReceiveTimeoutMs, maxUnsentBytes, slowClientTimeoutMs, maxBodyBytes } = config.server;
  const app = createHttpApp({ logger, metrics, bodyLimit: maxBodyBytes, server: { maxConnections, headersTimeoutMs, requestReceiveTimeoutMs, maxUnsentBytes, slowClientTimeoutMs }, fastify: { forceCloseConnections: 'idle' } });
  const gateway = gatewayPort(ctx);
  const keys = { adminApiKey: config.keys.adminApiKey, apiKeys: config.keys.apiKeys };
  registerRoutes(app, gateway, { keys, metrics });
  // The operator console reads the log through the store (its pages, its subscription).
  registerConsole(app, gateway, createAuthenticator(keys), store);
  await app.listen({ host: config.server.host, port: config.server.port });
  const { port } = app.server.address() as AddressInfo;
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;
  const url = `http://${host}:${port}`;
  listening = url;

  // A failing write (disk full, I/O) is logged once per kind and tried again at the next period:
  // a timer that throws would end the process (issue 39, item 5).
  const timerError = onceByKind(logger);
  const checkpointTimer = setInterval(() => {
    projections.checkpoint(store, { soon: true }).catch((err: unknown) => timerError('projections_checkpoint_failed', err));
  }, 30_000);
  checkpointTimer.unref();

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      // Stop accepting, let in-flight requests finish (bounded), then flush and close.
      const closed = app.close();
      const deadline = Date.now() + config.server.shutdownTimeoutMs;
      while (limiter.counts().active_requests > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      await Promise.race([closed, new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now())))]);
      clearInterval(checkpointTimer);
      chainInfo.stop();
      stoppingLogCheck = true;
      await logCheck;
      await stopIntentReconciler();
      await rotation.stop();
      depletion.stop();
      pruneWatch.stop();
      await drainTask.stop();
      await heartbeats.stop();
      await drain.idle();
      await hostAcks.close();
      // Instances sharing the log: every escrow handed back now (its unused nonces first), so the
      // others take them at their next pass instead of after the lease time.
      await keeper?.handOverAll();
      // Nothing in flight: no reserved nonce beyond the last start can have been used.
      if (limiter.counts().active_requests === 0) {
        await releaseUnusedNonces(ctx).catch((err: unknown) => logger.warn({ err }, 'could not record the unused nonce reservations; the next start skips them'));
      }
      await projections.checkpoint(store).catch((err: unknown) => timerError('projections_checkpoint_failed', err));
      detach();
      await store.close();
      await (network as { close?: () => Promise<void> }).close?.();
      ownedClient?.close?.();
      await devnet?.close();
      await log.release();
    })());

  return { url, app, ctx, store, devnet, stop, tasks: { rotation, depletion, drain: drainTask, pruneWatch, logCheck, heartbeats }, ...(quickStart ? { quickStart } : {}) };
}

/**
 * Logs a timer's failure once per message and error kind (`code`, e.g. SQLITE_FULL, or the error's
 * name) for the life of the process: a full disk fails every tick, one line says so.
 */
export function onceByKind(logger: Logger): (msg: string, err: unknown) => void {
  const seen = new Set<string>();
  return (msg, err) => {
    const e = err as { code?: unknown; name?: unknown; message?: unknown } | undefined;
    const kind = typeof e?.code === 'string' ? e.code : typeof e?.name === 'string' ? e.name : 'unknown';
    if (seen.has(`${msg}/${kind}`)) return;
    seen.add(`${msg}/${kind}`);
    logger.error({ kind, err: { message: typeof e?.message === 'string' ? e.message : String(err) } }, `${msg} (logged once per kind; retried at the next period)`);
  };
}

/**
 * An escrow's session facts for the devshard protocol transport, as a host binds them: creator,
 * amount and slots as recorded from the chain, the price, fees and seal settings frozen on the
 * escrow, and the chain's bind params (vote threshold factor, timeouts, validation rate), read once
 * when the session opens (the transport keeps the session).
 */
async function protocolEscrow(ctx: GatewayContext, escrowId: string): Promise<SessionEscrow | undefined> {
  const c = ctx.engine.escrow(escrowId)?.context;
  if (!c || !c.creator || c.slots.length === 0) return undefined;
  // A session binds once, as a host does: a later run keeps the facts it was bound to (chain params
  // that changed since, or a chain that now serves fields it did not, must not change its config),
  // and only follows hosts that moved.
  const bound = await boundSessionFacts(ctx.engine, escrowId);
  const escrow = bound
    ? { ...bound, slots: c.slots.map((s) => ({ host: s.host, url: hostUrlOf(ctx, s) })) }
    : await boundSessionEscrow(ctx, escrowId, { creator: c.creator, amount: BigInt(c.deposit), slots: c.slots });
  // In the log before the session's first diff of this run: verify / replay / explain rebuild the replica from it.
  await recordSessionOpened(ctx.engine, escrow);
  return escrow;
}
