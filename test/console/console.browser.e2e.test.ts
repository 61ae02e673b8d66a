/**
 * The operator console in a real browser (issue 43): a gateway on the devnet that served chats,
 * finalized and settled an escrow and ran a rotation the chain refused; the tests sign in and walk
 * every page, checking what a person sees, and save screenshots for docs/console.md.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeTestGateway } from '../helpers/gateway.js';
import { launchChromium } from './browser.js';
import { chat, startConsoleScenario, type ConsoleScenario } from './scenario.js';

const SHOTS = join(import.meta.dirname, '..', '..', 'docs', 'console');
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

describe('the operator console in Chromium', () => {
  let s: ConsoleScenario;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  /** What the browser reported: CSP violations, script errors, failed requests. */
  const problems: string[] = [];

  beforeAll(async () => {
    browser = await launchChromium();
    s = await startConsoleScenario();
    mkdirSync(SHOTS, { recursive: true });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.on('console', (m) => {
      // A refused key's 401 is the answer the sign-in form reads; anything else the browser reports is a fault.
      if (m.type() === 'error' && !m.text().includes('status of 401')) problems.push(`console: ${m.text()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400 && r.status() !== 401) problems.push(`${r.status()} ${r.url()}`);
    });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await disposeTestGateway(s?.gw);
  });

  const shot = (name: string, p: Page = page, fullPage = true) => p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage });
  const goto = async (hash: string) => {
    await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
  };

  it('serves /console and its assets with the strict Content-Security-Policy, from the package', async () => {
    for (const path of ['/console', '/console/assets/app.mjs', '/console/assets/console.css', '/console/vendor/preact-htm.js', '/console/vendor/uplot.js', '/console/vendor/uplot.css']) {
      const r = await fetch(s.gw.url + path);
      expect(r.status, path).toBe(200);
      expect(r.headers.get('content-security-policy'), path).toBe(CSP);
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      const text = await r.text();
      if (path === '/console') {
        // No inline script or style: every script and stylesheet comes from a file of this origin.
        expect(text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
        expect(text).not.toMatch(/<style|style=/);
        expect(text).not.toMatch(/https?:\/\//);
      }
    }
  });

  it('every data call answers 401 with a client key or no key, with the OpenAI-style error body', async () => {
    const paths = ['/v1/admin/console/overview', '/v1/admin/console/escrows', `/v1/admin/console/escrows/${s.settled}/timeline`, `/v1/admin/console/escrows/${s.settled}/series`, `/v1/admin/console/escrows/${s.settled}/state?position=1`, `/v1/admin/console/escrows/${s.settled}/verify`, '/v1/admin/console/rotation', `/v1/admin/console/requests/${s.requests[0]!.requestId}`, '/v1/admin/console/live'];
    for (const path of paths) {
      for (const key of ['client', 'none'] as const) {
        const r = await s.gw.call(path, { key });
        expect(r.status, `${path} with ${key}`).toBe(401);
        expect(r.json.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key' });
        expect(r.headers.get('www-authenticate')).toBe('Bearer');
      }
    }
    // Documented in /openapi.json, admin key only.
    const doc = (await s.gw.call('/openapi.json', { key: 'none' })).json;
    for (const path of ['/v1/admin/console/overview', '/v1/admin/console/escrows', '/v1/admin/console/escrows/{id}/timeline', '/v1/admin/console/escrows/{id}/series', '/v1/admin/console/escrows/{id}/state', '/v1/admin/console/escrows/{id}/verify', '/v1/admin/console/rotation', '/v1/admin/console/requests/{id}', '/v1/admin/console/live']) {
      expect(doc.paths[path]?.get, path).toBeDefined();
      expect(doc.paths[path].get.security).toEqual([{ adminKey: [] }]);
      expect(doc.paths[path].get.responses['401']).toBeDefined();
    }
  });

  it('a client key stays at the sign-in form; the admin key signs in and is kept in sessionStorage only', async () => {
    await page.goto(`${s.gw.url}/console`);
    await page.locator('#admin-key').fill(s.gw.keys.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'not the admin key' }).waitFor();
    await shot('sign-in');
    await page.locator('#admin-key').fill(s.gw.keys.adminApiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    expect(page.url()).not.toContain(s.gw.keys.adminApiKey);
    expect(await page.evaluate('({ session: Object.values(sessionStorage), local: Object.values(localStorage), cookie: document.cookie })')).toEqual({ session: [s.gw.keys.adminApiKey], local: [], cookie: '' });
    // Never in a log line of the gateway either.
    expect(s.gw.logs.some((l) => l.includes(s.gw.keys.adminApiKey))).toBe(false);
  });

  it('Overview: kill switch, access mode, limits, capacity and the rotation state of the model', async () => {
    await goto('#/');
    const models = page.locator('#models tbody tr');
    await models.first().waitFor();
    const row = await models.first().innerText();
    expect(row).toContain('api_key');
    expect(row).toContain('insufficient_funds');
    expect(await page.locator('#kill-switch').innerText()).toContain('off');
    expect(await page.locator('#limits').innerText()).toContain('Concurrent requests');
    await shot('overview');
  });

  it("Escrows: the settled escrow's row, and the filter by state", async () => {
    await goto('#/escrows');
    const settledRow = page.locator(`#escrows tr[data-escrow="${s.settled}"]`);
    await settledRow.waitFor();
    const text = await settledRow.innerText();
    expect(text).toContain('settled');
    expect(text).toContain('v4.1');
    await page.locator(`#escrows tr[data-escrow="${s.serving}"]`).waitFor();
    await shot('escrows');
    await page.locator('select[name="state"]').selectOption('active');
    await settledRow.waitFor({ state: 'detached' });
    await page.locator(`#escrows tr[data-escrow="${s.serving}"]`).waitFor();
    await page.locator('select[name="state"]').selectOption('');
  });

  it('One escrow: its timeline reaches "settled", what it paid each host, time travel to an earlier position, verify', async () => {
    await page.locator(`#escrows tr[data-escrow="${s.settled}"] a`).first().click();
    await page.getByRole('heading', { name: `Escrow ${s.settled}` }).waitFor();
    const settledRow = page.locator('#timeline tr[data-event="EscrowSettled"]');
    await settledRow.waitFor();
    expect(await settledRow.innerText()).toContain('settled');
    for (const event of ['EscrowCreated', 'EscrowFinalized', 'EscrowSettleRequested', 'DevshardDiffSent', 'InferencesRecorded']) {
      expect(await page.locator(`#timeline tr[data-event="${event}"]`).count(), event).toBeGreaterThan(0);
    }
    // A diff shows its nonce, txs and root; the finalize its signatures (behind "more").
    expect(await page.locator('#timeline tr[data-event="DevshardDiffSent"]').first().innerText()).toMatch(/diff nonce 1: StartInference#1; root [0-9a-f]{12}/);
    // What it paid each host: one row per slot, from the signed settlement.
    const payouts = page.locator('#payouts tbody tr');
    await payouts.first().waitFor();
    expect(await payouts.count()).toBe(3);
    expect(await page.locator('#paid').innerText()).toContain('Refund to creator');
    await page.locator('#balance-chart canvas').first().waitFor();
    await page.getByRole('button', { name: 'Run verify' }).click();
    await page.locator('#verify-result').getByText('verified').waitFor();
    await shot('escrow');

    // Time travel: the position of its registration, before any chat: active, nonce 0.
    const registered = await page.locator('#timeline tr[data-event="EscrowRegistered"]').getAttribute('data-position');
    await page.locator(`#timeline tr[data-event="EscrowRegistered"] td button`).first().click();
    const result = page.locator('#travel-result');
    await result.getByText(`${registered}`, { exact: true }).waitFor();
    const travelled = await result.innerText();
    expect(travelled).toMatch(/State\s+active/);
    expect(travelled).toMatch(/Nonce\s+0/);
    expect(travelled).toContain('EscrowRegistered');
  });

  it('Rotation: the failed create, its marker, the chain\'s reason and what to do', async () => {
    await page.getByRole('link', { name: 'Rotation' }).click();
    const failure = page.locator('.rotation .failure').first();
    await failure.waitFor();
    const text = await failure.innerText();
    expect(text).toContain('escrow_rotation_create_failed');
    expect(text).toContain('insufficient_funds');
    expect(text).toContain('What to do: The creator account cannot pay');
    expect(await page.locator('.rotation ol.steps li.failed').count()).toBeGreaterThan(0);
    await shot('rotation');
  });

  it('A request: found by its x-request-id and by its completion id', async () => {
    await page.getByRole('link', { name: 'Request' }).click();
    const { requestId, completionId } = s.requests[1]!;
    await page.locator('#request-id').fill(requestId);
    await page.getByRole('button', { name: 'Explain' }).click();
    const result = page.locator('#request-result');
    await result.getByText(completionId, { exact: true }).waitFor();
    expect(await result.innerText()).toMatch(/Finish/);
    await shot('request');
    await page.locator('#request-id').fill(completionId);
    await page.getByRole('button', { name: 'Explain' }).click();
    await result.locator('h2').getByText(requestId, { exact: true }).waitFor();
  });

  it('Live: a new chat appears without a reload', async () => {
    await page.getByRole('link', { name: 'Live' }).click();
    await page.locator('#live-state').getByText('live from position').waitFor();
    const r = await chat(s.gw, 'seen live?');
    expect(r.status, r.text).toBe(200);
    const row = page.locator(`#live tr[data-event="InferencesRecorded"]`).filter({ hasText: `escrow-${s.serving}` }).first();
    await row.waitFor();
    expect(await row.innerText()).toMatch(/finished/);
    await shot('live');
  });

  it('works at a phone width', async () => {
    // The same tab (the key is in this tab's session storage), narrowed to a phone's width.
    const phone = page;
    await phone.setViewportSize({ width: 390, height: 844 });
    await goto(`#/escrow/${s.settled}`);
    await phone.locator('#timeline tr[data-event="EscrowSettled"]').waitFor();
    // No horizontal scrolling of the page itself.
    expect(await phone.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await shot('escrow-phone', phone, false);
    await goto('#/escrows');
    await phone.locator(`#escrows tr[data-escrow="${s.settled}"]`).waitFor();
    await shot('escrows-phone', phone, false);
    await phone.setViewportSize({ width: 1280, height: 900 });
  });

  it('the browser reported no CSP violation and no script error', () => {
    expect(problems).toEqual([]);
  });
});
