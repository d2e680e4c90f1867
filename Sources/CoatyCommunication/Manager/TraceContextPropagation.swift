import Tracing

/// Carries a trace context across agents in MQTT 5 user properties: the tracer's propagator (W3C `traceparent` and
/// `tracestate` with swift-otel) writes and reads them; the Coaty payload never changes. Over MQTT 3.1.1 (and so
/// with Coaty JS peers) nothing is added: the transport carries no user properties.
enum TraceContextPropagation {
    /// Writes each field the tracer injects as one user property.
    struct PropertyInjector: Injector {
        func inject(_ value: String, forKey key: String, into carrier: inout [MQTTUserProperty]) {
            carrier.append(MQTTUserProperty(name: key, value: value))
        }
    }

    /// Reads a field as the first user property of its name.
    struct PropertyExtractor: Extractor {
        func extract(key: String, from carrier: [MQTTUserProperty]) -> String? {
            carrier.first { $0.name == key }?.value
        }
    }

    /// The user properties that carry `context` (a span's) to the receiver of a message; none when `transport`
    /// carries no user properties.
    static func properties(
        of context: ServiceContext,
        tracer: any Tracer,
        transport: any CoatyTransport
    ) -> [MQTTUserProperty] {
        guard transport.carriesUserProperties else { return [] }
        var properties: [MQTTUserProperty] = []
        tracer.inject(context, into: &properties, using: PropertyInjector())
        return properties
    }

    /// The remote context a received message carries, or `nil` when its user properties hold none the tracer
    /// reads.
    static func remoteContext(in properties: [MQTTUserProperty], tracer: any Tracer) -> ServiceContext? {
        guard !properties.isEmpty else { return nil }
        var context = ServiceContext.topLevel
        tracer.extract(properties, into: &context, using: PropertyExtractor())
        return context.isEmpty ? nil : context
    }
}
