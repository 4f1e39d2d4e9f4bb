/**
 * An endpoint's annotation (`HttpApiEndpoint.annotate(LongPoll, …)`): the endpoint holds a request for up to this
 * long by design, waiting for something to answer with (a long poll). Its deadline is `REQUEST_TIMEOUT` past that, and
 * the listener's idle timeout leaves room for it.
 */
import { Context, type Duration } from "effect"

export class LongPoll extends Context.Tag("petstore/LongPoll")<LongPoll, Duration.Duration>() {}
