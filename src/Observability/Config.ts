/**
 * Observability's configuration, read from the environment by the variables of the OpenTelemetry specification
 * (`OTEL_*`, "General SDK configuration" and "OTLP exporter configuration") and `METRICS_ADDRESS`. Nothing here loads an
 * exporter: `Live.ts` does, and only when something is configured. A bad value stops start-up naming the variable.
 */
import { Config, ConfigError, Either, Option, Redacted } from "effect"

/** The samplers of `OTEL_TRACES_SAMPLER` that petstore implements (the specification's built-in ones). */
export const SAMPLERS = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio"
] as const
export type SamplerName = typeof SAMPLERS[number]

export interface Sampling {
  readonly sampler: SamplerName
  /** The ratio of `traceidratio` samplers, 0–1. */
  readonly ratio: number
}

export type OtlpProtocol = "http/protobuf" | "http/json"

export interface OtlpOptions {
  /** Where spans go: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as is, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`. */
  readonly tracesUrl: string
  readonly metricsUrl: string
  readonly protocol: OtlpProtocol
  /** May carry credentials: never logged. */
  readonly headers: Redacted.Redacted<Record<string, string>>
  readonly timeoutMillis: number
  readonly serviceName: string
  readonly resourceAttributes: Record<string, string>
  readonly sampling: Sampling
  /** The span buffer (`OTEL_BSP_*`): spans past `maxQueueSize` waiting for export are dropped and counted. */
  readonly maxQueueSize: number
  readonly maxExportBatchSize: number
  readonly scheduleDelayMillis: number
  readonly metricExportIntervalMillis: number
}

export interface ObservabilityOptions {
  /** `Some` when an OTLP endpoint is configured (and `OTEL_SDK_DISABLED` is not `true`). */
  readonly otlp: Option.Option<OtlpOptions>
  /** `METRICS_ADDRESS`: where `GET /metrics` is served. */
  readonly metricsAddress: Option.Option<{ readonly hostname: string; readonly port: number }>
}

const absoluteHttpUrl = (name: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: "Expected an absolute http(s) URL such as http://collector:4318",
      validation: (value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol)
    }),
    Config.option
  )

/**
 * A `key=value,key=value` list (the W3C Baggage form the specification uses for `OTEL_EXPORTER_OTLP_HEADERS` and
 * `OTEL_RESOURCE_ATTRIBUTES`), values percent-decoded. Returns an error text when an entry is not of that form.
 */
export const parseKeyValueList = (text: string): Either.Either<Record<string, string>, string> => {
  const out: Record<string, string> = {}
  for (const entry of text.split(",")) {
    if (entry.trim() === "") continue
    const at = entry.indexOf("=")
    const key = at === -1 ? "" : entry.slice(0, at).trim()
    if (key === "") return Either.left(`"${entry.trim()}" is not key=value`)
    try {
      out[key] = decodeURIComponent(entry.slice(at + 1).trim())
    } catch {
      return Either.left(`the value of ${key} is not percent-encoded correctly`)
    }
  }
  return Either.right(out)
}

const keyValueList = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((text) =>
      Either.mapLeft(parseKeyValueList(text), (problem) =>
        ConfigError.InvalidData([], `Expected key=value pairs separated by commas: ${problem}`))
    ),
    Config.withDefault({} as Record<string, string>)
  )

/** Milliseconds as the specification writes them: a non-negative integer. */
const millis = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "Expected a whole number of milliseconds, 0 or more", validation: (n) => n >= 0 }),
    Config.withDefault(fallback)
  )

const positive = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "Expected a whole number, 1 or more", validation: (n) => n >= 1 }),
    Config.withDefault(fallback)
  )

export const SamplingConfig: Config.Config<Sampling> = Config.all({
  sampler: Config.literal(...SAMPLERS)("OTEL_TRACES_SAMPLER").pipe(
    Config.withDefault("parentbased_always_on" as const)
  ),
  ratio: Config.number("OTEL_TRACES_SAMPLER_ARG").pipe(
    Config.validate({ message: "Expected a ratio from 0 to 1, such as 0.1", validation: (n) => n >= 0 && n <= 1 }),
    Config.withDefault(1)
  )
})

/** `OTEL_EXPORTER_OTLP_ENDPOINT` is a base: the signal's path is appended to it (specification, "Endpoint URLs for OTLP/HTTP"). */
const signalUrl = (base: string, signal: "traces" | "metrics") => `${base.replace(/\/+$/, "")}/v1/${signal}`

const OtlpConfig: Config.Config<Option.Option<OtlpOptions>> = Config.all({
  disabled: Config.boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false)),
  endpoint: absoluteHttpUrl("OTEL_EXPORTER_OTLP_ENDPOINT"),
  tracesEndpoint: absoluteHttpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
  metricsEndpoint: absoluteHttpUrl("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
  protocol: Config.literal("http/protobuf", "http/json")("OTEL_EXPORTER_OTLP_PROTOCOL").pipe(
    Config.withDefault("http/protobuf" as const)
  ),
  headers: keyValueList("OTEL_EXPORTER_OTLP_HEADERS"),
  timeoutMillis: millis("OTEL_EXPORTER_OTLP_TIMEOUT", 10_000),
  serviceName: Config.nonEmptyString("OTEL_SERVICE_NAME").pipe(Config.option),
  resourceAttributes: keyValueList("OTEL_RESOURCE_ATTRIBUTES"),
  sampling: SamplingConfig,
  maxQueueSize: positive("OTEL_BSP_MAX_QUEUE_SIZE", 2048),
  maxExportBatchSize: positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
  scheduleDelayMillis: millis("OTEL_BSP_SCHEDULE_DELAY", 5000),
  metricExportIntervalMillis: positive("OTEL_METRIC_EXPORT_INTERVAL", 60_000)
}).pipe(Config.map((c): Option.Option<OtlpOptions> => {
  if (c.disabled) return Option.none()
  const tracesUrl = Option.orElse(c.tracesEndpoint, () => Option.map(c.endpoint, (base) => signalUrl(base, "traces")))
  const metricsUrl = Option.orElse(
    c.metricsEndpoint,
    () => Option.map(c.endpoint, (base) => signalUrl(base, "metrics"))
  )
  if (Option.isNone(tracesUrl) && Option.isNone(metricsUrl)) return Option.none()
  return Option.some({
    // With one signal's endpoint alone, the other is sent nowhere: the empty URL says so.
    tracesUrl: Option.getOrElse(tracesUrl, () => ""),
    metricsUrl: Option.getOrElse(metricsUrl, () => ""),
    protocol: c.protocol,
    headers: Redacted.make(c.headers),
    timeoutMillis: c.timeoutMillis,
    // The specification: OTEL_SERVICE_NAME wins over a service.name in OTEL_RESOURCE_ATTRIBUTES.
    serviceName: Option.getOrElse(c.serviceName, () => c.resourceAttributes["service.name"] ?? "petstore"),
    resourceAttributes: c.resourceAttributes,
    sampling: c.sampling,
    maxQueueSize: c.maxQueueSize,
    maxExportBatchSize: Math.min(c.maxExportBatchSize, c.maxQueueSize),
    scheduleDelayMillis: c.scheduleDelayMillis,
    metricExportIntervalMillis: c.metricExportIntervalMillis
  })
}))

/** `host:port` (`[::1]:9464` for IPv6). */
export const parseListenAddress = (text: string): Option.Option<{ hostname: string; port: number }> => {
  const found = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text.trim())
  if (found === null) return Option.none()
  const port = Number(found[3])
  if (port < 1 || port > 65535) return Option.none()
  return Option.some({ hostname: found[1] ?? found[2], port })
}

export const MetricsAddress = Config.string("METRICS_ADDRESS").pipe(
  Config.mapOrFail((text) =>
    Option.match(parseListenAddress(text), {
      onNone: () =>
        Either.left(
          ConfigError.InvalidData([], "Expected host:port, such as 127.0.0.1:9464 or [::1]:9464")
        ),
      onSome: Either.right
    })
  ),
  Config.option
)

export const ObservabilityConfig: Config.Config<ObservabilityOptions> = Config.all({
  otlp: OtlpConfig,
  metricsAddress: MetricsAddress
})

/** Whether spans are made at all: an endpoint for them and a sampler that can say yes. */
export const tracesEnabled = (options: ObservabilityOptions): boolean =>
  Option.isSome(options.otlp) && options.otlp.value.tracesUrl !== "" &&
  options.otlp.value.sampling.sampler !== "always_off"

/** Whether metrics are counted: served on `METRICS_ADDRESS`, or exported over OTLP. */
export const metricsEnabled = (options: ObservabilityOptions): boolean =>
  Option.isSome(options.metricsAddress) || (Option.isSome(options.otlp) && options.otlp.value.metricsUrl !== "")
