/**
 * Following the shared log: what other instances commit reaches this one's CommittedLog.
 *
 * Every commit sends `NOTIFY shardgate_log, '<new last position>'` inside its transaction
 * (PostgreSQL delivers it at commit, in commit order). A dedicated connection LISTENs; a payload
 * beyond what was heard reads the missing positions from the table, in pages, and delivers them.
 * A poll at `pollMs` (default 500 ms) does the same read regardless, so a lost notification or a
 * broken LISTEN connection (re-opened after `pollMs`) delays a foreign commit by at most about
 * `pollMs` plus one read. One read runs at a time; what arrives meanwhile asks for another.
 */
import pg from 'pg';
import type { CommittedLog } from './committed-log.js';
import { readPage, PG_PAGE_SIZE } from './reader.js';

export const LOG_CHANNEL = 'shardgate_log';
export const DEFAULT_POLL_MS = 500;

export interface FollowerOptions {
  /** Poll bound (ms): the longest a foreign commit waits when no notification comes. */
  pollMs: number;
  /** LISTEN for commits (default true); false leaves only the poll (tests of the fallback). */
  listen: boolean;
  onError: (error: unknown) => void;
}

export class LogFollower {
  private listener: pg.Client | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly clientConfig: pg.ClientConfig,
    private readonly log: CommittedLog,
    private readonly opts: FollowerOptions,
  ) {}

  async start(): Promise<void> {
    if (this.opts.listen) await this.connect();
    this.pollTimer = setInterval(() => void this.catchUp(), this.opts.pollMs);
    this.pollTimer.unref();
  }

  /** Reads and delivers everything committed after what was heard (once at a time). */
  catchUp(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = this.readAhead().finally(() => (this.reading = undefined));
    return this.reading;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const listener = this.listener;
    this.listener = undefined;
    await this.reading?.catch(() => undefined);
    if (listener) await listener.end().catch(() => undefined);
  }

  private async readAhead(): Promise<void> {
    try {
      do {
        this.again = false;
        for (;;) {
          const rows = await readPage(this.pool, this.log.position, PG_PAGE_SIZE);
          if (this.stopped) return;
          this.log.deliver(rows);
          if (rows.length < PG_PAGE_SIZE) break;
        }
      } while (this.again && !this.stopped);
    } catch (error) {
      if (!this.stopped) this.opts.onError(error);
    }
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(this.clientConfig);
    client.on('notification', (msg) => {
      if (msg.channel !== LOG_CHANNEL) return;
      const position = Number(msg.payload);
      if (!Number.isFinite(position) || position > this.log.position) void this.catchUp();
    });
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, undefined));
    try {
      await client.connect();
      await client.query(`LISTEN ${LOG_CHANNEL}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.listener = client;
    // Commits between the last read and LISTEN sent no notification we heard.
    void this.catchUp();
  }

  /** The LISTEN connection broke: the poll carries on; try again after `pollMs`. */
  private lost(client: pg.Client, error: unknown): void {
    if (this.listener !== client || this.stopped) return;
    this.listener = undefined;
    if (error) this.opts.onError(error);
    client.end().catch(() => undefined);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.reconnectTimer) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.connect().catch((error: unknown) => {
        this.opts.onError(error);
        this.scheduleReconnect();
      });
    }, this.opts.pollMs);
    this.reconnectTimer.unref();
  }
}
