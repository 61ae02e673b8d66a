import { it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { disposeTestGateway, startTestGateway } from '../helpers/gateway.js';
it('dump', async () => {
  const gw = await startTestGateway();
  writeFileSync('/tmp/oa/openapi.json', (await gw.call('/openapi.json', { key: 'none' })).text);
  await disposeTestGateway(gw);
}, 120000);
