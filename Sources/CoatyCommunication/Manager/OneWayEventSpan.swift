import CoatyModel
import Tracing

/// Spans of one-way events (Advertise, Deadvertise, Channel, Associate, IoValue), only while the manager traces and
/// only those the tracer samples: a producer span `Advertise send` (…) around the publication, a child of the
/// caller's current span, and a consumer span `Advertise receive` (…) at the delivery to the observers, a child of
/// the publisher's span, made only when the message carries the sampled publisher's context (MQTT 5).
/// A tracer samples a span it does not record (`isRecording == false`): then no attribute is computed and no
/// context is sent. Without a tracer nothing here runs (``CommunicationManager/isTracing``).
enum OneWayEventSpan {
    /// Sets the attributes both sides share.
    static func describe(
        _ span: any Span,
        operation: String,
        event: CommunicationEventType,
        topic: String,
        agentId: CoatyUUID,
        namespace: String
    ) {
        span.attributes[RequestSpan.Key.system] = "mqtt"
        span.attributes[RequestSpan.Key.operationType] = operation
        span.attributes[RequestSpan.Key.operationName] = event.name
        span.attributes[RequestSpan.Key.eventType] = event.name
        span.attributes[RequestSpan.Key.destination] = topic
        span.attributes[RequestSpan.Key.agentId] = agentId.description
        span.attributes[RequestSpan.Key.namespace] = namespace
    }
}

extension CommunicationManager {
    /// Sends the messages of one one-way event (an Advertise goes out on up to two topics) in its producer span
    /// when the tracer samples one; untraced, exactly ``send(_:)`` for each.
    func sendOneWay(_ event: CommunicationEventType, _ messages: [TransportMessage]) async throws(CommunicationError) {
        guard isTracing, let first = messages.first,
            options.tracesUnparentedOneWayEvents || InstrumentationContext.current != nil
        else {
            for message in messages { try await send(message) }
            return
        }
        let span = tracer.startSpan(
            event.sendSpanName,
            context: InstrumentationContext.current ?? .topLevel,
            ofKind: .producer,
            at: DefaultTracerClock.now
        )
        guard span.isRecording else {
            span.end()
            for message in messages { try await send(message) }
            return
        }
        OneWayEventSpan.describe(
            span,
            operation: "send",
            event: event,
            topic: first.topic,
            agentId: identity.objectId,
            namespace: options.namespace
        )
        let properties = TraceContextPropagation.properties(of: span.context, tracer: tracer, transport: transport)
        do throws(CommunicationError) {
            for var message in messages {
                message.userProperties = properties
                try await send(message)
            }
        } catch {
            span.endFailed(by: error, outcome: false)
            throw error
        }
        span.end()
    }

    /// The other `sendOneWay` for one message (untraced: no array made).
    func sendOneWay(_ event: CommunicationEventType, _ message: TransportMessage) async throws(CommunicationError) {
        guard isTracing else {
            try await send(message)
            return
        }
        try await sendOneWay(event, [message])
    }

    /// The consumer span of a one-way event received on `topic`, started and ended at its delivery: only for an
    /// event that carries its publisher's sampled context (MQTT 5). An event without one makes no span and asks the
    /// sampler nothing — a stream of thousands of events a second is not sampled anew at each receiver (measured:
    /// asking swift-otel's sampler per received Advertise cost a third of `coaty observe`'s throughput).
    func traceReceived(_ topic: CoatyTopic, userProperties: [MQTTUserProperty]) {
        guard let remote = TraceContextPropagation.remoteContext(in: userProperties, tracer: tracer) else { return }
        let span = tracer.startSpan(
            "\(topic.eventType.name) receive",
            context: remote,
            ofKind: .consumer,
            at: DefaultTracerClock.now
        )
        if span.isRecording {
            OneWayEventSpan.describe(
                span,
                operation: "receive",
                event: topic.eventType,
                topic: topic.name,
                agentId: identity.objectId,
                namespace: String(topic.namespace)
            )
            span.attributes[HandledRequestSpan.Key.sourceId] = topic.sourceUUID.description
        }
        span.end()
    }
}

extension CommunicationEventType {
    /// The name of a producer span (a one-way event's or a request's), a literal: a publication the sampler drops still
    /// names its span, and an interpolated name would allocate for each of them.
    var sendSpanName: String {
        switch self {
        case .advertise: "Advertise send"
        case .deadvertise: "Deadvertise send"
        case .channel: "Channel send"
        case .associate: "Associate send"
        case .ioValue: "IoValue send"
        case .discover: "Discover send"
        case .resolve: "Resolve send"
        case .query: "Query send"
        case .retrieve: "Retrieve send"
        case .update: "Update send"
        case .complete: "Complete send"
        case .call: "Call send"
        case .return: "Return send"
        case .raw: "Raw send"
        }
    }
}
