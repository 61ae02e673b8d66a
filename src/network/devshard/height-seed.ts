/**
 * The v5 height seed at session open, as the network's gateway runs it (Z5 user/heightsync_seed.go):
 * `POST …/sessions/{id}/height-sync` to each distinct host until at least half of them returned an
 * Anchor (seeded·2 ≥ hosts). Each try fans out to the hosts not yet seeded, with a backoff from
 * 50 ms to 5 s. Once the quorum is met, the remaining hosts are asked once more (the seed binds the
 * session on a host, which a later verify-timeout needs), and the seed is `ok` for good.
 *
 * With the gate on (DEVSHARD_REQUIRE_HEIGHT_SEED), a chat waits at most 2 s on a seed still
 * `pending`, and is refused (503 `height_seed_incomplete`) once it is `missed`: 30 s without the
 * quorum, or hosts declining (404/501) so that the quorum cannot be reached. Missed is not final:
 * the loop keeps trying every 5 s. With the gate off the seed still runs, and chat never waits.
 * A session whose replica already has a floor (rebuilt from the log) needs no seed.
 */

export type SeedVerdict = 'anchored' | 'retry_later' | 'declined';
export type SeedState = 'pending' | 'ok' | 'missed';

export interface SeedOutcome {
  verdict: SeedVerdict;
  /** "ok", "omit" (200 without an Anchor), or the failure. */
  reason: string;
}

export interface HeightSeedStatus {
  state: SeedState;
  seeded: number;
  /** Distinct hosts asked. */
  slots: number;
  /** The latest verdict per host. */
  outcomes: { host: string; verdict: SeedVerdict; reason: string }[];
}

/** A chat refused by the gate: the roster has not seeded (Z5 HeightSeedError, code height_seed_incomplete). */
export class HeightSeedIncomplete extends Error {
  override name = 'HeightSeedIncomplete';
  constructor(
    readonly seeded: number,
    readonly slots: number,
  ) {
    super(`not seeded yet, retry: ${seeded}/${slots} hosts returned a height anchor`);
  }
}

export interface HeightSeedOptions {
  /** The gate: chat waits on the seed and is refused while it is missed. */
  required: boolean;
  /** How long the seed may stay short of its quorum before it is missed (Z5: 30 s). */
  gateMs?: number;
  retryInitialMs?: number;
  retryMaxMs?: number;
  /** Called when the state moves (pending → ok, pending → missed, missed → ok). */
  onChange?: (s: HeightSeedStatus) => void;
}

export const HEIGHT_SEED_GATE_MS = 30_000;
/** How long a chat waits on a seed still pending (Z5 WaitHeightSeedChatBudget). */
export const HEIGHT_SEED_CHAT_BUDGET_MS = 2_000;

const quorum = (seeded: number, slots: number) => slots > 0 && seeded * 2 >= slots;

export class HeightSeed {
  private state: SeedState = 'pending';
  private readonly seeded = new Set<string>();
  private readonly last = new Map<string, SeedOutcome>();
  private started = false;
  private stopped = false;
  private waiters: (() => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
  private sleeping: (() => void) | undefined;

  constructor(
    private readonly hosts: readonly string[],
    private readonly attempt: (host: string) => Promise<SeedOutcome>,
    private readonly opts: HeightSeedOptions,
  ) {}

  /** Marks the seed done without asking (the replica already has a floor). */
  skip(): void {
    this.set('ok');
  }

  status(): HeightSeedStatus {
    return {
      state: this.state,
      seeded: this.seeded.size,
      slots: this.hosts.length,
      outcomes: this.hosts.filter((h) => this.last.has(h)).map((h) => ({ host: h, ...this.last.get(h)! })),
    };
  }

  /** Starts the loop once (it runs until ok or stop()). */
  start(): void {
    if (this.started || this.state === 'ok') return;
    this.started = true;
    void this.loop();
  }

  /**
   * Resolves when chat may go on: the gate off, or the seed ok. Throws HeightSeedIncomplete when it
   * is missed, or still pending after `budgetMs`.
   */
  async wait(budgetMs = HEIGHT_SEED_CHAT_BUDGET_MS): Promise<void> {
    if (!this.opts.required || this.state === 'ok') return;
    this.start();
    if (this.state === 'pending') {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(t);
          this.waiters = this.waiters.filter((w) => w !== done);
          resolve();
        };
        const t = setTimeout(done, budgetMs);
        t.unref();
        this.waiters.push(done);
      });
    }
    if ((this.state as SeedState) !== 'ok') throw new HeightSeedIncomplete(this.seeded.size, this.hosts.length);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.sleeping?.();
  }

  private set(state: SeedState): void {
    if (this.state === state || this.state === 'ok') return;
    this.state = state;
    for (const w of this.waiters.splice(0)) w();
    this.opts.onChange?.(this.status());
  }

  private async fan(hosts: readonly string[]): Promise<void> {
    const outcomes = await Promise.all(hosts.map((h) => this.attempt(h).catch((err: unknown) => ({ verdict: 'retry_later' as const, reason: err instanceof Error ? err.message : String(err) }))));
    hosts.forEach((h, i) => {
      const o = outcomes[i]!;
      this.last.set(h, o);
      if (o.verdict === 'anchored') this.seeded.add(h);
    });
  }

  private async loop(): Promise<void> {
    const gateAt = Date.now() + (this.opts.gateMs ?? HEIGHT_SEED_GATE_MS);
    const max = this.opts.retryMaxMs ?? 5_000;
    let delay = this.opts.retryInitialMs ?? 50;
    while (!this.stopped && this.state !== 'ok') {
      if (this.hosts.length === 0) return this.set('ok');
      await this.fan(this.hosts.filter((h) => !this.seeded.has(h)));
      if (this.stopped) return;
      if (quorum(this.seeded.size, this.hosts.length)) {
        // The rest once more: a seed binds the session on its host.
        const rest = this.hosts.filter((h) => !this.seeded.has(h));
        if (rest.length > 0) await this.fan(rest);
        return this.set('ok');
      }
      const declined = this.hosts.filter((h) => !this.seeded.has(h) && this.last.get(h)?.verdict === 'declined').length;
      const feasible = quorum(this.hosts.length - declined, this.hosts.length);
      if (!feasible || Date.now() >= gateAt) this.set('missed');
      await new Promise<void>((resolve) => {
        this.sleeping = resolve;
        this.timer = setTimeout(resolve, this.state === 'missed' ? max : delay);
        this.timer.unref();
      });
      this.sleeping = undefined;
      delay = Math.min(delay * 2, max);
    }
  }
}
