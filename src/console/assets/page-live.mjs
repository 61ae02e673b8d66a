// Live: events as they are committed (server-sent events read with fetch and the admin key), newest first, bounded.
import { html, useEffect, useState } from '../vendor/preact-htm.js';
import { live } from './api.mjs';
import { badge, time } from './format.mjs';

const KEEP = 300;

export function LivePage() {
  const [events, setEvents] = useState([]);
  const [state, setState] = useState('connecting');
  const [dropped, setDropped] = useState(0);
  useEffect(() => {
    const ac = new AbortController();
    live('/v1/admin/console/live', {
      signal: ac.signal,
      onState: setState,
      onFrame: (f) => {
        if (f.type === 'event') setEvents((xs) => [f.event, ...xs].slice(0, KEEP));
        else if (f.type === 'gap') setDropped((n) => n + f.dropped);
        else if (f.type === 'hello') setState(`live from position ${f.position}`);
      },
    }).catch((err) => { if (err.name !== 'AbortError') setState(`disconnected: ${err.message}`); });
    return () => ac.abort();
  }, []);
  return html`
    <h1>Live</h1>
    <p><span id="live-state" class=${`badge ${state.startsWith('live') ? 'badge-ok' : 'badge-warning'}`}>${state}</span> ${dropped > 0 && html`<span class="warning">${dropped} events skipped (this page fell behind)</span>`}</p>
    <div class="table-wrap">
    <table id="live">
      <thead><tr><th>Position</th><th>Time</th><th>Stream</th><th>Event</th><th>What</th><th>Actor</th></tr></thead>
      <tbody>${events.map((e) => html`<tr key=${e.position} data-position=${e.position} data-event=${e.event}>
        <td data-label="Position">${e.position}</td>
        <td data-label="Time">${time(e.time)}</td>
        <td data-label="Stream">${e.stream.startsWith('escrow-') && !e.stream.startsWith('escrow-create-') ? html`<a href=${`#/escrow/${e.stream.slice(7)}`}>${e.stream}</a>` : e.stream}</td>
        <td data-label="Event">${badge(e.kind)} ${e.event}</td>
        <td data-label="What">${e.summary}</td>
        <td data-label="Actor">${e.actor}</td>
      </tr>`)}</tbody>
    </table>
    </div>
    ${events.length === 0 && html`<p class="muted">Waiting for the next event…</p>`}`;
}
