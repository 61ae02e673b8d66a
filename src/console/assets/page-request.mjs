// A request: `explain request <id>`, by x-request-id or completion id.
import { html } from '../vendor/preact-htm.js';
import { useApi } from './hooks.mjs';
import { amount, badge, ErrorBox, Json, Loading, time } from './format.mjs';

export function RequestPage({ id }) {
  const { data, error } = useApi(id ? `/v1/admin/console/requests/${encodeURIComponent(id)}` : null);
  const search = (e) => {
    e.preventDefault();
    const v = new FormData(e.currentTarget).get('id')?.toString().trim();
    if (v) location.hash = `#/request/${encodeURIComponent(v)}`;
  };
  return html`
    <h1>A request</h1>
    <form class="inline-form" onSubmit=${search} role="search">
      <label for="request-id">Request id or completion id</label>
      <input id="request-id" name="id" value=${id ?? ''} placeholder="req-… or devshard-<escrow>-<nonce>" spellcheck="false" />
      <button type="submit">Explain</button>
    </form>
    ${id && (error ? html`<${ErrorBox} error=${error} />` : !data ? html`<${Loading} what="Reading the log" />` : html`<${Explanation} x=${data} />`)}`;
}

function Explanation({ x }) {
  const d = x.devshard;
  return html`<section id="request-result">
    <h2>Request <code>${x.request_id}</code></h2>
    <dl class="inline">
      <dt>Completion id</dt><dd><code>${x.completion_id}</code></dd>
      <dt>Escrow</dt><dd><a href=${`#/escrow/${x.escrow_id}`}>${x.escrow_id}</a></dd>
      <dt>Nonce</dt><dd>${x.nonce}</dd>
      <dt>Billed to the client</dt><dd>${amount(x.billing.billed)}</dd>
      <dt>Charged by the host</dt><dd>${amount(x.billing.charged)}</dd>
      ${d?.executor && html`<dt>Executor</dt><dd>${d.executor}</dd>`}
    </dl>
    <h3>The gateway's records</h3>
    <ul class="plain">${x.gateway.map((g) => html`<li>#${g.position} ${time(g.time)} ${badge(g.type.replace('Inference', '').toLowerCase())} ${g.type === 'InferenceStarted' ? `reserved ${amount(g.data.reservedCost)}` : `usage in ${g.data.usage?.promptTokens} out ${g.data.usage?.completionTokens}, billed ${amount(g.data.cost)}${g.data.reason ? ` (${g.data.reason})` : ''}`}</li>`)}</ul>
    ${d ? html`<h3>In the diffs</h3>
      <ul class="plain">${d.steps.map((s) => html`<li>diff nonce ${s.nonce} (#${s.position}): ${badge(s.tx.kind)} ${s.tx.detail}</li>`)}</ul>
      ${d.record && html`<p>Replica: ${badge(d.record.status)} executor slot ${d.record.executorSlot}, tokens in ${d.record.inputTokens} out ${d.record.outputTokens}, charged ${amount(d.record.actualCost)}${d.sealedAt !== undefined ? ` (sealed at nonce ${d.sealedAt})` : ''}</p>`}
      <p class="muted">${d.hosts.map((h) => `${h.host} applied through nonce ${h.applied}`).join('; ')}</p>
      ${d.failures.map((f) => html`<p class="error">${f}</p>`)}`
    : html`<p class="muted">No devshard diff carries this inference.</p>`}
    ${x.settlement && html`<p>Settlement at nonce ${x.settlement.nonce}: slot ${x.settlement.slot_id} is paid ${amount(x.settlement.slot_cost)} in all, this inference included; ${x.settlement.signatures} signatures.</p>`}
    <details><summary>JSON</summary><${Json} value=${x} /></details>
  </section>`;
}
