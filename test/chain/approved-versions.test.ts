/**
 * Chain v0.2.16's approved devshard versions, over HTTP to the devnet: their own store, served at
 * `GET /productscience/inference/inference/devshard_approved_versions` (zpoken/gonka@ef1a5efd
 * query.proto, `rpc DevshardApprovedVersions`), read by our client into `EscrowParams.approvedVersions`;
 * the keeper refuses a settlement whose version is not listed with `settlement version %q is not
 * listed in approved devshard versions` and accepts any version when the list is empty
 * (zpoken/gonka@ef1a5efd k/devshard_settlement.go `validateDevshardSettlementVersionApproved`).
 * The gateway's own pre-check (`versionRefusal`) says the same before any fee is spent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import { settleRefusal, versionRefusal } from '../../src/chain/prechecks.js';
import type { EscrowParams } from '../../src/chain/port.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import { SUPPORTED_VERSION_NAMES } from '../../src/protocol/versions.js';
import { clientFor, CREATOR_KEYS, MODEL, signedSettlement, startDevnetAndClient, startTestDevnet, stopDevnetAndClient } from './helpers.js';

const AMOUNT = 2_000_000_000n;
const key = CREATOR_KEYS[0]!;

describe('the devnet keeper and the approved-versions store (default: every version the gateway speaks)', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  beforeAll(async () => ({ devnet, client } = await startDevnetAndClient()));
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  it('the client reads the store, not the (empty) params list', async () => {
    expect((await client.params()).approvedVersions).toEqual([...SUPPORTED_VERSION_NAMES].sort());
  });

  it('settles a listed version', async () => {
    const id = (await client.createEscrow(key, AMOUNT, MODEL)).escrowId;
    await client.settleEscrow(key, signedSettlement(id, devnet.hosts, { tag: 'v4.1' }));
    expect((await client.escrow(id))?.settled).toBe(true);
  });

  it('refuses an unlisted version with the keeper\'s v0.2.16 text, mapped to version_not_approved', async () => {
    const id = (await client.createEscrow(key, AMOUNT, MODEL)).escrowId;
    const outcome = await client.broadcast(await client.prepareSettleEscrow(key, signedSettlement(id, devnet.hosts, { tag: 'v1' })));
    expect(outcome).toMatchObject({ code: 1, codespace: 'undefined' });
    expect(outcome.rawLog).toBe('failed to execute message; message index: 0: settlement version "v1" is not listed in approved devshard versions');
    expect(client.errorOf(outcome).kind).toBe('version_not_approved');
    expect((await client.escrow(id))?.settled).toBe(false);
  });
});

describe('an empty approved-versions store accepts any version', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  beforeAll(async () => ({ devnet, client } = await startDevnetAndClient({ approvedVersions: '' })));
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  it('serves an empty list, and the keeper settles a version no one approved', async () => {
    const body = (await (await fetch(`${devnet.url}/productscience/inference/inference/devshard_approved_versions`)).json()) as unknown;
    expect(body).toEqual({ versions: [] });
    expect((await client.params()).approvedVersions).toEqual([]);
    const id = (await client.createEscrow(key, AMOUNT, MODEL)).escrowId;
    await client.settleEscrow(key, signedSettlement(id, devnet.hosts, { tag: 'v99-unlisted' }));
    expect((await client.escrow(id))?.settled).toBe(true);
  });
});

describe('DEVNET_APPROVED_VERSIONS', () => {
  it.each([
    ['a list (spaces trimmed, sorted by name as the keeper lists them)', 'v5, v4.1', ['v4.1', 'v5']],
    ['an empty string: the empty list', '', []],
  ])('%s', async (_what, value, names) => {
    const devnet = await startTestDevnet({ env: { DEVNET_APPROVED_VERSIONS: value } });
    const client = clientFor(devnet);
    try {
      expect((await client.params()).approvedVersions).toEqual(names);
    } finally {
      await stopDevnetAndClient({ devnet, client });
    }
  });
});

describe('versionRefusal: the keeper\'s rule as a pre-check', () => {
  it('an empty list accepts any version; a listed one passes', () => {
    expect(versionRefusal([], 'v99')).toBeUndefined();
    expect(versionRefusal(['v4', 'v4.1'], 'v4.1')).toBeUndefined();
  });

  it('an unlisted version: the keeper\'s text, the listed names, the remedy; refused before any fee', () => {
    const refused = versionRefusal(['v4', 'v4.1'], 'v3');
    expect(refused).toMatchObject({ kind: 'version_not_approved', detail: { precheck: true } });
    expect(refused!.message).toContain('settlement version "v3" is not listed in approved devshard versions');
    expect(refused!.message).toContain('(listed: v4, v4.1)');
    expect(refused!.message).toContain('wait until governance approves "v3"');
    expect(refused!.message).toContain('no fee was spent');
  });

  it('settleRefusal applies it after the settler allowlist', () => {
    const p = { allowedCreatorAddresses: [], approvedVersions: ['v4.1'] } as unknown as EscrowParams;
    expect(settleRefusal(p, { settler: 'gonka1x', version: 'v4.1' })).toBeUndefined();
    expect(settleRefusal(p, { settler: 'gonka1x', version: 'v2' })).toMatchObject({ kind: 'version_not_approved' });
    expect(settleRefusal({ ...p, allowedCreatorAddresses: ['gonka1y'] }, { settler: 'gonka1x', version: 'v2' })).toMatchObject({ kind: 'not_allowlisted' });
  });
});
