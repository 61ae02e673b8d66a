/**
 * Faults the simulated hosts can be told to show (tests and the devnet mutate the object at any
 * time; each request reads it when it arrives). "Chunks" are SSE data events, the role chunk
 * included: `stallAfterChunks: 1` sends the role chunk and then nothing.
 * Under the real host protocol (protocol/routes.ts) the same switches mean: `failStatus` refuses
 * before any diff is applied (`{"message": failMessage}`); `latencyMs` delays the answer;
 * `stallAfterChunks` / `truncateAfterChunks` count the executor's output events after the receipt:
 * stall holds the connection silent, truncate cuts it (the host dies mid-stream); either way no
 * `[DONE]`, no meta, no MsgFinishInference; `withholdSignature` answers without `state_sig`.
 */
export interface HostFaults {
  /** Host indexes (HostIdentity.index) the faults apply to; undefined = every host. */
  hosts?: number[];
  /** Answer chat requests with this HTTP status and an OpenAI-style error body. */
  failStatus?: number;
  /** Message of that error (default "simulated host fault"). */
  failMessage?: string;
  /** Stream: go silent after this many chunks, keeping the connection open until the client leaves.
   *  Non-stream: never answer. */
  stallAfterChunks?: number;
  /** Stream: close the response after this many chunks, without `data: [DONE]`.
   *  Non-stream: send half the JSON body, then drop the connection. */
  truncateAfterChunks?: number;
  /** Real host protocol (protocol/): answer with no `state_sig` and store no signature for the nonce. */
  withholdSignature?: boolean;
  /** Extra delay before answering, ms. */
  latencyMs?: number;
  /** Real host protocol: hold the request (before its diffs are applied) until this settles: a hold a test releases. */
  hold?: Promise<unknown>;
  /** Called when a request starts waiting on `hold` (a test waits for it: the held request is the one it meant). */
  onHold?: () => void;
  /**
   * v5: the host signs its height stamps one block below the floor F(m) (receipt and ConfirmStart,
   * Finish, heartbeat acks), with that block's hash: what L0 refuses (`INVALID(height_regression)`),
   * for tests of a gateway that must keep such a tx out of its diffs. No effect while F(m) ≤ 1.
   */
  subFloorStamps?: boolean;
  /**
   * The executor's answer turns into an error after this many output events, and it still signs
   * the Finish over what it wrote: streamed, an `{"error":{…}}` event then `[DONE]` (an answer v5's
   * error-miss refunds); whole, the error object as the body (not a miss under Z5's rule).
   */
  errorAnswerAfterChunks?: number;
  /** v5: the seed RPC is off on this host (Z5 `WithHeightSyncSeedRPC(false)`): 404 `height-sync seed RPC disabled`. */
  seedRpcOff?: boolean;
  /** Apply to this many more matching requests, then stop (undefined = until changed). */
  remaining?: number;
}

/** The faults that apply to one request of a host (consuming one of `remaining`), if any. */
export function faultFor(faults: HostFaults | undefined, hostIndex: number): HostFaults | undefined {
  if (!faults) return undefined;
  if (faults.hosts && !faults.hosts.includes(hostIndex)) return undefined;
  const any =
    faults.failStatus !== undefined ||
    faults.stallAfterChunks !== undefined ||
    faults.truncateAfterChunks !== undefined ||
    faults.withholdSignature === true ||
    (faults.latencyMs !== undefined && faults.latencyMs > 0) ||
    faults.hold !== undefined ||
    faults.subFloorStamps === true ||
    faults.errorAnswerAfterChunks !== undefined ||
    faults.seedRpcOff === true;
  if (!any) return undefined;
  if (faults.remaining !== undefined) {
    if (faults.remaining <= 0) return undefined;
    faults.remaining -= 1;
  }
  return { ...faults };
}
