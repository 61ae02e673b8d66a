/** Issue 39 item 5: the gateway's timers log a failing write once per kind (onceByKind). */
import { describe, expect, it } from 'vitest';
import { onceByKind } from '../../src/main/start.js';
import { capturingLogger } from '../helpers/gateway.js';

describe('onceByKind', () => {
  it('logs the first failure of each message and kind, and nothing after', async () => {
    const { logger, logs } = await capturingLogger('info');
    const report = onceByKind(logger);
    const full = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    for (let i = 0; i < 5; i++) report('projections_checkpoint_failed', full);
    report('projections_checkpoint_failed', Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' }));
    report('devnet_state_save_failed', full);
    expect(logs.map((l) => [JSON.parse(l).kind, JSON.parse(l).msg.split(' ')[0]])).toEqual([
      ['SQLITE_FULL', 'projections_checkpoint_failed'],
      ['SQLITE_IOERR', 'projections_checkpoint_failed'],
      ['SQLITE_FULL', 'devnet_state_save_failed'],
    ]);
  });
});
