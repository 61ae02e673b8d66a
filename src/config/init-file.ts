/**
 * What `shardgate init` writes: freshly generated keys in the spec's formats plus the reference
 * values of the configuration table, as an env file for `shardgate serve --env-file`.
 */
import { randomBytes } from 'node:crypto';
import { formatEnvValue } from './env-file.js';
import { VARIABLES } from './variables.js';

export interface GeneratedKeys {
  /** `sk-` + 48 hex */
  apiKey: string;
  /** `sk-admin-` + 48 hex */
  adminApiKey: string;
  /** 64 hex, no 0x */
  privateKey: string;
}

export function generateKeys(): GeneratedKeys {
  return {
    apiKey: `sk-${randomBytes(24).toString('hex')}`,
    adminApiKey: `sk-admin-${randomBytes(24).toString('hex')}`,
    privateKey: randomBytes(32).toString('hex'),
  };
}

export interface InitFileOptions {
  keys?: GeneratedKeys;
  /** Pool mode with no escrow yet (the spec's reference), so `serve` starts at once. Default true. */
  pool?: boolean;
  now?: Date;
}

export function renderInitFile(options: InitFileOptions = {}): string {
  const keys = options.keys ?? generateKeys();
  const generated: Record<string, string> = {
    DEVSHARD_PRIVATE_KEY: keys.privateKey,
    DEVSHARD_API_KEYS: keys.apiKey,
    DEVSHARD_ADMIN_API_KEY: keys.adminApiKey,
  };
  const lines = [
    '# shardgate configuration, written by `shardgate init`.',
    `# Generated ${(options.now ?? new Date()).toISOString()}. Keep this file private (mode 600): it holds keys.`,
    '# Use it with: shardgate serve --env-file <this file>. Variables set in the environment override it.',
    '#',
    '# DEVSHARD_PRIVATE_KEY is a fresh creator key. On a real chain its address must be on the',
    '# allowlist (devshard_escrow_params.allowed_creator_addresses) before you fund it or create escrows;',
    '# never reuse a validator, participant or broker key. No chain REST address = run `serve --devnet`.',
    '',
  ];
  for (const v of VARIABLES) {
    if (v.init === 'generate') lines.push(`# ${v.meaning}`, `${v.name}=${formatEnvValue(generated[v.name] ?? '')}`);
  }
  lines.push('');
  if (options.pool !== false) {
    lines.push('# Pool mode with no escrow yet; create escrows with POST /v1/admin/escrows.', "DEVSHARDS_JSON='[]'", '');
  }
  for (const v of VARIABLES) {
    if (v.init === 'reference' && v.default !== undefined) lines.push(`${v.name}=${formatEnvValue(v.default)}`);
  }
  lines.push('', '# Real chain (leave commented for the embedded devnet):');
  for (const name of ['DEVSHARD_CHAIN_REST', 'DEVSHARD_PUBLIC_API', 'DEVSHARD_TX_QUERY_REST', 'NODE_RPC', 'NODE_BASE', 'NODE_CHAIN_API']) lines.push(`# ${name}=`);
  return lines.join('\n') + '\n';
}
