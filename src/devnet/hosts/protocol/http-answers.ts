/** How a devshard host's handlers answer (echo): errors as `{"message": text}`, JSON as Go's writeJSON writes it. */
import type { FastifyReply } from 'fastify';
import { HostHttpError } from './wire.js';

/** An echo HTTP error answered as the host answers it, `{"message": text}` with its status; anything else is rethrown. */
export function sendHttpError(reply: FastifyReply, e: unknown): FastifyReply {
  if (e instanceof HostHttpError) return reply.code(e.status).type('application/json').send(JSON.stringify({ message: e.message }));
  throw e;
}

/** A JSON body as Go's writeJSON sends it (`c.Blob`): `application/json` exactly, no trailing newline. */
export function sendGoJson(reply: FastifyReply, text: string): FastifyReply {
  return reply.header('content-type', 'application/json').send(Buffer.from(text, 'utf8'));
}
