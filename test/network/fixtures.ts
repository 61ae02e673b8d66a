/** Test keys, the test model, a chat body and fault helpers shared by the network and devnet tests. */
import { randomBytes } from 'node:crypto';
import { rawSecp256k1PubkeyToRawAddress } from '@cosmjs/amino';
import { Secp256k1 } from '@cosmjs/crypto';
import { toBech32 } from '@cosmjs/encoding';
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
