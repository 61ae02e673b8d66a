/**
 * Warm-key grants over HTTP to the devnet: cosmos authz `GET /cosmos/authz/v1beta1/grants?granter=
 * &grantee=&msg_type_url=` (cosmos-sdk x/authz keeper/grpc_query.go Grants: one grant, or
 * ErrNoAuthorizationFound "authorization not found for %s type"), the marker
 * `/inference.inference.MsgClaimRewards` since chain v0.2.15 (gonka WarmKeyGrantMarkerTypeURL; the
 * v0_2_15 upgrade copies pairs granted the legacy `/inference.inference.MsgStartInference`,
 * zpoken/gonka@89ff8bdb app/upgrades/v0_2_15/upgrades.go migrateWarmKeyGrantMarker). The keeper
 * accepts a settlement signature by a warm key the slot's address granted the marker, and only the
 * marker (zpoken/gonka@ef1a5efd k/devshard_settlement.go HasWarmKeyGrant).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import { addressOfPrivateKey, deterministicKeyHex, privateKeyBytes } from '../../src/chain/keys.js';
import { LEGACY_WARM_KEY_GRANT_MARKER, WARM_KEY_GRANT_MARKER } from '../../src/chain/warm-keys.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import { CREATOR_KEYS, MODEL, signedSettlement, startDevnetAndClient, stopDevnetAndClient } from './helpers.js';

const HOST_KEYS = [0, 1, 2].map((i) => deterministicKeyHex(`test/warm-keys/host/${i}`));
const HOSTS = HOST_KEYS.map((k) => addressOfPrivateKey(k));
const WARM_KEY = deterministicKeyHex('test/warm-keys/warm');
const WARM = addressOfPrivateKey(WARM_KEY);
const LEGACY_WARM_KEY = deterministicKeyHex('test/warm-keys/legacy-warm');
const LEGACY_WARM = addressOfPrivateKey(LEGACY_WARM_KEY);
const STRANGER = addressOfPrivateKey(deterministicKeyHex('test/warm-keys/stranger'));

describe('warm-key grants on the devnet', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  beforeAll(async () => {
    ({ devnet, client } = await startDevnetAndClient({
      hostKeys: HOST_KEYS,
      warmKeyGrants: [
        { granter: HOSTS[1]!, grantee: WARM, msgTypeUrl: WARM_KEY_GRANT_MARKER },
        // A pair of before v0.2.15, never migrated: the keeper does not take it, our client still sees it.
        { granter: HOSTS[2]!, grantee: LEGACY_WARM, msgTypeUrl: LEGACY_WARM_KEY_GRANT_MARKER },
      ],
    }));
  });
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  it('warmKeyGranted: the marker, then the legacy marker; nothing else', async () => {
    expect(await client.warmKeyGranted(HOSTS[1]!, WARM)).toBe(true);
    expect(await client.warmKeyGranted(HOSTS[2]!, LEGACY_WARM)).toBe(true);
    expect(await client.warmKeyGranted(HOSTS[0]!, WARM)).toBe(false);
    expect(await client.warmKeyGranted(HOSTS[1]!, STRANGER)).toBe(false);
    // Direction matters: the cold key grants the warm one.
    expect(await client.warmKeyGranted(WARM, HOSTS[1]!)).toBe(false);
  });

  it('none by default', async () => {
    const other = await startDevnetAndClient({ hostKeys: HOST_KEYS });
    try {
      expect(await other.client.warmKeyGranted(HOSTS[1]!, WARM)).toBe(false);
      expect(other.devnet.chain.state.authzGrants).toEqual([]);
    } finally {
      await stopDevnetAndClient(other);
    }
  });

  it('the keeper takes a slot signature by a warm key its address granted the marker', async () => {
    const id = (await client.createEscrow(CREATOR_KEYS[0]!, 2_000_000_000n, MODEL)).escrowId;
    const warm = { ...devnet.hosts[1]!, privateKey: privateKeyBytes(WARM_KEY) };
    await client.settleEscrow(CREATOR_KEYS[0]!, signedSettlement(id, devnet.hosts, { signers: [devnet.hosts[0]!, warm, devnet.hosts[2]!] }));
    expect((await client.escrow(id))?.settled).toBe(true);
  });

  it('and refuses a key granted only the legacy marker (HasWarmKeyGrant asks for the marker)', async () => {
    const id = (await client.createEscrow(CREATOR_KEYS[0]!, 2_000_000_000n, MODEL)).escrowId;
    const legacy = { ...devnet.hosts[2]!, privateKey: privateKeyBytes(LEGACY_WARM_KEY) };
    const outcome = await client.broadcast(await client.prepareSettleEscrow(CREATOR_KEYS[0]!, signedSettlement(id, devnet.hosts, { signers: [devnet.hosts[0]!, devnet.hosts[1]!, legacy] })));
    expect(outcome.rawLog).toBe(`failed to execute message; message index: 0: signature for slot 2 recovered ${LEGACY_WARM}, expected ${HOSTS[2]}`);
    expect(client.errorOf(outcome).kind).toBe('bad_signatures');
  });

  it('an expired grant is deleted at the next block (x/authz BeginBlock), and no longer answers', async () => {
    devnet.chain.state.authzGrants.push({ granter: HOSTS[0]!, grantee: STRANGER, msgTypeUrl: WARM_KEY_GRANT_MARKER, expiration: new Date(Date.now() + 60_000).toISOString() });
    expect(await client.warmKeyGranted(HOSTS[0]!, STRANGER)).toBe(true);
    devnet.chain.state.authzGrants.at(-1)!.expiration = new Date(Date.now() - 1_000).toISOString();
    devnet.chain.advance();
    expect(await client.warmKeyGranted(HOSTS[0]!, STRANGER)).toBe(false);
  });
});
