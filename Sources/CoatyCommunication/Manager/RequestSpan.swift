import CoatyModel
import CoatySync
import Tracing

/// The span of one request sent (Discover, Query, Update, Call): from its publication to its first response, or to
/// the end of the iteration without one (timeout, limit, cancellation) or a publication failure — whichever comes
/// first. It ends once.
///
/// Attributes follow OpenTelemetry's messaging conventions (`messaging.system = mqtt`,
/// `messaging.operation.type = send`, `messaging.operation.name`, `messaging.destination.name`,
/// `messaging.message.conversation_id`) plus Coaty's own (`coaty.event.type`, `coaty.correlation_id`,
/// `coaty.agent.id`, `coaty.namespace`, and at the end `coaty.responses` and `coaty.request.outcome`:
/// `response`, `no response` or `failed`). Nothing is computed for them when the span does not record (no tracer
/// bootstrapped: swift-distributed-tracing's no-op tracer).
final class RequestSpan: Sendable {
    /// Attribute keys (shared with the tests).
    enum Key {
        static let system = "messaging.system"
        static let operationType = "messaging.operation.type"
        static let operationName = "messaging.operation.name"
        static let destination = "messaging.destination.name"
        static let conversation = "messaging.message.conversation_id"
        static let eventType = "coaty.event.type"
        static let correlationId = "coaty.correlation_id"
        static let agentId = "coaty.agent.id"
        static let namespace = "coaty.namespace"
        static let responses = "coaty.responses"
        static let outcome = "coaty.request.outcome"
    }

    private let span: any Span
    private let ended = CoatyMutex(false)

    /// Starts the span of a request, a child of the caller's current span (`InstrumentationContext.current`).
    init(
        tracer: any Tracer,
        event: CommunicationEventType,
        correlationIds: [CoatyUUID],
        agentId: CoatyUUID,
        namespace: String
    ) {
        span = tracer.startSpan(
            event.sendSpanName,
            context: InstrumentationContext.current ?? .topLevel,
            ofKind: .producer,
            at: DefaultTracerClock.now
        )
        guard span.isRecording else { return }
        span.attributes[Key.system] = "mqtt"
        span.attributes[Key.operationType] = "send"
        span.attributes[Key.operationName] = event.name
        span.attributes[Key.eventType] = event.name
        span.attributes[Key.agentId] = agentId.description
        span.attributes[Key.namespace] = namespace
        if let first = correlationIds.first {
            span.attributes[Key.correlationId] = first.description
            span.attributes[Key.conversation] = first.description
        }
    }

    /// Whether the span records (a tracer is bootstrapped and sampled it).
    var isRecording: Bool { span.isRecording }

    /// The span's context, carried to the responders (MQTT 5): their handling spans are children of this one.
    var context: ServiceContext { span.context }

    /// Records the topic a request went out on (the first, for an Update published twice).
    func published(on topic: String) {
        guard span.isRecording, span.attributes[Key.destination] == nil else { return }
        span.attributes[Key.destination] = topic
    }

    /// Ends the span at the first response, linked to the responder's span when the response carried its context.
    func responded(remote: ServiceContext? = nil) { end(outcome: "response", responses: 1, link: remote) }

    /// Ends the span when the request ends without a response (timeout, limit, cancellation); no-op after a response.
    func finished(responses: Int) { end(outcome: responses > 0 ? "response" : "no response", responses: responses) }

    /// Ends the span with the publication's error.
    func failed(_ error: any Error) {
        guard claimEnd() else { return }
        span.endFailed(by: error)
    }

    /// Ends the span once (the first caller), with a link to `link` when given: a link added only by the caller that
    /// ends it can never come after the end.
    private func end(outcome: String, responses: Int, link: ServiceContext? = nil) {
        guard claimEnd() else { return }
        if span.isRecording {
            if let link { span.addLink(SpanLink(context: link, attributes: [:])) }
            span.attributes[Key.outcome] = outcome
            span.attributes[Key.responses] = responses
        }
        span.end()
    }

    /// `true` for the first caller only.
    private func claimEnd() -> Bool {
        ended.withLock { ended in
            defer { ended = true }
            return !ended
        }
    }
}

extension Span {
    /// Records `error` on the span (its error, an `error` status) and ends it; with `outcome`, also
    /// `coaty.request.outcome = failed` (the request spans; a one-way event's span has no outcome).
    func endFailed(by error: any Error, outcome: Bool = true) {
        recordError(error)
        setStatus(SpanStatus(code: .error, message: "\(error)"))
        if outcome { attributes[RequestSpan.Key.outcome] = "failed" }
        end()
    }
}
