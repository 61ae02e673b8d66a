import { join } from 'node:path';

/** Where a storage directory keeps its event log. */
export function eventsFile(storageDir: string): string {
  return join(storageDir, 'events.sqlite');
}

/** `--storage` default: $DEVSHARD_STORAGE_DIR, else `.devshardctl` in the working directory. */
export function defaultStorageDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.DEVSHARD_STORAGE_DIR || '.devshardctl';
}
