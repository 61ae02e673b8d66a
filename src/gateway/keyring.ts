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
  /** The first environment variable it was read from; undefined while only a request gave it. */
  envName?: string;
}

/**
 * Where the key of an address comes from, for devshardctl's `private_key_env` (never the key):
 * an environment variable's name, a request only (held in memory until the process ends), or not held.
 */
export type KeyOrigin = { kind: 'env'; name: string } | { kind: 'request' } | { kind: 'not_held' };

/**
 * The value of variable `name` in `env`, read from the environment's own members only: a name such
 * as `__proto__` or `constructor` is unset here, never Object.prototype's member (which made a
 * `private_key_env` of that name a 500). Undefined when unset or not a string.
 */
export function envValue(env: Readonly<Record<string, string | undefined>>, name: string): string | undefined {
  if (!Object.hasOwn(env, name)) return undefined;
  const value: unknown = env[name];
  return typeof value === 'string' ? value : undefined;
}

export class Keyring {
  private readonly byAddress = new Map<string, Held>();

  constructor(
    private readonly env: Record<string, string | undefined>,
    private readonly addressOf: (privateKeyHex: string) => Promise<string>,
  ) {}

  /** Remembers a key (read from env variable `envName`, when given); answers its address. */
  async add(privateKeyHex: string, envName?: string): Promise<string> {
    const key = privateKeyHex.toLowerCase();
    const address = await this.addressOf(key);
    const held = this.byAddress.get(address);
    if (!held) this.byAddress.set(address, { privateKeyHex: key, signer: createRequestSigner(key), ...(envName ? { envName } : {}) });
    else if (envName && !held.envName) held.envName = envName;
    return address;
  }

  /** The address of a key, without holding it (checking a key given in a request first). */
  address(privateKeyHex: string): Promise<string> {
    return this.addressOf(privateKeyHex.toLowerCase());
  }

  /** Where the key of `address` comes from (an env variable's name, a request, or not held). */
  originOf(address: string): KeyOrigin {
    const held = this.byAddress.get(address);
    if (!held) return { kind: 'not_held' };
    return held.envName ? { kind: 'env', name: held.envName } : { kind: 'request' };
  }

  /** The key held in env variable `name` (registered on first use); undefined when unset or malformed. */
  async fromEnv(name: string): Promise<{ privateKeyHex: string; address: string } | undefined> {
    const value = envValue(this.env, name)?.trim();
    // The range check too: a zero key would throw in add() (a 500) instead of "unset or malformed".
    if (!value || !isPrivateKeyHex(value)) return undefined;
    const address = await this.add(value, name);
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
