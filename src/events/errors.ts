import type { ExpectedVersion } from './store.js';

/** The stream's last version is not what the caller expected; nothing of that append was written. */
export class WrongExpectedVersionError extends Error {
  readonly code = 'WRONG_EXPECTED_VERSION';
  constructor(
    readonly streamId: string,
    readonly expected: ExpectedVersion,
    /** Actual last version of the stream, -1 when it does not exist. */
    readonly actual: number,
  ) {
    super(`stream ${JSON.stringify(streamId)}: expected version ${String(expected)}, actual ${actual}`);
    this.name = 'WrongExpectedVersionError';
  }
}

/** The store was closed; the append was not written. */
export class EventStoreClosedError extends Error {
  readonly code = 'EVENT_STORE_CLOSED';
  constructor() {
    super('event store is closed');
    this.name = 'EventStoreClosedError';
  }
}

/** The file was written by a newer shardgate (schema version above what this build knows). */
export class UnsupportedSchemaError extends Error {
  readonly code = 'UNSUPPORTED_EVENT_SCHEMA';
  constructor(
    readonly found: number,
    readonly supported: number,
  ) {
    super(`event log schema version ${found} is newer than this build supports (${supported}); upgrade shardgate`);
    this.name = 'UnsupportedSchemaError';
  }
}

/**
 * The append named a lease (its fencing token) that is no longer the one in force: another
 * instance took it over since (after it expired, or handed over). Nothing of that append was
 * written; the instance has lost the stream to the new holder and must stop writing to it.
 */
export class LeaseLostError extends Error {
  readonly code = 'LEASE_LOST';
  constructor(
    readonly lease: string,
    readonly token: number,
    /** The token in force now and its holder (undefined: released, nobody holds it). */
    readonly current: { token: number; owner: string | undefined } | undefined,
  ) {
    super(`lease ${JSON.stringify(lease)}: fencing token ${token} is stale${current ? ` (token ${current.token} is in force, held by ${current.owner ?? 'nobody'})` : ''}; nothing was written`);
    this.name = 'LeaseLostError';
  }
}
