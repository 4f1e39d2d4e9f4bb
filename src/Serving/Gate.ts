/**
 * The gate every request passes before anything else runs (before authentication, before any decoding): limits on its
 * head, the form of its target, and its body. One set of rules, whichever way the request is then served.
 *
 * Bodies: only a request to an endpoint that declares a payload may send one (RFC 9110 §9.3.1: content in a GET has no
 * meaning, and ignoring it is how requests get smuggled); it is `application/json` in UTF-8, at most `MAX_BODY_BYTES`
 * (a declared length past it is refused unread, a body of unknown length once the limit is passed, never read further),
 * and JSON that `JsonBody.jsonProblem` accepts.
 */
import { MAX_BODY_BYTES } from "../Domain/Errors.js"
import { isJsonMediaType, jsonProblem, syntaxProblem } from "./JsonBody.js"
import * as Refusals from "./Refusals.js"
import { targetStart } from "./Url.js"

/** Which limit a request's head passes, if any: 414 for its target (path and query), 431 for its headers. */
export const headRefusal = (url: string, headers: Headers): Refusals.Refusal | undefined => {
  if (url.length - targetStart(url) > Refusals.MAX_URL_LENGTH) return Refusals.uriTooLong
  let size = 0
  for (const [name, value] of headers) size += name.length + value.length + 4
  return size > Refusals.MAX_HEADER_BYTES ? Refusals.headerTooLarge : undefined
}

/**
 * RFC 9112 §3.2: a request target has no fragment. Bun keeps one in the URL; a query parser would read it into a
 * value, a router would drop it.
 */
export const targetRefusal = (url: string): Refusals.Refusal | undefined =>
  url.includes("#") ? Refusals.fragment : undefined

/**
 * What to do with the body, before reading it: nothing (there is none), read it, or refuse the request unread. A
 * request has a body when it says so (`Content-Length`, `Transfer-Encoding`) or carries one (a `Request` made in
 * process need not say so).
 */
export const bodyPlan = (
  takesBody: boolean,
  { body, headers, method }: Request
): "none" | "read" | Refusals.Refusal => {
  const length = headers.get("content-length")
  if (!takesBody) {
    return Number(length ?? 0) > 0 || headers.has("transfer-encoding") || body !== null
      ? Refusals.bodyOnMethod(method)
      : "none"
  }
  if (length !== null && Number(length) > MAX_BODY_BYTES) return Refusals.payloadTooLarge
  if (!isJsonMediaType(headers.get("content-type")) && Number(length ?? 0) > 0) return Refusals.unsupportedMediaType
  return "read"
}

/**
 * The body's bytes, read up to the limit and never further (a refusal past it, or when the client goes away before the
 * body arrives: the answer then reaches no one, but the promise settles).
 */
export const readBody = async (request: Request): Promise<Uint8Array | Refusals.Refusal> => {
  if (request.body === null) return new Uint8Array(0)
  const length = request.headers.get("content-length")
  try {
    // A declared length (digits alone, within the limit: `bodyPlan`) is read in one call, cheaper than chunk by chunk.
    if (length !== null && /^[0-9]+$/.test(length) && !request.headers.has("transfer-encoding")) {
      return await request.bytes()
    }
    const chunks: Array<Uint8Array> = []
    let size = 0
    for await (const chunk of request.body) {
      size += chunk.byteLength
      if (size > MAX_BODY_BYTES) {
        await request.body.cancel().catch(() => {})
        return Refusals.payloadTooLarge
      }
      chunks.push(chunk)
    }
    return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)
  } catch {
    return Refusals.unreadableBody
  }
}

/** A body that was read: JSON the API may decode (its text and value). */
export type ReadBody = { readonly text: string; readonly json: unknown }

/** Strict: bytes that are not UTF-8 are refused, not turned into U+FFFD and stored. */
const utf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * The body as JSON the API may decode, or the refusal: not `application/json`, not UTF-8, not JSON (an empty body is
 * not JSON either), or JSON that `jsonProblem` refuses.
 */
export const checkBody = (bytes: Uint8Array, headers: Headers): ReadBody | Refusals.Refusal => {
  if (bytes.byteLength > 0 && !isJsonMediaType(headers.get("content-type"))) return Refusals.unsupportedMediaType
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    return Refusals.invalidJson("The request body is not UTF-8 text (JSON is UTF-8).")
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return Refusals.invalidJson(`The request body is not valid JSON: ${syntaxProblem(text)}.`)
  }
  const problem = jsonProblem(text)
  return problem === undefined ? { text, json } : Refusals.invalidJson(`The request body is refused: ${problem}.`)
}
