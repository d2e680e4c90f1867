import CoatyFilter
public import CoatyModel

/// Protocol facts at the MQTT level that a Coaty transport needs besides topics: the client id and
/// the last will of an agent.
public enum CoatyConnection {
    /// The MQTT client id Coaty agents use: `"Coaty"` followed by the first 18 hex digits of the
    /// identity id without dashes (23 characters, the MQTT 3.1.1 limit every broker accepts).
    ///
    /// Client ids must be unique per connection: two clients with one id take each other's
    /// connection over forever, so give every agent its own identity id.
    ///
    /// - Parameter identityId: the agent's identity objectId.
    /// - Returns: the client id, e.g. `Coaty0a1b2c3d4e5f4a6b8c`.
    public static func clientId(identityId: CoatyUUID) -> String {
        "Coaty" + identityId.compactString.prefix(18)
    }

    /// The last will of an agent: the Deadvertise of its identity and the objects it owns
    /// (its IoNodes), published by the broker when the agent's connection is lost uncleanly.
    ///
    /// The topic is `coaty/3/<namespace>/DAD/<identityId>` and the payload
    /// `{"objectIds":["<identityId>", …]}`. On a clean stop an agent publishes the same message
    /// itself before it disconnects.
    ///
    /// - Parameters:
    ///   - namespace: the agent's namespace.
    ///   - identityId: the agent's identity objectId (the source id of the topic and the first
    ///     object id).
    ///   - ownedObjectIds: further object ids to deadvertise, e.g. the agent's IoNodes.
    /// - Returns: the will message (QoS 0, not retained).
    /// - Throws: ``CoatyTopicError`` for an invalid namespace or an identity id that is not a
    ///   version 4 UUID.
    public static func lastWill(
        namespace: String,
        identityId: CoatyUUID,
        ownedObjectIds: [CoatyUUID] = []
    ) throws(CoatyTopicError) -> TransportMessage {
        let topic = try CoatyTopic(event: .deadvertise, namespace: namespace, sourceId: identityId)
        var payload: [UInt8] = []
        payload.reserveCapacity(16 + 39 * (ownedObjectIds.count + 1))
        payload.append(contentsOf: #"{"objectIds":["#.utf8)
        for (i, id) in ([identityId] + ownedObjectIds).enumerated() {
            if i > 0 { payload.append(UInt8(ascii: ",")) }
            payload.append(UInt8(ascii: "\""))
            payload.append(contentsOf: id.uuidString.utf8)
            payload.append(UInt8(ascii: "\""))
        }
        payload.append(contentsOf: "]}".utf8)
        return TransportMessage(topic: topic.name, payload: payload)
    }
}
