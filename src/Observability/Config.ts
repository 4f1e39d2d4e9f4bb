/**
 * Observability's configuration: the OpenTelemetry specification's variables (`OTEL_*`, "General SDK configuration"
 * and "OTLP exporter configuration") and `METRICS_ADDRESS`. A bad value stops start-up naming the variable.
 */
import { Config, ConfigError, Either, Option, Redacted } from "effect"

/** The specification's built-in samplers: each of these, alone or after `parentbased_`. */
const ROOT_SAMPLERS = ["always_on", "always_off", "traceidratio"] as const
const SAMPLERS = [...ROOT_SAMPLERS, ...ROOT_SAMPLERS.map((name) => `parentbased_${name}` as const)]
export type SamplerName = typeof SAMPLERS[number]

/** `""` when unset. */
const absoluteHttpUrl = (name: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: "Expected an absolute http(s) URL such as http://collector:4318",
      validation: (value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol)
    }),
    Config.withDefault("")
  )

/** A `key=value,…` list (W3C Baggage's form), values percent-decoded: `OTEL_EXPORTER_OTLP_HEADERS`, `…_ATTRIBUTES`. */
const keyValueList = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((text) => {
      const pairs: Record<string, string> = {}
      for (const entry of text.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")) {
        const at = entry.indexOf("=")
        const key = entry.slice(0, Math.max(at, 0)).trim()
        const value = Either.try(() => decodeURIComponent(entry.slice(at + 1).trim()))
        if (key === "" || Either.isLeft(value)) {
          const problem = key === "" ? `"${entry}" is not key=value` : `the value of ${key} is not percent-encoded`
          return Either.left(ConfigError.InvalidData([], `Expected key=value pairs separated by commas: ${problem}`))
        }
        pairs[key] = value.right
      }
      return Either.right(pairs)
    }),
    Config.withDefault({} as Record<string, string>)
  )

/** A whole number of at least `least` (milliseconds are 0 or more, sizes 1 or more). */
const wholeNumber = (name: string, least: 0 | 1, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({
      message: least === 0
        ? "Expected a whole number of milliseconds, 0 or more"
        : "Expected a whole number, 1 or more",
      validation: (n) => n >= least
    }),
    Config.withDefault(fallback)
  )

/** `OTEL_EXPORTER_OTLP_ENDPOINT` is a base: the signal's path is appended to it (specification, "Endpoint URLs"). */
const signalUrl = (base: string, given: string, signal: "traces" | "metrics") =>
  given !== "" || base === "" ? given : `${base.replace(/\/+$/, "")}/v1/${signal}`

/** `Some` when an OTLP endpoint is configured and the SDK is not disabled. */
const OtlpConfig = Config.all({
  disabled: Config.boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false)),
  endpoint: absoluteHttpUrl("OTEL_EXPORTER_OTLP_ENDPOINT"),
  tracesEndpoint: absoluteHttpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
  metricsEndpoint: absoluteHttpUrl("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
  protocol: Config.literal("http/protobuf", "http/json")("OTEL_EXPORTER_OTLP_PROTOCOL").pipe(
    Config.withDefault("http/protobuf")
  ),
  headers: keyValueList("OTEL_EXPORTER_OTLP_HEADERS"),
  timeoutMillis: wholeNumber("OTEL_EXPORTER_OTLP_TIMEOUT", 0, 10_000),
  serviceName: Config.nonEmptyString("OTEL_SERVICE_NAME").pipe(Config.option),
  resourceAttributes: keyValueList("OTEL_RESOURCE_ATTRIBUTES"),
  sampling: Config.all({
    sampler: Config.literal(...SAMPLERS)("OTEL_TRACES_SAMPLER").pipe(Config.withDefault("parentbased_always_on")),
    /** The ratio of the `traceidratio` samplers. */
    ratio: Config.number("OTEL_TRACES_SAMPLER_ARG").pipe(
      Config.validate({ message: "Expected a ratio from 0 to 1, such as 0.1", validation: (n) => n >= 0 && n <= 1 }),
      Config.withDefault(1)
    )
  }),
  maxQueueSize: wholeNumber("OTEL_BSP_MAX_QUEUE_SIZE", 1, 2048),
  maxExportBatchSize: wholeNumber("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1, 512),
  scheduleDelayMillis: wholeNumber("OTEL_BSP_SCHEDULE_DELAY", 0, 5000),
  metricExportIntervalMillis: wholeNumber("OTEL_METRIC_EXPORT_INTERVAL", 1, 60_000)
}).pipe(Config.map(({ disabled, endpoint, metricsEndpoint, tracesEndpoint, ...c }) => {
  const tracesUrl = signalUrl(endpoint, tracesEndpoint, "traces")
  const metricsUrl = signalUrl(endpoint, metricsEndpoint, "metrics")
  // `""`: that signal is not sent.
  if (disabled || (tracesUrl === "" && metricsUrl === "")) return Option.none()
  return Option.some({
    ...c,
    tracesUrl,
    metricsUrl,
    /** May carry credentials: never logged. */
    headers: Redacted.make(c.headers),
    // OTEL_SERVICE_NAME wins over a service.name in OTEL_RESOURCE_ATTRIBUTES (the specification).
    serviceName: Option.getOrElse(c.serviceName, () => c.resourceAttributes["service.name"] ?? "petstore"),
    // The exporter sends a batch as soon as it holds this many spans: no more wait for their export.
    maxExportBatchSize: Math.min(c.maxExportBatchSize, c.maxQueueSize)
  })
}))
export type OtlpOptions = Option.Option.Value<Config.Config.Success<typeof OtlpConfig>>

/** `host:port` (`[::1]:9464` for IPv6): where `GET /metrics` is served. */
export const MetricsAddress = Config.string("METRICS_ADDRESS").pipe(
  Config.mapOrFail((text) => {
    const found = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text.trim())
    const port = Number(found?.[3])
    return found === null || port < 1 || port > 65535
      ? Either.left(ConfigError.InvalidData(
        [],
        `METRICS_ADDRESS must be host:port, such as 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464${
          /^\d+$/.test(text.trim()) ? " (a port alone names no host)" : ""
        } (got ${JSON.stringify(text)})`
      ))
      : Either.right({ hostname: found[1] ?? found[2], port })
  }),
  Config.option
)

export const ObservabilityConfig = Config.all({ otlp: OtlpConfig, metricsAddress: MetricsAddress }).pipe(
  Config.map(({ metricsAddress, otlp }) => ({
    otlp,
    metricsAddress,
    /** Whether spans are made: an endpoint for them, and a sampler that can say yes. */
    tracing: Option.isSome(otlp) && otlp.value.tracesUrl !== "" && otlp.value.sampling.sampler !== "always_off",
    /** Whether metrics are counted: served on `METRICS_ADDRESS`, or exported over OTLP. */
    metrics: Option.isSome(metricsAddress) || (Option.isSome(otlp) && otlp.value.metricsUrl !== "")
  }))
)
export type ObservabilityOptions = Config.Config.Success<typeof ObservabilityConfig>
