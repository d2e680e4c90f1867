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
        try await publishResponse(event, correlationId: correlationId, payloadBytes: payload.serializedBytes(), span: span)
    }

    /// Publishes a response whose payload is already serialized (a Resolve encoded straight from its object).
    func publishResponse(
        _ event: CoatyTopic.Event,
        correlationId: CoatyUUID,
        payloadBytes: [UInt8],
        span: HandledRequestSpan? = nil
    ) async throws(CommunicationError) {
        guard let span else {
            let topic = try topic(event, correlationId: correlationId)
            try await send(TransportMessage(topic: topic.name, payload: payloadBytes))
            return
        }
        let name: String
        do throws(CommunicationError) {
            name = try topic(event, correlationId: correlationId).name
            let properties = TraceContextPropagation.properties(of: span.context, tracer: tracer, transport: transport)
            try await send(TransportMessage(topic: name, payload: payloadBytes, userProperties: properties))
        } catch {
            span.failed(error)
            throw error
        }
        span.responded(on: name)
    }
}
