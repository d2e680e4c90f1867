import CoatyFilter
public import CoatyModel
import CoatySync
import Logging
import Synchronization

// MARK: - Publishing one-way events

extension CommunicationManager {
    /// Publishes an Advertise of an object: on `ADV:<CoreType>`, and also on `ADV::<objectType>`
    /// when the object type is not the core type's own. Deferred while offline.
    ///
    /// - Parameters:
    ///   - object: the object.
    ///   - privateData: application data.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError`` for an invalid object type or a permanent transport failure.
    public func publishAdvertise<Object: CoatyObject>(
        _ object: Object,
        privateData: JSONObject? = nil,
        qos: TransportQoS = .atMostOnce
    ) async throws(CommunicationError) {
        let payload = try AnyCoatyObject.payloadBytes(object: object, privateData: privateData)
        // Every topic is built before anything is sent: an invalid object type sends nothing.
        let topics = try advertiseTopicNames(objectType: object.objectType, coreType: object.coreType)
        guard isTracing else {
            for topic in topics { try await send(TransportMessage(topic: topic, payload: payload, qos: qos)) }
            return
        }
        try await sendOneWay(.advertise, topics.map { TransportMessage(topic: $0, payload: payload, qos: qos) })
    }

    /// Publishes a Deadvertise of object ids.
    ///
    /// - Parameters:
    ///   - objectIds: the ids of the objects that are gone.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError`` for a permanent transport failure.
    public func publishDeadvertise(_ objectIds: [CoatyUUID], qos: TransportQoS = .atMostOnce)
        async throws(CommunicationError)
    {
        let topic = try topic(.deadvertise)
        try await sendOneWay(
            .deadvertise,
            TransportMessage(
                topic: topic.name,
                payload: DeadvertiseEventData(objectIds: objectIds).payloadBytes,
                qos: qos
            )
        )
    }

    /// Publishes a Channel event with one object (`{"object":…}`).
    ///
    /// - Parameters:
    ///   - channelId: the channel id.
    ///   - object: the object.
    ///   - privateData: application data.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError`` for an invalid channel id or a permanent transport failure.
    public func publishChannel<Object: CoatyObject>(
        _ channelId: String,
        object: Object,
        privateData: JSONObject? = nil,
        qos: TransportQoS = .atMostOnce
    ) async throws(CommunicationError) {
        let payload = try AnyCoatyObject.payloadBytes(object: object, privateData: privateData)
        let topic = try topic(.channel(id: channelId))
        try await sendOneWay(.channel, TransportMessage(topic: topic.name, payload: payload, qos: qos))
    }

    /// Publishes a Channel event with an array of objects (`{"objects":[…]}`).
    ///
    /// - Parameters:
    ///   - channelId: the channel id.
    ///   - objects: the objects.
    ///   - privateData: application data.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError`` for an invalid channel id or a permanent transport failure.
    public func publishChannel(
        _ channelId: String,
        objects: [any CoatyObject],
        privateData: JSONObject? = nil,
        qos: TransportQoS = .atMostOnce
    ) async throws(CommunicationError) {
        var wrapped: [AnyCoatyObject] = []
        for object in objects { wrapped.append(try AnyCoatyObject.wrapping(object)) }
        try await publishChannel(
            channelId,
            data: ChannelEventData(objects: wrapped, privateData: privateData),
            qos: qos
        )
    }

    /// Publishes a Channel event payload.
    ///
    /// - Parameters:
    ///   - channelId: the channel id.
    ///   - data: the payload.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError`` for an invalid channel id or a permanent transport failure.
    public func publishChannel(
        _ channelId: String,
        data: ChannelEventData,
        qos: TransportQoS = .atMostOnce
    ) async throws(CommunicationError) {
        let topic = try topic(.channel(id: channelId))
        try await sendOneWay(.channel, TransportMessage(topic: topic.name, payload: data.payloadBytes, qos: qos))
    }

    /// Publishes a Raw message on a topic that does not start with `coaty/`.
    ///
    /// - Parameters:
    ///   - topic: the MQTT topic name.
    ///   - payload: the bytes.
    ///   - retain: whether the broker keeps the message for future subscribers.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid or `coaty/` topic.
    public func publishRaw(
        topic: String,
        payload: [UInt8],
        retain: Bool = false,
        qos: TransportQoS = .atMostOnce
    ) async throws(CommunicationError) {
        do throws(CoatyTopicError) {
            try CoatyTopic.validateRawTopic(topic)
        } catch {
            throw .invalidTopic(error)
        }
        try await send(TransportMessage(topic: topic, payload: payload, qos: qos, retain: retain))
    }
}
