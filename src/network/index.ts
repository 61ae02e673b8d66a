/** The network side: inference ports (devshard hosts, OpenAI upstream), request signing, settlement signatures. */
export * from './port.js';
export { createHostTransport, type HostTransport, type HostTransportOptions } from './host-transport.js';
export { createUpstreamPort, type UpstreamOptions, type UpstreamPort } from './upstream.js';
export { createRequestSigner, createSignatureVerifier, requestDigest, SIGNATURE_HEADER, TIMESTAMP_HEADER, NONCE_HEADER } from './signature.js';
export { signStateRoot, verifyStateRootSignature, stateRootDigest } from './settlement-signature.js';
export { collectSignatures, collectSignaturesDetailed, type SignatureRequest, type SignatureFailure } from './collect-signatures.js';
export { countPromptTokens, countCompletionTokens, textTokens } from './tokens.js';
export { SseParser, type SseEvent } from './sse.js';
