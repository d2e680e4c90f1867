import CoatyFilter
public import CoatyModel
import CoatySync
import Logging
import Synchronization

// MARK: - IO routing events

extension CommunicationManager {
    /// Observes Associate events of an IO context.
    ///
    /// - Parameter ioContextName: the IO context name.
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid name.
    public func observeAssociate(ioContextName: String) throws(CommunicationError) -> EventObservation<AssociateEvent> {
        try makeObservation(.associate(ioContextName: ioContextName)) { incoming throws(ObservationSkip) in
            guard case .associate(let data) = incoming.payload else { throw ObservationSkip() }
            return AssociateEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                ioContextName: ioContextName,
                data: data
            )
        }
    }

    /// Publishes an Associate (or, without route, a disassociate) for an IO context.
    ///
    /// - Parameters:
    ///   - ioContextName: the IO context name.
    ///   - data: the association.
    /// - Throws: ``CommunicationError`` for an invalid name or a permanent transport failure.
    public func publishAssociate(ioContextName: String, data: AssociateEventData) async throws(CommunicationError) {
        let topic = try topic(.associate(ioContextName: ioContextName))
        try await sendOneWay(.associate, TransportMessage(topic: topic.name, payload: data.payloadBytes))
    }

    /// The Coaty route of an IoSource's values: `coaty/3/<namespace>/IOV/<ioSourceId>`.
    ///
    /// - Parameter ioSourceId: the IoSource.
    /// - Returns: the topic.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` when the id is not a version 4 UUID.
    public func ioValueTopic(ioSourceId: CoatyUUID) throws(CommunicationError) -> String {
        do throws(CoatyTopicError) {
            return try CoatyTopic(event: .ioValue, namespace: options.namespace, sourceId: ioSourceId).name
        } catch {
            throw .invalidTopic(error)
        }
    }

    /// Publishes an IoValue of an IoSource as JSON on its Coaty route. (For an external route,
    /// a topic outside `coaty/`, use ``publishRaw(topic:payload:retain:)``.)
    ///
    /// - Parameters:
    ///   - value: the value.
    ///   - ioSourceId: the IoSource publishing it (the topic's source id).
    /// - Throws: ``CommunicationError`` for a permanent transport failure.
    public func publishIoValue(_ value: JSONValue, ioSourceId: CoatyUUID) async throws(CommunicationError) {
        try await publishIoValue(rawBytes: value.serializedBytes(), ioSourceId: ioSourceId)
    }

    /// Publishes a raw IoValue (an IoSource with `useRawIoValues`) on its Coaty route.
    ///
    /// - Parameters:
    ///   - rawBytes: the bytes.
    ///   - ioSourceId: the IoSource publishing it.
    /// - Throws: ``CommunicationError`` for a permanent transport failure.
    public func publishIoValue(rawBytes: [UInt8], ioSourceId: CoatyUUID) async throws(CommunicationError) {
        try await sendOneWay(.ioValue, TransportMessage(topic: try ioValueTopic(ioSourceId: ioSourceId), payload: rawBytes))
    }

    /// Observes the IoValues of one IoSource on its Coaty route.
    ///
    /// - Parameter ioSourceId: the IoSource.
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` when the id is not a version 4 UUID.
    public func observeIoValue(ioSourceId: CoatyUUID) throws(CommunicationError) -> EventObservation<IoValueEvent> {
        var filter = try ioValueTopic(ioSourceId: ioSourceId)
        if options.crossNamespacing {
            filter = "coaty/3/+/IOV/" + ioSourceId.uuidString
        }
        return makeObservation(filter: filter, routeKey: CoatyTopic.Event.ioValue.level) {
            incoming throws(ObservationSkip) in
            guard case .ioValue(let bytes) = incoming.payload, incoming.topic.sourceUUID == ioSourceId else {
                throw ObservationSkip()
            }
            return IoValueEvent(ioSourceId: ioSourceId, topic: incoming.topic, payload: bytes)
        }
    }
}
