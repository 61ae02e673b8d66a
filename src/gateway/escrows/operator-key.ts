/**
 * The creator key of an operator's create, as devshardctl takes it (gateway.go handleAdminEscrows):
 * `private_key`, or the env variable named by `private_key_env`, or DEVSHARD_PRIVATE_KEY when
 * neither is given and that variable is set. The key is never echoed; an env key is recorded by
 * its variable's name.
 */
import type { KeySource } from '../../events/catalog.js';
import type { GatewayContext } from '../context.js';
import { refuse } from '../errors.js';
import { isPrivateKeyHex, PRIVATE_KEY_RULE } from '../../config/private-key.js';

export const DEFAULT_KEY_ENV = 'DEVSHARD_PRIVATE_KEY';

/** devshardctl's key fields of a body: `private_key` or `private_key_env` (one of them). */
export interface OperatorKey {
  privateKey?: string | undefined;
  keyEnv?: string | undefined;
}

export async function operatorCreateKey(ctx: GatewayContext, privateKey: string | undefined, keyEnv: string | undefined): Promise<{ privateKeyHex: string; keySource: KeySource }> {
  oneKeyOf(privateKey, keyEnv);
  if (privateKey !== undefined) return { privateKeyHex: privateKey, keySource: { kind: 'request' } };
  const name = keyEnv ?? DEFAULT_KEY_ENV;
  const held = await ctx.keyring.fromEnv(name);
  if (held) return { privateKeyHex: held.privateKeyHex, keySource: { kind: 'env', name } };
  if (keyEnv === undefined) {
    throw refuse.invalid(`private_key or private_key_env is required (${DEFAULT_KEY_ENV}, the default, is unset on this gateway).`, 'private_key', 'creator_key_required');
  }
  throw refuse.invalid(`private_key_env: environment variable ${name} is unset or not a 64-hex key.`, 'private_key_env', 'creator_key_unavailable');
}

/**
 * A creator key given as `private_key` in a register, re-activate or settle body (devshardctl's
 * adminDevshardRequest / adminSettleEscrowRequest): checked against the escrow's creator, then held
 * in memory like a create's request key (keyring.ts); the log records only `{kind:'request'}`.
 * devshardctl writes such a key into its state store; we never persist it, so after a restart the
 * key must come from an environment variable (or be given again).
 */
export async function holdRequestKey(ctx: GatewayContext, privateKey: string, escrowId: string, creator: string | null, code: string): Promise<void> {
  if (!isPrivateKeyHex(privateKey)) throw refuse.invalid(`Invalid value for 'private_key': ${PRIVATE_KEY_RULE}.`, 'private_key');
  const address = await ctx.keyring.address(privateKey);
  if (creator !== null && address !== creator) {
    throw refuse.invalid(`The key given in private_key is for ${address}, not the creator of devshard ${escrowId} (${creator}).`, 'private_key', code);
  }
  await ctx.keyring.add(privateKey);
}

/** devshardctl takes either; both at once is ambiguous (which one signs?). */
export function oneKeyOf(privateKey: string | undefined, keyEnv: string | undefined): void {
  if (privateKey !== undefined && keyEnv !== undefined) {
    throw refuse.invalid('Give either private_key or private_key_env, not both.', 'private_key_env', 'ambiguous_key');
  }
}
