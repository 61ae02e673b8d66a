/**
 * The gateway's Prometheus metrics, on prom-client: one registry per app instance (never the
 * library's global one, so several gateways in one process, as in tests, do not collide), Node's
 * default process metrics (CPU, memory, event loop lag, GC, handles) on it, and our counters,
 * gauges and histograms. Label values are bounded by the callers: method, route pattern, status,
 * a served model id (anything else is counted as '(unknown)'), an escrow id of ours.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Observable, Subscription } from 'rxjs';
import type { RecordedEvent } from '../events/envelope.js';

export type Labels = Record<string, string | number>;

/** Seconds; from a fast non-streamed answer to a long stream. */
export const LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120] as const;

export class MetricsRegistry {
  /** This instance's own prom-client registry. */
  readonly prom = new Registry();
  /** Called before each render, e.g. to copy projection values into gauges. */
  private collectors: (() => void)[] = [];

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.prom });
  }
  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return new Counter({ name, help, labelNames, registers: [this.prom] });
  }
  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return new Gauge({ name, help, labelNames, registers: [this.prom] });
  }
  histogram(name: string, help: string, labelNames: readonly string[] = [], buckets: readonly number[] = LATENCY_BUCKETS): Histogram {
    return new Histogram({ name, help, labelNames, buckets: [...buckets], registers: [this.prom] });
  }
  onCollect(fn: () => void): void {
    this.collectors.push(fn);
  }
  /** The text exposition (format 0.0.4), collectors run first. */
  async render(): Promise<string> {
    for (const c of this.collectors) c();
    return this.prom.metrics();
  }
}

export const PROMETHEUS_CONTENT_TYPE: string = Registry.PROMETHEUS_CONTENT_TYPE;

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
    storageFreeBytes: registry.gauge('shardgate_storage_free_bytes', 'Free bytes on the file system of the storage directory (the event log).'),
    // Fed from the log (countRecordedFailures): every recorded failure, whoever ran the step.
    createFailures: registry.counter('shardgate_escrow_create_failures_total', 'Escrow create transactions that failed, by reason (the chain error kind).', ['reason']),
    settleFailures: registry.counter(
      'shardgate_escrow_settle_failures_total',
      'Escrow settle transactions that failed, by reason (the chain error kind; settle_window_closed when a pending retry was given up).',
      ['reason'],
    ),
    rotationFailures: registry.counter(
      'shardgate_rotation_failures_total',
      'Rotation and depletion-replacement steps that failed, by step and reason (the chain error kind).',
      ['step', 'reason'],
    ),
  };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;

/** What a recorded failure's `error` holds that a label may use (ChainErrorInfo.kind: a bounded enum). */
interface FailureData {
  error?: { kind?: unknown };
  step?: unknown;
  windowClosed?: unknown;
  /** RotationFailed of a configuration error (the key's env variable), not the chain's answer. */
  configuration?: unknown;
}

const reasonOf = (d: FailureData): string =>
  d.configuration ? 'configuration' : d.windowClosed === true ? 'settle_window_closed' : typeof d.error?.kind === 'string' ? d.error.kind : 'unknown';

/**
 * Counts create, settle and rotation failures as the log records them (the log is the truth: a
 * failure found by the rotation task, the drain reactor or the reconciler is counted as well as
 * one an operator's request met). Pass the live events from the log's current end, e.g.
 * `store.subscribe(store.lastPosition())`: counters start at zero with the process, as Prometheus expects.
 */
export function countRecordedFailures(metrics: GatewayMetrics, events: Observable<RecordedEvent>): Subscription {
  return events.subscribe((event) => {
    const d = event.data as FailureData;
    switch (event.type) {
      case 'EscrowCreateFailed':
        metrics.createFailures.inc({ reason: reasonOf(d) });
        break;
      case 'EscrowSettleFailed':
        metrics.settleFailures.inc({ reason: reasonOf(d) });
        break;
      case 'RotationFailed':
        metrics.rotationFailures.inc({ step: typeof d.step === 'string' ? d.step : 'unknown', reason: reasonOf(d) });
        break;
      case 'DepletionReplacementFailed':
        metrics.rotationFailures.inc({ step: `depletion_${d.step === 'settle' ? 'settle' : 'create'}`, reason: reasonOf(d) });
        break;
    }
  });
}
