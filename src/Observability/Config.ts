/**
 * Observability's configuration, read from the environment by the variables of the OpenTelemetry specification
 * (`OTEL_*`, "General SDK configuration" and "OTLP exporter configuration") and `METRICS_ADDRESS`. Nothing here loads an
 * exporter: `Live.ts` does, and only when something is configured. A bad value stops start-up naming the variable.
 */
import { Config, ConfigError, Either, Option, Redacted } from "effect"

/** The samplers of `OTEL_TRACES_SAMPLER`: the specification's built-in ones. */
const SAMPLERS = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio"
] as const
export type SamplerName = typeof SAMPLERS[number]

const absoluteHttpUrl = (name: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: "Expected an absolute http(s) URL such as http://collector:4318",
      validation: (value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol)
    }),
    Config.option
  )

/** A `key=value,…` list (W3C Baggage's form), values percent-decoded: `OTEL_EXPORTER_OTLP_HEADERS`, `…_ATTRIBUTES`. */
const keyValueList = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((text) => {
      const out: Record<string, string> = {}
      for (const entry of text.split(",").filter((entry) => entry.trim() !== "")) {
        const at = entry.indexOf("=")
        const key = at === -1 ? "" : entry.slice(0, at).trim()
        const value = Either.try(() => decodeURIComponent(entry.slice(at + 1).trim()))
        if (key === "" || Either.isLeft(value)) {
          const problem = key === ""
            ? `"${entry.trim()}" is not key=value`
            : `the value of ${key} is not percent-encoded`
          return Either.left(ConfigError.InvalidData([], `Expected key=value pairs separated by commas: ${problem}`))
        }
        out[key] = value.right
      }
      return Either.right(out)
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

export const SamplingConfig = Config.all({
  sampler: Config.literal(...SAMPLERS)("OTEL_TRACES_SAMPLER").pipe(
    Config.withDefault("parentbased_always_on" as const)
  ),
  /** The ratio of the `traceidratio` samplers. */
  ratio: Config.number("OTEL_TRACES_SAMPLER_ARG").pipe(
    Config.validate({ message: "Expected a ratio from 0 to 1, such as 0.1", validation: (n) => n >= 0 && n <= 1 }),
    Config.withDefault(1)
  )
})
export type Sampling = Config.Config.Success<typeof SamplingConfig>

/** `OTEL_EXPORTER_OTLP_ENDPOINT` is a base: the signal's path is appended to it (specification, "Endpoint URLs"). */
const signalUrl = (base: Option.Option<string>, given: Option.Option<string>, signal: "traces" | "metrics") =>
  Option.orElse(given, () => Option.map(base, (url) => `${url.replace(/\/+$/, "")}/v1/${signal}`))

const OtlpConfig = Config.all({
  disabled: Config.boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false)),
  endpoint: absoluteHttpUrl("OTEL_EXPORTER_OTLP_ENDPOINT"),
  tracesEndpoint: absoluteHttpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
  metricsEndpoint: absoluteHttpUrl("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
  protocol: Config.literal("http/protobuf", "http/json")("OTEL_EXPORTER_OTLP_PROTOCOL").pipe(
    Config.withDefault("http/protobuf" as const)
  ),
  headers: keyValueList("OTEL_EXPORTER_OTLP_HEADERS"),
  timeoutMillis: wholeNumber("OTEL_EXPORTER_OTLP_TIMEOUT", 0, 10_000),
  serviceName: Config.nonEmptyString("OTEL_SERVICE_NAME").pipe(Config.option),
  resourceAttributes: keyValueList("OTEL_RESOURCE_ATTRIBUTES"),
  sampling: SamplingConfig,
  maxQueueSize: wholeNumber("OTEL_BSP_MAX_QUEUE_SIZE", 1, 2048),
  maxExportBatchSize: wholeNumber("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1, 512),
  scheduleDelayMillis: wholeNumber("OTEL_BSP_SCHEDULE_DELAY", 0, 5000),
  metricExportIntervalMillis: wholeNumber("OTEL_METRIC_EXPORT_INTERVAL", 1, 60_000)
}).pipe(Config.map(({ disabled, endpoint, maxQueueSize, metricsEndpoint, tracesEndpoint, ...c }) => {
  const tracesUrl = signalUrl(endpoint, tracesEndpoint, "traces")
  const metricsUrl = signalUrl(endpoint, metricsEndpoint, "metrics")
  if (disabled || (Option.isNone(tracesUrl) && Option.isNone(metricsUrl))) return Option.none()
  return Option.some({
    ...c,
    // With one signal's endpoint alone, the other is sent nowhere: the empty URL says so.
    tracesUrl: Option.getOrElse(tracesUrl, () => ""),
    metricsUrl: Option.getOrElse(metricsUrl, () => ""),
    /** May carry credentials: never logged. */
    headers: Redacted.make(c.headers),
    // The specification: OTEL_SERVICE_NAME wins over a service.name in OTEL_RESOURCE_ATTRIBUTES.
    serviceName: Option.getOrElse(c.serviceName, () => c.resourceAttributes["service.name"] ?? "petstore"),
    // The exporter sends a batch as soon as it holds this many spans: no more wait for their export.
    maxExportBatchSize: Math.min(c.maxExportBatchSize, maxQueueSize)
  })
}))
export type OtlpOptions = Option.Option.Value<Config.Config.Success<typeof OtlpConfig>>

/** `host:port` (`[::1]:9464` for IPv6). */
export const parseListenAddress = (text: string): Option.Option<{ hostname: string; port: number }> => {
  const found = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text.trim())
  const port = Number(found?.[3])
  return found === null || port < 1 || port > 65535
    ? Option.none()
    : Option.some({ hostname: found[1] ?? found[2], port })
}

export const MetricsAddress = Config.string("METRICS_ADDRESS").pipe(
  Config.mapOrFail((text) =>
    Either.fromOption(
      parseListenAddress(text),
      () => ConfigError.InvalidData([], "Expected host:port, such as 127.0.0.1:9464 or [::1]:9464")
    )
  ),
  Config.option
)

/** `otlp`: `Some` when an OTLP endpoint is configured; `metricsAddress`: where `GET /metrics` is served. */
export const ObservabilityConfig = Config.all({ otlp: OtlpConfig, metricsAddress: MetricsAddress })
export type ObservabilityOptions = Config.Config.Success<typeof ObservabilityConfig>

/** Whether spans are made at all: an endpoint for them and a sampler that can say yes. */
export const tracesEnabled = ({ otlp }: ObservabilityOptions): boolean =>
  Option.isSome(otlp) && otlp.value.tracesUrl !== "" && otlp.value.sampling.sampler !== "always_off"

/** Whether metrics are counted: served on `METRICS_ADDRESS`, or exported over OTLP. */
export const metricsEnabled = ({ metricsAddress, otlp }: ObservabilityOptions): boolean =>
  Option.isSome(metricsAddress) || (Option.isSome(otlp) && otlp.value.metricsUrl !== "")
