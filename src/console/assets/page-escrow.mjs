// One escrow: what it paid each host, its balance and nonce over time, time travel, verify's verdict, its timeline by pages.
import { html, useEffect, useState } from '../vendor/preact-htm.js';
import { api } from './api.mjs';
import { useApi } from './hooks.mjs';
import { BalanceChart } from './chart.mjs';
import { amount, badge, ErrorBox, Json, Loading, shortId, time } from './format.mjs';

const PAGE = 100;

export function EscrowPage({ id }) {
  const view = useApi(`/v1/admin/devshards/${id}`);
  const series = useApi(`/v1/admin/console/escrows/${id}/series`);
  const [travelTo, setTravelTo] = useState(null);
  const v = view.data;
  return html`
    <h1>Escrow ${id} ${v && badge(v.state)}</h1>
    ${view.error && html`<p class="warning">${view.error.status === 404 ? 'This gateway no longer holds this escrow (removed): its log remains below.' : view.error.message}</p>`}
    ${v && html`<p class="muted">${v.model_id} · protocol ${v.protocol_version ?? '–'} · epoch ${v.epoch_index} · deposit ${amount(v.amount)} · creator <span title=${v.creator}>${shortId(v.creator, 14)}</span></p>`}
    <section class="cards">
      <article class="card wide" id="paid"><h2>Paid to each host</h2>${v ? html`<${Payouts} id=${id} view=${v} />` : view.error ? html`<p class="muted">–</p>` : html`<${Loading} />`}</article>
      <article class="card wide"><h2>Balance and nonce</h2>
        ${series.error ? html`<${ErrorBox} error=${series.error} />` : series.data ? html`<${BalanceChart} series=${series.data} /><p class="muted">${series.data.total} points${series.data.total > series.data.points.length ? `, ${series.data.points.length} shown` : ''}</p>` : html`<${Loading} />`}
      </article>
      <article class="card" id="time-travel"><h2>Time travel</h2><${TimeTravel} id=${id} position=${travelTo} /></article>
      <article class="card" id="verify"><h2>Verify</h2><${Verify} id=${id} /></article>
    </section>
    <h2>Timeline</h2>
    <${Timeline} id=${id} onPick=${setTravelTo} />`;
}

function Payouts({ id, view }) {
  const fin = useApi(view.state === 'finalized' || view.state === 'settling' || view.state === 'settled' || view.state === 'settleDeferred' ? `/devshard/${id}/v1/finalize` : null);
  const cs = view.chain_settlement;
  if (!fin.data && !cs) return html`<p class="muted">Not finalized yet: the hosts have not signed a settlement.</p>`;
  const hostOf = (slot) => view.slots.find((s) => s.slot_id === slot)?.host ?? `slot ${slot}`;
  return html`
    ${fin.data && html`<div class="table-wrap"><table id="payouts">
      <thead><tr><th>Slot</th><th>Host</th><th>Paid (cost)</th><th>Missed</th><th>Invalid</th><th>Signed</th></tr></thead>
      <tbody>${fin.data.host_stats.map((h) => html`<tr>
        <td data-label="Slot">${h.slot_id}</td>
        <td data-label="Host"><span title=${hostOf(h.slot_id)}>${hostOf(h.slot_id)}</span></td>
        <td data-label="Paid" class="num">${amount(h.cost)}</td>
        <td data-label="Missed" class="num">${h.missed}</td>
        <td data-label="Invalid" class="num">${h.invalid}</td>
        <td data-label="Signed">${fin.data.signatures.some((s) => s.slot_id === h.slot_id) ? badge('signed', 'ok') : badge('no signature', 'failed')}</td>
      </tr>`)}</tbody>
    </table></div>
    <p class="muted">Settlement at nonce ${fin.data.nonce}, version ${fin.data.version}; protocol fees ${amount(fin.data.fees)} (shared among the hosts by the chain).</p>`}
    ${cs ? html`<dl class="inline">
      <dt>Settled at height</dt><dd>${cs.height}</dd>
      <dt>Total payout</dt><dd>${amount(cs.total_payout)}</dd>
      <dt>Host costs</dt><dd>${amount(cs.host_costs)}</dd>
      <dt>Fees</dt><dd>${amount(cs.fees)}</dd>
      <dt>Refund to creator</dt><dd>${amount(cs.refund)}</dd>
      <dt>Settle tx</dt><dd><code title=${cs.tx_hash}>${shortId(cs.tx_hash, 16)}</code></dd>
    </dl>` : html`<p class="muted">Not settled on chain yet.</p>`}`;
}

function TimeTravel({ id, position }) {
  const [pos, setPos] = useState('');
  const [state, setState] = useState(null);
  const [error, setError] = useState(null);
  const load = async (p) => {
    setPos(String(p));
    setError(null);
    try {
      setState(await api(`/v1/admin/console/escrows/${id}/state?position=${encodeURIComponent(p)}`));
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => {
    if (position !== null) void load(position);
  }, [position]);
  const go = (e) => {
    e.preventDefault();
    void load(new FormData(e.currentTarget).get('position'));
  };
  return html`
    <form onSubmit=${go} class="inline-form">
      <label for="travel-position">Position</label>
      <input id="travel-position" name="position" inputmode="numeric" pattern="[0-9]+" required value=${pos} onInput=${(e) => setPos(e.currentTarget.value)} />
      <button type="submit">Show state</button>
    </form>
    <p class="muted">Pick a row's position in the timeline, or type one: the state <code>replay --until</code> computes.</p>
    <${ErrorBox} error=${error} />
    ${state && html`<div id="travel-result">
      ${state.state ? html`<dl class="inline">
        <dt>At position</dt><dd>${state.position}</dd>
        <dt>State</dt><dd>${badge(state.state.state)}</dd>
        <dt>Nonce</dt><dd>${state.state.nonce}</dd>
        <dt>In flight</dt><dd>${state.state.inFlight}</dd>
        <dt>Balance</dt><dd>${amount(state.state.balance)}</dd>
        <dt>Reserved</dt><dd>${amount(state.state.reserved)}</dd>
      </dl>` : html`<p>Not created yet at position ${state.position}.</p>`}
      <p class="muted">Last event then: ${state.last.at(-1) ? `${state.last.at(-1).event} at ${state.last.at(-1).position}` : '–'}</p>
    </div>`}`;
}

function Verify({ id }) {
  const [run, setRun] = useState(false);
  const r = useApi(run ? `/v1/admin/console/escrows/${id}/verify` : null);
  if (!run) return html`<button onClick=${() => setRun(true)}>Run verify</button><p class="muted">Recomputes the hashes of its events and replays its devshard session.</p>`;
  if (r.error) return html`<${ErrorBox} error=${r.error} />`;
  if (!r.data) return html`<${Loading} what="Verifying" />`;
  const d = r.data;
  return html`<div id="verify-result">
    <p>${d.ok ? badge('verified', 'ok') : badge('FAILED', 'failed')} ${d.events} events</p>
    <ul class="plain">${d.checked.map((c) => html`<li>${c}</li>`)}</ul>
    ${d.failures.map((f) => html`<p class="error">position ${f.position}: ${f.reason}</p>`)}
    ${d.warnings.map((w) => html`<p class="warning">${w}</p>`)}
    ${d.devshard?.replica && html`<p class="muted">Replica: nonce ${d.devshard.replica.nonce}, ${d.devshard.replica.phase}, root <code>${shortId(d.devshard.replica.root, 16)}</code>; ${d.devshard.settlements.map((s) => `settlement at nonce ${s.nonce} ${s.matches ? 'equals the replica' : 'DIFFERS'}, ${s.valid}/${s.signatures} signatures valid`).join('; ')}</p>`}
    <button onClick=${r.reload}>Run again</button>
  </div>`;
}

function Timeline({ id, onPick }) {
  const [cursor, setCursor] = useState('before=end');
  const [open, setOpen] = useState(null);
  const { data, error, loading } = useApi(`/v1/admin/console/escrows/${id}/timeline?${cursor}&limit=${PAGE}`);
  if (error) return html`<${ErrorBox} error=${error} />`;
  if (!data) return html`<${Loading} />`;
  const pager = html`<div class="pager">
    <button onClick=${() => setCursor('after=0')} disabled=${!data.before}>Oldest</button>
    <button onClick=${() => setCursor(`before=${data.before}`)} disabled=${!data.before}>Older</button>
    <span class="muted">${data.entries.length ? `positions ${data.entries[0].position}–${data.entries.at(-1).position}` : 'no events'} of ${data.total} events${loading ? ' …' : ''}</span>
    <button onClick=${() => setCursor(`after=${data.after}`)} disabled=${!data.after}>Newer</button>
    <button onClick=${() => setCursor('before=end')} disabled=${!data.after}>Newest</button>
  </div>`;
  return html`${pager}
    <div class="table-wrap">
    <table id="timeline" class="timeline">
      <thead><tr><th>Position</th><th>Time</th><th>Event</th><th>What</th><th>Actor</th><th>Causation</th></tr></thead>
      <tbody>${data.entries.map((e) => html`
        <tr class=${`kind-${e.kind}`} data-position=${e.position} data-event=${e.event}>
          <td data-label="Position"><button class="link" title="Time travel to this position" onClick=${() => onPick(e.position)}>${e.position}</button></td>
          <td data-label="Time">${time(e.time)}</td>
          <td data-label="Event">${badge(e.kind)} ${e.event}${e.state ? html` → ${badge(e.state)}` : ''}</td>
          <td data-label="What">${e.summary}${e.details ? html` <button class="link" onClick=${() => setOpen(open === e.position ? null : e.position)}>${open === e.position ? 'less' : 'more'}</button>` : ''}
            ${open === e.position && html`<${Json} value=${e.details} />`}</td>
          <td data-label="Actor">${e.actor}</td>
          <td data-label="Causation"><span title=${e.correlation ?? ''}>${shortId(e.causation ?? e.correlation ?? '–', 14)}</span></td>
        </tr>`)}</tbody>
    </table>
    </div>
    ${pager}`;
}
