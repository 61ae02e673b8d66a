/**
 * Per model, the escrows the router may pick (state `active`), in the order they became routable,
 * with the position each joined (which orders a merge of partitions).
 */
import type { EscrowSnapshot } from '../machines/index.js';

export class RoutableEscrows {
  /** model → escrow ids in state `active`. */
  private readonly byModel = new Map<string, Set<string>>();
  /** Position at which each routable escrow joined its model's set (orders `merge`). */
  private readonly since = new Map<string, number>();

  /** The routable ids of a model (live view; undefined when none ever was). */
  of(model: string): ReadonlySet<string> | undefined {
    return this.byModel.get(model);
  }

  /** Follows an escrow from `before` to `after` (folded at `position`). */
  update(id: string, before: EscrowSnapshot, after: EscrowSnapshot, position: number): void {
    const model = after.context.model ?? '';
    const wasRoutable = before.value === 'active' && this.byModel.get(before.context.model ?? '')?.has(id);
    const isRoutable = after.value === 'active';
    if (wasRoutable && !isRoutable) this.byModel.get(model)?.delete(id);
    if (isRoutable) this.add(model, id, position, true);
  }

  /** Every routable escrow `owns` picks, with its model and the position it joined. */
  part(owns: (escrowId: string) => boolean): [model: string, escrowId: string, since: number][] {
    const out: [string, string, number][] = [];
    for (const [model, ids] of this.byModel) for (const id of ids) if (owns(id)) out.push([model, id, this.since.get(id)!]);
    return out;
  }

  /** Adds the entries of `part`s, in the order of the position each joined. */
  merge(entries: [model: string, escrowId: string, since: number][]): void {
    for (const [model, id, since] of [...entries].sort((a, b) => a[2] - b[2])) this.add(model, id, since, false);
  }

  clear(): void {
    this.byModel.clear();
    this.since.clear();
  }

  /** `keepSince`: an escrow already in the set keeps the position it joined at. */
  private add(model: string, id: string, position: number, keepSince: boolean): void {
    let set = this.byModel.get(model);
    if (!set) this.byModel.set(model, (set = new Set()));
    if (keepSince && set.has(id)) return;
    set.add(id);
    this.since.set(id, position);
  }
}
