import { describe, expect, it } from 'vitest';
import { MetricsRegistry } from '../../src/http/metrics.js';

describe('metrics registry series', () => {
  it('counts one series per label set, whether a value comes as a number or as its text', () => {
    const r = new MetricsRegistry();
    const c = r.counter('t_requests_total', 'Requests.', ['model', 'status']);
    c.inc({ model: 'm', status: 200 });
    c.inc({ status: '200', model: 'm' });
    c.inc({ model: 'm', status: 429 }, 2);
    expect(c.get({ model: 'm', status: 200 })).toBe(2);
    expect(r.render()).toBe(
      '# HELP t_requests_total Requests.\n# TYPE t_requests_total counter\n' +
        't_requests_total{model="m",status="200"} 2\nt_requests_total{model="m",status="429"} 2\n',
    );
  });

  it('refuses an unknown label even when a series with the other labels exists', () => {
    const c = new MetricsRegistry().counter('t_total', 'T.', ['model', 'status']);
    c.inc({ model: 'm' });
    c.inc({ model: 'm', status: 200 });
    expect(() => c.inc({ model: 'm', code: 'x' })).toThrow(/unknown label 'code'/);
    expect(() => c.inc({ model: 'm', status: 200, code: 'x' })).toThrow(/unknown label 'code'/);
    expect(c.get({ model: 'm' })).toBe(1);
  });

  it('starts a removed series again from zero; a gauge keeps the last value set', () => {
    const r = new MetricsRegistry();
    const c = r.counter('t_total', 'T.', ['model']);
    const g = r.gauge('t_gauge', 'G.', ['escrow_id']);
    const h = r.histogram('t_seconds', 'H.', ['model'], [0.1, 1]);
    c.inc({ model: 'a' }, 3);
    c.remove({ model: 'a' });
    c.inc({ model: 'a' });
    expect(c.get({ model: 'a' })).toBe(1);
    g.set({ escrow_id: '1' }, 5);
    g.set({ escrow_id: '1' }, 7);
    expect(g.get({ escrow_id: '1' })).toBe(7);
    h.observe({ model: 'a' }, 0.05);
    h.observe({ model: 'a' }, 0.5);
    expect(r.render()).toContain('t_seconds_bucket{model="a",le="0.1"} 1\nt_seconds_bucket{model="a",le="1"} 2\nt_seconds_bucket{model="a",le="+Inf"} 2');
    const unlabelled = r.counter('t_plain_total', 'P.');
    unlabelled.inc();
    unlabelled.inc({}, 2);
    expect(unlabelled.get()).toBe(3);
  });
});
