/** `petstore healthcheck`: asks a server's `/healthz`, for container health checks. */
import { FetchHttpClient, HttpClient, HttpClientResponse } from "@effect/platform"
import { Console, Effect } from "effect"
import { CommandFailed } from "../CommandFailed.js"

/** Why a connection failed, in a few words (`connection refused`). */
const reasonOf = (cause: unknown): string | undefined => {
  const { code, message } = (cause ?? {}) as { code?: unknown; message?: unknown }
  if (code === "ECONNREFUSED") return "connection refused"
  return typeof code === "string" ? code : typeof message === "string" ? message : undefined
}

/** Asks the server listening on `host` (a wildcard address: on loopback) for /healthz; prints `ok` on a 200. */
export const askHealth = (host: string, port: number) => {
  const target = host === "" || host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host
  const url = `http://${target.includes(":") ? `[${target}]` : target}:${port}/healthz`
  return HttpClient.get(url).pipe(
    Effect.flatMap(HttpClientResponse.filterStatusOk),
    Effect.timeoutFail({
      duration: "2 seconds",
      onTimeout: () => new CommandFailed({ message: `${url} did not answer within 2 seconds.` })
    }),
    Effect.catchTags({
      RequestError: (error) =>
        new CommandFailed({
          message: `no server answers at ${url} (${reasonOf(error.cause) ?? error.reason}). ` +
            `Is 'petstore serve' running there? Set HOST and PORT (or --host, --port) to the address it listens on.`
        }),
      ResponseError: (error) => new CommandFailed({ message: `${url} answered ${error.response.status}, not 200.` })
    }),
    Effect.zipRight(Console.log("ok")),
    Effect.provide(FetchHttpClient.layer)
  )
}
