/**
 * A session's answers to "did `cold` grant `warm` its warm-key marker?" (session.ts): the replica's
 * resolver is synchronous, so a pair not yet known is asked of the chain in the background and
 * refused for now; a granted answer is kept, a denial believed for WARM_KEY_DENIED_TTL_MS.
 */
import type { WarmKeyGrantLookup } from './session-types.js';

/** How long a 'not granted' answer is believed (ms): a grant made later is noticed after it. */
export const WARM_KEY_DENIED_TTL_MS = 60_000;
/** Warm-key lookups in flight at once per session (txs signed by many unknown keys do not flood the chain). */
const WARM_KEY_MAX_LOOKUPS = 4;
/** Warm-key answers kept per session; expired denials, then the oldest, go first. */
const WARM_KEY_MAX_ANSWERS = 256;

export class WarmKeyAnswers {
  /** `cold warm` → the lookup's answer and when it came. */
  private readonly answers = new Map<string, { granted: boolean; at: number }>();
  /** `cold warm` of the lookups in flight. */
  private readonly lookups = new Set<string>();

  constructor(private readonly now: () => number) {}

  /** The known answer for the pair, or false while the one lookup for it runs (it starts on a miss). */
  answer(cold: string, warm: string, lookup: WarmKeyGrantLookup): boolean {
    const key = `${cold} ${warm}`;
    const known = this.answers.get(key);
    if (known && (known.granted || this.now() - known.at < WARM_KEY_DENIED_TTL_MS)) return known.granted;
    if (!this.lookups.has(key) && this.lookups.size < WARM_KEY_MAX_LOOKUPS) this.lookUp(key, cold, warm, lookup);
    return false;
  }

  /** One background lookup: its answer is kept; a failure (the chain unreachable) is forgotten, so a later miss asks again. */
  private lookUp(key: string, cold: string, warm: string, lookup: WarmKeyGrantLookup): void {
    this.lookups.add(key);
    let p: Promise<boolean>;
    try {
      p = Promise.resolve(lookup(cold, warm));
    } catch (e) {
      p = Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    p.then(
      (granted) => {
        this.lookups.delete(key);
        this.remember(key, granted === true);
      },
      () => {
        this.lookups.delete(key);
      },
    );
  }

  private remember(key: string, granted: boolean): void {
    const answers = this.answers;
    answers.delete(key);
    if (answers.size >= WARM_KEY_MAX_ANSWERS) {
      const now = this.now();
      for (const [k, a] of answers) if (!a.granted && now - a.at >= WARM_KEY_DENIED_TTL_MS) answers.delete(k);
      if (answers.size >= WARM_KEY_MAX_ANSWERS) answers.delete(answers.keys().next().value!);
    }
    answers.set(key, { granted, at: this.now() });
  }
}
