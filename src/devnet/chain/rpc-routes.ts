/**
 * CometBFT JSON-RPC (POST /) as CosmJS 0.39's Comet38Client reads it: status, abci_query (auth
 * Account, bank Balance), broadcast_tx_sync, tx_search, tx, block. Shapes, string-vs-number rules
 * and errors follow what that client's parser accepts (@cosmjs/tendermint-rpc,
 * build/comet38/adaptor/responses.js; docs/chain.md lists the routes). GET /status answers the same as the
 * JSON-RPC `status` (the operator's `{chain_rpc}status`).
 */
import { fromBase64, fromHex, toBase64, toHex, toUtf8 } from '@cosmjs/encoding';
import { sha256 } from '@cosmjs/crypto';
import { BaseAccount } from 'cosmjs-types/cosmos/auth/v1beta1/auth';
import { QueryAccountRequest, QueryAccountResponse } from 'cosmjs-types/cosmos/auth/v1beta1/query';
import { QueryBalanceRequest, QueryBalanceResponse } from 'cosmjs-types/cosmos/bank/v1beta1/query';
import { PubKey } from 'cosmjs-types/cosmos/crypto/secp256k1/keys';
import type { FastifyInstance } from 'fastify';
import { SDK_CODES } from '../../chain/devshard-errors.js';
import { DENOM } from '../../chain/keys.js';
import type { DevnetChain } from './chain.js';
import type { TxRecord } from './state.js';

interface RpcRequest {
  jsonrpc?: string;
  id?: number | string;
  method?: string;
  params?: Record<string, unknown>;
}

class RpcError extends Error {
  constructor(readonly code: number, message: string, readonly data?: string) {
    super(message);
  }
}

const internal = (data: string) => new RpcError(-32603, 'Internal error', data);

export function registerRpcRoutes(app: FastifyInstance, chain: DevnetChain): void {
  // Connections left hanging by the 'hang' fault are dropped when the devnet closes.
  const hanging = new Set<import('node:net').Socket>();
  app.addHook('preClose', async () => {
    for (const s of hanging) s.destroy();
  });
  app.post('/', async (request, reply) => {
    if (chain.faults.rpcDown) return reply.code(503).send('node unavailable');
    const body = request.body as RpcRequest | undefined;
    const id = body?.id ?? -1;
    try {
      if (!body || typeof body.method !== 'string') throw new RpcError(-32600, 'Invalid Request');
      const lose = chain.faults.dropBroadcastResponse;
      if (lose && body.method.startsWith('broadcast_tx')) {
        try {
          handle(chain, body.method, body.params ?? {}); // the tx goes into the mempool all the same
        } catch {
          // whatever the node said is lost too
        }
        if (lose === 'error') return reply.code(503).send('upstream connect error or disconnect/reset before headers');
        if (lose === 'reset') {
          request.raw.socket.destroy();
          return reply.hijack();
        }
        hanging.add(request.raw.socket);
        request.raw.socket.once('close', () => hanging.delete(request.raw.socket));
        return reply.hijack(); // 'hang': no answer at all (the socket stays open until the client gives up)
      }
      const result = handle(chain, body.method, body.params ?? {});
      return { jsonrpc: '2.0', id, result };
    } catch (e) {
      if (e instanceof RpcError) {
        return { jsonrpc: '2.0', id, error: { code: e.code, message: e.message, ...(e.data !== undefined ? { data: e.data } : {}) } };
      }
      throw e;
    }
  });
  app.get('/status', async (_request, reply) => {
    if (chain.faults.rpcDown) return reply.code(503).send('node unavailable');
    return { jsonrpc: '2.0', id: -1, result: status(chain) };
  });
}

function handle(chain: DevnetChain, method: string, params: Record<string, unknown>): unknown {
  switch (method) {
    case 'status':
      return status(chain);
    case 'abci_query':
      return abciQuery(chain, String(params.path ?? ''), String(params.data ?? ''));
    case 'broadcast_tx_sync':
      return broadcastTxSync(chain, String(params.tx ?? ''));
    case 'tx_search':
      return txSearch(chain, String(params.query ?? ''));
    case 'tx': {
      const hash = hashParam(String(params.hash ?? ''));
      const rec = chain.findTx(hash);
      if (!rec) throw internal(`tx (${hash}) not found`);
      return txEntry(rec);
    }
    case 'block':
      return block(chain, params.height === undefined ? chain.height : Number(params.height));
    default:
      throw new RpcError(-32601, 'Method not found');
  }
}

const nodeId = (chain: DevnetChain) => toHex(sha256(toUtf8(`${chain.chainId}/node`))).slice(0, 40);

function status(chain: DevnetChain) {
  const validator = sha256(toUtf8(`${chain.chainId}/validator`));
  return {
    node_info: {
      protocol_version: { p2p: '8', block: '11', app: '0' },
      id: nodeId(chain),
      listen_addr: 'tcp://127.0.0.1:26656',
      network: chain.chainId,
      version: '0.38.17',
      channels: '40202122233038606100',
      moniker: 'shardgate-devnet',
      other: { tx_index: 'on', rpc_address: chain.baseUrl.replace(/^http/, 'tcp') },
    },
    sync_info: {
      latest_block_hash: chain.blockHash(chain.height),
      latest_app_hash: chain.appHash(),
      latest_block_height: String(chain.height),
      latest_block_time: chain.state.latestBlockTime,
      earliest_block_hash: chain.blockHash(1),
      earliest_app_hash: chain.appHash(),
      earliest_block_height: '1',
      earliest_block_time: chain.state.genesisTime,
      catching_up: false,
    },
    validator_info: {
      address: toHex(validator.slice(0, 20)).toUpperCase(),
      pub_key: { type: 'tendermint/PubKeyEd25519', value: toBase64(validator) },
      voting_power: '10',
    },
  };
}

function abciQuery(chain: DevnetChain, path: string, dataHex: string) {
  const height = String(chain.height);
  const ok = (value: Uint8Array) => ({
    response: { code: 0, log: '', info: '', index: '0', key: null, value: toBase64(value), proofOps: null, height, codespace: '' },
  });
  const err = (code: number, log: string) => ({
    response: { code, log, info: '', index: '0', key: null, value: null, proofOps: null, height, codespace: 'sdk' },
  });
  const data = fromHex(dataHex);
  if (path === '/cosmos.auth.v1beta1.Query/Account') {
    const { address } = QueryAccountRequest.decode(data);
    const acc = chain.state.accounts[address];
    if (!acc) return err(SDK_CODES.notFound, `rpc error: code = NotFound desc = account ${address} not found: key not found`);
    const base = BaseAccount.fromPartial({
      address,
      accountNumber: BigInt(acc.accountNumber),
      sequence: BigInt(acc.sequence),
      pubKey: acc.pubKey
        ? { typeUrl: '/cosmos.crypto.secp256k1.PubKey', value: PubKey.encode({ key: fromBase64(acc.pubKey) }).finish() }
        : undefined,
    });
    const any = { typeUrl: '/cosmos.auth.v1beta1.BaseAccount', value: BaseAccount.encode(base).finish() };
    return ok(QueryAccountResponse.encode({ account: any }).finish());
  }
  if (path === '/cosmos.bank.v1beta1.Query/Balance') {
    const { address, denom } = QueryBalanceRequest.decode(data);
    const amount = denom === DENOM ? chain.balanceOf(address).toString() : '0';
    return ok(QueryBalanceResponse.encode({ balance: { denom, amount } }).finish());
  }
  return err(SDK_CODES.unknownRequest, `unknown query path ${path}: unknown request`);
}

function broadcastTxSync(chain: DevnetChain, txB64: string) {
  let bytes: Uint8Array;
  try {
    bytes = fromBase64(txB64);
  } catch {
    throw new RpcError(-32602, 'Invalid params', 'tx must be base64');
  }
  const answer = chain.broadcast(bytes);
  // CometBFT's mempool answers a duplicate with this RPC error (ErrTxInCache), not a CheckTx code.
  if (answer.inCache) throw internal('tx already exists in cache');
  const f = answer.failure;
  return { code: f?.code ?? 0, data: '', log: f?.log ?? '', codespace: f?.codespace ?? '', hash: answer.hash };
}

function hashParam(value: string): string {
  if (/^[0-9a-fA-F]{64}$/.test(value)) return value.toUpperCase();
  try {
    return toHex(fromBase64(value)).toUpperCase();
  } catch {
    return value.toUpperCase();
  }
}

function txEntry(rec: TxRecord) {
  const r = rec.result;
  return {
    hash: rec.hash,
    height: String(rec.height),
    index: rec.index,
    tx: rec.tx,
    tx_result: {
      code: r.code,
      data: r.data,
      log: r.log,
      info: '',
      gas_wanted: r.gasWanted,
      gas_used: r.gasUsed,
      events: r.events.map((e) => ({ type: e.type, attributes: e.attributes.map((a) => ({ ...a, index: true })) })),
      codespace: r.codespace,
    },
  };
}

/** Supports the queries clients send: tx.hash='X' and tx.height=N. */
function txSearch(chain: DevnetChain, query: string) {
  let txs: TxRecord[] = [];
  const byHash = /tx\.hash\s*=\s*'([0-9a-fA-F]{64})'/.exec(query);
  const byHeight = /tx\.height\s*=\s*(\d+)/.exec(query);
  if (byHash) {
    const rec = chain.findTx(byHash[1]!);
    txs = rec ? [rec] : [];
  } else if (byHeight) {
    const hashes = chain.state.blocks[byHeight[1]!]?.txs ?? [];
    txs = hashes.map((h) => chain.findTx(h)!).filter(Boolean);
  }
  return { txs: txs.map(txEntry), total_count: String(txs.length) };
}

function block(chain: DevnetChain, height: number) {
  if (!Number.isInteger(height) || height < 1 || height > chain.height) {
    throw internal(`height ${height} must be less than or equal to the current blockchain height ${chain.height}`);
  }
  const rec = chain.state.blocks[height];
  const time = rec?.time ?? (height === chain.height ? chain.state.latestBlockTime : chain.state.genesisTime);
  const txs = (rec?.txs ?? []).map((h) => chain.findTx(h)!.tx);
  const proposer = toHex(sha256(toUtf8(`${chain.chainId}/validator`)).slice(0, 20)).toUpperCase();
  const hash = chain.blockHash(height);
  return {
    block_id: { hash, parts: { total: 1, hash } },
    block: {
      header: {
        version: { block: '11', app: '0' },
        chain_id: chain.chainId,
        height: String(height),
        time,
        last_block_id: height > 1 ? { hash: chain.blockHash(height - 1), parts: { total: 1, hash: chain.blockHash(height - 1) } } : { hash: '', parts: { total: 0, hash: '' } },
        last_commit_hash: '',
        data_hash: '',
        validators_hash: '',
        next_validators_hash: '',
        consensus_hash: '',
        app_hash: chain.appHash(),
        last_results_hash: '',
        evidence_hash: '',
        proposer_address: proposer,
      },
      data: { txs: txs.length > 0 ? txs : null },
      evidence: { evidence: [] },
      last_commit: { height: String(Math.max(height - 1, 0)), round: 0, block_id: { hash: '', parts: { total: 0, hash: '' } }, signatures: [] },
    },
  };
}
