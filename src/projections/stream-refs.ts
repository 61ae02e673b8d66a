/** Parsed stream ids, shared by the projections of one record. */
import { parseStreamId } from '../events/catalog.js';

/** A parsed stream id (the aggregate parses each record's once and hands it to every projection). */
export type StreamRef = ReturnType<typeof parseStreamId>;

/**
 * parseStreamId keeping each stream's ref, for a fold of many records: a log has few streams, and
 * one ref object (and id string) per stream also spares the maps keyed by id re-hashing a new
 * string each time.
 */
export function streamRefs(): (streamId: string) => StreamRef {
  const refs = new Map<string, StreamRef>();
  return (streamId) => {
    let ref = refs.get(streamId);
    if (!ref) refs.set(streamId, (ref = parseStreamId(streamId)));
    return ref;
  };
}
