/**
 * `explain rotation` per model for the console (src/projections/rotation-explain.ts over the log's
 * rotation, escrow and intent streams), with each failure's marker (the log line the gateway wrote
 * for it: `escrow_rotation_create_failed`, `escrow_depletion_replacement_failed`, ...) and what an
 * operator does about it.
 */
import type { RecordedEvent } from '../events/envelope.js';
import { explainRotation, formatExplain, type ExplainFailure, type RotationExplanation } from '../projections/rotation-explain.js';
import type { ConsoleLog } from './log-source.js';

/** What to do about a chain failure of this kind. */
const ADVICE: Record<string, string> = {
  not_allowlisted: "The creator address is not on the chain's devshard allowlist: ask the network to add it, or rotate with an allowlisted key (escrow_rotation.models[].private_key_env).",
  amount_out_of_range: "The rotation's amount is outside the chain's range: set escrow_rotation.models[].amount within min/max (POST /v1/admin/settings).",
  below_min_amount: "The rotation's amount is below the chain's minimum: raise escrow_rotation.models[].amount.",
  insufficient_funds: 'The creator account cannot pay the deposit and fee: fund the creator address, then the next tick creates it.',
  epoch_limit: 'The chain allows no more escrows for this creator in this epoch: creates are suppressed until the next epoch; lower the target or use another creator key.',
  already_settled: 'The escrow was settled already (by another gateway or a retry): nothing to do.',
  wrong_epoch: "The settle window has closed: the chain prunes the escrow and pays its deposit to its hosts; settle earlier next time (watch the prune warning on the Escrows page).",
  bad_signatures: "The hosts' settlement signatures did not check out: open the escrow, check `verify`'s verdict, and the hosts' refusals in its timeline.",
  wrong_settler: 'The settle was signed by another key than the creator: set the key the escrow was created with.',
  nonce_too_high: "The settlement's nonce is beyond what the chain accepts: check the escrow's verify verdict.",
  version_not_approved: "The escrow's protocol version is no longer approved by the chain: create escrows with an approved version (DEVSHARD_PROTOCOL_VERSION).",
  overspent: "The settlement pays more than the deposit: check the escrow's verify verdict and its host stats.",
  not_found: 'The chain does not know the escrow (pruned, or another chain): check DEVSHARD_CHAIN_ID and the node.',
  bad_sequence: 'Account sequence mismatch (another signer uses the key): the gateway retries; use one key per gateway.',
  unreachable: 'The chain node could not be reached: check the node URL and the network; the gateway retries by hash.',
  timeout: 'The transaction was not included in time: the gateway follows it by its hash; nothing to resend.',
  rejected: "The chain refused the transaction: read the chain's text below.",
};

export interface ConsoleFailure extends ExplainFailure {
  /** The log line the gateway wrote for it. */
  marker: string;
  advice: string;
  recovered: boolean;
}

export interface ModelRotation {
  model: string;
  cycles: (RotationExplanation['cycles'][number] & { failures: ConsoleFailure[]; verdict: string })[];
  replacements: (RotationExplanation['replacements'][number] & { marker: string | null; advice: string | null })[];
  text: string;
}

function markerOf(f: ExplainFailure): string {
  if (f.configuration) return 'escrow_rotation_configuration_error';
  if (f.windowClosed) return 'escrow_rotation_settle_window_closed';
  if (f.step === 'settle') return f.retryAtHeight !== undefined ? 'escrow_rotation_settle_retry_scheduled' : 'escrow_rotation_settle_failed';
  if (f.step.startsWith('create')) return 'escrow_rotation_create_failed';
  return 'escrow_rotation_failed';
}

function adviceOf(f: Pick<ExplainFailure, 'configuration' | 'windowClosed' | 'error'>): string {
  if (f.configuration) return `Set the environment variable ${f.configuration.variable} to the creator's key (or name another in escrow_rotation.models[].private_key_env); the rotation tries again at its next tick.`;
  if (f.windowClosed) return ADVICE.wrong_epoch!;
  return ADVICE[f.error.kind] ?? "Read the chain's reason; the rotation retries transient failures on its own.";
}

/** The records explain rotation reads: rotation streams and the escrow / intent streams' lifecycle (no devshard session events). */
async function rotationRecords(log: ConsoleLog): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  for await (const r of log.readAll(0)) {
    if (r.streamId.startsWith('devshard-session-')) continue;
    out.push(r);
  }
  return out;
}

export async function rotationByModel(log: ConsoleLog, model?: string): Promise<{ models: ModelRotation[] }> {
  const x = explainRotation(await rotationRecords(log), model !== undefined ? { model } : {});
  const models = new Map<string, ModelRotation>();
  const of = (m: string) => {
    let v = models.get(m);
    if (!v) models.set(m, (v = { model: m, cycles: [], replacements: [], text: '' }));
    return v;
  };
  for (const c of x.cycles) {
    const failures = c.failures.map((f) => {
      const recovered = (f.retryAtHeight !== undefined && c.settles.some((s) => s.escrowId === f.escrowId && s.state === 'settled')) || (f.configuration !== undefined && c.created.some((k) => k.intentId === f.intentId && k.escrowId !== null));
      return { ...f, marker: markerOf(f), advice: adviceOf(f), recovered };
    });
    const failed = failures.some((f) => !f.recovered);
    const verdict = c.status === 'completed' ? (failed ? 'completed with failures' : 'completed') : `in progress (${c.stage.replace('_', ' ')})${failed ? ' with failures' : ''}`;
    of(c.model).cycles.push({ ...c, failures, verdict });
  }
  for (const r of x.replacements) {
    of(r.model).replacements.push({ ...r, marker: r.failure ? 'escrow_depletion_replacement_failed' : null, advice: r.failure ? adviceOf({ error: r.failure }) : null });
  }
  for (const m of models.values()) {
    m.text = formatExplain({ cycles: x.cycles.filter((c) => c.model === m.model), replacements: x.replacements.filter((r) => r.model === m.model) });
  }
  return { models: [...models.values()].sort((a, b) => a.model.localeCompare(b.model)) };
}
