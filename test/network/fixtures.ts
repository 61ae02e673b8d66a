/** A fastify app on loopback with the simulated hosts over an in-memory chain view, and real keys. */
import { randomBytes } from 'node:crypto';
import { rawSecp256k1PubkeyToRawAddress } from '@cosmjs/amino';
import { Secp256k1 } from '@cosmjs/crypto';
import { toBech32 } from '@cosmjs/encoding';
import Fastify, { type FastifyInstance } from 'fastify';
import { registerSimulatedHosts, type SimulatedHosts } from '../../src/devnet/hosts/index.js';
import type { DevnetChainView, DevnetEscrowView, HostIdentity } from '../../src/devnet/hosts/chain-view.js';
import type { HostFaults } from '../../src/devnet/hosts/faults.js';

export interface Key {
  privateKey: Uint8Array;
  privateKeyHex: string;
  pubKey: Uint8Array;
  address: string;
}

export function newKey(): Key {
  for (;;) {
    const privateKey = new Uint8Array(randomBytes(32));
    try {
      const pubKey = Secp256k1.compressPubkey(Secp256k1.makeKeypair(privateKey).pubkey);
      return {
        privateKey,
        privateKeyHex: Buffer.from(privateKey).toString('hex'),
        pubKey,
        address: toBech32('gonka', rawSecp256k1PubkeyToRawAddress(pubKey)),
      };
    } catch {
      /* out of range: draw again */
    }
  }
}

export const MODEL = 'Qwen/Test-Model';
export const TOKEN_PRICE = 7n;

export interface Net {
  app: FastifyInstance;
  base: string;
  creator: Key;
  hostKeys: Key[];
  hosts: HostIdentity[];
  sim: SimulatedHosts;
  faults: HostFaults;
  escrows: Map<string, DevnetEscrowView>;
  /** Base URL of host i. */
  hostUrl(i: number): string;
  close(): Promise<void>;
}

export async function startNet(opts: { tokenDelayMs?: number; hosts?: number } = {}): Promise<Net> {
  const creator = newKey();
  const hostKeys = Array.from({ length: opts.hosts ?? 3 }, () => newKey());
  const hosts: HostIdentity[] = hostKeys.map((k, index) => ({
    index,
    address: k.address,
    privateKey: k.privateKey,
    pubKey: k.pubKey,
    prefix: `/hosts/${index}`,
  }));
  const escrows = new Map<string, DevnetEscrowView>();
  const pubKeys = new Map<string, Uint8Array>([[creator.address, creator.pubKey]]);
  const chain: DevnetChainView = {
    escrow: (id) => escrows.get(id),
    pubKeyOf: (address) => pubKeys.get(address),
    tokenPrice: () => TOKEN_PRICE,
  };
  const faults: HostFaults = {};
  const app = Fastify({ logger: false });
  const sim = registerSimulatedHosts(app, { chain, hosts, tokenDelayMs: opts.tokenDelayMs ?? 0, faults });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  const base = `http://127.0.0.1:${addr.port}`;
  const hostUrl = (i: number): string => `${base}/hosts/${i}`;
  escrows.set('1', {
    id: '1',
    creator: creator.address,
    modelId: MODEL,
    settled: false,
    epochIndex: 1,
    slots: hosts.map((h) => ({ slotId: h.index, host: h.address, url: hostUrl(h.index) })),
  });
  return { app, base, creator, hostKeys, hosts, sim, faults, escrows, hostUrl, close: () => app.close() };
}

/** Clears every fault switch (the object is shared with the hosts, so it is emptied in place). */
export function clearFaults(f: HostFaults): void {
  for (const k of Object.keys(f) as (keyof HostFaults)[]) delete f[k];
}

export const chatBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: MODEL,
  messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Tell me about the sea.' },
  ],
  max_tokens: 512,
  ...extra,
});
