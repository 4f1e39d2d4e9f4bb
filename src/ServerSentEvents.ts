/**
 * Server-Sent Events (the `text/event-stream` format of the WHATWG HTML standard, what `EventSource` reads): the
 * blocks of a stream, and a response that streams them as they come, with the headers that keep proxies from holding
 * them back (`X-Accel-Buffering: no`) or caching them.
 */
import { HttpServerResponse } from "@effect/platform"
import { Stream } from "effect"

export const CONTENT_TYPE = "text/event-stream"

/** Whether an `Accept` header asks for an event stream. */
export const accepts = (accept: string | undefined): boolean => accept?.includes(CONTENT_TYPE) === true

/**
 * One event: an `id:` line (the client's last event id, sent back as `Last-Event-ID` when it reconnects), an `event:`
 * line (its type), and one `data:` line per line of data. An event without data is dispatched to no listener but still
 * moves the client's last event id.
 */
export const event = (fields: { readonly id?: string; readonly event?: string; readonly data?: string }): string => {
  let block = ""
  if (fields.id !== undefined) block += `id: ${fields.id}\n`
  if (fields.event !== undefined) block += `event: ${fields.event}\n`
  if (fields.data !== undefined) { for (const line of fields.data.split("\n")) block += `data: ${line}\n` }
  return `${block}\n`
}

/** A comment: ignored by the client, it keeps the connection from looking idle. */
export const comment = (text: string): string => `: ${text}\n\n`

/** How long the client waits before it reconnects after the stream ends. */
export const retry = (millis: number): string => `retry: ${Math.round(millis)}\n\n`

/** A response that streams the blocks as they come. */
export const response = <E>(blocks: Stream.Stream<string, E>): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.stream(Stream.encodeText(blocks), {
    contentType: CONTENT_TYPE,
    headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
  })
