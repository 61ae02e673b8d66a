/**
 * The log as one record per request start or end: each InferencesRecorded (the gateway records a
 * batch's starts and ends of one escrow as one event) stands for its entries, each as a record of
 * the entry's type and data with the group's place in the log. Other records are as they are.
 */
import type { RecordedEvent } from '../../src/events/envelope.js';
import { eachRequestEvent } from '../../src/events/request-data.js';

export function requestRecords(records: Iterable<RecordedEvent>): RecordedEvent[] {
  const out: RecordedEvent[] = [];
  for (const r of records) {
    if (r.type !== 'InferencesRecorded') out.push(r);
    else for (const e of eachRequestEvent([r])) out.push({ ...r, type: e.type, data: e.data });
  }
  return out;
}
