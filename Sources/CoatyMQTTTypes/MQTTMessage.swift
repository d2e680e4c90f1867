/// The MQTT quality of service of a publication, subscription or will.
///
/// Coaty uses ``atMostOnce`` for everything; higher levels are an opt-in beyond the protocol.
public enum MQTTQoS: UInt8, Sendable, Hashable, CaseIterable {
    /// QoS 0: fire and forget (the Coaty default).
    case atMostOnce = 0
    /// QoS 1: acknowledged, possibly duplicated.
    case atLeastOnce = 1
    /// QoS 2: acknowledged exactly once.
    case exactlyOnce = 2
}

extension MQTTQoS: Comparable {
    /// Orders by level: at most once < at least once < exactly once.
    public static func < (lhs: MQTTQoS, rhs: MQTTQoS) -> Bool {
        lhs.rawValue < rhs.rawValue
    }
}

/// One MQTT application message: a topic, a binary payload, its QoS and retain flag. Sent and
/// received by the MQTT client and by every Coaty transport (as `TransportMessage`), and used as
/// the last will.
public struct MQTTMessage: Sendable, Hashable {
    /// The MQTT topic name.
    public var topic: String
    /// The payload bytes (UTF-8 JSON for Coaty events, anything for Raw and raw IoValues).
    public var payload: [UInt8]
    /// The quality of service it was published (or delivered) with.
    public var qos: MQTTQoS
    /// Whether the broker keeps the message for future subscribers (only Raw publications ask
    /// for this). A received message has `retain == true` only when it was stored before the
    /// subscription was made.
    public var retain: Bool
    /// MQTT 5 user properties, in order (names may repeat). Sent only by a client speaking MQTT 5 (over MQTT 3.1.1
    /// they are left out: the protocol has no place for them), and received only from an MQTT 5 publisher by an MQTT 5
    /// subscriber (a broker drops them for MQTT 3.1.1 subscribers). CoatyKit carries W3C trace context in them
    /// (`traceparent`, `tracestate`); the Coaty payload never changes.
    public var userProperties: [MQTTUserProperty]

    /// Creates a message.
    ///
    /// - Parameters:
    ///   - topic: the MQTT topic name (no wildcards).
    ///   - payload: the payload bytes.
    ///   - qos: the quality of service; Coaty uses ``MQTTQoS/atMostOnce`` (the default).
    ///   - retain: whether the broker should retain the message.
    ///   - userProperties: MQTT 5 user properties (default none).
    public init(
        topic: String,
        payload: [UInt8],
        qos: MQTTQoS = .atMostOnce,
        retain: Bool = false,
        userProperties: [MQTTUserProperty] = []
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.userProperties = userProperties
    }
}

/// An MQTT 5 user property: a name/value pair of UTF-8 strings that travels beside a message's payload.
public struct MQTTUserProperty: Sendable, Hashable {
    /// The property name (at most 65535 UTF-8 bytes).
    public var name: String
    /// The property value (at most 65535 UTF-8 bytes).
    public var value: String

    /// Creates a user property.
    ///
    /// - Parameters:
    ///   - name: the name, e.g. `traceparent`.
    ///   - value: the value.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}
