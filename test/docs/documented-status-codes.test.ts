/**
 * Issue 38 item 5: the docs said what the gateway does not do (pool-mode /v1/finalize 409, a
 * deposit below min_amount `below_min_amount`, a creator not allowlisted 422). The table of status
 * codes in docs/http.md ("Status codes (checked against the gateway)") is read here and every row
 * is exercised through a real test gateway; and every `<status> \`<code>\`` pair written anywhere in
 * README.md or docs/*.md must agree with the table, so the prose cannot drift from it either.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES_DEFAULT, VARIABLES } from '../../src/config/index.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type CallResult, type TestGateway } from '../helpers/gateway.js';
import { repoRoot } from '../helpers/store-dist.js';

interface Row {
  status: number;
  /** null: an empty body (`—`). */
  code: string | null;
  when: string;
}

const httpDoc = readFileSync(join(repoRoot, 'docs/http.md'), 'utf8');

/** The rows between the status-codes markers of docs/http.md. */
function documentedRows(): Row[] {
  const begin = httpDoc.indexOf('<!-- status-codes:begin -->');
  const end = httpDoc.indexOf('<!-- status-codes:end -->');
  expect(begin, 'status-codes markers in docs/http.md').toBeGreaterThanOrEqual(0);
  expect(end).toBeGreaterThan(begin);
  const lines = httpDoc.slice(begin, end).split('\n').filter((l) => l.startsWith('|'));
  expect(lines[0]).toBe('| Status | Code | When |');
  return lines.slice(2).map((line) => {
    const cells = line.split('|').slice(1, -1).map((c) => c.trim());
    expect(cells, line).toHaveLength(3);
    const [status, code, when] = cells as [string, string, string];
    expect(status, line).toMatch(/^[1-5]\d\d$/);
    if (code !== '—') expect(code, line).toMatch(/^`[a-z][a-z0-9_]*`$/);
    return { status: Number(status), code: code === '—' ? null : code.slice(1, -1), when };
  });
}

/** Codes the gateway no longer answers with (an older log's chain-error kind): no doc may promise them. */
const NEVER_ANSWERED = ['below_min_amount'];

/** Every `<status> \`<code>\`` pair (also `**<status>** \`<code>\``) in README.md and docs/*.md, with where it is. */
function statusCodePairs(): { file: string; line: number; status: number; code: string }[] {
  const files = ['README.md', ...readdirSync(join(repoRoot, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const out: { file: string; line: number; status: number; code: string }[] = [];
  for (const file of files) {
    readFileSync(join(repoRoot, file), 'utf8')
      .split('\n')
      .forEach((text, i) => {
        for (const m of text.matchAll(/(?:\*\*)?\b([1-5]\d\d)\b(?:\*\*)?\s+`([a-z][a-z0-9_]*)`/g)) out.push({ file, line: i + 1, status: Number(m[1]), code: m[2]! });
      });
  }
  return out;
}

describe('the status codes docs/http.md documents are the gateway\'s', () => {
  let gw: TestGateway;
  let ids: string[];
  const create = (body: Record<string, unknown>) =>
    gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: gw.keys.privateKey, chain_id: 'shardgate-devnet', register: true, ...body } });

  /** One request per documented code, answering what the gateway said. */
  const scenarios: Record<string, () => Promise<CallResult>> = {
    // Pool mode with two devshards.
    not_single_escrow: () => gw.call('/v1/finalize', { method: 'POST' }),
    amount_out_of_range: () => create({ amount: '1' }),
    not_allowlisted: () => create({ private_key: gw.devnet!.notAllowlisted.privateKeyHex }),
    insufficient_funds: () => create({ amount: String(gw.devnet!.chain.balanceOf(gw.devnet!.creatorAddresses[0]!) + 1n) }),
    wrong_chain_id: () => create({ chain_id: 'another-chain' }),
    epoch_limit: async () => {
      const p = gw.devnet!.chain.state.params;
      const limit = p.maxEscrowsPerEpoch;
      p.maxEscrowsPerEpoch = gw.devnet!.chain.state.escrowsPerEpoch[gw.devnet!.chain.epoch().epochIndex] ?? 0;
      try {
        return await create({});
      } finally {
        p.maxEscrowsPerEpoch = limit;
      }
    },
    invalid_api_key: () => gw.call('/v1/admin/devshards', { key: 'sk-not-a-key' }),
    model_admin_only: () => gw.call('/v1/chat/completions', { key: 'client', body: { model: MODEL, messages: [{ role: 'user', content: 'Hi' }] } }),
    model_not_found: () => gw.call('/v1/chat/completions', { body: { model: 'no-such/model', messages: [{ role: 'user', content: 'Hi' }] } }),
    request_too_large: () => gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'x'.repeat(MAX_BODY_BYTES_DEFAULT) }] } }),
    not_finalized: () => gw.call(`/devshard/${ids[0]}/v1/finalize`, { method: 'GET' }),
    not_settled: () => gw.call(`/v1/admin/devshards/${ids[1]}`, { method: 'DELETE' }),
    '(empty body)': () => gw.call('/devshard//v1/finalize', { method: 'POST' }),
  };

  beforeAll(async () => {
    gw = await startTestGateway();
    ids = [await createEscrowViaApi(gw), await createEscrowViaApi(gw)];
  });
  afterAll(() => disposeTestGateway(gw));

  const rows = documentedRows();

  it('documents at least the answers issue 38 found wrong, each code once, and a request for each', () => {
    const byCode = new Map(rows.map((r) => [r.code, r.status]));
    expect(byCode.get('not_single_escrow')).toBe(400);
    expect(byCode.get('amount_out_of_range')).toBe(400);
    expect(byCode.get('not_allowlisted')).toBe(403);
    expect(rows.map((r) => r.code).filter((c, i, all) => all.indexOf(c) !== i)).toEqual([]);
    expect(rows.map((r) => r.code ?? '(empty body)').sort()).toEqual(Object.keys(scenarios).sort());
  });

  for (const row of rows) {
    it(`${row.status} ${row.code ?? '(empty body)'}: ${row.when.slice(0, 80)}`, async () => {
      const r = await scenarios[row.code ?? '(empty body)']!();
      expect(r.status, r.text).toBe(row.status);
      if (row.code === null) expect(r.text).toBe('');
      else expect(r.json?.error?.code, r.text).toBe(row.code);
    });
  }

  it('README.md and docs/*.md pair each documented code with its documented status, and promise no retired code', () => {
    const table = new Map(rows.filter((r) => r.code !== null).map((r) => [r.code!, r.status]));
    const wrong = statusCodePairs()
      .filter((p) => (table.has(p.code) && table.get(p.code) !== p.status) || NEVER_ANSWERED.includes(p.code))
      .map((p) => `${p.file}:${p.line}: ${p.status} \`${p.code}\` (table: ${table.get(p.code) ?? 'never answered'})`);
    expect(wrong).toEqual([]);
    for (const code of NEVER_ANSWERED) expect(table.has(code), code).toBe(false);
  });
});

describe('DEVSHARD_TX_GAS_LIMIT in the docs', () => {
  it('is stated as the gateway\'s default (the network gateway\'s 500000), and the spec\'s 700000 is named as the spec\'s, never as ours', () => {
    const gas = VARIABLES.find((v) => v.name === 'DEVSHARD_TX_GAS_LIMIT')!;
    expect(gas.default).toBe('500000');
    // The meaning (the README table) says where the default comes from and how it differs from the spec.
    expect(gas.meaning).toContain('700000');
    expect(gas.meaning).toMatch(/devshardctl|DefaultGasLimit/);
    const chainDoc = readFileSync(join(repoRoot, 'docs/chain.md'), 'utf8');
    expect(chainDoc).toContain(`\`DEVSHARD_TX_GAS_LIMIT\` (${gas.default})`);
    // Wherever our docs write 700000 (or 700,000), they say it is the spec's reference value.
    const files = ['README.md', ...readdirSync(join(repoRoot, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    for (const file of files) {
      for (const line of readFileSync(join(repoRoot, file), 'utf8').split('\n')) {
        if (/\b700[,\s]?000\b/.test(line)) expect(line, `${file}: ${line}`).toMatch(/spec/i);
      }
    }
  });
});
