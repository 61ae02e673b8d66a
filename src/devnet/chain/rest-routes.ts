/**
 * The chain REST API (cosmos-sdk gRPC-gateway style: snake_case, integers as strings) and the
 * node's governance model list, and the public API's epoch routes. Routes and sources: docs/chain.md.
 */
import type { FastifyInstance } from 'fastify';
import { fromBase64, fromBech32 } from '@cosmjs/encoding';
import { SDK_CODES } from '../../chain/devshard-errors.js';
import { DENOM } from '../../chain/keys.js';
import { authzNotFoundText } from '../../chain/warm-keys.js';
import type { DevnetChain } from './chain.js';
import { LOGPROBS_MODE } from './params.js';
import type { AuthzGrant, EscrowParamsState, EscrowState } from './state.js';

/** Participant (participant.proto) in grpc-gateway JSON: every field, defaults included. */
function participantJson(host: { address: string; url: string }) {
  return {
    index: host.address,
    address: host.address,
    weight: 1,
    join_time: '0',
    join_height: '1',
    last_inference_time: '0',
    inference_url: host.url,
    status: 'ACTIVE',
    coin_balance: '0',
    validator_key: '',
    consecutive_invalid_inferences: '0',
    worker_public_key: '',
    epochs_completed: 0,
    current_epoch_stats: null,
  };
}

export const REST_PATHS = {
  params: '/productscience/inference/inference/params',
  approvedVersions: '/productscience/inference/inference/devshard_approved_versions',
  authzGrants: '/cosmos/authz/v1beta1/grants',
  escrow: '/productscience/inference/inference/devshard_escrow/:id',
  participant: '/productscience/inference/inference/participant/:address',
  epochInfo: '/productscience/inference/inference/epoch_info',
  currentEpoch: '/productscience/inference/inference/get_current_epoch',
  publicEpochLatest: '/v1/epochs/latest',
  publicParticipants: '/v1/epochs/current/participants',
  balances: '/cosmos/bank/v1beta1/balances/:address',
  account: '/cosmos/auth/v1beta1/accounts/:address',
  latestBlock: '/cosmos/base/tendermint/v1beta1/blocks/latest',
  tx: '/cosmos/tx/v1beta1/txs/:hash',
  broadcast: '/cosmos/tx/v1beta1/txs',
  nodeInfo: '/cosmos/base/tendermint/v1beta1/node_info',
  models: '/v1/governance/models',
} as const;

/** DevshardEscrow (devshard_escrow.proto) in grpc-gateway JSON: 64-bit ints as strings, slots as addresses. */
export function escrowJson(e: EscrowState, params: EscrowParamsState) {
  return {
    id: String(e.id),
    creator: e.creator,
    amount: e.amount.toString(),
    slots: e.slots.map((s) => s.host),
    epoch_index: String(e.epochIndex),
    app_hash: e.appHash ?? '',
    settled: e.settled,
    token_price: (e.tokenPrice ?? params.tokenPrice).toString(),
    model_id: e.modelId,
    create_devshard_fee: (e.createDevshardFee ?? params.createDevshardFee).toString(),
    fee_per_nonce: (e.feePerNonce ?? params.feePerNonce).toString(),
    inference_seal_grace_nonces: e.inferenceSealGraceNonces ?? params.defaultInferenceSealGraceNonces,
    inference_seal_grace_seconds: e.inferenceSealGraceSeconds ?? params.defaultInferenceSealGraceSeconds,
    auto_seal_every_n_nonces: e.autoSealEveryNNonces ?? params.defaultAutoSealEveryNNonces,
    // 15–18, frozen at create (0 on an escrow of an older snapshot: a legacy row).
    validation_rate: e.validationRate ?? 0,
    vote_threshold_factor: e.voteThresholdFactor ?? 0,
    refusal_timeout: (e.refusalTimeout ?? 0n).toString(),
    execution_timeout: (e.executionTimeout ?? 0n).toString(),
  };
}

/**
 * The module's Params as the devnet serves them: devshard_escrow_params, and of validation_params
 * only logprobs_mode (field 26). Other sections are not served.
 */
export function moduleParamsJson(p: EscrowParamsState) {
  return { validation_params: { logprobs_mode: LOGPROBS_MODE }, devshard_escrow_params: paramsJson(p) };
}

/**
 * DevshardEscrowParams (params.proto) in grpc-gateway JSON. approved_versions (7) is served empty
 * (the gateway emits defaults), as on chain v0.2.16 after its upgrade moved the list out.
 */
export function paramsJson(p: EscrowParamsState) {
  return {
    min_amount: p.minAmount.toString(),
    max_amount: p.maxAmount.toString(),
    max_escrows_per_epoch: p.maxEscrowsPerEpoch,
    group_size: p.groupSize,
    allowed_creator_addresses: p.allowedCreatorAddresses,
    token_price: p.tokenPrice.toString(),
    approved_versions: [],
    max_nonce: p.maxNonce,
    devshard_requests_enabled: p.devshardRequestsEnabled,
    default_inference_seal_grace_nonces: p.defaultInferenceSealGraceNonces,
    default_inference_seal_grace_seconds: p.defaultInferenceSealGraceSeconds,
    create_devshard_fee: p.createDevshardFee.toString(),
    fee_per_nonce: p.feePerNonce.toString(),
    refusal_timeout: p.refusalTimeout.toString(),
    execution_timeout: p.executionTimeout.toString(),
    validation_rate: p.validationRate,
    vote_threshold_factor: p.voteThresholdFactor,
    default_auto_seal_every_n_nonces: p.defaultAutoSealEveryNNonces,
  };
}

/**
 * The public API's EpochStages (inference-chain/x/inference/types/epoch_stages.go) of devnet epoch
 * `i`. The devnet's timeline: set_new_validators of epoch i at (i+1)·E, then a PoC window of P blocks.
 */
function epochStages(chain: DevnetChain, i: number) {
  const E = chain.config.epochBlocks;
  const P = chain.config.pocBlocks;
  const pocStart = i * E;
  const third = Math.floor(P / 3);
  return {
    epoch_index: i,
    poc_start: pocStart,
    poc_generation_wind_down: pocStart + third,
    poc_generation_end: pocStart + third,
    poc_validation_start: pocStart + third,
    poc_validation_wind_down: pocStart + P,
    poc_validation_end: pocStart + P,
    set_new_validators: (i + 1) * E,
    claim_money: (i + 1) * E,
    inference_validation_cutoff: (i + 1) * E,
    next_poc_start: (i + 1) * E,
    poc_exchange_window: { start: pocStart, end: pocStart + third },
    poc_validation_exchange_window: { start: pocStart + third, end: pocStart + P },
  };
}

const grpcNotFound = (message: string) => ({ code: 5, message, details: [] });

/** authz.Grant in grpc-gateway JSON: a GenericAuthorization of one message type, expiration or null. */
const grantJson = (g: AuthzGrant) => ({
  authorization: { '@type': '/cosmos.authz.v1beta1.GenericAuthorization', msg: g.msgTypeUrl },
  expiration: g.expiration ?? null,
});

/** What the SDK's bech32 address codec answers for an address it cannot decode (undefined: fine). */
function badAddress(address: string): string | undefined {
  if (address.trim() === '') return 'empty address string is not allowed';
  try {
    const { prefix } = fromBech32(address, 128);
    if (prefix !== 'gonka') return `invalid Bech32 prefix; expected gonka, got ${prefix}`;
  } catch (e) {
    return `decoding bech32 failed: ${(e as Error).message}`;
  }
  return undefined;
}

/** A `tx_response` for a tx the node refused or took into its mempool (not yet in a block). */
function checkTxResponse(hash: string, code: number, codespace: string, rawLog: string) {
  return {
    height: '0', txhash: hash, codespace, code, data: '', raw_log: rawLog, logs: [], info: '',
    gas_wanted: '0', gas_used: '0', tx: null, timestamp: '', events: [],
  };
}

export function registerRestRoutes(app: FastifyInstance, chain: DevnetChain): void {
  // The rpcDown fault takes down what a tx needs (RPC, accounts, node info, broadcast, tx lookup);
  // the inference module's queries keep answering, as when one of several nodes behind a proxy fails.
  const txPaths = ['/cosmos/tx/', '/cosmos/auth/', '/cosmos/base/tendermint/'];
  app.addHook('onRequest', async (request, reply) => {
    if (chain.faults.rpcDown && txPaths.some((p) => request.url.startsWith(p))) return reply.code(503).send('node unavailable');
  });
  const hanging = new Set<import('node:net').Socket>();
  app.addHook('preClose', async () => {
    for (const s of hanging) s.destroy();
  });

  // cosmos.tx.v1beta1.Service/BroadcastTx over the gRPC gateway (devshardctl's broadcastTx).
  app.post(REST_PATHS.broadcast, async (request, reply) => {
    const body = (request.body ?? {}) as { tx_bytes?: unknown; mode?: unknown };
    if (body.mode !== 'BROADCAST_MODE_SYNC' && body.mode !== 'BROADCAST_MODE_ASYNC') {
      return reply.code(400).send({ code: 3, message: `unsupported broadcast mode ${JSON.stringify(body.mode)}: invalid request`, details: [] });
    }
    if (typeof body.tx_bytes !== 'string' || body.tx_bytes === '') {
      return reply.code(400).send({ code: 3, message: 'invalid empty tx', details: [] });
    }
    let bytes: Uint8Array;
    try {
      bytes = fromBase64(body.tx_bytes);
    } catch {
      return reply.code(400).send({ code: 3, message: 'tx_bytes is not base64', details: [] });
    }
    const lose = chain.faults.dropBroadcastResponse;
    const answer = chain.broadcast(bytes); // with a lost answer the tx goes into the mempool all the same
    if (lose === 'error') return reply.code(503).send('upstream connect error or disconnect/reset before headers');
    if (lose === 'reset') {
      request.raw.socket.destroy();
      return reply.hijack();
    }
    if (lose === 'hang') {
      hanging.add(request.raw.socket);
      request.raw.socket.once('close', () => hanging.delete(request.raw.socket));
      return reply.hijack();
    }
    if (answer.inCache) return { tx_response: checkTxResponse(answer.hash, SDK_CODES.txInMempoolCache, 'sdk', 'tx already exists in cache') };
    const f = answer.failure;
    return { tx_response: f ? checkTxResponse(answer.hash, f.code, f.codespace, f.log) : checkTxResponse(answer.hash, 0, '', '[]') };
  });

  app.get(REST_PATHS.nodeInfo, async () => ({
    default_node_info: {
      protocol_version: { p2p: '8', block: '11', app: '0' },
      default_node_id: chain.blockHash(0).slice(0, 40).toLowerCase(),
      listen_addr: 'tcp://0.0.0.0:26656',
      network: chain.chainId,
      version: '0.38.17',
      channels: '40202122233038606100',
      moniker: 'shardgate-devnet',
      other: { tx_index: 'on', rpc_address: 'tcp://0.0.0.0:26657' },
    },
    application_version: {
      name: 'inference', app_name: 'inferenced', version: 'devnet', git_commit: '', build_tags: '',
      go_version: '', build_deps: [], cosmos_sdk_version: 'v0.53',
    },
  }));

  app.get(REST_PATHS.params, async () => {
    return { params: moduleParamsJson(chain.state.params) };
  });

  // Query/DevshardApprovedVersions (chain v0.2.16, zpoken/gonka@ef1a5efd query.proto): the store, by name.
  app.get(REST_PATHS.approvedVersions, async () => ({
    versions: (chain.state.approvedVersions ?? []).map((v) => ({ name: v.name, binary: v.binary, sha256: v.sha256 })),
  }));

  // cosmos.authz.v1beta1.Query/Grants (x/authz keeper/grpc_query.go). With msg_type_url: that one
  // grant, or the keeper's ErrNoAuthorizationFound, which the gateway answers as gRPC Unknown (500).
  app.get<{ Querystring: { granter?: string; grantee?: string; msg_type_url?: string } }>(REST_PATHS.authzGrants, async (request, reply) => {
    const { granter = '', grantee = '', msg_type_url: msgTypeUrl = '' } = request.query;
    for (const address of [granter, grantee]) {
      const bad = badAddress(address);
      if (bad) return reply.code(500).send({ code: 2, message: bad, details: [] });
    }
    const pair = (chain.state.authzGrants ?? []).filter((g) => g.granter === granter && g.grantee === grantee);
    if (msgTypeUrl !== '') {
      const grant = pair.find((g) => g.msgTypeUrl === msgTypeUrl);
      if (!grant) return reply.code(500).send({ code: 2, message: authzNotFoundText(msgTypeUrl), details: [] });
      return { grants: [grantJson(grant)], pagination: null };
    }
    // Without a limit the SDK's pagination counts the total.
    return { grants: pair.map(grantJson), pagination: { next_key: null, total: String(pair.length) } };
  });

  app.get<{ Params: { id: string } }>(REST_PATHS.escrow, async (request, reply) => {
    if (!/^\d+$/.test(request.params.id)) return reply.code(400).send({ code: 3, message: 'escrow id must be an unsigned integer', details: [] });
    const e = chain.state.escrows[String(BigInt(request.params.id))];
    // An unknown id is an answer, not an error (k/query_devshard_escrow.go).
    if (!e) return { escrow: null, found: false };
    return { escrow: escrowJson(e, chain.state.params), found: true };
  });

  // QueryGetParticipantResponse (participant.proto); an unknown address is gRPC NotFound.
  app.get<{ Params: { address: string } }>(REST_PATHS.participant, async (request, reply) => {
    const host = chain.participants().find((h) => h.address === request.params.address);
    if (!host) return reply.code(404).send(grpcNotFound('key not found'));
    return { participant: participantJson(host) };
  });

  // QueryEpochInfoResponse (query.proto): of Params the devnet serves devshard_escrow_params.
  app.get(REST_PATHS.epochInfo, async () => {
    const p = chain.epoch();
    return {
      block_height: String(p.height),
      params: moduleParamsJson(chain.state.params),
      latest_epoch: { index: String(p.epochIndex), poc_start_block_height: String(p.epochIndex * chain.config.epochBlocks) },
      is_confirmation_poc_active: false,
      active_confirmation_poc_event: null,
    };
  });

  // QueryGetCurrentEpochResponse (deprecated on the chain; still served).
  app.get(REST_PATHS.currentEpoch, async () => ({ epoch: String(chain.epoch().epochIndex) }));

  // The public API (decentralized-api internal/server/public/get_epoch.go): JSON numbers; only `latest`.
  app.get(REST_PATHS.publicEpochLatest, async () => {
    const p = chain.epoch();
    return {
      block_height: p.height,
      latest_epoch: { index: p.epochIndex, poc_start_block_height: p.epochIndex * chain.config.epochBlocks },
      phase: p.pocActive ? 'PoCGenerate' : 'Inference',
      epoch_stages: epochStages(chain, p.epochIndex),
      next_epoch_stages: epochStages(chain, p.epochIndex + 1),
      is_confirmation_poc_active: false,
    };
  });

  // The public API's active participants (the fields devshardctl's phase gate reads).
  app.get(REST_PATHS.publicParticipants, async () => ({
    active_participants: {
      participants: chain.participants().map((h) => ({ index: h.address, inference_url: h.url, weight: 1, models: chain.state.models, ml_nodes: [] })),
    },
  }));

  app.get<{ Params: { address: string } }>(REST_PATHS.balances, async (request) => {
    const balance = chain.balanceOf(request.params.address);
    const balances = balance > 0n ? [{ denom: DENOM, amount: balance.toString() }] : [];
    return { balances, pagination: { next_key: null, total: String(balances.length) } };
  });

  app.get<{ Params: { address: string } }>(REST_PATHS.account, async (request, reply) => {
    const acc = chain.state.accounts[request.params.address];
    if (!acc) return reply.code(404).send(grpcNotFound(`account ${request.params.address} not found`));
    return {
      account: {
        '@type': '/cosmos.auth.v1beta1.BaseAccount',
        address: acc.address,
        pub_key: acc.pubKey ? { '@type': '/cosmos.crypto.secp256k1.PubKey', key: acc.pubKey } : null,
        account_number: String(acc.accountNumber),
        sequence: String(acc.sequence),
      },
    };
  });

  app.get(REST_PATHS.latestBlock, async () => ({
    block_id: { hash: chain.blockHash(chain.height) },
    block: { header: { chain_id: chain.chainId, height: String(chain.height), time: chain.state.latestBlockTime } },
  }));

  app.get<{ Params: { hash: string } }>(REST_PATHS.tx, async (request, reply) => {
    const rec = chain.findTx(request.params.hash);
    if (!rec) return reply.code(404).send(grpcNotFound(`tx not found: ${request.params.hash}`));
    const r = rec.result;
    return {
      tx_response: {
        height: String(rec.height),
        txhash: rec.hash,
        codespace: r.codespace,
        code: r.code,
        data: r.data,
        raw_log: r.log,
        logs: [],
        info: '',
        gas_wanted: r.gasWanted,
        gas_used: r.gasUsed,
        events: r.events.map((e) => ({ type: e.type, attributes: e.attributes.map((a) => ({ ...a, index: true })) })),
        tx: null,
        timestamp: chain.state.blocks[rec.height]?.time ?? '',
      },
      tx: null,
    };
  });

  app.get(REST_PATHS.models, async () => ({
    models: chain.state.models.map((id) => ({
      id,
      proposed_by: 'genesis',
      units_of_compute_per_token: '1',
      hf_repo: id,
      hf_commit: '',
      model_args: [],
      v_ram: '0',
      throughput_per_nonce: '0',
      validation_threshold: { value: '85', exponent: -2 },
    })),
  }));
}
