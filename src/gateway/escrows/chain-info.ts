/**
 * Chain facts the hot path needs (token price, params), cached and refreshed in the background so
 * no request waits on the chain.
 */
import type { ChainPort, EscrowParams } from '../../chain/port.js';

export class ChainInfo {
  private cached: EscrowParams | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly chain: ChainPort) {}

  /** Loads params once (start fails loudly if the chain cannot be reached). */
  async load(): Promise<EscrowParams> {
    this.cached = await this.chain.params();
    return this.cached;
  }

  /** Refreshes every `ms`; a failed refresh keeps the last known params. */
  follow(ms: number): void {
    this.timer = setInterval(() => {
      this.chain.params().then((p) => (this.cached = p), () => undefined);
    }, ms);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  get params(): EscrowParams {
    if (!this.cached) throw new Error('chain params not loaded');
    return this.cached;
  }

  get tokenPrice(): bigint {
    return this.params.tokenPrice;
  }
}
