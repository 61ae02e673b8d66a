/** The chain client's settings and defaults (cosmos-client.ts), and reading a tx's event attributes. */
import { DENOM } from './keys.js';
import type { TxOutcome } from './port.js';

/** devshardctl's defaults (ctl/chain_tx_rest.go): 1,000,000 ngonka fee, 500,000 gas. */
export const DEFAULT_TX_FEE = { denom: DENOM, amount: 1_000_000n, gasLimit: 500_000n } as const;

export interface CosmosChainClientOptions {
  /** Chain REST (DEVSHARD_CHAIN_REST / NODE_CHAIN_API). */
  restUrl: string;
  /** Node base (NODE_BASE), for /v1/governance/models; defaults to restUrl. */
  nodeBaseUrl?: string;
  /** Public API (DEVSHARD_PUBLIC_API), for the PoC gate's /v1/epochs/latest; defaults to nodeBaseUrl. */
  publicApiUrl?: string;
  /** DEVSHARD_TX_QUERY_REST: a second REST address where txs are also looked up by hash. */
  txQueryRestUrl?: string;
  /** NODE_RPC: accepted for compatibility, not used (everything goes over REST). */
  rpcUrl?: string;
  /** Expected chain id (CHAIN_ID); checked against the node's on first use when given. */
  chainId?: string;
  /** DEVSHARD_TX_FEE_AMOUNT, default 1000000. */
  feeAmount?: bigint;
  /** DEVSHARD_TX_FEE_DENOM, default ngonka. */
  feeDenom?: string;
  /** DEVSHARD_TX_GAS_LIMIT, default 500000. */
  gasLimit?: number;
  /** Sleep before each inclusion check, default 150 ms (devshardctl: 2 s). */
  broadcastPollIntervalMs?: number;
  /** How long broadcast waits for inclusion before ChainError 'timeout', default 60000. */
  broadcastTimeoutMs?: number;
  /** REST request timeout, default 10000. */
  requestTimeoutMs?: number;
  /** Clock for timeout timestamps (tests). */
  now?: () => number;
}

/** How long a participant's inference_url is reused before it is looked up again. */
export const PARTICIPANT_TTL_MS = 60_000;

/** The value of attribute `key` of the tx's first event of `type` that has it. */
export function eventAttr(outcome: TxOutcome, type: string, key: string): string | undefined {
  for (const e of outcome.events) {
    if (e.type !== type) continue;
    const a = e.attributes.find((x) => x.key === key);
    if (a) return a.value;
  }
  return undefined;
}
