import { existsSync } from 'node:fs';
import { openSqliteEventStore } from '../../events/sqlite-store.js';
import { defaultStorageDir, eventsFile } from '../../events/storage-path.js';
import type { SqliteEventStore } from '../../events/sqlite-store.js';

/**
 * Runs `read` over the event log in `storage` and closes it. Reading commands never create a log:
 * with none there, says so and exits 1.
 */
export async function withExistingLog(storage: string | undefined, read: (store: SqliteEventStore, file: string) => void | Promise<void>): Promise<void> {
  const file = eventsFile(storage ?? defaultStorageDir());
  if (!existsSync(file)) {
    process.stderr.write(`no event log at ${file}\n`);
    process.exitCode = 1;
    return;
  }
  const store = openSqliteEventStore(file);
  try {
    await read(store, file);
  } finally {
    await store.close();
  }
}
