/**
 * The chain REST API (cosmos-sdk gRPC-gateway style: snake_case, integers as strings) and the
 * node's governance model list. Paths are documented in docs/chain.md.
 */
import type { FastifyInstance } from 'fastify';
import { fromBase64 } from '@cosmjs/encoding';
import { SDK_CODES } from '../../chain/devshard-errors.js';
import { DENOM } from '../../chain/keys.js';
import type { DevnetChain } from './chain.js';
import type { EscrowState } from './state.js';

export const REST_PATHS = {
  params: '/productscience/inference/inference/params',
  escrow: '/productscience/inference/inference/devshard_escrow/:id',
  epoch: '/productscience/inference/inference/epoch',
  balances: '/cosmos/bank/v1beta1/balances/:address',
  account: '/cosmos/auth/v1beta1/accounts/:address',
  latestBlock: '/cosmos/base/tendermint/v1beta1/blocks/latest',
  tx: '/cosmos/tx/v1beta1/txs/:hash',
  broadcast: '/cosmos/tx/v1beta1/txs',
  nodeInfo: '/cosmos/base/tendermint/v1beta1/node_info',
  models: '/v1/governance/models',
} as const;

function escrowJson(e: EscrowState) {
  return {
    id: String(e.id),
    creator: e.creator,
    amount: e.amount.toString(),
    settled: e.settled,
    epoch_index: String(e.epochIndex),
    model_id: e.modelId,
    slots: e.slots.map((s) => ({ slot_id: s.slotId, host: s.host, url: s.url })),
  };
}

const grpcNotFound = (message: string) => ({ code: 5, message, details: [] });

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
    const p = chain.state.params;
    return {
      params: {
        devshard_escrow_params: {
          min_amount: p.minAmount.toString(),
          max_escrows_per_epoch: String(p.maxEscrowsPerEpoch),
          max_nonce: String(p.maxNonce),
          allowed_creator_addresses: p.allowedCreatorAddresses,
          token_price: p.tokenPrice.toString(),
        },
      },
    };
  });

  app.get<{ Params: { id: string } }>(REST_PATHS.escrow, async (request, reply) => {
    if (!/^\d+$/.test(request.params.id)) return reply.code(400).send({ code: 3, message: 'escrow id must be an unsigned integer', details: [] });
    const e = chain.state.escrows[String(Number(request.params.id))];
    if (!e) {
      return { escrow: { id: '0', creator: '', amount: '0', settled: false, epoch_index: '0', model_id: '', slots: [] }, found: false };
    }
    return { escrow: escrowJson(e), found: true };
  });

  app.get(REST_PATHS.epoch, async () => {
    const p = chain.epoch();
    return {
      height: String(p.height),
      epoch_index: String(p.epochIndex),
      epoch_start_height: String(p.epochStartHeight),
      epoch_length: String(chain.config.epochBlocks),
      next_set_new_validators_height: String(p.nextBoundaryHeight),
      blocks_until_set_new_validators: String(p.blocksUntilBoundary),
      poc_active: p.pocActive,
      poc_start_height: String(p.pocStartHeight),
      poc_end_height: String(p.pocEndHeight),
      poc_length: String(chain.config.pocBlocks),
    };
  });

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
