// Rotation: `explain rotation` per model as a timeline, failures marked with their log marker and what to do.
import { html } from '../vendor/preact-htm.js';
import { useApi } from './hooks.mjs';
import { badge, ErrorBox, Loading, time } from './format.mjs';

export function RotationPage({ model }) {
  const { data, error } = useApi(`/v1/admin/console/rotation${model ? `?model=${encodeURIComponent(model)}` : ''}`);
  const models = useApi('/v1/admin/console/overview');
  return html`
    <h1>Rotation</h1>
    <form class="filters" onSubmit=${(e) => e.preventDefault()}>
      <label>Model <select value=${model ?? ''} onChange=${(e) => { location.hash = e.currentTarget.value ? `#/rotation/${encodeURIComponent(e.currentTarget.value)}` : '#/rotation'; }}>
        <option value="">all</option>${(models.data?.models ?? []).map((m) => html`<option value=${m}>${m}</option>`)}
      </select></label>
    </form>
    <${ErrorBox} error=${error} />
    ${!data ? html`<${Loading} />` : data.models.length === 0 ? html`<p class="muted">No rotation is recorded in this log${model ? ` for ${model}` : ''}.</p>` : data.models.map((m) => html`<${ModelRotation} m=${m} />`)}`;
}

function ModelRotation({ m }) {
  return html`<section class="rotation" data-model=${m.model}>
    <h2>${m.model}</h2>
    ${m.cycles.map((c) => html`<article class="card wide cycle">
      <h3>Cycle of epoch ${c.epoch} ${badge(c.verdict, /fail/.test(c.verdict) ? 'failed' : c.status === 'completed' ? 'ok' : 'warning')}</h3>
      <p class="muted">Boundary at height ${c.boundaryHeight}; stage ${c.stage.replace('_', ' ')}</p>
      <ol class="steps">${c.steps.map((s) => html`<li class=${s.text.startsWith('FAILED') ? 'step failed' : 'step'}>
        <span class="pos">#${s.position}</span> <span class="muted">${time(s.time)}</span> ${s.text}</li>`)}</ol>
      ${c.failures.length > 0 && html`<h4>Failures</h4>${c.failures.map((f) => html`<div class=${`failure ${f.recovered ? 'recovered' : ''}`}>
        <p>${badge(f.marker, f.recovered ? 'warning' : 'failed')} step <b>${f.step}</b>${f.role ? ` (${f.role})` : ''} at #${f.position}${f.recovered ? ' — recovered' : ''}</p>
        <p>The chain said <b>${f.error.kind}</b>: ${f.error.message}</p>
        ${f.suppressed && html`<p class="muted">Further creates of this role were suppressed for the epoch.</p>`}
        <p class="advice">What to do: ${f.advice}</p>
      </div>`)}`}
      ${c.settles.length > 0 && html`<h4>Settles</h4><ul class="plain">${c.settles.map((s) => html`<li><a href=${`#/escrow/${s.escrowId}`}>escrow ${s.escrowId}</a> (${s.role}): ${badge(s.state)}${s.reason ? ` ${s.reason}` : ''}</li>`)}</ul>`}
    </article>`)}
    ${m.replacements.length > 0 && html`<article class="card wide"><h3>Depletion replacements</h3>
      ${m.replacements.map((r) => html`<div class=${r.failure ? 'failure' : ''}>
        <p>#${r.position} ${time(r.time)}: <a href=${`#/escrow/${r.escrowId}`}>escrow ${r.escrowId}</a> (${r.reason}) ${r.failure ? badge(r.marker, 'failed') : r.replacementId ? html`replaced by <a href=${`#/escrow/${r.replacementId}`}>${r.replacementId}</a>` : 'under way'}</p>
        ${r.failure && html`<p>The chain said <b>${r.failure.kind}</b>: ${r.failure.message}</p><p class="advice">What to do: ${r.advice}</p>`}
      </div>`)}</article>`}
    <details><summary>As <code>shardgate explain rotation</code> prints it</summary><pre class="json">${m.text}</pre></details>
  </section>`;
}
