/**
 * What every answer of petstore must look like, as plain predicates over a status, headers and a parsed body: shared by
 * the in-process property tests and the system tests against the executable.
 */
import { expect } from "@effect/vitest"
import { Schema } from "effect"
import { Pet } from "../../src/Domain/Pet.js"

export type Json = any

/** An error answer: JSON `{code, message, status}` with `status` equal to the HTTP status (and the code, when given). */
export const expectErrorBody = (
  response: { readonly status: number; readonly contentType: string | null; readonly body: Json },
  status: number | ReadonlyArray<number>,
  code?: string | ReadonlyArray<string>
) => {
  const statuses = typeof status === "number" ? [status] : status
  const context = `${response.status} ${JSON.stringify(response.body)?.slice(0, 300)}`
  expect(statuses, context).toContain(response.status)
  expect(response.contentType ?? "", context).toContain("application/json")
  const body = response.body
  expect(Object.keys(body ?? {}).sort(), context).toEqual(["code", "message", "status"])
  expect(body.status, context).toBe(response.status)
  expect(typeof body.code === "string" && /^[a-z]+(_[a-z]+)*$/.test(body.code), context).toBe(true)
  expect(typeof body.message === "string" && body.message.length > 0, context).toBe(true)
  if (code !== undefined) expect(typeof code === "string" ? [code] : code, context).toContain(body.code)
  return body as { code: string; message: string; status: number }
}

const decodePets = Schema.decodeUnknownSync(Schema.Array(Pet))

/** A page of listPets: well-formed pets, ascending ids without duplicates, at most `limit` of them. */
export const expectPage = (
  body: Json,
  options: { readonly limit?: number; readonly after?: number; readonly status?: string } = {}
) => {
  const pets = decodePets(body, { onExcessProperty: "error" })
  for (let i = 1; i < pets.length; i++) expect(pets[i].id, JSON.stringify(pets)).toBeGreaterThan(pets[i - 1].id)
  expect(pets.length).toBeLessThanOrEqual(options.limit ?? 20)
  if (options.after !== undefined) { for (const pet of pets) expect(pet.id).toBeGreaterThan(options.after) }
  if (options.status !== undefined) { for (const pet of pets) expect(pet.status).toBe(options.status) }
  return pets
}

/** The target of a `Link: <…>; rel="next"` header, if there is one. */
export const nextLink = (link: string | null): string | undefined => {
  if (link === null) return undefined
  const target = /^<([^>]+)>; rel="next"$/.exec(link)?.[1]
  expect(target, `Link: ${link}`).toBeDefined()
  return target
}
