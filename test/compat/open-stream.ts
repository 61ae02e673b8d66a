import { expect } from 'vitest';
import { longPrompt } from '../clients/helpers.js';
import { MODEL, type TestGateway } from '../helpers/gateway.js';

/** A chat stream held open after its first chunk (an active request); `finish` reads the rest. */
export async function openStream(gw: Pick<TestGateway, 'url' | 'keys'>): Promise<{ finish: () => Promise<void> }> {
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: longPrompt(50) }], stream: true }),
  });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  await reader.read();
  return {
    finish: async () => {
      while (!(await reader.read()).done);
    },
  };
}
