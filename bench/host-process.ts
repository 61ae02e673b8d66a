/**
 * The zero-delay host in a process of its own (`fork`), for diagnostics that must see the gateway's
 * and the baseline's CPU without the host's: the parent gets `{ url }` once it listens.
 */
import { fork } from 'node:child_process';
import type { Target } from './host.js';

export async function startHostProcess(): Promise<Target> {
  const child = fork(new URL(import.meta.url), ['--child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (m: { url: string }) => resolve(m.url));
    child.once('exit', (code) => reject(new Error(`host process exited (${code})`)));
  });
  return {
    name: 'host',
    url,
    close: async () => {
      child.kill();
    },
  };
}

if (process.argv.includes('--child')) {
  const { startHost } = await import('./host.js');
  const host = await startHost();
  process.send!({ url: host.url });
}
