/**
 * Host answers that mean the escrow's protocol, not the request, is wrong, turned into operator
 * errors that name the escrow, its route and tag, and the remedy. They are kept per escrow (the
 * latest one) for /v1/status and logged once; the request fails with the same text, never retried.
 *
 * - 410 with `{"error":"deprecated",…}`: the host API retired `/v1/devshard` (gonka #1386, chain
 *   v0.2.14; decentralized-api/internal/server/public devshard deprecation handler).
 * - `unsupported devshard route prefix %q`: devshard/paths.go ResolveRoutePrefix (Z5).
 * - `post_state_root does not match computed state root` on the escrow's first diff: the hosts'
 *   build hashes another state-root tag (59b1ee7e builds stamp "v2" by default; later builds the
 *   version's name): network-versions.md §2.
 */
import type { EscrowProtocol } from '../../protocol/versions.js';

export type RouteRefusalRule = 'route_retired' | 'route_unsupported' | 'state_root_tag_mismatch';

export interface RouteRefusal {
  rule: RouteRefusalRule;
  escrowId: string;
  host: string;
  status: number;
  /** The operator's error: what happened and what to do. */
  message: string;
  /** ms since the epoch. */
  at: number;
}

const ROOT_MISMATCH = 'post_state_root does not match computed state root';

/**
 * Classifies a host's non-200 answer to a session request. `firstDiff`: the request carried the
 * escrow's first diff (nonce 1), so a root mismatch there can only be the tag (or the session's
 * config), not a diverged session.
 */
export function routeRefusalOf(
  a: { escrowId: string; host: string; status: number; text: string; protocol: EscrowProtocol; firstDiff: boolean; at: number },
): RouteRefusal | undefined {
  const { escrowId, host, status, text, protocol: p } = a;
  const where = `escrow ${escrowId} speaks ${p.version} on ${p.route} (state-root tag ${JSON.stringify(p.tag)})`;
  let deprecated = false;
  try {
    deprecated = (JSON.parse(text) as { error?: unknown }).error === 'deprecated';
  } catch {
    /* not JSON */
  }
  if (status === 410 || deprecated) {
    return {
      rule: 'route_retired',
      escrowId,
      host,
      status,
      at: a.at,
      message: `host ${host} answered ${status} (${text.trim().slice(0, 200)}): the network retired the route ${p.route}, and ${where}. Hosts since chain v0.2.14 serve /devshard/<version> only. Deactivate this escrow (POST /v1/admin/devshards/${escrowId}/deactivate) and create escrows at a version the hosts serve (protocol_version in POST /v1/admin/escrows, or DEVSHARD_PROTOCOL_VERSION); an old log's v2 escrows need hosts that still serve /v1/devshard.`,
    };
  }
  if (/unsupported devshard route prefix/.test(text)) {
    return {
      rule: 'route_unsupported',
      escrowId,
      host,
      status,
      at: a.at,
      message: `host ${host} does not serve the route ${p.route} (${text.trim().slice(0, 200)}); ${where}. Create escrows at a version the hosts serve (protocol_version / route_prefix in POST /v1/admin/escrows, or DEVSHARD_PROTOCOL_VERSION / DEVSHARD_ROUTE_PREFIX), and deactivate this one (POST /v1/admin/devshards/${escrowId}/deactivate).`,
    };
  }
  if (a.firstDiff && text.includes(ROOT_MISMATCH)) {
    return {
      rule: 'state_root_tag_mismatch',
      escrowId,
      host,
      status,
      at: a.at,
      message: `host ${host} refused escrow ${escrowId}'s first diff: ${ROOT_MISMATCH}. The likely cause is the state-root tag: ${where}, and the hosts' build hashes another stamp (builds of the v3 line stamp "v2" by default). Create escrows with state_root_version (POST /v1/admin/escrows) or DEVSHARD_STATE_ROOT_VERSION set to the hosts' stamp, and deactivate this one (POST /v1/admin/devshards/${escrowId}/deactivate).`,
    };
  }
  return undefined;
}
