/**
 * Collects the hosts' signatures over a settlement state root, for the settle transaction.
 *
 * Protocol (our design): `POST {hostUrl}/devshard/v1/sessions/{escrowId}/sign` with JSON
 * `{ state_root, nonce, slot_id, host_stats: [{ slot_id, missed, invalid, cost, requests }] }`
 * (cost as a decimal string: it is a uint64). The host answers `{ slot_id, signature }` (base64
 * 64-byte r||s over sha256(state root bytes)) or a 4xx with an OpenAI-style error saying why it
 * refuses (see src/devnet/hosts/sign-route.ts for the rule).
 */
import type { Agent } from 'undici';
import type { HostStat, SlotSignature } from '../chain/port.js';
import { createHttpAgent, splitBaseUrl } from './http-agent.js';

export interface SignatureRequest {
  stateRoot: string;
  nonce: number;
  hostStats: HostStat[];
}

export interface SignatureFailure {
  slotId: number;
  url: string;
  status?: number;
  message: string;
  /** What the host says it served for this slot, when it refuses a claim (409 cost_mismatch). */
  served?: { cost: bigint; confirmedCost: bigint };
}

export interface CollectOptions {
  agent?: Agent;
  /** Per-host deadline, ms (default 10 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

let sharedAgent: Agent | undefined;

/** Asks every slot's host in parallel; answers the signatures obtained and why the others failed. */
export async function collectSignaturesDetailed(
  hosts: { slotId: number; url: string }[],
  escrowId: string,
  req: SignatureRequest,
  opts: CollectOptions = {},
): Promise<{ signatures: SlotSignature[]; failures: SignatureFailure[] }> {
  const agent = opts.agent ?? (sharedAgent ??= createHttpAgent({ keepAliveTimeoutMs: 5_000 }));
  const hostStats = req.hostStats.map((s) => ({
    slot_id: s.slotId,
    missed: s.missed,
    invalid: s.invalid,
    cost: s.cost.toString(),
    requests: s.requests,
  }));
  const results = await Promise.all(
    hosts.map(async (h): Promise<SlotSignature | SignatureFailure> => {
      const { origin, prefix } = splitBaseUrl(h.url);
      const signal = opts.signal
        ? AbortSignal.any([opts.signal, AbortSignal.timeout(opts.timeoutMs ?? 10_000)])
        : AbortSignal.timeout(opts.timeoutMs ?? 10_000);
      try {
        const res = await agent.request({
          origin,
          path: `${prefix}/devshard/v1/sessions/${encodeURIComponent(escrowId)}/sign`,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ state_root: req.stateRoot, nonce: req.nonce, slot_id: h.slotId, host_stats: hostStats }),
          signal,
        });
        const text = await res.body.text();
        let json: { signature?: unknown; error?: { message?: unknown }; served?: { cost?: unknown; confirmed_cost?: unknown } } = {};
        try {
          json = JSON.parse(text) as typeof json;
        } catch {
          /* handled below */
        }
        if (res.statusCode !== 200 || typeof json.signature !== 'string') {
          const message = typeof json.error?.message === 'string' ? json.error.message : text.slice(0, 500) || `status ${res.statusCode}`;
          const served = servedOf(json.served);
          return { slotId: h.slotId, url: h.url, status: res.statusCode, message, ...(served ? { served } : {}) };
        }
        return { slotId: h.slotId, signature: json.signature };
      } catch (err) {
        return { slotId: h.slotId, url: h.url, message: `unreachable: ${(err as Error).message}` };
      }
    }),
  );
  const signatures: SlotSignature[] = [];
  const failures: SignatureFailure[] = [];
  for (const r of results) {
    if ('signature' in r) signatures.push(r);
    else failures.push(r);
  }
  return { signatures, failures };
}

function servedOf(v: { cost?: unknown; confirmed_cost?: unknown } | undefined): SignatureFailure['served'] {
  const big = (x: unknown) => (typeof x === 'string' && /^\d{1,30}$/.test(x) ? BigInt(x) : undefined);
  const cost = big(v?.cost);
  const confirmedCost = big(v?.confirmed_cost);
  return cost !== undefined && confirmedCost !== undefined ? { cost, confirmedCost } : undefined;
}

/** The signatures the hosts gave (refusals and unreachable hosts are left out). */
export async function collectSignatures(
  hosts: { slotId: number; url: string }[],
  escrowId: string,
  req: SignatureRequest,
  opts: CollectOptions = {},
): Promise<SlotSignature[]> {
  return (await collectSignaturesDetailed(hosts, escrowId, req, opts)).signatures;
}
