/**
 * One fixture per chain / public-API route under test/fixtures/chain/, written from gonka's proto
 * and query definitions (each fixture names its source). Two checks per route:
 * - our client parses the fixture (served by a stand-in node);
 * - the devnet serves exactly that shape: every field it serves exists in the fixture with the same
 *   JSON type (a field the real chain does not serve, or a number where the chain sends a string,
 *   fails).
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import { CREATOR_KEYS, MIN_AMOUNT, MODEL, startDevnetAndClient, stopDevnetAndClient } from './helpers.js';

const fixture = (name: string): unknown => (JSON.parse(readFileSync(new URL(`../fixtures/chain/${name}.json`, import.meta.url), 'utf8')) as { response: unknown }).response;
const kind = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

/** Every path the devnet serves must be in the fixture with the same JSON type. */
function extraOrMistyped(served: unknown, real: unknown, path = '$'): string[] {
  if (kind(real) === 'null' && (kind(served) === 'null' || kind(served) === 'object')) {
    return kind(served) === 'null' ? [] : [`${path}: the fixture has null here, the devnet an object`];
  }
  if (kind(served) !== kind(real)) return [`${path}: devnet ${kind(served)}, chain ${kind(real)}`];
  if (Array.isArray(served) && Array.isArray(real)) {
    if (served.length === 0 || real.length === 0) return [];
    return served.flatMap((x, i) => extraOrMistyped(x, real[0], `${path}[${i}]`));
  }
  if (kind(served) === 'object') {
    const r = real as Record<string, unknown>;
    return Object.entries(served as Record<string, unknown>).flatMap(([k, v]) =>
      k in r ? extraOrMistyped(v, r[k], `${path}.${k}`) : [`${path}.${k}: served by the devnet, not by the chain`],
    );
  }
  return [];
}

describe('route shapes: the devnet serves what the real chain serves', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  let escrowId = '';
  beforeAll(async () => {
    ({ devnet, client } = await startDevnetAndClient());
    escrowId = (await client.createEscrow(CREATOR_KEYS[0]!, MIN_AMOUNT, MODEL)).escrowId;
  });
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  const get = async (path: string) => (await fetch(`${devnet.url}${path}`)).json();
  const routes: [string, () => string][] = [
    ['params', () => '/productscience/inference/inference/params'],
    ['devshard_escrow', () => `/productscience/inference/inference/devshard_escrow/${escrowId}`],
    ['devshard_escrow_unknown', () => '/productscience/inference/inference/devshard_escrow/999999'],
    ['participant', () => `/productscience/inference/inference/participant/${devnet.hosts[0]!.address}`],
    ['epoch_info', () => '/productscience/inference/inference/epoch_info'],
    ['get_current_epoch', () => '/productscience/inference/inference/get_current_epoch'],
    ['public_epochs_latest', () => '/v1/epochs/latest'],
    ['public_epochs_current_participants', () => '/v1/epochs/current/participants'],
    ['governance_models', () => '/v1/governance/models'],
    ['bank_balances', () => `/cosmos/bank/v1beta1/balances/${devnet.creators[0]!.address}`],
    ['auth_account', () => `/cosmos/auth/v1beta1/accounts/${devnet.creators[0]!.address}`],
  ];
  it.each(routes)('%s', async (name, path) => {
    expect(extraOrMistyped(await get(path()), fixture(name))).toEqual([]);
  });

  it('the invented epoch route is gone', async () => {
    expect((await fetch(`${devnet.url}/productscience/inference/inference/epoch`)).status).toBe(404);
  });

  it('an escrow lists its slots as plain addresses, with the frozen price, fees and seal settings', async () => {
    const { escrow } = (await get(`/productscience/inference/inference/devshard_escrow/${escrowId}`)) as { escrow: Record<string, unknown> };
    expect(escrow.slots).toEqual(devnet.hosts.map((h) => h.address));
    expect(escrow).toMatchObject({ token_price: '1000', create_devshard_fee: '10000', fee_per_nonce: '1000', inference_seal_grace_nonces: 30, inference_seal_grace_seconds: 3600, auto_seal_every_n_nonces: 150 });
    expect(escrow.app_hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('approved_versions lists v1 and v2 as objects', async () => {
    const p = (await get('/productscience/inference/inference/params')) as { params: { devshard_escrow_params: { approved_versions: { name: string }[] } } };
    expect(p.params.devshard_escrow_params.approved_versions.map((v) => v.name)).toEqual(['v1', 'v2']);
  });
});

describe('our client parses the real shapes', () => {
  let server: Server;
  let client: CosmosChainClient;
  const byPath: Record<string, string> = {
    '/productscience/inference/inference/params': 'params',
    '/productscience/inference/inference/devshard_escrow/7': 'devshard_escrow',
    '/productscience/inference/inference/devshard_escrow/8': 'devshard_escrow_unknown',
    '/v1/epochs/latest': 'public_epochs_latest',
    '/v1/governance/models': 'governance_models',
  };
  beforeAll(async () => {
    server = createServer((req, res) => {
      const url = req.url ?? '';
      const name = byPath[url] ?? (url.startsWith('/productscience/inference/inference/participant/') ? 'participant' : url.startsWith('/cosmos/bank/v1beta1/balances/') ? 'bank_balances' : undefined);
      if (!name) return void res.writeHead(404).end('{"code":5,"message":"not found","details":[]}');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(fixture(name)));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    client = new CosmosChainClient({ restUrl: base, nodeBaseUrl: base, publicApiUrl: base });
  });
  afterAll(() => new Promise((r) => server.close(r)));

  it('params: every field the gateway uses, 64-bit from strings', async () => {
    expect(await client.params()).toEqual({
      minAmount: 5_000_000_000n,
      maxAmount: 10_000_000_000n,
      maxEscrowsPerEpoch: 100,
      groupSize: 16,
      maxNonce: 20_000,
      allowedCreatorAddresses: ['gonka1qyqszqgpqyqszqgpqyqszqgpqyqszqgpjnp7du'],
      tokenPrice: 1n,
      approvedVersions: ['v1'],
      createDevshardFee: 10_000n,
      feePerNonce: 1_000n,
      bind: { refusalTimeout: 60n, executionTimeout: 1200n, validationRate: 5000, voteThresholdFactor: 50 },
    });
  });

  it('escrow: slots as addresses (one address holding two), each resolved to its participant inference_url; unknown id is null', async () => {
    const e = await client.escrow('7');
    expect(e).toMatchObject({ id: '7', amount: 5_000_000_000n, epochIndex: 12, settled: false });
    expect(e!.slots.map((s) => [s.slotId, s.url])).toEqual([[0, 'https://host.example:8443'], [1, 'https://host.example:8443'], [2, 'https://host.example:8443']]);
    expect(e!.slots[0]!.host).toBe(e!.slots[1]!.host);
    // What a host binds its session to: the values frozen on the escrow (DevshardEscrow 8, 10–14).
    expect(e!.session).toEqual({ tokenPrice: 1n, createDevshardFee: 10_000n, feePerNonce: 1_000n, inferenceSealGraceNonces: 160, inferenceSealGraceSeconds: 3600, autoSealEveryNNonces: 150 });
    expect(await client.escrow('8')).toBeNull();
  });

  it('epoch from the public API: index, height, PoC start, the set_new_validators boundary, the epoch length', async () => {
    expect(await client.epoch()).toEqual({
      height: 24810,
      epochIndex: 12,
      pocStartHeight: 24000,
      phase: 'Inference',
      nextBoundaryHeight: 26210,
      blocksUntilBoundary: 26210 - 24810,
      pocActive: false,
      pocEndHeight: 26200,
      // epoch_stages next_poc_start − poc_start: what the prune warning counts whole epochs with.
      epochLength: 2000,
    });
  });

  it('models and balances', async () => {
    expect(await client.models()).toEqual(['Qwen/Qwen3-235B-A22B-Instruct-2507-FP8']);
    expect(await client.balance('gonka1x')).toBe(12_000_000_000n);
  });
});
