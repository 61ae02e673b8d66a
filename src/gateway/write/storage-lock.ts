/**
 * One gateway per storage directory. Two processes on one event log would each decide nonces from
 * their own state and skip each other's reservations at start-up; the log would stay consistent
 * (expected versions) but both would keep setting escrows aside. So the storage holds a lock file
 * with the owner's pid: a live owner refuses the second start with a clear message; a dead one (a
 * SIGKILL leaves its file behind) is taken over.
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export class StorageInUseError extends Error {
  constructor(
    readonly storageDir: string,
    readonly pid: number,
  ) {
    super(`the storage directory ${storageDir} is in use by another shardgate process (pid ${pid}); stop it first or use another DEVSHARD_STORAGE_DIR`);
    this.name = 'StorageInUseError';
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Takes the storage's lock; answers its release. Throws StorageInUseError when a live process holds it. */
export function lockStorage(storageDir: string): () => void {
  const file = join(storageDir, 'gateway.lock');
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        try {
          if (Number(readFileSync(file, 'utf8').trim()) === process.pid) unlinkSync(file);
        } catch {
          /* already gone */
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let owner: number;
    try {
      owner = Number(readFileSync(file, 'utf8').trim());
    } catch {
      continue; // removed meanwhile: try again
    }
    if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && alive(owner)) throw new StorageInUseError(storageDir, owner);
    // Left by a process that is gone (or by this one, e.g. a test restarting in-process): take it over.
    try {
      unlinkSync(file);
    } catch {
      /* someone else took it over first: the next attempt decides */
    }
  }
  throw new Error(`could not take the lock file ${file}`);
}
