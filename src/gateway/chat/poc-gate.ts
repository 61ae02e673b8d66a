/**
 * DEVSHARD_POC_REQUEST_MODE as devshardctl applies it (ctl/poc_mode.go, ctl/phase_gate.go): with
 * `off`, chat is refused with 503 while the chain is in PoC (PoCGenerate, PoCGenerateWindDown,
 * PoCValidate, PoCValidateWindDown) or a blocking confirmation PoC, read from /v1/epochs/latest
 * (src/chain: EpochInfo.pocActive, phase); `relaxed` keeps serving. The epoch is the one the prune
 * watch last read (prune-watch.ts), so no request waits on the chain.
 */
import type { EpochInfo } from '../../chain/port.js';
import type { GatewayContext } from '../context.js';
import { refuse } from '../errors.js';
import { knownEpoch } from '../workers/prune-watch.js';

const HUMAN: Record<string, string> = {
  PoCGenerate: 'PoC generation',
  PoCGenerateWindDown: 'PoC generation wind down',
  PoCValidate: 'PoC validation',
  PoCValidateWindDown: 'PoC validation wind down',
};

/** devshardctl's block_reason (`poc` / `confirmation_poc`) and its humanized phase, or undefined when not blocked. */
export function pocBlock(ctx: GatewayContext, e: EpochInfo | undefined = knownEpoch(ctx)): { reason: string; during: string } | undefined {
  if (ctx.config.compatibility.pocRequestMode !== 'off' || !e?.pocActive) return undefined;
  const phase = e.phase ?? '';
  if (HUMAN[phase]) return { reason: 'poc', during: HUMAN[phase]! };
  return { reason: 'confirmation_poc', during: 'confirmation PoC' };
}

/** Throws devshardctl's 503 while chat is blocked by the PoC gate. */
export function admitDuringPoc(ctx: GatewayContext): void {
  const b = pocBlock(ctx);
  if (!b) return;
  const e = knownEpoch(ctx)!;
  const wait = Math.max(1, Math.min(600, Math.max(0, e.pocEndHeight - e.height) * 6));
  throw refuse.unavailable(`devshard temporarily unavailable during ${b.during} (DEVSHARD_POC_REQUEST_MODE=off); retry after the PoC window (height ${e.pocEndHeight}).`, wait, `${b.reason}_active`);
}
