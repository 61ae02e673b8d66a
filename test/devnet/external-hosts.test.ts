/**
 * Hosts the devnet does not run (DEVNET_EXTERNAL_HOSTS) and given simulated-host keys
 * (DEVNET_HOST_KEYS): the config's checks and texts, the participants and escrow slots the devnet
 * serves, and keys never echoed. The end-to-end run (a gateway chatting with and settling an
 * external slot) is test/gateway/devnet-external-host.e2e.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toBech32 } from '@cosmjs/encoding';
import type { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import { addressOfPrivateKey, deterministicKeyHex } from '../../src/chain/keys.js';
import { describeDevnet } from '../../src/cli/commands/devnet.js';
import { parseExternalHosts, resolveDevnetConfig, type Devnet } from '../../src/devnet/chain/index.js';
import { clientFor, CREATOR_KEYS, MODEL, startTestDevnet } from '../chain/helpers.js';

const KEY_A = deterministicKeyHex('test/external/a');
const KEY_B = deterministicKeyHex('test/external/b');
const HOST_KEY = deterministicKeyHex('test/host-key/0');
const ADDR_A = addressOfPrivateKey(KEY_A);
const ADDR_B = addressOfPrivateKey(KEY_B);

const resolve = (env: Record<string, string>) => resolveDevnetConfig({ env });

describe('DEVNET_EXTERNAL_HOSTS: parsing and config errors', () => {
  it('parses addr@url entries in order (spaces trimmed, empty entries ignored, a trailing slash dropped)', () => {
    const c = resolve({ DEVNET_EXTERNAL_HOSTS: ` ${ADDR_A}@http://10.0.0.5:8080/ , ,${ADDR_B}@https://host-b.example/inference ` });
    expect(c.externalHosts).toEqual([
      { address: ADDR_A, url: 'http://10.0.0.5:8080' },
      { address: ADDR_B, url: 'https://host-b.example/inference' },
    ]);
    expect(c.hosts).toBe(3);
    expect(resolve({}).externalHosts).toEqual([]);
  });

  it('DEVNET_HOSTS=0 means only external hosts; with none at all there would be no slot', () => {
    expect(resolve({ DEVNET_HOSTS: '0', DEVNET_EXTERNAL_HOSTS: `${ADDR_A}@http://127.0.0.1:9000` })).toMatchObject({ hosts: 0, externalHosts: [{ address: ADDR_A }] });
    expect(() => resolve({ DEVNET_HOSTS: '0' })).toThrow('DEVNET_HOSTS=0 needs DEVNET_EXTERNAL_HOSTS: an escrow needs at least one slot');
    expect(() => resolve({ DEVNET_HOSTS: '-1' })).toThrow('DEVNET_HOSTS must be a non-negative integer');
  });

  const bad: [string, string, string | RegExp][] = [
    ['no @', 'http://127.0.0.1:9000', 'DEVNET_EXTERNAL_HOSTS entry 1: expected <gonka1 address>@<inference_url>'],
    ['nothing after @', `${ADDR_A}@`, 'DEVNET_EXTERNAL_HOSTS entry 1: expected <gonka1 address>@<inference_url>'],
    ['an address that is not bech32', 'gonka1notanaddress@http://127.0.0.1:9000', /^DEVNET_EXTERNAL_HOSTS entry 1: address "gonka1notanaddress" is not bech32 \(.+\)$/],
    ['a bad checksum', `${ADDR_A.slice(0, -1)}${ADDR_A.endsWith('q') ? 'p' : 'q'}@http://127.0.0.1:9000`, /^DEVNET_EXTERNAL_HOSTS entry 1: address "gonka1\w+" is not bech32 \(.*checksum.*\)$/i],
    ['another prefix', `${toBech32('cosmos', new Uint8Array(20).fill(7))}@http://127.0.0.1:9000`, /^DEVNET_EXTERNAL_HOSTS entry 1: address "cosmos1\w+" has prefix "cosmos", expected "gonka"$/],
    ['a 32-byte (module/contract) address', `${toBech32('gonka', new Uint8Array(32).fill(7))}@http://127.0.0.1:9000`, /^DEVNET_EXTERNAL_HOSTS entry 1: address "gonka1\w+" holds 32 bytes, an account address holds 20$/],
    ['not a URL', `${ADDR_A}@127.0.0.1:9000/x y`, /^DEVNET_EXTERNAL_HOSTS entry 1: inference_url "127\.0\.0\.1:9000\/x y" (is not a URL|must be http or https)$/],
    ['a relative URL', `${ADDR_A}@/hosts/0`, 'DEVNET_EXTERNAL_HOSTS entry 1: inference_url "/hosts/0" is not a URL'],
    ['another scheme', `${ADDR_A}@ftp://127.0.0.1/x`, 'DEVNET_EXTERNAL_HOSTS entry 1: inference_url "ftp://127.0.0.1/x" must be http or https'],
    ['a query', `${ADDR_A}@http://127.0.0.1:9000/?a=1`, 'DEVNET_EXTERNAL_HOSTS entry 1: inference_url "http://127.0.0.1:9000/?a=1" must have no query or fragment'],
    ['credentials in the URL', `${ADDR_A}@http://user:pw@127.0.0.1:9000`, 'DEVNET_EXTERNAL_HOSTS entry 1: inference_url must not carry credentials'],
    ['an address twice', `${ADDR_A}@http://127.0.0.1:9000,${ADDR_A}@http://127.0.0.1:9001`, `DEVNET_EXTERNAL_HOSTS: address ${ADDR_A} is given twice (entries 1 and 2); each external host holds one slot`],
    ['a URL twice', `${ADDR_A}@http://127.0.0.1:9000/,${ADDR_B}@http://127.0.0.1:9000`, 'DEVNET_EXTERNAL_HOSTS: inference_url http://127.0.0.1:9000 is given twice (entries 1 and 2)'],
  ];
  for (const [what, value, text] of bad) {
    it(`refuses ${what}`, () => {
      expect(() => resolve({ DEVNET_EXTERNAL_HOSTS: value })).toThrow(text);
    });
  }

  it('the second entry is named as entry 2', () => {
    expect(() => parseExternalHosts(`${ADDR_A}@http://a:1,${ADDR_B}@ftp://b`)).toThrow(/^DEVNET_EXTERNAL_HOSTS entry 2: /);
  });

  it('options take the parsed list or the text, with the same checks', () => {
    expect(resolveDevnetConfig({ env: {}, externalHosts: [{ address: ADDR_A, url: 'http://x:1/' }] }).externalHosts).toEqual([{ address: ADDR_A, url: 'http://x:1' }]);
    expect(() => resolveDevnetConfig({ env: {}, externalHosts: [{ address: 'nope', url: 'http://x:1' }] })).toThrow(/^externalHosts entry 1: address "nope" is not bech32/);
    expect(resolveDevnetConfig({ env: {}, externalHosts: `${ADDR_B}@http://y:2` }).externalHosts).toEqual([{ address: ADDR_B, url: 'http://y:2' }]);
  });
});

describe('DEVNET_HOST_KEYS: parsing and config errors, the key never echoed', () => {
  it('entry i is host i; empty or missing entries keep the generated key; 0x and upper case accepted', () => {
    expect(resolve({ DEVNET_HOST_KEYS: `${HOST_KEY}` }).hostKeys).toEqual([HOST_KEY]);
    expect(resolve({ DEVNET_HOST_KEYS: `, 0x${HOST_KEY.toUpperCase()} ,` }).hostKeys).toEqual([undefined, HOST_KEY]);
    expect(resolve({ DEVNET_HOST_KEYS: '' }).hostKeys).toEqual([]);
  });

  const cases: [string, Record<string, string>, string][] = [
    ['not hex', { DEVNET_HOST_KEYS: `${HOST_KEY.slice(0, 63)}z` }, 'DEVNET_HOST_KEYS entry 1 must be 64 hex characters encoding a valid secp256k1 key (not zero, below the curve order)'],
    ['too short', { DEVNET_HOST_KEYS: `${KEY_A},${HOST_KEY.slice(2)}` }, 'DEVNET_HOST_KEYS entry 2 must be 64 hex characters encoding a valid secp256k1 key (not zero, below the curve order)'],
    ['zero', { DEVNET_HOST_KEYS: '0'.repeat(64) }, 'DEVNET_HOST_KEYS entry 1 must be 64 hex characters encoding a valid secp256k1 key (not zero, below the curve order)'],
    ['more keys than hosts', { DEVNET_HOSTS: '1', DEVNET_HOST_KEYS: `${KEY_A},${HOST_KEY}` }, 'DEVNET_HOST_KEYS has 2 entries but there are 1 simulated hosts (DEVNET_HOSTS): entry i is host i\'s key'],
    ['the same key twice', { DEVNET_HOST_KEYS: `${HOST_KEY},,${HOST_KEY}` }, 'DEVNET_HOST_KEYS entries 1 and 3 are the same key: each simulated host needs its own'],
  ];
  for (const [what, env, text] of cases) {
    it(`refuses ${what} without echoing any key`, () => {
      let message = '';
      try {
        resolve(env);
      } catch (e) {
        message = (e as Error).message;
      }
      expect(message).toBe(text);
      for (const k of [HOST_KEY, KEY_A, HOST_KEY.slice(0, 40), HOST_KEY.slice(2)]) expect(message).not.toContain(k);
    });
  }

  it('an external host at a simulated host\'s address is refused at genesis (two slots, one key)', async () => {
    await expect(startTestDevnet({ hostKeys: [KEY_A], externalHosts: `${ADDR_A}@http://127.0.0.1:9` })).rejects.toThrow(
      `DEVNET_EXTERNAL_HOSTS: ${ADDR_A} is simulated host 0's address; an external host needs an address of its own (or lower DEVNET_HOSTS)`,
    );
  });
});

describe('a devnet with given host keys and external hosts', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  const EXT_A = 'http://127.0.0.1:9/ext-a';
  const EXT_B = 'http://127.0.0.1:9/ext-b';
  beforeAll(async () => {
    devnet = await startTestDevnet({ hosts: 2, hostKeys: [undefined, HOST_KEY], externalHosts: `${ADDR_A}@${EXT_A},${ADDR_B}@${EXT_B}` });
    client = clientFor(devnet);
  });
  afterAll(async () => {
    client.close();
    await devnet.close();
  });

  it('simulated host i holds key i when given (the generated test key otherwise)', () => {
    expect(devnet.hosts[1]!.address).toBe(addressOfPrivateKey(HOST_KEY));
    expect(devnet.hosts[0]!.address).toBe(addressOfPrivateKey(deterministicKeyHex('shardgate-devnet/host/0')));
  });

  it('lists the external hosts as participants with their inference_url (and the simulated ones at their mounts)', async () => {
    const participant = async (a: string) => (await (await fetch(`${devnet.url}/productscience/inference/inference/participant/${a}`)).json()) as any;
    expect((await participant(ADDR_A)).participant).toMatchObject({ index: ADDR_A, address: ADDR_A, inference_url: EXT_A, status: 'ACTIVE' });
    expect((await participant(ADDR_B)).participant.inference_url).toBe(EXT_B);
    expect((await participant(devnet.hosts[1]!.address)).participant.inference_url).toBe(`${devnet.url}/hosts/1`);
    const active = (await (await fetch(`${devnet.url}/v1/epochs/current/participants`)).json()) as any;
    expect(active.active_participants.participants.map((p: any) => [p.index, p.inference_url])).toEqual([
      [devnet.hosts[0]!.address, `${devnet.url}/hosts/0`],
      [devnet.hosts[1]!.address, `${devnet.url}/hosts/1`],
      [ADDR_A, EXT_A],
      [ADDR_B, EXT_B],
    ]);
  });

  it('gives every escrow the simulated slots first, then the external ones in the order given; group_size counts them all', async () => {
    expect((await client.params()).groupSize).toBe(4);
    const { escrow } = await client.createEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL);
    expect(escrow.slots.map((s) => [s.slotId, s.host, s.url])).toEqual([
      [0, devnet.hosts[0]!.address, `${devnet.url}/hosts/0`],
      [1, devnet.hosts[1]!.address, `${devnet.url}/hosts/1`],
      [2, ADDR_A, EXT_A],
      [3, ADDR_B, EXT_B],
    ]);
  });

  it('`shardgate devnet` prints the external hosts and marks given keys, never printing a host key', () => {
    const text = describeDevnet(devnet).join('\n');
    expect(text).toContain(`slot 2  ${ADDR_A}  ${EXT_A}`);
    expect(text).toContain(`slot 3  ${ADDR_B}  ${EXT_B}`);
    expect(text).toContain(`host 1  ${devnet.hosts[1]!.address}  ${devnet.url}/hosts/1  (key given)`);
    expect(text).not.toContain(HOST_KEY);
    expect(text).not.toContain(deterministicKeyHex('shardgate-devnet/host/0'));
  });
});

describe('a devnet of external hosts only (DEVNET_HOSTS=0)', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  beforeAll(async () => {
    devnet = await startTestDevnet({ env: { DEVNET_HOSTS: '0', DEVNET_EXTERNAL_HOSTS: `${ADDR_A}@http://127.0.0.1:9/a` }, hosts: undefined });
    client = clientFor(devnet);
  });
  afterAll(async () => {
    client.close();
    await devnet.close();
  });

  it('mounts no simulated host; escrows have the external slots only', async () => {
    expect(devnet.hosts).toEqual([]);
    expect((await client.params()).groupSize).toBe(1);
    const { escrow } = await client.createEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL);
    expect(escrow.slots).toEqual([{ slotId: 0, host: ADDR_A, url: 'http://127.0.0.1:9/a' }]);
    expect((await fetch(`${devnet.url}/hosts/0/devshard/v4.1/sessions/1/mempool`)).status).toBe(404);
    expect((await fetch(`${devnet.url}/hosts/0/v1/devshard/sessions/1/mempool`)).status).toBe(404);
  });
});
