/**
 * The one place the console reads code of src/gateway: the devshard session's offline audit
 * (src/gateway/session/audit.ts), which `verify`, `replay` and `explain request` use too. It lives
 * in the gateway layer because it needs src/protocol; the console only reads with it.
 */
export { auditDevshardLog, describeTx, failureText, isMissingFacts, type EscrowAudit, type InferenceTrail, type TxLine } from '../gateway/session/audit.js';
