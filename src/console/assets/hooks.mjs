import { useEffect, useState } from '../vendor/preact-htm.js';
import { api } from './api.mjs';

/** GET `path` (null: nothing yet); answers {data, error, loading, reload}. */
export function useApi(path) {
  const [state, setState] = useState({ data: undefined, error: null, loading: path !== null });
  const [n, setN] = useState(0);
  useEffect(() => {
    if (path === null) return undefined;
    const ac = new AbortController();
    setState((s) => ({ ...s, loading: true, error: null }));
    api(path, { signal: ac.signal }).then(
      (data) => setState({ data, error: null, loading: false }),
      (error) => { if (error.name !== 'AbortError') setState({ data: undefined, error, loading: false }); },
    );
    return () => ac.abort();
  }, [path, n]);
  return { ...state, reload: () => setN(n + 1) };
}
