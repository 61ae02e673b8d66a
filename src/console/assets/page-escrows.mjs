// Escrows: one row each; filter by model and state.
import { html, useState } from '../vendor/preact-htm.js';
import { useApi } from './hooks.mjs';
import { amount, badge, ErrorBox, Loading, shortId } from './format.mjs';

export function EscrowsPage() {
  const [model, setModel] = useState('');
  const [state, setState] = useState('');
  const q = new URLSearchParams({ ...(model ? { model } : {}), ...(state ? { state } : {}) }).toString();
  const all = useApi('/v1/admin/console/escrows');
  const { data, error, loading } = useApi(`/v1/admin/console/escrows${q ? `?${q}` : ''}`);
  const models = all.data?.models ?? [];
  const states = all.data?.states ?? [];
  return html`
    <h1>Escrows</h1>
    <form class="filters" onSubmit=${(e) => e.preventDefault()}>
      <label>Model <select name="model" value=${model} onChange=${(e) => setModel(e.currentTarget.value)}>
        <option value="">all</option>${models.map((m) => html`<option value=${m}>${m}</option>`)}
      </select></label>
      <label>State <select name="state" value=${state} onChange=${(e) => setState(e.currentTarget.value)}>
        <option value="">all</option>${states.map((s) => html`<option value=${s}>${s}</option>`)}
      </select></label>
    </form>
    <${ErrorBox} error=${error} />
    ${loading && !data ? html`<${Loading} />` : html`
    <div class="table-wrap">
    <table id="escrows">
      <thead><tr><th>Id</th><th>Model</th><th>Protocol</th><th>State</th><th>Balance</th><th>Usable</th><th>Nonce</th><th>In flight</th><th>Epoch</th><th>Prune</th><th>Hosts</th></tr></thead>
      <tbody>
        ${(data?.data ?? []).map((r) => html`<tr data-escrow=${r.id}>
          <td data-label="Id"><a href=${`#/escrow/${r.id}`}>${r.id}</a></td>
          <td data-label="Model">${shortId(r.model, 24)}</td>
          <td data-label="Protocol">${r.protocol_version ?? '–'}</td>
          <td data-label="State">${badge(r.state)}</td>
          <td data-label="Balance" class="num">${amount(r.balance)}</td>
          <td data-label="Usable" class="num">${amount(r.usable_balance)}</td>
          <td data-label="Nonce" class="num">${r.nonce}</td>
          <td data-label="In flight" class="num">${r.in_flight}</td>
          <td data-label="Epoch" class="num">${r.epoch}</td>
          <td data-label="Prune">${pruneText(r)}</td>
          <td data-label="Hosts"><span class="hosts">${r.hosts.map((h) => html`<span class="host" title=${h}>${shortId(h, 12)}</span>`)}</span></td>
        </tr>`)}
      </tbody>
    </table>
    </div>
    ${data?.data?.length === 0 && html`<p class="muted">No escrow matches.</p>`}`}`;
}

function pruneText(r) {
  if (r.expired) return badge('settle window closed', 'failed');
  if (!r.prune) return '–';
  const soon = r.prune.blocks_until_prune !== null && r.prune.blocks_until_prune < 200;
  const text = `settle by epoch ${r.prune.settle_deadline_epoch}${r.prune.blocks_until_prune !== null ? ` (${r.prune.blocks_until_prune} blocks to prune)` : ''}`;
  return soon ? badge(text, 'warning') : html`<span class="muted">${text}</span>`;
}
