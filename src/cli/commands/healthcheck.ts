import { InvalidArgumentError, type Command } from 'commander';

/**
 * `shardgate healthcheck [--url U] [--timeout-ms N]`: GET /v1/status, exit 0 on a 2xx JSON answer
 * or on the kill switch's 308, 1 otherwise with one line on stderr. It exists so the container health check needs no curl/wget
 * in a slim image: only node, which the image has anyway.
 */

export const DEFAULT_HEALTHCHECK_TIMEOUT_MS = 5000;

export interface HealthcheckResult {
  ok: boolean;
  /** One line: what was asked and what came back (or did not). */
  message: string;
}

/**
 * The gateway's own /v1/status from its listen settings: a wildcard listen address (the
 * container's 0.0.0.0) is reached on loopback.
 */
export function defaultStatusUrl(env: NodeJS.ProcessEnv = process.env): string {
  const listen = env.GATEWAY_HOST?.trim() || '127.0.0.1';
  const host = listen === '0.0.0.0' || listen === '::' ? '127.0.0.1' : listen.includes(':') ? `[${listen}]` : listen;
  const port = env.DEVSHARD_PORT?.trim() || '8080';
  return `http://${host}:${port}/v1/status`;
}

export async function runHealthcheck(url: string, timeoutMs: number): Promise<HealthcheckResult> {
  // One deadline for connect, headers and body: a gateway that stalls mid-body is not healthy.
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    // No redirects: the kill switch answers 308 to another gateway, whose health is not ours.
    const res = await fetch(url, { signal, redirect: 'manual', headers: { accept: 'application/json' } });
    const text = await res.text();
    // A disabled gateway is up and meant to stay up (its admin routes finalize and settle); a health
    // check that failed on it would have the orchestrator restart it for doing what it was told.
    if (res.status === 308 && killSwitchBody(text)) return { ok: true, message: `${url} answered HTTP 308: the gateway is disabled (kill switch on), clients are sent to another URL` };
    if (res.status < 200 || res.status > 299) return { ok: false, message: `${url} answered HTTP ${res.status}` };
    try {
      JSON.parse(text);
    } catch {
      return { ok: false, message: `${url} answered HTTP ${res.status} but not JSON` };
    }
    return { ok: true, message: `${url} answered HTTP ${res.status} with JSON` };
  } catch (err) {
    return { ok: false, message: `${url}: ${failureReason(err, timeoutMs)}` };
  }
}

/** The disabled gate's body: `{"status":"disabled","message":…,"new_url":…}`. */
function killSwitchBody(text: string): boolean {
  try {
    const body = JSON.parse(text) as { status?: unknown } | null;
    return body?.status === 'disabled';
  } catch {
    return false;
  }
}

function failureReason(err: unknown, timeoutMs: number): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return `no answer within ${timeoutMs} ms`;
  // fetch says only "fetch failed"; the socket's reason is in `cause`.
  const code = e.cause?.code;
  if (code === 'ECONNREFUSED') return 'connection refused (ECONNREFUSED): nothing listens there';
  const cause = code ?? e.cause?.message;
  return cause ? `cannot connect (${cause})` : (e.message ?? String(err));
}

function parseTimeout(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('expected a positive integer (milliseconds)');
  return n;
}

export function registerHealthcheck(program: Command): void {
  program
    .command('healthcheck')
    .description('GET the gateway\'s /v1/status: exit 0 on a 2xx JSON answer or the kill switch\'s 308, 1 otherwise (the container health check)')
    .option('--url <url>', 'status URL (default: http://127.0.0.1:$DEVSHARD_PORT/v1/status, or GATEWAY_HOST when it is not a wildcard)')
    .option('--timeout-ms <ms>', 'give up after this long', parseTimeout, DEFAULT_HEALTHCHECK_TIMEOUT_MS)
    .action(async (opts: { url?: string; timeoutMs: number }) => {
      const result = await runHealthcheck(opts.url ?? defaultStatusUrl(), opts.timeoutMs);
      if (result.ok) {
        process.stdout.write(`ok: ${result.message}\n`);
      } else {
        process.stderr.write(`unhealthy: ${result.message}\n`);
      }
      // Exit now: an aborted request's socket must not keep the check alive past its answer.
      process.exit(result.ok ? 0 : 1);
    });
}
