/**
 * Genesis: allowlisted and funded creators, one funded account that is *not* allowlisted, the
 * simulated hosts' accounts and the external hosts' (DEVNET_EXTERNAL_HOSTS). Every generated key is
 * deterministic (sha256 of a fixed seed), so a devnet restarted with the same settings has the same
 * identities; they are test keys only. A simulated host's key can be given (DEVNET_HOST_KEYS).
 */
import { toBase64 } from '@cosmjs/encoding';
import type { HostIdentity } from '../hosts/chain-view.js';
import {
  addressOfPrivateKey,
  addressOfPubKey,
  compressedPubKey,
  deterministicKeyHex,
  isPrivateKeyHex,
  privateKeyBytes,
} from '../../chain/keys.js';
import type { DevnetConfig, ExternalHost } from './config.js';
import { approvedVersionEntries, devnetParams } from './params.js';
import { ensureAccount, type ChainState } from './state.js';

export interface FundedKey {
  privateKeyHex: string;
  address: string;
}

export interface GenesisIdentities {
  /** Creators given as keys (address-only creators have no key here). */
  creators: FundedKey[];
  creatorAddresses: string[];
  notAllowlisted: FundedKey;
  hosts: HostIdentity[];
  /** Hosts the devnet does not run: slots after the simulated hosts, in the order given. */
  externalHosts: ExternalHost[];
}

const SEED = 'shardgate-devnet';

export function genesisIdentities(config: DevnetConfig): GenesisIdentities {
  const entries = config.creators.length > 0 ? config.creators : [deterministicKeyHex(`${SEED}/creator/0`)];
  const creators: FundedKey[] = [];
  const creatorAddresses: string[] = [];
  for (const entry of entries) {
    if (isPrivateKeyHex(entry)) {
      const address = addressOfPrivateKey(entry);
      creators.push({ privateKeyHex: entry.toLowerCase(), address });
      creatorAddresses.push(address);
    } else if (/^gonka1[0-9a-z]{38,}$/.test(entry)) {
      creatorAddresses.push(entry);
    } else {
      // Never echo the entry: it may be a mistyped private key.
      throw new Error('DEVNET_CREATORS entries must be 64-hex private keys or gonka1... addresses');
    }
  }
  const outsiderKey = deterministicKeyHex(`${SEED}/not-allowlisted`);
  const hosts: HostIdentity[] = [];
  for (let index = 0; index < config.hosts; index++) {
    const privateKey = privateKeyBytes(config.hostKeys[index] ?? deterministicKeyHex(`${SEED}/host/${index}`));
    const pubKey = compressedPubKey(privateKey);
    hosts.push({ index, address: addressOfPubKey(pubKey), privateKey, pubKey, prefix: `/hosts/${index}` });
  }
  for (const ext of config.externalHosts) {
    const sim = hosts.find((h) => h.address === ext.address);
    // Two slots of one address would be two hosts answering for one key: refuse rather than guess.
    if (sim) throw new Error(`DEVNET_EXTERNAL_HOSTS: ${ext.address} is simulated host ${sim.index}'s address; an external host needs an address of its own (or lower DEVNET_HOSTS)`);
  }
  return {
    creators,
    creatorAddresses: [...new Set(creatorAddresses)],
    notAllowlisted: { privateKeyHex: outsiderKey, address: addressOfPrivateKey(outsiderKey) },
    hosts,
    externalHosts: config.externalHosts.map((h) => ({ ...h })),
  };
}

export function genesisState(config: DevnetConfig, ids: GenesisIdentities, now = new Date()): ChainState {
  const time = now.toISOString();
  const state: ChainState = {
    chainId: config.chainId,
    genesisTime: time,
    height: config.startHeight,
    latestBlockTime: time,
    nextAccountNumber: 0,
    nextEscrowId: 1,
    accounts: {},
    hostPubKeys: {},
    escrows: {},
    escrowsPerEpoch: {},
    txs: {},
    blocks: {},
    params: devnetParams(config, ids.creatorAddresses),
    approvedVersions: approvedVersionEntries(config.approvedVersions),
    authzGrants: config.warmKeyGrants.map((g) => ({ ...g })),
    models: config.models,
    feesCollected: 0n,
  };
  for (const address of ids.creatorAddresses) ensureAccount(state, address).balance += config.creatorFunds;
  ensureAccount(state, ids.notAllowlisted.address).balance += config.creatorFunds;
  for (const host of ids.hosts) {
    ensureAccount(state, host.address);
    state.hostPubKeys[host.address] = toBase64(host.pubKey);
  }
  // An external host's key is its own: the chain learns only its address (its public key would come
  // with its first signed tx). Its settlement signatures are recovered to that address.
  for (const host of ids.externalHosts) ensureAccount(state, host.address);
  return state;
}
