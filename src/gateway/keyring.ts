/**
 * Creator keys, held in memory only (docs/architecture.md, principle 5). The log names where a key came from
 * (an env variable's name, or "the request"), never the key. Chat needs the creator's key of every
 * routed escrow to sign host requests, so keys given in a create request stay here for the life
 * of the process; after a restart only keys from the environment are known again.
 */
import { isPrivateKeyHex } from '../config/private-key.js';
import { createRequestSigner } from '../network/signature.js';
import type { RequestSigner } from '../network/port.js';
import type { KeySource } from '../events/catalog.js';

interface Held {
  privateKeyHex: string;
  signer: RequestSigner;
}

export class Keyring {
  private readonly byAddress = new Map<string, Held>();

  constructor(
    private readonly env: Record<string, string | undefined>,
    private readonly addressOf: (privateKeyHex: string) => Promise<string>,
  ) {}

  /** Remembers a key; answers its address. */
  async add(privateKeyHex: string): Promise<string> {
    const key = privateKeyHex.toLowerCase();
    const address = await this.addressOf(key);
    if (!this.byAddress.has(address)) this.byAddress.set(address, { privateKeyHex: key, signer: createRequestSigner(key) });
    return address;
  }

  /** The key held in env variable `name` (registered on first use); undefined when unset or malformed. */
  async fromEnv(name: string): Promise<{ privateKeyHex: string; address: string } | undefined> {
    const value = this.env[name]?.trim();
    // The range check too: a zero key would throw in add() (a 500) instead of "unset or malformed".
    if (!value || !isPrivateKeyHex(value)) return undefined;
    const address = await this.add(value);
    return { privateKeyHex: value.toLowerCase(), address };
  }

  /** The key for a recorded source: env keys are read again; request keys only if still held. */
  async resolve(source: KeySource, creator: string): Promise<string | undefined> {
    if (source.kind === 'env') return (await this.fromEnv(source.name))?.privateKeyHex;
    return this.byAddress.get(creator)?.privateKeyHex;
  }

  signerFor(address: string): RequestSigner | undefined {
    return this.byAddress.get(address)?.signer;
  }

  privateKeyOf(address: string): string | undefined {
    return this.byAddress.get(address)?.privateKeyHex;
  }

  has(address: string): boolean {
    return this.byAddress.has(address);
  }
}
