/** v5: one host's answer to a session's height-seed request (the session's HeightSeed asks each host, height-seed.ts). */
import type { DevshardSession } from '../session.js';
import type { SeedOutcome } from '../height-seed.js';
import type { TransportContext } from './context.js';
import { messageOf, postSessionRoute } from './host-requests.js';

/** One seed request's bound (Z5 transport DefaultHeightSeedTimeout is of this order). */
const HEIGHT_SEED_ATTEMPT_MS = 5_000;

/**
 * One seed request (Z5 transport/client_heightsync.go SeedHeightSync): `POST …/height-sync` with
 * `{}`, signed as any session request. An Anchor (height > 0, a block hash) is a seed; a 200
 * without one is to be asked again; 404/501 is the host declining (user/heightsync_seed.go
 * classifySeedVerdict).
 */
export async function seedHost(ctx: TransportContext, s: DevshardSession, url: string): Promise<SeedOutcome> {
  let status: number;
  let text: string;
  try {
    ({ status, text } = await postSessionRoute(ctx, s, url, 'height-sync', Buffer.from('{}'), { timeoutMs: HEIGHT_SEED_ATTEMPT_MS }));
  } catch (err) {
    return { verdict: 'retry_later', reason: (err as Error)?.message ?? String(err) };
  }
  if (status === 404 || status === 501) return { verdict: 'declined', reason: `${status} ${messageOf(text)}` };
  if (status !== 200) return { verdict: 'retry_later', reason: `${status} ${messageOf(text)}` };
  let hs: { mainnet_height?: unknown; mainnet_block_hash_hex?: unknown } | undefined;
  try {
    hs = (JSON.parse(text) as { height_sync?: typeof hs }).height_sync;
  } catch {
    return { verdict: 'retry_later', reason: 'the answer is not JSON' };
  }
  const anchor = hs && typeof hs.mainnet_height === 'number' && hs.mainnet_height > 0 && typeof hs.mainnet_block_hash_hex === 'string' && hs.mainnet_block_hash_hex.trim() !== '';
  return anchor ? { verdict: 'anchored', reason: 'ok' } : { verdict: 'retry_later', reason: 'omit' };
}
