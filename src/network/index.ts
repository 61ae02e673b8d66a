/** The network side: inference ports (the devshard host protocol, OpenAI upstream), the creator's signer. */
export * from './port.js';
export { createUpstreamPort, type UpstreamOptions, type UpstreamPort } from './upstream.js';
export { createRequestSigner } from './signature.js';
export { countPromptTokens, countCompletionTokens, textTokens } from './tokens.js';
export { SseParser, type SseEvent } from './sse.js';
