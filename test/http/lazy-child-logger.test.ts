/**
 * The per-request logger fastify gets from `lazyChildLoggerFactory`: no pino child is made for a
 * request that logs nothing at an enabled level; one that does logs with its bindings (reqId).
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { lazyChildLoggerFactory } from '../../src/http/lazy-child-logger.js';

function capture(level: string) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { logger: pino({ level }, sink), lines };
}

/** Whether the lazy logger has made its pino child yet. */
const materialized = (log: unknown) => (log as { real?: unknown }).real !== undefined;

describe('lazy per-request logger', () => {
  it('makes no child for calls below the level, and logs with the bindings once a call is enabled', async () => {
    const { logger, lines } = capture('warn');
    const log = lazyChildLoggerFactory(logger, { reqId: 'req-1' }, {});
    log.info('not written');
    log.debug({ a: 1 }, 'not written either');
    expect(materialized(log)).toBe(false);
    expect(log.level).toBe('warn');
    log.error({ code: 'x' }, 'written');
    await new Promise((r) => setImmediate(r));
    expect(materialized(log)).toBe(true);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ reqId: 'req-1', code: 'x', msg: 'written', level: 50 });
    log.warn('again');
    await new Promise((r) => setImmediate(r));
    expect(lines[1]).toMatchObject({ reqId: 'req-1', msg: 'again' });
    const grand = log.child({ step: 'x' });
    grand.warn('nested');
    await new Promise((r) => setImmediate(r));
    expect(lines[2]).toMatchObject({ reqId: 'req-1', step: 'x', msg: 'nested' });
  });
});
