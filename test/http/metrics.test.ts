import { register as globalRegister } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createGatewayMetrics, MetricsRegistry, PROMETHEUS_CONTENT_TYPE } from '../../src/http/metrics.js';

/** The value of one sample line `name{labels} value` in a text exposition, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('metrics registry (prom-client)', () => {
  it('counts one series per label set, whether a value comes as a number or as its text', async () => {
    const r = new MetricsRegistry({ defaultMetrics: false });
    const c = r.counter('t_requests_total', 'Requests.', ['model', 'status']);
    c.inc({ model: 'm', status: 200 });
    c.inc({ status: '200', model: 'm' });
    c.inc({ model: 'm', status: 429 }, 2);
    const text = await r.render();
    expect(text).toContain('# HELP t_requests_total Requests.\n# TYPE t_requests_total counter\n');
    expect(sample(text, 't_requests_total{model="m",status="200"}')).toBe(2);
    expect(sample(text, 't_requests_total{model="m",status="429"}')).toBe(2);
  });

  it('each gateway has its own registry: two in one process do not collide, and the global one stays empty', async () => {
    const a = createGatewayMetrics();
    const b = createGatewayMetrics();
    a.chatRequests.inc({ model: 'm', status: 200 }, 5);
    b.chatRequests.inc({ model: 'm', status: 200 });
    expect(sample(await a.registry.render(), 'shardgate_chat_requests_total{model="m",status="200"}')).toBe(5);
    expect(sample(await b.registry.render(), 'shardgate_chat_requests_total{model="m",status="200"}')).toBe(1);
    expect(await globalRegister.metrics()).not.toContain('shardgate_');
  });

  it("serves Node's default process metrics beside ours", async () => {
    const text = await createGatewayMetrics().registry.render();
    for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes', 'process_start_time_seconds']) {
      expect(text, name).toMatch(new RegExp(`^# TYPE ${name} `, 'm'));
    }
    expect(PROMETHEUS_CONTENT_TYPE).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  it('runs its collectors before each render; a removed series is gone, a gauge keeps the last value set', async () => {
    const r = new MetricsRegistry({ defaultMetrics: false });
    const g = r.gauge('t_gauge', 'G.', ['escrow_id']);
    let value = 5;
    r.onCollect(() => g.set({ escrow_id: '1' }, value));
    expect(sample(await r.render(), 't_gauge{escrow_id="1"}')).toBe(5);
    value = 7;
    expect(sample(await r.render(), 't_gauge{escrow_id="1"}')).toBe(7);
    const c = r.counter('t_total', 'T.', ['model']);
    c.inc({ model: 'a' }, 3);
    c.remove({ model: 'a' });
    c.inc({ model: 'a' });
    expect(sample(await r.render(), 't_total{model="a"}')).toBe(1);
  });

  it('histograms: the latency buckets, cumulative, with sum and count', async () => {
    const m = createGatewayMetrics(new MetricsRegistry({ defaultMetrics: false }));
    m.chatLatency.observe({ model: 'a', stream: 'true' }, 0.07);
    m.chatLatency.observe({ model: 'a', stream: 'true' }, 3);
    const text = await m.registry.render();
    expect(sample(text, 'shardgate_chat_latency_seconds_bucket{le="0.05",model="a",stream="true"}')).toBe(0);
    expect(sample(text, 'shardgate_chat_latency_seconds_bucket{le="0.1",model="a",stream="true"}')).toBe(1);
    expect(sample(text, 'shardgate_chat_latency_seconds_bucket{le="5",model="a",stream="true"}')).toBe(2);
    expect(sample(text, 'shardgate_chat_latency_seconds_bucket{le="+Inf",model="a",stream="true"}')).toBe(2);
    expect(sample(text, 'shardgate_chat_latency_seconds_count{model="a",stream="true"}')).toBe(2);
    expect(sample(text, 'shardgate_chat_latency_seconds_sum{model="a",stream="true"}')).toBeCloseTo(3.07);
  });
});
