// What the manager must know about the broker's MQTT dialect, and how a topic whose dots a
// broker rewrote is read back.

import CoatyFilter
import CoatyModel

/// The kind of MQTT broker an agent talks to, where a broker departs from MQTT in ways that
/// matter to Coaty (``CommunicationManager/Options/brokerType``).
///
/// Nothing is detected silently: a manager on ``standard`` that receives a Coaty topic it could
/// read only as a RabbitMQ topic logs a warning naming this setting, and counts the message as an
/// invalid topic.
public enum BrokerType: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// A broker that keeps topics as published: mosquitto, EMQX, HiveMQ, VerneMQ, ejabberd's
    /// `mod_mqtt`, Coaty JS's `aedes` broker (the default).
    case standard
    /// RabbitMQ's MQTT plugin (3.x). It maps MQTT topics to AMQP routing keys, where `.` separates
    /// words, and maps them back on delivery: every `.` **inside** a topic level arrives as `/`
    /// (`ADV::com.example.Light` arrives as `ADV::com/example/Light`). Subscriptions still match
    /// (a filter's dots become the same words), so the manager rebuilds each received Coaty topic
    /// from its known structure (``CoatyTopic/restoringRewrittenDots(_:)``). Two more differences
    /// it accounts for: the broker delivers one copy of a message per client however many of its
    /// subscriptions match (``CommunicationManager/Options/brokerDeliversCopyPerSubscription`` is
    /// taken as `false`), and it has no shared subscriptions (a
    /// ``CommunicationManager/Options/sharedSubscriptionGroup`` is refused when the manager
    /// starts). Raw topics cannot be rebuilt: Raw observers receive them as delivered (with `/`
    /// for `.`), and their filters are matched in that form.
    case rabbitMQ = "rabbitmq"

    /// The name used on the command line (`--broker-type`), in configuration files
    /// (`communication.brokerType`) and in `COATY_BROKER_TYPE`: `standard` or `rabbitmq`.
    public var description: String { rawValue }

    /// The broker type named `name` (case-insensitive), or `nil`.
    /// - Parameter name: `standard` or `rabbitmq`.
    public init?(name: String) {
        self.init(rawValue: name.lowercased())
    }

    /// Whether a broker of this type rewrites `.` inside topic levels as `/` on delivery.
    public var rewritesDotsInTopics: Bool { self == .rabbitMQ }

    /// The form in which a broker of this type delivers a topic matching `filter` (for matching
    /// Raw filters locally): with every `.` replaced by `/` on RabbitMQ, unchanged otherwise.
    func deliveredForm(ofFilter filter: String) -> String {
        guard rewritesDotsInTopics, filter.utf8.contains(UInt8(ascii: ".")) else { return filter }
        return String(filter.map { $0 == "." ? "/" : $0 })
    }
}

extension CoatyTopic {
    /// The most splits of the namespace and event levels tried by
    /// ``restoringRewrittenDots(_:)`` (bounds its work on hostile topics).
    static let maximumRestoreAttempts = 8

    /// The Coaty topic that a broker which rewrites `.` inside topic levels as `/` (RabbitMQ's MQTT
    /// plugin, ``BrokerType/rabbitMQ``) delivered as `delivered`, or `nil` when no such topic exists.
    ///
    /// A Coaty topic is `coaty/3/<namespace>/<event>/<sourceId>[/<correlationId>]`; ids are UUIDs
    /// (no dots), so the extra levels belong to the namespace and the event level. The event level
    /// starts with a three-letter event code, which splits them; each candidate is validated by
    /// ``init(parsing:)``, the first valid one wins. A topic that parses as it is is returned as it
    /// is.
    ///
    /// ```swift
    /// let topic = CoatyTopic.restoringRewrittenDots("coaty/3/-/ADV::com/example/Light/\(agentId)")
    /// topic?.objectType  // "com.example.Light"
    /// ```
    ///
    /// - Parameter delivered: the topic as the broker delivered it.
    /// - Returns: the restored, validated topic, or `nil`.
    public static func restoringRewrittenDots(_ delivered: String) -> CoatyTopic? {
        if let topic = try? CoatyTopic(parsing: delivered) { return topic }
        guard delivered.utf8.count <= maximumByteCount, delivered.hasPrefix("coaty/3/") else { return nil }
        let levels = delivered.utf8.split(separator: ASCII.slash, omittingEmptySubsequences: false)
        guard levels.count > 5 else { return nil }
        func isUUID(_ level: Substring.UTF8View) -> Bool { withUTF8Bytes(Substring(level)) { isLowercaseUUIDv4($0) } }
        func text(_ range: Range<Int>, _ separator: String) -> String {
            levels[range].map { String(Substring($0)) }.joined(separator: separator)
        }
        // Two-way events end in two UUIDs, one-way events in one.
        var tails: [Int] = []
        if isUUID(levels[levels.count - 1]) {
            if isUUID(levels[levels.count - 2]) { tails.append(2) }
            tails.append(1)
        }
        var attempts = 0
        for tail in tails {
            let middle = 2..<(levels.count - tail)
            guard middle.count >= 2 else { continue }
            for split in (middle.lowerBound + 1)..<middle.upperBound where startsEventLevel(levels[split]) {
                attempts += 1
                guard attempts <= maximumRestoreAttempts else { return nil }
                let candidate =
                    "coaty/3/" + text(middle.lowerBound..<split, ".") + "/" + text(split..<middle.upperBound, ".")
                    + "/" + text((levels.count - tail)..<levels.count, "/")
                if let topic = try? CoatyTopic(parsing: candidate) { return topic }
            }
        }
        return nil
    }

    /// Whether a level starts like an event level: a known three-letter code, alone or before `:`.
    private static func startsEventLevel(_ level: Substring.UTF8View) -> Bool {
        let bytes = Array(level.prefix(4))
        guard bytes.count >= 3, CommunicationEventType(codeBytes: bytes[0], bytes[1], bytes[2]) != nil else {
            return false
        }
        return bytes.count == 3 || bytes[3] == ASCII.colon
    }
}
