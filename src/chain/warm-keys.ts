/**
 * Warm keys: a host's cold (account) key lets a warm key sign for it through a cosmos authz grant.
 * Since chain v0.2.15 a pair is identified by a grant of the marker `/inference.inference.MsgClaimRewards`
 * (`WarmKeyGrantMarkerTypeURL`, a live permission: revoking it de-warms the key); before, by a grant of
 * `/inference.inference.MsgStartInference`, which v0.2.15 no longer grants and whose pairs its upgrade
 * copied to the new marker (app/upgrades/v0_2_15 `migrateWarmKeyGrantMarker`). The keeper accepts a
 * settlement signature by a warm key when the slot's address granted it the marker
 * (k/devshard_settlement.go `HasWarmKeyGrant`: authz `Grants{granter, grantee, msg_type_url}` non-empty).
 *
 * Over REST that is `GET /cosmos/authz/v1beta1/grants?granter=&grantee=&msg_type_url=`: 200 with
 * `{grants:[{authorization, expiration}], pagination}` when granted; when not, the SDK's keeper returns
 * `authorization not found for <type> type: authorization not found` (x/authz keeper/grpc_query.go
 * Grants), a registered error the gRPC gateway answers with HTTP 500 (gRPC Unknown).
 */
import { ChainError } from './port.js';
import { obj, trimSlash } from './rest-queries.js';

/** `types.WarmKeyGrantMarkerTypeURL` (chain v0.2.15+). */
export const WARM_KEY_GRANT_MARKER = '/inference.inference.MsgClaimRewards';
/** `types.LegacyMsgStartInferenceTypeURL`: what identified a pair before v0.2.15. */
export const LEGACY_WARM_KEY_GRANT_MARKER = '/inference.inference.MsgStartInference';

export const AUTHZ_GRANTS_PATH = '/cosmos/authz/v1beta1/grants';

/** The SDK's text for a pair without that grant (x/authz ErrNoAuthorizationFound, wrapped). */
export const authzNotFoundText = (msgTypeUrl: string) => `authorization not found for ${msgTypeUrl} type: authorization not found`;

/** Whether `granter` granted `grantee` the message type `msgTypeUrl` (one authz query). */
export async function fetchGranted(o: { restUrl: string; timeoutMs: number }, granter: string, grantee: string, msgTypeUrl: string): Promise<boolean> {
  const q = new URLSearchParams({ granter, grantee, msg_type_url: msgTypeUrl });
  const url = `${trimSlash(o.restUrl)}${AUTHZ_GRANTS_PATH}?${q.toString()}`;
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(o.timeoutMs), headers: { accept: 'application/json' } });
  } catch (e) {
    const timedOut = (e as Error).name === 'TimeoutError';
    throw new ChainError(timedOut ? 'timeout' : 'unreachable', `chain REST ${timedOut ? 'timed out' : 'unreachable'}: GET ${url}`);
  }
  const text = await res.text().catch(() => '');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (res.ok) {
    const grants = obj(body).grants;
    return Array.isArray(grants) && grants.length > 0;
  }
  // No grant of that type is an error answer on the chain, not an empty list.
  if (/authorization not found/.test(String(obj(body).message ?? text))) return false;
  throw new ChainError(res.status >= 500 ? 'unreachable' : 'rejected', `chain REST answered ${res.status}: GET ${url}`);
}

/** The v0.2.15 marker first, then the legacy one (a chain before v0.2.15 knows only that). */
export async function fetchWarmKeyGranted(o: { restUrl: string; timeoutMs: number }, cold: string, warm: string): Promise<boolean> {
  if (await fetchGranted(o, cold, warm, WARM_KEY_GRANT_MARKER)) return true;
  return fetchGranted(o, cold, warm, LEGACY_WARM_KEY_GRANT_MARKER);
}
