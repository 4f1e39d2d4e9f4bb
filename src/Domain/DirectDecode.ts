/**
 * A schema annotation for a value decoded on every request: the schema's decoding of a text as a plain function, giving
 * the decoded value, or `undefined` for a text the schema refuses. The request pipeline calls it instead of Schema's
 * parser for a request header: the parser makes some twenty short-lived objects for a transformation, which on every
 * create sent with an `Idempotency-Key` cost more than the key's own record (`docs/retries-and-limits.md`). Schema still
 * decides everything else, and makes the refusal of a text the function does not take, so a client is told one thing.
 *
 * The function must be the schema's own decoding (the schema's transformation calls it), so the two cannot disagree.
 */
export const DirectDecodeAnnotationId: unique symbol = Symbol.for("petstore/DirectDecode")

export type DirectDecode = (text: string) => unknown
