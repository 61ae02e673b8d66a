/** Export documents' `events` built by hand, hashed the way the source gateway's log hashes them. */
import { canonicalJson } from '../../src/events/canonical-json.js';
import { escrowStream, SCHEMA_VERSIONS, type EventType } from '../../src/events/catalog.js';
import { eventHash } from '../../src/events/hash.js';
import type { ExportedEvent } from '../../src/gateway/escrows/exported-stream.js';

/**
 * `events` as escrow `escrowId`'s exported stream: versions 0..n-1 at positions `stride` apart from
 * `firstPosition`, each prev_hash the previous row's hash when adjacent (else that of an event of
 * another stream). The hashes are integrity, not authentication: anyone can compute them, which is
 * what tests of the fold's own checks need.
 */
export function exportedRows(escrowId: string, events: readonly { type: string; data: unknown }[], { firstPosition = 1, stride = 1 } = {}): ExportedEvent[] {
  const rows: ExportedEvent[] = [];
  let prev = '';
  events.forEach((e, i) => {
    if (i > 0 && stride > 1) prev = 'e'.repeat(64);
    const row = {
      position: firstPosition + i * stride,
      stream_version: i,
      type: e.type,
      schema_version: SCHEMA_VERSIONS[e.type as EventType] ?? 1,
      data: JSON.parse(JSON.stringify(e.data)) as Record<string, unknown>,
      metadata: { actor: { kind: 'admin' } },
      time: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
      prev_hash: prev,
    };
    const hash = eventHash(prev, {
      position: row.position,
      streamId: escrowStream(escrowId),
      streamVersion: row.stream_version,
      type: row.type,
      schemaVersion: row.schema_version,
      dataJson: canonicalJson(row.data),
      metadataJson: canonicalJson(row.metadata),
      time: row.time,
    });
    rows.push({ ...row, hash });
    prev = hash;
  });
  return rows;
}
