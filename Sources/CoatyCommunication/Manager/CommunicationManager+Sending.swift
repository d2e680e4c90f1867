import CoatyFilter
package import CoatyModel
import CoatySync
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

extension CommunicationManager {
    // MARK: Sending

    /// Publishes now when online, otherwise defers the message (FIFO, bounded).
    /// `message` at ``Options/qos`` at least.
    func atLeastOptionsQoS(_ message: TransportMessage) -> TransportMessage {
        guard message.qos < options.qos else { return message }
        var raised = message
        raised.qos = options.qos
        return raised
    }

    func send(_ message: TransportMessage) async throws(CommunicationError) {
        let message = atLeastOptionsQoS(message)
        let sendNow = state.withLock { state -> Bool in
            if state.online && !state.draining && state.deferred.isEmpty { return true }
            defer_(message, &state)
            return false
        }
        guard sendNow else { return }
        do {
            try await transport.publish(message)
        } catch TransportError.notConnected {
            state.withLock { defer_(message, &$0) }
        } catch {
            throw .transportFailure(error)
        }
    }

    func defer_(_ message: TransportMessage, _ state: inout ManagerState) {
        if state.deferred.count >= max(0, options.deferredPublicationLimit) {
            if state.deferred.popFirst() != nil || options.deferredPublicationLimit <= 0 {
                counters.deferredOverflow()
                logger.debug(
                    "Deferred publication queue full; dropped the oldest",
                    metadata: ["topic": "\(message.topic)"]
                )
            }
            if options.deferredPublicationLimit <= 0 { return }
        }
        state.deferred.append(message)
    }

    func topic(_ event: CoatyTopic.Event, correlationId: CoatyUUID? = nil) throws(CommunicationError) -> CoatyTopic {
        do throws(CoatyTopicError) {
            return try CoatyTopic(
                event: event,
                namespace: options.namespace,
                sourceId: identity.objectId,
                correlationId: correlationId
            )
        } catch {
            throw .invalidTopic(error)
        }
    }

    /// The topic name of a two-way event with `correlationId`: the name up to the correlation id depends only on the
    /// event (the namespace and source id are fixed), so it is built and checked once per event and the id's text
    /// appended — a version 4 id with the RFC 4122 variant, as ``CoatyUUID()`` makes and a parsed request topic
    /// carries, is valid as it is (any other id goes the checked way and fails there).
    func twoWayTopicName(_ event: CoatyTopic.Event, correlationId: CoatyUUID) throws(CommunicationError) -> String {
        try withCorrelationPrefix(.topic, event, correlationId) { id throws(CommunicationError) in
            try topic(event, correlationId: id).name
        }
    }

    /// ``subscriptionFilter(_:correlationId:)`` for the responses of one request, its prefix built once per event.
    func responseFilter(_ event: CoatyTopic.Event, correlationId: CoatyUUID) throws(CommunicationError) -> String {
        try withCorrelationPrefix(.filter, event, correlationId) { id throws(CommunicationError) in
            try subscriptionFilter(event, correlationId: id)
        }
    }

    /// `build(correlationId)`, a string that ends with the correlation id, from the prefix of that kind remembered for
    /// `event`; built the checked way (and its prefix remembered) the first time, and for an id that is not version 4.
    private func withCorrelationPrefix(
        _ kind: TwoWayPrefixes.Kind,
        _ event: CoatyTopic.Event,
        _ correlationId: CoatyUUID,
        build: (CoatyUUID) throws(CommunicationError) -> String
    ) throws(CommunicationError) -> String {
        guard Self.isVersion4(correlationId) else { return try build(correlationId) }
        if let prefix = twoWayPrefixes.withLock({ $0[kind][event] }) {
            return prefix + correlationId.uuidString
        }
        let built = try build(correlationId)
        let prefix = String(decoding: built.utf8.dropLast(36), as: UTF8.self)
        twoWayPrefixes.withLock { $0.remember(prefix, for: event, in: kind) }
        return built
    }

    /// Whether `id` is a version 4 UUID of the RFC 4122 variant (what a Coaty topic's ids must be).
    static func isVersion4(_ id: CoatyUUID) -> Bool {
        (id.high >> 12) & 0xF == 4 && id.low >> 62 == 0b10
    }

    package func subscriptionFilter(_ event: CoatyTopic.Event, correlationId: CoatyUUID? = nil)
        throws(CommunicationError)
        -> String
    {
        do throws(CoatyTopicError) {
            if let correlationId {
                return try CoatyTopic.subscriptionFilter(
                    for: event,
                    namespace: options.namespace,
                    crossNamespacing: options.crossNamespacing,
                    correlationId: correlationId
                )
            }
            return try CoatyTopic.subscriptionFilter(
                for: event,
                namespace: options.namespace,
                crossNamespacing: options.crossNamespacing
            )
        } catch {
            throw .invalidTopic(error)
        }
    }

    /// The Advertise messages of `object`, one per topic: its type's topics
    /// (``advertiseTopicNames(objectType:coreType:)``), or those of `filters`. Every topic is built
    /// before any message is returned, so an invalid object type sends nothing.
    func advertiseMessage(
        _ object: AnyCoatyObject,
        privateData: JSONObject?,
        filters: [CoatyTopic.TypeFilter]? = nil
    ) throws(CommunicationError) -> [TransportMessage] {
        let payload = AdvertiseEventData(object: object, privateData: privateData).payloadBytes
        let topics: [String]
        if let filters {
            topics = try filters.map { filter throws(CommunicationError) in try topicName(.advertise(filter)) }
        } else {
            topics = try advertiseTopicNames(objectType: object.objectType, coreType: object.coreType)
        }
        return topics.map { TransportMessage(topic: $0, payload: payload) }
    }

    /// The Advertise topic names of an object type, `ADV:<CoreType>` and, for a custom object
    /// type, `ADV::<objectType>`: one lookup per Advertise, built once per type (up to 1024 kept).
    func advertiseTopicNames(objectType: String, coreType: CoreType) throws(CommunicationError) -> [String] {
        let key = AdvertisedType(objectType: objectType, coreType: coreType)
        if let names = advertiseNames.withLock({ $0[key] }) { return names }
        var names: [String] = []
        for filter in CoatyTopic.TypeFilter.publishing(objectType: objectType, coreType: coreType) {
            names.append(try topicName(.advertise(filter)))
        }
        advertiseNames.withLock { cache in
            if cache.count < 1024 { cache[key] = names }
        }
        return names
    }

    /// The topic name of a one-way event of this agent, built once per event (up to 1024 kept).
    func topicName(_ event: CoatyTopic.Event) throws(CommunicationError) -> String {
        if let name = topicNames.withLock({ $0[event] }) { return name }
        let name = try topic(event).name
        topicNames.withLock { names in
            if names.count < 1024 { names[event] = name }
        }
        return name
    }

    /// Publishes a response in the own namespace with the request's correlation id.
    func publishResponse(
        _ event: CoatyTopic.Event,
        correlationId: CoatyUUID,
        payload: JSONObject,
        span: HandledRequestSpan? = nil
    ) async throws(CommunicationError) {
        try await publishResponse(
            event,
            correlationId: correlationId,
            payloadBytes: payload.serializedBytes(),
            span: span
        )
    }

    /// Publishes a response whose payload is already serialized (a Resolve encoded straight from its object).
    func publishResponse(
        _ event: CoatyTopic.Event,
        correlationId: CoatyUUID,
        payloadBytes: [UInt8],
        span: HandledRequestSpan? = nil
    ) async throws(CommunicationError) {
        guard let span else {
            let name = try twoWayTopicName(event, correlationId: correlationId)
            try await send(TransportMessage(topic: name, payload: payloadBytes))
            return
        }
        let name: String
        do throws(CommunicationError) {
            name = try twoWayTopicName(event, correlationId: correlationId)
            let properties = TraceContextPropagation.properties(of: span.context, tracer: tracer, transport: transport)
            try await send(TransportMessage(topic: name, payload: payloadBytes, userProperties: properties))
        } catch {
            span.failed(error)
            throw error
        }
        span.responded(on: name)
    }
}

/// Topic names and response filters of two-way events up to their correlation id, by event; at most
/// ``TwoWayPrefixes/limit`` of each (Call operations and Update object types are the application's: many distinct
/// ones are built the checked way).
struct TwoWayPrefixes {
    /// Topic names or response filters.
    enum Kind {
        case topic, filter
    }

    static let limit = 256
    private var topics: [CoatyTopic.Event: String] = [:]
    private var filters: [CoatyTopic.Event: String] = [:]

    /// The prefixes of one kind, by event.
    subscript(kind: Kind) -> [CoatyTopic.Event: String] {
        switch kind {
        case .topic: topics
        case .filter: filters
        }
    }

    mutating func remember(_ prefix: String, for event: CoatyTopic.Event, in kind: Kind) {
        guard self[kind].count < Self.limit else { return }
        switch kind {
        case .topic: topics[event] = prefix
        case .filter: filters[event] = prefix
        }
    }
}
