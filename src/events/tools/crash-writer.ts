/**
 * Test helper process: appends forever in group-committed bursts and prints one line per
 * acknowledged append, `<position> <seq>`, only after its promise resolved (= durable).
 * The crash test SIGKILLs it mid-stream and checks every printed position survived.
 *
 *   node dist/src/events/tools/crash-writer.js <events.sqlite> [burst]
 */
import { openSqliteEventStore } from '../sqlite-store.js';

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: crash-writer <events.sqlite> [burst]\n');
  process.exit(2);
}
const burst = Number(process.argv[3] ?? 50);
const store = openSqliteEventStore(file);
let seq = 0;

for (;;) {
  const acks = Array.from({ length: burst }, () => {
    const n = ++seq;
    return store
      .append(`crash-${n % 5}`, [{ type: 'crash.tick', data: { seq: n }, metadata: { actor: { kind: 'startup' } } }], {
        expectedVersion: 'any',
      })
      // stdout to a pipe is synchronous on Linux: the line is out before the next append.
      .then((r) => process.stdout.write(`${r.positions[0]} ${n}\n`));
  });
  await Promise.all(acks);
}
