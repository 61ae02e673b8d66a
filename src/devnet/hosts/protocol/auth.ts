/**
 * The request signature every POST of the real host protocol carries (gonka 8a35022
 * devshard/transport/auth.go `VerifyRequest`; server.go `AuthMiddleware`, `isAllowedSender`,
 * `isOwner`). In order, each refusal with Go's status and text:
 *   401 `missing auth headers` · 401 `invalid signature hex` · 401 `invalid timestamp` ·
 *   401 `timestamp drift Ns exceeds maximum 30s` · 401 `recover address: …` ·
 *   403 `sender not in group` (neither the creator nor a slot holder) ·
 *   403 `restricted to escrow owner` (a group member, not the creator; the handlers check it).
 */
import { recoverAddress, RecoverError } from '../../../protocol/signatures.js';
import { requestHeaderMessage } from '../../../protocol/preimages.js';
import { HostHttpError } from './wire.js';

export const SIGNATURE_HEADER = 'x-devshard-signature';
export const TIMESTAMP_HEADER = 'x-devshard-timestamp';
export const MAX_TIMESTAMP_DRIFT = 30n;

const INT64_MAX = (1n << 63n) - 1n;
const first = (v: string | string[] | undefined): string => (Array.isArray(v) ? (v[0] ?? '') : (v ?? ''));

/** The signer of a request (recovered, not yet checked against the group). */
export function recoverRequestSigner(
  headers: Record<string, string | string[] | undefined>,
  escrowId: string,
  body: Uint8Array,
  nowSeconds: bigint,
): string {
  const sigHex = first(headers[SIGNATURE_HEADER]);
  const tsText = first(headers[TIMESTAMP_HEADER]);
  if (sigHex === '' || tsText === '') throw new HostHttpError(401, 'missing auth headers');
  // hex.DecodeString: even length, hex digits only (either case).
  if (sigHex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(sigHex)) throw new HostHttpError(401, 'invalid signature hex');
  // strconv.ParseInt(s, 10, 64): optional sign, decimal digits, int64 range.
  if (!/^[+-]?\d+$/.test(tsText)) throw new HostHttpError(401, 'invalid timestamp');
  const ts = BigInt(tsText);
  if (ts > INT64_MAX || ts < -INT64_MAX - 1n) throw new HostHttpError(401, 'invalid timestamp');
  let drift = ts - nowSeconds;
  if (drift < 0n) drift = -drift;
  if (drift > MAX_TIMESTAMP_DRIFT) throw new HostHttpError(401, `timestamp drift ${drift}s exceeds maximum ${MAX_TIMESTAMP_DRIFT}s`);
  try {
    return recoverAddress(requestHeaderMessage(escrowId, body, BigInt.asUintN(64, ts)), new Uint8Array(Buffer.from(sigHex, 'hex')));
  } catch (e) {
    if (e instanceof RecoverError) throw new HostHttpError(401, `recover address: ${e.message}`);
    throw e;
  }
}

/** AuthMiddleware, then the owner-only check of chat/completions and verify-timeout. */
export function requireOwner(signer: string, creator: string, groupAddresses: readonly string[]): void {
  if (signer !== creator && !groupAddresses.includes(signer)) throw new HostHttpError(403, 'sender not in group');
  if (signer !== creator) throw new HostHttpError(403, 'restricted to escrow owner');
}
