/** OpenAI-style error answers (`{"error":{"message","type","param","code"}}`), as the network's hosts give them. */
import type { FastifyReply } from 'fastify';

export function errorBody(status: number, message: string, code: string, param: string | null = null) {
  const type = status === 401 ? 'authentication_error' : status >= 500 ? 'server_error' : 'invalid_request_error';
  return { error: { message, type, param, code } };
}

export function sendError(reply: FastifyReply, status: number, message: string, code: string, param: string | null = null): FastifyReply {
  return reply.code(status).type('application/json').send(errorBody(status, message, code, param));
}
