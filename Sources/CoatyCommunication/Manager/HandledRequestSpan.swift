import CoatyModel
import CoatySync
import Tracing

/// The span of one request handled by an observer loop (`observeDiscover`, `observeQuery`, `observeUpdate`,
/// `observeCall`): from its delivery to the observer to its first response published, or a publication failure, or
/// else to the moment the event is released unanswered (`coaty.request.outcome = not answered`; in a `for await`
/// loop at the latest when the loop takes its next event).
///
/// Made only when the manager's tracer records (no tracer bootstrapped: no span, no allocation). Attributes follow
/// OpenTelemetry's messaging conventions for a consumer (`messaging.system = mqtt`,
/// `messaging.operation.type = process`, `messaging.destination.name` = the request's topic,
/// `messaging.message.conversation_id`) plus Coaty's (`coaty.event.type`, `coaty.correlation_id`, `coaty.agent.id`
/// = this agent, `coaty.source.id` = the requester, `coaty.namespace`, and at the end `coaty.request.outcome`:
/// `response`, `not answered` or `failed`, with `coaty.response.topic`).
final class HandledRequestSpan: Sendable {
    /// Attribute keys beyond ``RequestSpan/Key`` (shared with the tests).
    enum Key {
        static let sourceId = "coaty.source.id"
        static let responseTopic = "coaty.response.topic"
    }

    private let span: any Span
    private let ended = CoatyMutex(false)

    /// Starts the span of a request received on `topic`, or returns `nil` when `tracer` does not record it. With the
    /// requester's context (carried over MQTT 5) the span is a child of its request span, in the same trace.
    static func start(
        tracer: any Tracer,
        event: CommunicationEventType,
        topic: CoatyTopic,
        correlationId: CoatyUUID,
        agentId: CoatyUUID,
        parent: ServiceContext? = nil
    ) -> HandledRequestSpan? {
        let span = tracer.startSpan(
            "\(event.name) process",
            context: parent ?? .topLevel,
            ofKind: .consumer,
            at: DefaultTracerClock.now
        )
        guard span.isRecording else {
            span.end()
            return nil
        }
        span.attributes[RequestSpan.Key.system] = "mqtt"
        span.attributes[RequestSpan.Key.operationType] = "process"
        span.attributes[RequestSpan.Key.operationName] = event.name
        span.attributes[RequestSpan.Key.eventType] = event.name
        span.attributes[RequestSpan.Key.destination] = topic.name
        span.attributes[RequestSpan.Key.correlationId] = correlationId.description
        span.attributes[RequestSpan.Key.conversation] = correlationId.description
        span.attributes[RequestSpan.Key.agentId] = agentId.description
        span.attributes[RequestSpan.Key.namespace] = String(topic.namespace)
        span.attributes[Key.sourceId] = topic.sourceUUID.description
        return HandledRequestSpan(span)
    }

    private init(_ span: any Span) {
        self.span = span
    }

    deinit {
        // Every copy of the event is gone: the observer never answered it.
        if claimEnd() {
            span.attributes[RequestSpan.Key.outcome] = "not answered"
            span.end()
        }
    }

    /// The span's context: spans and requests started in it are children of this one.
    var context: ServiceContext { span.context }

    /// Ends the span at the first response, published on `topic`; later responses leave it as it is.
    func responded(on topic: String) {
        guard claimEnd() else { return }
        span.attributes[RequestSpan.Key.outcome] = "response"
        span.attributes[Key.responseTopic] = topic
        span.end()
    }

    /// Ends the span with the error of the response's publication.
    func failed(_ error: any Error) {
        guard claimEnd() else { return }
        span.endFailed(by: error)
    }

    /// `true` for the first caller only.
    private func claimEnd() -> Bool {
        ended.withLock { ended in
            defer { ended = true }
            return !ended
        }
    }
}
