/**
 * Waits on what a test drove, never on time: a record reaching the log, or requests held at a
 * simulated host until the test releases them.
 */
import { filter, firstValueFrom, type Observable } from 'rxjs';
import type { RecordedEvent } from '../../src/events/envelope.js';
import type { HostFaults } from '../../src/devnet/hosts/faults.js';

/**
 * The first committed record after `afterPosition` that `match` accepts (records already in the
 * log are read first, then the ones committed later). Rejects if the store closes first.
 */
export function nextRecord(store: { subscribe(afterPosition?: number): Observable<RecordedEvent> }, match: (r: RecordedEvent) => boolean, afterPosition = 0): Promise<RecordedEvent> {
  return firstValueFrom(store.subscribe(afterPosition).pipe(filter(match)));
}

/**
 * Holds the next `count` requests that reach the simulated hosts (before their diffs are applied):
 * `held` resolves once all of them wait, `release()` lets them go. Sets `faults` (the hosts read it
 * when a request arrives), so set it up before sending the requests it is meant for.
 */
export function holdHostRequests(faults: HostFaults, count = 1): { held: Promise<void>; release: () => void } {
  let release!: () => void;
  const hold = new Promise<void>((r) => (release = r));
  let allHeld!: () => void;
  const held = new Promise<void>((r) => (allHeld = r));
  let waiting = 0;
  Object.assign(faults, { hold, onHold: () => void (++waiting === count && allHeld()), remaining: count });
  return { held, release };
}
