// Overview: kill switch, access mode per model, limits, capacity, rotation state per model.
import { html } from '../vendor/preact-htm.js';
import { useApi } from './hooks.mjs';
import { badge, ErrorBox, Loading } from './format.mjs';

export function OverviewPage() {
  const { data, error, loading } = useApi('/v1/admin/console/overview');
  if (error) return html`<${ErrorBox} error=${error} />`;
  if (loading || !data) return html`<${Loading} />`;
  const ks = data.kill_switch;
  const s = data.settings;
  const a = data.admission;
  const capacity = data.status?.capacity?.models ?? {};
  const access = Object.fromEntries((s.model_limits ?? []).map((m) => [m.model_id, m.access_mode]));
  const rotation = data.rotation?.latest_by_model ?? {};
  const rotationModels = Object.fromEntries((s.escrow_rotation?.models ?? []).map((m) => [m.model_id, m]));
  return html`
    <h1>Overview</h1>
    <section class="cards">
      <article class="card" id="kill-switch">
        <h2>Kill switch</h2>
        <p>${ks.enabled ? badge('ON: chat is redirected', 'failed') : badge('off', 'ok')}</p>
        ${ks.enabled && html`<p>${ks.message}</p><p>New URL: <code>${ks.new_url || '(none)'}</code></p>`}
      </article>
      <article class="card" id="limits">
        <h2>Limits</h2>
        <dl>
          <dt>Concurrent requests</dt><dd>${a.active_requests} of ${a.max_concurrent_requests || 'unlimited'}</dd>
          <dt>Input tokens in flight</dt><dd>${a.input_tokens_in_flight} of ${a.max_input_tokens_in_flight || 'unlimited'}</dd>
          <dt>Refused (429) so far</dt><dd>${a.rejected_total}</dd>
          <dt>max_tokens default / cap</dt><dd>${s.default_request_max_tokens} / ${s.request_max_tokens_cap}</dd>
        </dl>
      </article>
    </section>
    <h2>Models</h2>
    <div class="table-wrap">
    <table id="models">
      <thead><tr><th>Model</th><th>Access</th><th>Escrows active / routable</th><th>In flight</th><th>Rotation</th><th>Rotation stage</th><th>Last rotation error</th></tr></thead>
      <tbody>
        ${data.models.map((m) => {
          const c = capacity[m] ?? {};
          const r = rotation[m];
          const rm = rotationModels[m];
          return html`<tr>
            <td data-label="Model">${m}</td>
            <td data-label="Access">${badge(access[m] ?? c.access_mode ?? 'admin_only', access[m] === 'api_key' ? 'ok' : 'muted')}</td>
            <td data-label="Escrows">${c.active_devshards ?? 0} / ${c.routable_devshards ?? 0} ${c.routable === false ? badge('not routable', 'failed') : ''}</td>
            <td data-label="In flight">${c.in_flight ?? 0}</td>
            <td data-label="Rotation">${s.escrow_rotation?.enabled && rm ? `on: ${rm.target_count} regular, ${rm.temp_count} temporary` : 'off'}</td>
            <td data-label="Stage">${r ? html`<a href=${`#/rotation/${encodeURIComponent(m)}`}>${r.stage}</a>` : '–'}${r?.epoch !== undefined && r?.epoch !== null ? ` (epoch ${r.epoch})` : ''}</td>
            <td data-label="Last error">${r?.last_error ? html`${badge(r.last_error.kind, 'failed')} <a href=${`#/rotation/${encodeURIComponent(m)}`}>why?</a>` : '–'}</td>
          </tr>`;
        })}
      </tbody>
    </table>
    </div>`;
}
