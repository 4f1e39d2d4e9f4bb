/**
 * The request id every answer carries and every log line of the request names: the client's own `X-Request-Id` when it
 * is 1 to 128 visible ASCII characters, otherwise a new UUID.
 */
import { randomUUID } from "node:crypto"

const REQUEST_ID = /^[\x21-\x7e]{1,128}$/

export const newRequestId = (): string => randomUUID()

export const requestIdOf = (sent: string | null | undefined): string =>
  sent !== null && sent !== undefined && REQUEST_ID.test(sent) ? sent : randomUUID()
