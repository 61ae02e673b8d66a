/**
 * One writer per `rotation-<model>` stream at a time: the rotation task and the depletion check
 * both append there with an exact expected version, so their multi-step runs are serialized here.
 */
import type { GatewayContext } from '../../context.js';

const locks = new WeakMap<object, Map<string, Promise<unknown>>>();

export function withModelLock<T>(ctx: GatewayContext, model: string, f: () => Promise<T>): Promise<T> {
  let byModel = locks.get(ctx.engine);
  if (!byModel) locks.set(ctx.engine, (byModel = new Map()));
  const before = byModel.get(model) ?? Promise.resolve();
  const run = before.then(f, f);
  const tail = run.catch(() => undefined);
  byModel.set(model, tail);
  void tail.then(() => {
    if (byModel!.get(model) === tail) byModel!.delete(model);
  });
  return run;
}
