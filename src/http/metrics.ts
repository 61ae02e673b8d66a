/**
 * A small Prometheus registry (text exposition format 0.0.4): counters, gauges and histograms with
 * labels. Hand-written to avoid a dependency; kept to what /metrics needs.
 */

export type Labels = Record<string, string | number>;

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const escapeHelp = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/** Series key: the label values in name order, NUL-separated (a NUL inside a value becomes U+FFFD). */
function labelKey(labels: Labels, names: readonly string[]): string {
  for (const k in labels) if (!names.includes(k)) throw new Error(`unknown label '${k}'`);
  let key = '';
  for (let i = 0; i < names.length; i++) {
    const v = labels[names[i]!];
    let text = v === undefined ? '' : String(v);
    if (text.includes('\u0000')) text = text.replaceAll('\u0000', '\uFFFD');
    key = i === 0 ? text : `${key}\u0000${text}`;
  }
  return key;
}

const labelValues = (key: string, names: readonly string[]): string[] => (names.length === 0 ? [] : key.split('\u0000'));

function renderLabels(names: readonly string[], values: readonly string[], extra?: [string, string]): string {
  const parts = names.map((n, i) => `${n}="${escapeLabel(values[i] ?? '')}"`);
  if (extra) parts.push(`${extra[0]}="${escapeLabel(extra[1])}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}

interface Metric {
  readonly name: string;
  render(): string;
}

abstract class Base<S extends object> implements Metric {
  protected series = new Map<string, S>();
  /**
   * The same series, found by walking the label values in name order (one Map level per label) so
   * the per-request paths build no key string. Filled only for fully labelled calls; a value and
   * its String() may both lead to one series. Cleared with `remove`/`reset`.
   */
  private index = new Map<unknown, unknown>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    private readonly type: string,
  ) {
    if (!NAME.test(name)) throw new Error(`invalid metric name '${name}'`);
    for (const l of labelNames) if (!LABEL.test(l) || l === 'le') throw new Error(`invalid label name '${l}'`);
  }
  protected abstract renderSeries(values: string[], s: S): string[];
  protected abstract fresh(): S;
  /** The series of `labels`, created when new. */
  protected seriesOf(labels: Labels): S {
    return this.cached(labels) ?? this.slowSeriesOf(labels);
  }
  /** The series found in `index`, or undefined (then the caller takes the checked path). */
  private cached(labels: Labels): S | undefined {
    const names = this.labelNames;
    let count = 0;
    for (const _ in labels) count++;
    if (count !== names.length) return undefined;
    if (count === 0) return this.index.get(undefined) as S | undefined;
    let node = this.index;
    const last = names.length - 1;
    for (let i = 0; i < last; i++) {
      const next = node.get(labels[names[i]!]) as Map<unknown, unknown> | undefined;
      if (next === undefined) return undefined;
      node = next;
    }
    return node.get(labels[names[last]!]) as S | undefined;
  }
  private slowSeriesOf(labels: Labels): S {
    const key = labelKey(labels, this.labelNames);
    let s = this.series.get(key);
    if (!s) this.series.set(key, (s = this.fresh()));
    const names = this.labelNames;
    if (names.length === 0) this.index.set(undefined, s);
    else if (names.every((n) => labels[n] !== undefined)) {
      let node = this.index;
      for (let i = 0; i < names.length - 1; i++) {
        const v = labels[names[i]!];
        let next = node.get(v) as Map<unknown, unknown> | undefined;
        if (!next) node.set(v, (next = new Map()));
        node = next;
      }
      node.set(labels[names[names.length - 1]!], s);
    }
    return s;
  }
  remove(labels: Labels = {}): void {
    this.series.delete(labelKey(labels, this.labelNames));
    this.index.clear();
  }
  reset(): void {
    this.series.clear();
    this.index.clear();
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} ${this.type}`];
    for (const [key, s] of this.series) lines.push(...this.renderSeries(labelValues(key, this.labelNames), s));
    return lines.join('\n');
  }
}

export class Counter extends Base<{ v: number }> {
  constructor(name: string, help: string, labelNames: readonly string[] = []) {
    super(name, help, labelNames, 'counter');
  }
  inc(labels: Labels = {}, by = 1): void {
    if (by < 0) throw new Error('counters only go up');
    this.seriesOf(labels).v += by;
  }
  protected fresh(): { v: number } {
    return { v: 0 };
  }
  get(labels: Labels = {}): number {
    return this.series.get(labelKey(labels, this.labelNames))?.v ?? 0;
  }
  protected renderSeries(values: string[], s: { v: number }): string[] {
    return [`${this.name}${renderLabels(this.labelNames, values)} ${formatValue(s.v)}`];
  }
}

export class Gauge extends Base<{ v: number }> {
  constructor(name: string, help: string, labelNames: readonly string[] = []) {
    super(name, help, labelNames, 'gauge');
  }
  set(labels: Labels, value: number): void {
    this.seriesOf(labels).v = value;
  }
  protected fresh(): { v: number } {
    return { v: 0 };
  }
  get(labels: Labels = {}): number | undefined {
    return this.series.get(labelKey(labels, this.labelNames))?.v;
  }
  protected renderSeries(values: string[], s: { v: number }): string[] {
    return [`${this.name}${renderLabels(this.labelNames, values)} ${formatValue(s.v)}`];
  }
}

interface HistogramSeries {
  counts: number[];
  sum: number;
  count: number;
}

export class Histogram extends Base<HistogramSeries> {
  readonly buckets: readonly number[];
  constructor(name: string, help: string, labelNames: readonly string[] = [], buckets: readonly number[] = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]) {
    super(name, help, labelNames, 'histogram');
    this.buckets = [...buckets].sort((a, b) => a - b);
  }
  observe(labels: Labels, value: number): void {
    const s = this.seriesOf(labels);
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) s.counts[i] = (s.counts[i] ?? 0) + 1;
    s.sum += value;
    s.count++;
  }
  protected fresh(): HistogramSeries {
    return { counts: this.buckets.map(() => 0), sum: 0, count: 0 };
  }
  protected renderSeries(values: string[], s: HistogramSeries): string[] {
    const lines = this.buckets.map((b, i) => `${this.name}_bucket${renderLabels(this.labelNames, values, ['le', formatValue(b)])} ${s.counts[i] ?? 0}`);
    lines.push(`${this.name}_bucket${renderLabels(this.labelNames, values, ['le', '+Inf'])} ${s.count}`);
    lines.push(`${this.name}_sum${renderLabels(this.labelNames, values)} ${formatValue(s.sum)}`);
    lines.push(`${this.name}_count${renderLabels(this.labelNames, values)} ${s.count}`);
    return lines;
  }
}

export class MetricsRegistry {
  private metrics = new Map<string, Metric>();
  /** Called before each render, e.g. to copy projection values into gauges. */
  private collectors: (() => void)[] = [];

  register<M extends Metric>(metric: M): M {
    if (this.metrics.has(metric.name)) throw new Error(`metric '${metric.name}' registered twice`);
    this.metrics.set(metric.name, metric);
    return metric;
  }
  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.register(new Counter(name, help, labelNames));
  }
  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return this.register(new Gauge(name, help, labelNames));
  }
  histogram(name: string, help: string, labelNames: readonly string[] = [], buckets?: readonly number[]): Histogram {
    return this.register(new Histogram(name, help, labelNames, buckets));
  }
  onCollect(fn: () => void): void {
    this.collectors.push(fn);
  }
  render(): string {
    for (const c of this.collectors) c();
    return [...this.metrics.values()].map((m) => m.render()).join('\n') + '\n';
  }
}

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** The gateway's metrics. Chat handlers record requests; projections feed the escrow gauges. */
export function createGatewayMetrics(registry = new MetricsRegistry()) {
  return {
    registry,
    httpRequests: registry.counter('shardgate_http_requests_total', 'HTTP requests by method, route pattern and status.', ['method', 'route', 'status']),
    chatRequests: registry.counter('shardgate_chat_requests_total', 'Chat completion requests by model and outcome status.', ['model', 'status']),
    chatLatency: registry.histogram('shardgate_chat_latency_seconds', 'Chat completion latency (request to last byte) in seconds.', ['model', 'stream']),
    tokens: registry.counter('shardgate_tokens_total', 'Tokens served by model and kind (prompt or completion).', ['model', 'kind']),
    errors: registry.counter('shardgate_errors_total', 'Chat errors by model and error code.', ['model', 'code']),
    escrowBalance: registry.gauge('shardgate_escrow_balance', 'Usable escrow balance in the smallest coin unit.', ['escrow_id', 'model']),
    escrowNonce: registry.gauge('shardgate_escrow_nonce', 'Last reserved nonce of an escrow.', ['escrow_id', 'model']),
    escrowInFlight: registry.gauge('shardgate_escrow_in_flight', 'Requests in flight on an escrow.', ['escrow_id', 'model']),
    activeRequests: registry.gauge('shardgate_active_requests', 'Chat requests admitted by the limiter and not finished.'),
    inputTokensInFlight: registry.gauge('shardgate_input_tokens_in_flight', 'Estimated prompt tokens of requests in flight.'),
  };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;
