/**
 * A statement, written once for both backends (SQL text with `?` placeholders), and what its runners
 * (`Statements.ts`, `SqliteStatements.ts`) share: how a query hands its rows over, what a transaction offers its body.
 */
import type { SqlError } from "@effect/sql"
import { type Effect, Either, ParseResult, Schema } from "effect"
import type { Statement as Observed } from "../Observability/Hooks.js"
import { compileCopy, REFUSED } from "../SchemaCopy.js"

/** A statement: its text, the values its placeholders take, the rows it returns. */
export interface Statement<Row, Params extends ReadonlyArray<unknown>> {
  readonly text: string
  /** The text around the placeholders, as a template literal's strings (for `@effect/sql`'s compiler). */
  readonly strings: TemplateStringsArray
  /** As observability names it: its first word (`SELECT`, `INSERT`, `UPDATE`) and its table. */
  readonly operation: string
  readonly collection: string
  /**
   * Its rows as the driver gives them, decoded by the row's schema; a row that does not decode (a value written
   * around the service, a column changed under it) throws: a defect, never a row cast to a type it does not have.
   */
  readonly decode: (rows: ReadonlyArray<unknown>) => Array<Row>
  /** Never set: carries the types of the values. */
  readonly types?: { readonly params: Params }
}

/** A statement's row schema and table: the schema is required when it returns rows (`Row` is not `never`). */
type RowOf<Row> = [Row] extends [never] ? [row?: undefined, collection?: string]
  : [row: Schema.Schema<Row, any>, collection?: string]

/** What decodes the rows of a statement that returns none. */
const noRows = (rows: ReadonlyArray<unknown>): Array<never> => rows as Array<never>

/** A row schema's compiled check and copy (`SchemaCopy.ts`; none refuses every row), and the schema's own decoder. */
const decodersOf = <Row>(row: Schema.Schema<Row, any>) => ({
  copy: compileCopy(row.ast) ?? (() => REFUSED),
  decode: Schema.decodeUnknownEither(row)
})

/** Decodes one row by `row`: by its compiled check and copy where it accepts the row, else by the schema. */
export const rowDecoder = <Row>(row: Schema.Schema<Row, any>) => {
  const { copy, decode } = decodersOf(row)
  return (u: unknown): Either.Either<Row, ParseResult.ParseError> => {
    const copied = copy(u)
    return copied === REFUSED ? decode(u) : Either.right(copied as Row)
  }
}

/**
 * Decodes rows by `row`; a row that does not decode throws, naming `what` and the schema's complaint. A row its compiled
 * check accepts is its copy as it is (no `Either` made for it, as reads decode every row); any other goes to the schema.
 */
export const rowsDecoder = <Row>(row: Schema.Schema<Row, any>, what: string) => {
  const { copy, decode } = decodersOf(row)
  const decodeRow = (u: unknown): Row => {
    const copied = copy(u)
    if (copied !== REFUSED) return copied as Row
    const decoded = decode(u)
    if (Either.isRight(decoded)) return decoded.right
    throw new Error(
      `A row of ${what} does not match its schema: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}`
    )
  }
  return (rows: ReadonlyArray<unknown>): Array<Row> => rows.map(decodeRow)
}

/**
 * A statement returning rows of `row` (its columns named as the schema's fields, `category_id AS "categoryId"`), on
 * `collection`: by default the table its text names first (after FROM, INTO or UPDATE).
 */
export const statement = <Row = never, Params extends ReadonlyArray<unknown> = []>(
  text: string,
  ...[row, collection = /\b(?:FROM|INTO|UPDATE)\s+(\w+)/i.exec(text)?.[1] ?? ""]: RowOf<Row>
): Statement<Row, Params> => {
  const strings = text.split("?")
  const operation = text.slice(0, text.indexOf(" "))
  const decode = row === undefined ? noRows : rowsDecoder(row, `${collection} (${operation})`)
  return { text, strings: Object.assign(strings, { raw: strings }), operation, collection, decode }
}

/**
 * Runs a statement and hands its rows to `f` (by default: the rows). Only the database's own failures are a `SqlError`:
 * an `f` that throws is a bug, a defect.
 */
export type Query = <Row, Params extends ReadonlyArray<unknown>, A = Array<Row>>(
  statement: Statement<Row, Params>,
  params: Params,
  f?: (rows: Array<Row>) => A
) => Effect.Effect<A, SqlError.SqlError>

/**
 * Runs two reads that see one state of the database and hands both rows to `f`: on a SQLite file, back to back on the
 * reading connection in one synchronous step (the writer commits only in a turn of its own); through `@effect/sql`, in
 * one transaction (PostgreSQL: REPEATABLE READ, READ ONLY, so that both read one snapshot).
 */
export type QueryBoth = <Row1, Params1 extends ReadonlyArray<unknown>, Row2, Params2 extends ReadonlyArray<unknown>, A>(
  first: Statement<Row1, Params1>,
  firstParams: Params1,
  second: Statement<Row2, Params2>,
  secondParams: Params2,
  f: (first: Array<Row1>, second: Array<Row2>) => A
) => Effect.Effect<A, SqlError.SqlError>

export interface Transaction {
  readonly query: Query
  /**
   * Takes the lock called `name` for the rest of the transaction, without waiting: false when another transaction
   * holds it (PostgreSQL: an advisory lock, for every replica; a SQLite file: the writer's; in memory, transactions
   * run one at a time and need none).
   */
  readonly tryLock: (name: string) => Effect.Effect<boolean, SqlError.SqlError>
}

/** The statements of a backend. */
export interface Runner {
  readonly system: Observed["system"]
  /** Runs one statement: a `SELECT` reads; any other writes, committed (durably) before it succeeds. */
  readonly query: Query
  /** Runs two `SELECT`s that see one state of the database. */
  readonly queryBoth: QueryBoth
  /**
   * Runs `body`'s statements in one transaction, committed (durably) before it succeeds, rolled back if it fails; it
   * fails as the body does (a defect stays a defect), or with a `SqlError` when the transaction cannot be committed.
   */
  readonly transaction: <A, E>(
    body: (tx: Transaction) => Effect.Effect<A, E>
  ) => Effect.Effect<A, E | SqlError.SqlError>
}

export type AnyStatement = Statement<any, any>
/** A `Query` as its implementations see it. */
export type Run = (
  statement: AnyStatement,
  params: ReadonlyArray<unknown>,
  f?: (rows: Array<unknown>) => unknown
) => Effect.Effect<unknown, SqlError.SqlError>
export const identity = (rows: Array<unknown>) => rows

/** `make` of each statement, made at its first use. */
export const perStatement = <A>(make: (statement: AnyStatement) => A) => {
  const made = new Map<AnyStatement, A>()
  return (statement: AnyStatement): A => {
    let value = made.get(statement)
    if (value === undefined) made.set(statement, value = make(statement))
    return value
  }
}

export const describer = (system: Observed["system"]) =>
  perStatement(({ collection, operation, text }): Observed => ({ system, operation, collection, text }))
