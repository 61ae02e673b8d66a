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
import { addressOfPrivateKey, deterministicKeyHex } from '../../src/chain/keys.js';
import { LEGACY_WARM_KEY_GRANT_MARKER, WARM_KEY_GRANT_MARKER } from '../../src/chain/warm-keys.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import { SUPPORTED_VERSION_NAMES } from '../../src/protocol/versions.js';
import { CREATOR_KEYS, MIN_AMOUNT, MODEL, startDevnetAndClient, stopDevnetAndClient } from './helpers.js';

const fixtureFile = (name: string) => JSON.parse(readFileSync(new URL(`../fixtures/chain/${name}.json`, import.meta.url), 'utf8')) as { response: unknown; status?: number };
const fixture = (name: string): unknown => fixtureFile(name).response;
/** A warm key granted by the first creator at genesis (the grants route's shape). */
const COLD = addressOfPrivateKey(CREATOR_KEYS[0]!);
const WARM = addressOfPrivateKey(deterministicKeyHex('test/route-shapes/warm'));
const grantsPath = (granter: string, grantee: string, type: string) =>
  `/cosmos/authz/v1beta1/grants?granter=${granter}&grantee=${grantee}&msg_type_url=${encodeURIComponent(type)}`;
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
    ({ devnet, client } = await startDevnetAndClient({ warmKeyGrants: [{ granter: COLD, grantee: WARM, msgTypeUrl: WARM_KEY_GRANT_MARKER, expiration: '2099-01-01T00:00:00Z' }] }));
    escrowId = (await client.createEscrow(CREATOR_KEYS[0]!, MIN_AMOUNT, MODEL)).escrowId;
  });
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  const get = async (path: string) => (await fetch(`${devnet.url}${path}`)).json();
  const routes: [string, () => string][] = [
    ['params', () => '/productscience/inference/inference/params'],
    ['devshard_approved_versions', () => '/productscience/inference/inference/devshard_approved_versions'],
    ['authz_grants', () => grantsPath(COLD, WARM, WARM_KEY_GRANT_MARKER)],
    ['authz_grants_not_found', () => grantsPath(COLD, WARM, LEGACY_WARM_KEY_GRANT_MARKER)],
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
    // 15–18 frozen from the params at create (uint32 as numbers, int64 as strings; devshard_escrow.proto, Z5).
    expect(escrow).toMatchObject({ validation_rate: 1000, vote_threshold_factor: 50, refusal_timeout: '60', execution_timeout: '1200' });
  });

  it('chain v0.2.16: params carry no approved versions; the store lists every version the gateway speaks, with binary and sha256', async () => {
    const p = (await get('/productscience/inference/inference/params')) as { params: { devshard_escrow_params: { approved_versions: unknown[]; validation_rate: number }; validation_params: { logprobs_mode: string } } };
    expect(p.params.devshard_escrow_params.approved_versions).toEqual([]);
    // t/params.go at 59b1ee7e: DefaultDevshardValidationRate 1000 (:108), DefaultLogprobsMode "processed_logprobs" (:91-93).
    expect(p.params.devshard_escrow_params.validation_rate).toBe(1000);
    expect(p.params.validation_params.logprobs_mode).toBe('processed_logprobs');
    const v = (await get('/productscience/inference/inference/devshard_approved_versions')) as { versions: { name: string; binary: string; sha256: string }[] };
    expect(v.versions.map((x) => x.name)).toEqual([...SUPPORTED_VERSION_NAMES].sort());
    for (const x of v.versions) {
      expect(x.binary).toMatch(/^https:\/\//);
      expect(x.sha256).toMatch(/^[0-9a-f]{64}$/);
    }
  });

  it('authz grants: a missing grant is the SDK\'s error answer (HTTP 500, gRPC Unknown), not an empty list', async () => {
    const res = await fetch(`${devnet.url}${grantsPath(COLD, WARM, LEGACY_WARM_KEY_GRANT_MARKER)}`);
    expect(res.status).toBe(fixtureFile('authz_grants_not_found').status);
    expect(await res.json()).toEqual({ ...(fixture('authz_grants_not_found') as object), message: `authorization not found for ${LEGACY_WARM_KEY_GRANT_MARKER} type: authorization not found` });
    const found = (await get(grantsPath(COLD, WARM, WARM_KEY_GRANT_MARKER))) as { grants: unknown[] };
    expect(found.grants).toEqual([{ authorization: { '@type': '/cosmos.authz.v1beta1.GenericAuthorization', msg: WARM_KEY_GRANT_MARKER }, expiration: '2099-01-01T00:00:00Z' }]);
  });
});

/** A stand-in node serving the fixtures; `overrides` answers some paths otherwise (status, body). */
async function fixtureNode(byPath: Record<string, string>, overrides: Record<string, [number, unknown]> = {}) {
  const requested: string[] = [];
  // Warm-key grants the stand-in holds: cold → warm under the v0.2.15 marker, cold → old under the legacy one.
  const grants = [
    { granter: 'gonka1cold', grantee: 'gonka1warm', type: WARM_KEY_GRANT_MARKER },
    { granter: 'gonka1cold', grantee: 'gonka1old', type: LEGACY_WARM_KEY_GRANT_MARKER },
  ];
  const server = createServer((req, res) => {
    const url = req.url ?? '';
    requested.push(url);
    const json = (status: number, body: unknown) => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (overrides[url]) return json(...overrides[url]!);
    if (url.startsWith('/cosmos/authz/v1beta1/grants?')) {
      const q = new URL(url, 'http://x').searchParams;
      const type = q.get('msg_type_url') ?? '';
      const found = grants.some((g) => g.granter === q.get('granter') && g.grantee === q.get('grantee') && g.type === type);
      if (!found) return json(fixtureFile('authz_grants_not_found').status!, { ...(fixture('authz_grants_not_found') as object), message: `authorization not found for ${type} type: authorization not found` });
      const body = fixture('authz_grants') as { grants: { authorization: { msg: string } }[] };
      return json(200, { ...body, grants: body.grants.map((g) => ({ ...g, authorization: { ...g.authorization, msg: type } })) });
    }
    const name = byPath[url] ?? (url.startsWith('/productscience/inference/inference/participant/') ? 'participant' : url.startsWith('/cosmos/bank/v1beta1/balances/') ? 'bank_balances' : undefined);
    if (!name) return json(404, { code: 5, message: 'Not Found', details: [] });
    json(200, fixture(name));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { server, requested, base, client: new CosmosChainClient({ restUrl: base, nodeBaseUrl: base, publicApiUrl: base }) };
}

const PARAMS_FIELDS = {
  minAmount: 5_000_000_000n,
  maxAmount: 10_000_000_000n,
  maxEscrowsPerEpoch: 100,
  groupSize: 16,
  maxNonce: 20_000,
  allowedCreatorAddresses: ['gonka1qyqszqgpqyqszqgpqyqszqgpqyqszqgpjnp7du'],
  tokenPrice: 1n,
  createDevshardFee: 10_000n,
  feePerNonce: 1_000n,
};

describe('our client parses the real shapes', () => {
  let server: Server;
  let client: CosmosChainClient;
  let requested: string[];
  const byPath: Record<string, string> = {
    '/productscience/inference/inference/params': 'params',
    '/productscience/inference/inference/devshard_approved_versions': 'devshard_approved_versions',
    '/productscience/inference/inference/devshard_escrow/7': 'devshard_escrow',
    '/productscience/inference/inference/devshard_escrow/8': 'devshard_escrow_unknown',
    '/productscience/inference/inference/devshard_escrow/9': 'devshard_escrow_v0213',
    '/v1/epochs/latest': 'public_epochs_latest',
    '/v1/governance/models': 'governance_models',
  };
  beforeAll(async () => {
    ({ server, client, requested } = await fixtureNode(byPath));
  });
  afterAll(() => new Promise((r) => server.close(r)));

  it('params (chain v0.2.16): every field the gateway uses, 64-bit from strings; the approved versions from their own store', async () => {
    expect(await client.params()).toEqual({
      ...PARAMS_FIELDS,
      // The store's names (the params' list is empty on v0.2.16).
      approvedVersions: ['v4', 'v4.1'],
      bind: { refusalTimeout: 60n, executionTimeout: 1200n, validationRate: 1000, voteThresholdFactor: 50 },
    });
  });

  it('escrow (chain v0.2.16): the chain params frozen at create (DevshardEscrow 15–18), int64 from strings', async () => {
    expect((await client.escrow('7'))!.frozen).toEqual({ validationRate: 1000, voteThresholdFactor: 50, refusalTimeout: 60n, executionTimeout: 1200n });
    // An escrow of a chain that does not know the fields: nothing frozen (the session binds the live params).
    expect((await client.escrow('9'))!.frozen).toBeUndefined();
  });

  it('warm keys: the v0.2.15 marker first, then the legacy one; a missing grant (HTTP 500 "authorization not found") is false', async () => {
    requested.length = 0;
    expect(await client.warmKeyGranted('gonka1cold', 'gonka1warm')).toBe(true);
    expect(requested).toEqual([grantsPath('gonka1cold', 'gonka1warm', WARM_KEY_GRANT_MARKER)]);
    requested.length = 0;
    expect(await client.warmKeyGranted('gonka1cold', 'gonka1old')).toBe(true);
    expect(requested).toEqual([grantsPath('gonka1cold', 'gonka1old', WARM_KEY_GRANT_MARKER), grantsPath('gonka1cold', 'gonka1old', LEGACY_WARM_KEY_GRANT_MARKER)]);
    expect(await client.warmKeyGranted('gonka1cold', 'gonka1stranger')).toBe(false);
    expect(await client.warmKeyGranted('gonka1warm', 'gonka1cold')).toBe(false);
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

describe('a chain before v0.2.16: the approved versions from params', () => {
  const APPROVED = '/productscience/inference/inference/devshard_approved_versions';
  const byPath = { '/productscience/inference/inference/params': 'params_v0213' };
  const older = { ...PARAMS_FIELDS, approvedVersions: ['v1'], bind: { refusalTimeout: 60n, executionTimeout: 1200n, validationRate: 5000, voteThresholdFactor: 50 } };

  it.each([
    ['404 (no such route)', 404, { code: 5, message: 'Not Found', details: [] }],
    ['501 (gRPC Unimplemented)', 501, { code: 12, message: 'unknown method DevshardApprovedVersions', details: [] }],
  ])('the store route answers %s', async (_what, status, body) => {
    const node = await fixtureNode(byPath, { [APPROVED]: [status, body] });
    try {
      expect(await node.client.params()).toEqual(older);
    } finally {
      await new Promise((r) => node.server.close(r));
    }
  });

  it('a failing store route is an error, never a silent fallback to the params\' list', async () => {
    const node = await fixtureNode(byPath, { [APPROVED]: [503, { code: 14, message: 'unavailable', details: [] }] });
    try {
      await expect(node.client.params()).rejects.toMatchObject({ kind: 'unreachable' });
    } finally {
      await new Promise((r) => node.server.close(r));
    }
  });
});
