import { html } from '../vendor/preact-htm.js';

export const shortId = (s, n = 10) => (typeof s === 'string' && s.length > n + 2 ? `${s.slice(0, n)}…` : s ?? '–');
export const time = (iso) => (iso ? new Date(iso).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '–');
/** Amounts are decimal strings in the smallest unit: grouped by thousands. */
export const amount = (s) => (s === null || s === undefined ? '–' : String(s).replace(/\B(?=(\d{3})+(?!\d))/g, ','));
export const badge = (text, kind = text) => html`<span class=${`badge badge-${String(kind).replace(/[^a-z_-]/gi, '-').toLowerCase()}`}>${text}</span>`;
export const link = (href, text) => html`<a href=${href}>${text}</a>`;

export function Loading({ what = 'Loading' }) {
  return html`<p class="muted" role="status">${what}…</p>`;
}

export function ErrorBox({ error }) {
  return error ? html`<p class="error" role="alert">${error.message ?? String(error)}</p>` : null;
}

export function Json({ value }) {
  return html`<pre class="json">${JSON.stringify(value, null, 2)}</pre>`;
}
