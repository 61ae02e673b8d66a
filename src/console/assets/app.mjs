// The console's shell: sign-in, navigation, and the page of the location's hash (#/escrows, #/escrow/7, ...).
import { html, render, useEffect, useState } from '../vendor/preact-htm.js';
import { api, clearKey, getKey, onSignedOut, setKey } from './api.mjs';
import { OverviewPage } from './page-overview.mjs';
import { EscrowsPage } from './page-escrows.mjs';
import { EscrowPage } from './page-escrow.mjs';
import { RotationPage } from './page-rotation.mjs';
import { RequestPage } from './page-request.mjs';
import { LivePage } from './page-live.mjs';

const NAV = [
  ['#/', 'Overview'],
  ['#/escrows', 'Escrows'],
  ['#/rotation', 'Rotation'],
  ['#/request', 'Request'],
  ['#/live', 'Live'],
];

function SignIn({ onSignedIn }) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    const key = new FormData(e.currentTarget).get('key')?.toString().trim() ?? '';
    e.currentTarget.reset();
    if (!key) return setError('Enter the admin key.');
    setBusy(true);
    try {
      await api('/v1/admin/console/overview', { key });
      setKey(key);
      setError(null);
      onSignedIn();
    } catch (err) {
      setError(err.status === 401 ? 'This is not the admin key (DEVSHARD_ADMIN_API_KEY): the console answers only to it.' : err.message);
    } finally {
      setBusy(false);
    }
  };
  return html`
    <main class="signin">
      <h1>shardgate console</h1>
      <form method="post" action="#" onSubmit=${submit} autocomplete="off">
        <label for="admin-key">Admin key</label>
        <input id="admin-key" name="key" type="password" autocomplete="off" spellcheck="false" required />
        <button type="submit" disabled=${busy}>Sign in</button>
        <p class="muted">Kept in this tab's session storage only; closing the tab forgets it.</p>
        ${error && html`<p class="error" role="alert">${error}</p>`}
      </form>
    </main>`;
}

function route(hash) {
  const parts = (hash.replace(/^#\/?/, '') || '').split('/').map(decodeURIComponent);
  switch (parts[0]) {
    case '':
      return html`<${OverviewPage} />`;
    case 'escrows':
      return html`<${EscrowsPage} />`;
    case 'escrow':
      return html`<${EscrowPage} id=${parts[1]} key=${parts[1]} />`;
    case 'rotation':
      return html`<${RotationPage} model=${parts[1]} />`;
    case 'request':
      return html`<${RequestPage} id=${parts[1]} key=${parts[1] ?? ''} />`;
    case 'live':
      return html`<${LivePage} />`;
    default:
      return html`<p>No such page. <a href="#/">Overview</a></p>`;
  }
}

function App() {
  const [signedIn, setSignedIn] = useState(getKey() !== null);
  const [hash, setHash] = useState(location.hash || '#/');
  useEffect(() => {
    const f = () => setHash(location.hash || '#/');
    addEventListener('hashchange', f);
    onSignedOut(() => setSignedIn(false));
    return () => removeEventListener('hashchange', f);
  }, []);
  if (!signedIn) return html`<${SignIn} onSignedIn=${() => setSignedIn(true)} />`;
  const section = '#/' + (hash.replace(/^#\/?/, '').split('/')[0] ?? '');
  const current = (href) => (href === '#/' ? section === '#/' : section === href || (href === '#/escrows' && section === '#/escrow'));
  return html`
    <header class="top">
      <a class="brand" href="#/">shardgate</a>
      <nav>${NAV.map(([href, text]) => html`<a href=${href} class=${current(href) ? 'current' : ''} aria-current=${current(href) ? 'page' : undefined}>${text}</a>`)}</nav>
      <button class="link" onClick=${() => { clearKey(); setSignedIn(false); }}>Sign out</button>
    </header>
    <main class="page">${route(hash)}</main>`;
}

render(html`<${App} />`, document.getElementById('app'));
