// The admin key lives in sessionStorage only (this tab, until it closes): never in a URL, a cookie or a log.
const KEY = 'shardgate.console.adminKey';

export const getKey = () => sessionStorage.getItem(KEY);
export const setKey = (k) => sessionStorage.setItem(KEY, k);
export const clearKey = () => sessionStorage.removeItem(KEY);

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code ?? null;
  }
}

const listeners = new Set();
/** Called with no argument when the key is refused (401): the app shows the sign-in form. */
export const onSignedOut = (f) => listeners.add(f);

export async function api(path, { key = getKey(), signal } = {}) {
  const res = await fetch(path, { headers: key ? { authorization: `Bearer ${key}` } : {}, signal, cache: 'no-store' });
  const text = await res.text();
  let body;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  if (res.status === 401) {
    if (key === getKey()) {
      clearKey();
      for (const f of listeners) f();
    }
    throw new ApiError(401, body);
  }
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

/**
 * Server-sent events read with fetch (EventSource cannot send the Authorization header): calls
 * `onFrame` with each `data:` frame's JSON until `signal` aborts; `onState` hears 'open' / 'closed'.
 */
export async function live(path, { onFrame, onState, signal }) {
  const res = await fetch(path, { headers: { authorization: `Bearer ${getKey()}`, accept: 'text/event-stream' }, signal, cache: 'no-store' });
  if (res.status === 401) {
    clearKey();
    for (const f of listeners) f();
    return;
  }
  if (!res.ok || !res.body) throw new ApiError(res.status);
  onState?.('open');
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let at;
      while ((at = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, at);
        buffer = buffer.slice(at + 2);
        const data = frame.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        if (data) onFrame(JSON.parse(data));
      }
    }
  } finally {
    onState?.('closed');
  }
}
