/**
 * `shardgate healthcheck`, the container health check: the built CLI as a child process (as Docker
 * runs it) against a real gateway, a closed port and a server that never answers; the other answers
 * through runHealthcheck in-process (a child costs a node start each).
 */
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultStatusUrl, runHealthcheck } from '../../src/cli/commands/healthcheck.js';
import { disposeTestGateway, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { ensureBuilt, repoRoot } from '../helpers/store-dist.js';

interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** When the child exited (Date.now()). */
  exitedAt: number;
}

function healthcheck(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  const cli = ensureBuilt('dist/src/cli/main.js');
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [cli, 'healthcheck', ...args], { cwd: repoRoot, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 20_000 }, (_err, stdout, stderr) => {
      resolve({ code: child.exitCode, stdout, stderr, exitedAt: Date.now() });
    });
  });
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}

/** A port nothing listens on: bound once, then released. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await listen(s);
  const port = (s.address() as AddressInfo).port;
  await close(s);
  return port;
}

describe('shardgate healthcheck (child process)', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => disposeTestGateway(gw));

  it('exits 0 against a running gateway, found from the container\'s own settings (GATEWAY_HOST=0.0.0.0 is reached on loopback)', async () => {
    const port = new URL(gw.url).port;
    const r = await healthcheck([], { GATEWAY_HOST: '0.0.0.0', DEVSHARD_PORT: port });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`ok: http://127.0.0.1:${port}/v1/status answered HTTP 200 with JSON\n`);
  });

  it('exits 1 with one line on stderr against a closed port', async () => {
    const url = `http://127.0.0.1:${await closedPort()}/v1/status`;
    const r = await healthcheck(['--url', url]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`unhealthy: ${url}: connection refused (ECONNREFUSED): nothing listens there\n`);
  });

  it('exits 1 once --timeout-ms has passed against a server that never answers', async () => {
    let arrivedAt = 0;
    // Holds every request far longer than the timeout (until the test closes it).
    const hang = createServer(() => {
      arrivedAt = Date.now();
    });
    const base = await listen(hang);
    try {
      const r = await healthcheck(['--url', `${base}/v1/status`, '--timeout-ms', '700']);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`unhealthy: ${base}/v1/status: no answer within 700 ms\n`);
      expect(arrivedAt).toBeGreaterThan(0); // it did connect and ask
      // The deadline, not the server, ended it: well before the hang would (process exit included).
      expect(r.exitedAt - arrivedAt).toBeLessThan(5_000);
    } finally {
      await close(hang);
    }
  });

  it('exits 0 while the kill switch is on (the gateway is up, clients are sent elsewhere), and 0 again once it is off', async () => {
    const on = await gw.call('/v1/admin/settings', { body: { disabled: { enabled: true, message: 'moved', new_url: 'https://next.example.org/v1' } } });
    expect(on.status, on.text).toBe(200);
    try {
      const url = `${gw.url}/v1/status`;
      expect((await gw.call('/v1/status', { key: 'none' })).status).toBe(308);
      const r = await healthcheck(['--url', url]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`ok: ${url} answered HTTP 308: the gateway is disabled (kill switch on), clients are sent to another URL\n`);
    } finally {
      expect((await gw.call('/v1/admin/settings', { body: { disabled: { enabled: false } } })).status).toBe(200);
    }
    expect((await healthcheck(['--url', `${gw.url}/v1/status`])).code).toBe(0);
  });

  it('refuses a --timeout-ms that is not a positive integer', async () => {
    const r = await healthcheck(['--timeout-ms', '0']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/--timeout-ms.*expected a positive integer/);
  });
});

describe('runHealthcheck: what counts as healthy', () => {
  let server: Server;
  let base: string;
  let answer: (res: import('node:http').ServerResponse) => void = () => {};
  beforeAll(async () => {
    server = createServer((_req, res) => answer(res));
    base = await listen(server);
  });
  afterAll(() => close(server));

  const respond = (status: number, body: string, headers: Record<string, string> = {}) => (res: import('node:http').ServerResponse) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(body);
  };

  it('2xx with a JSON body is healthy', async () => {
    answer = respond(200, '{"runtimes":[]}');
    expect(await runHealthcheck(`${base}/v1/status`, 2000)).toEqual({ ok: true, message: `${base}/v1/status answered HTTP 200 with JSON` });
  });

  it('a 2xx that is not JSON is not', async () => {
    answer = respond(200, '<html>proxy page</html>', { 'content-type': 'text/html' });
    expect(await runHealthcheck(`${base}/v1/status`, 2000)).toEqual({ ok: false, message: `${base}/v1/status answered HTTP 200 but not JSON` });
  });

  it('a 5xx JSON answer is not', async () => {
    answer = respond(503, '{"error":{}}');
    expect(await runHealthcheck(`${base}/v1/status`, 2000)).toMatchObject({ ok: false, message: `${base}/v1/status answered HTTP 503` });
  });

  it('the kill switch\'s 308 is healthy and not followed to the other gateway; another redirect is not healthy', async () => {
    let followed = false;
    const other = createServer((_req, res) => {
      followed = true;
      respond(200, '{}')(res);
    });
    const otherBase = await listen(other);
    try {
      answer = respond(308, '{"status":"disabled"}', { location: `${otherBase}/v1/status` });
      const r = await runHealthcheck(`${base}/v1/status`, 2000);
      expect(r).toEqual({ ok: true, message: `${base}/v1/status answered HTTP 308: the gateway is disabled (kill switch on), clients are sent to another URL` });
      answer = respond(308, '{}', { location: `${otherBase}/v1/status` });
      expect(await runHealthcheck(`${base}/v1/status`, 2000)).toEqual({ ok: false, message: `${base}/v1/status answered HTTP 308` });
      answer = respond(302, '{"status":"disabled"}', { location: `${otherBase}/v1/status` });
      expect(await runHealthcheck(`${base}/v1/status`, 2000)).toEqual({ ok: false, message: `${base}/v1/status answered HTTP 302` });
      expect(followed).toBe(false);
    } finally {
      await close(other);
    }
  });

  it('headers in time but a body that stalls past the deadline is not', async () => {
    answer = (res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"runtimes":');
    };
    const t0 = Date.now();
    expect(await runHealthcheck(`${base}/v1/status`, 300)).toEqual({ ok: false, message: `${base}/v1/status: no answer within 300 ms` });
    expect(Date.now() - t0).toBeLessThan(2_000);
  });
});

describe('defaultStatusUrl', () => {
  it('is loopback on the listen port; a wildcard listen address is reached on loopback', () => {
    expect(defaultStatusUrl({})).toBe('http://127.0.0.1:8080/v1/status');
    expect(defaultStatusUrl({ GATEWAY_HOST: '0.0.0.0', DEVSHARD_PORT: '8080' })).toBe('http://127.0.0.1:8080/v1/status');
    expect(defaultStatusUrl({ GATEWAY_HOST: '::', DEVSHARD_PORT: '9000' })).toBe('http://127.0.0.1:9000/v1/status');
    expect(defaultStatusUrl({ GATEWAY_HOST: '10.0.0.5' })).toBe('http://10.0.0.5:8080/v1/status');
    expect(defaultStatusUrl({ GATEWAY_HOST: '::1' })).toBe('http://[::1]:8080/v1/status');
  });
});
