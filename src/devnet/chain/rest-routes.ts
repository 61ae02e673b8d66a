/**
 * The chain REST API (cosmos-sdk gRPC-gateway style: snake_case, integers as strings) and the
 * node's governance model list. Paths are documented in docs/chain.md.
 */
import type { FastifyInstance } from 'fastify';
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

export function registerRestRoutes(app: FastifyInstance, chain: DevnetChain): void {
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
        gas_wanted: r.gasWanted,
        gas_used: r.gasUsed,
        events: r.events.map((e) => ({ type: e.type, attributes: e.attributes.map((a) => ({ ...a, index: true })) })),
        timestamp: chain.state.blocks[rec.height]?.time ?? '',
      },
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
