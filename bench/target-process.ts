/**
 * A compared target (the bare proxy or the gateway) in a process of its own, so its CPU can be
 * read apart from the load generator's and the host's (/proc/<pid>/stat: all its threads, the
 * gateway's store writer included). The gateway's process runs with tuneV8ForServing(), as
 * `shardgate serve` does.
 *
 *   startTargetProcess('baseline' | 'gateway', hostUrl, { escrows }) -> { url, headers, pid, close }
 */
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';

export type TargetKind = 'baseline' | 'gateway';

export interface TargetProcess {
  name: TargetKind;
  url: string;
  headers: Record<string, string>;
  pid: number;
  /** Labels of the process's known threads by Linux thread id (the gateway's log writer). */
  threadNames: Record<string, string>;
  close(): Promise<void>;
}

/** CPU seconds (user + system, all threads) a process has used so far; Linux only. */
export function processCpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime are fields 14 and 15 of stat(5), counted after the ") " that ends the name.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Ready {
  url: string;
  headers?: Record<string, string>;
  threads?: Record<string, string>;
}

export async function startTargetProcess(kind: TargetKind, hostUrl: string, opts: { escrows?: number; execArgv?: string[] } = {}): Promise<TargetProcess> {
  const child = fork(new URL(import.meta.url), ['--child', kind, hostUrl, String(opts.escrows ?? 8)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: [...process.execArgv, ...(opts.execArgv ?? [])],
  });
  const ready = await new Promise<Ready>((resolve, reject) => {
    child.once('message', (m: Ready) => resolve(m));
    child.once('exit', (code) => reject(new Error(`${kind} process exited (${code}) before it listened`)));
  });
  return {
    name: kind,
    url: ready.url,
    headers: ready.headers ?? {},
    pid: child.pid!,
    threadNames: ready.threads ?? {},
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.send('close');
      }),
  };
}

if (process.argv[2] === '--child') {
  const [kind, hostUrl, escrows] = process.argv.slice(3) as [TargetKind, string, string];
  if (kind === 'gateway') {
    const { tuneV8ForServing } = await import('../src/gateway/v8-tuning.js');
    tuneV8ForServing(); // the gateway as `shardgate serve` runs it; the bare proxy keeps Node's defaults
  }
  const { startBaseline, startGatewayTarget } = await import('./gateway-bench.js');
  const gateway = kind === 'gateway' ? await startGatewayTarget(hostUrl, { mode: 'upstream', escrows: Number(escrows) }) : undefined;
  const target = gateway ?? (await startBaseline(hostUrl));
  process.on('message', (m) => {
    if (m !== 'close') return;
    void target.close().then(() => process.exit(0));
  });
  process.send!({ url: target.url, headers: target.headers, threads: gateway?.threadNames() ?? {} });
}
