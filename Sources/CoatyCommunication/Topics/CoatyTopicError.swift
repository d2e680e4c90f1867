import CoatyFilter
import CoatyModel

/// Why a string is not a valid Coaty topic, or why a Coaty topic or subscription filter could not
/// be built from the given parts.
///
/// Received topics that fail to parse are dropped (and counted) by the communication layer; when
/// building, the error names the part to fix. Strings carried by the cases are shortened to at
/// most 80 characters.
public enum CoatyTopicError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The topic is empty.
    case empty
    /// The topic has more than 65535 UTF-8 bytes, the MQTT limit.
    case tooLong(byteCount: Int)
    /// The topic does not start with `coaty/`; it is a Raw topic, not a Coaty event topic.
    case notCoatyTopic
    /// A Raw topic starts with `coaty/`, which is reserved for Coaty event topics.
    case reservedCoatyPrefix
    /// A Raw topic or topic filter is not valid MQTT.
    case invalidMQTTTopic(MQTTTopicError)
    /// The topic has the wrong number of levels (a Coaty topic has 5 or 6).
    case wrongLevelCount(Int)
    /// The level at the given zero-based index is empty.
    case emptyLevel(index: Int)
    /// The topic contains a byte that is not allowed in a Coaty topic (NUL, `+` or `#`).
    case forbiddenCharacter(UInt8)
    /// The protocol version level is not `3`.
    case unsupportedProtocolVersion(String)
    /// The namespace is empty or contains NUL, `+`, `#` or `/`.
    case invalidNamespace(String)
    /// The shared-subscription group name is empty or contains NUL, `+`, `#` or `/`.
    case invalidSharedSubscriptionGroup(String)
    /// The broker has no shared subscriptions (``BrokerType/rabbitMQ``): a shared-subscription
    /// group would receive nothing.
    case sharedSubscriptionsUnsupported(BrokerType)
    /// The event level does not start with a known three-letter event code.
    case unknownEventType(String)
    /// The event type requires a filter (`ADV:…`, `UPD:…`, `CHN:…`, `CLL:…`, `ASC:…`) but has none.
    case missingFilter(CommunicationEventType)
    /// The event type must not have a filter but has one.
    case unexpectedFilter(CommunicationEventType)
    /// The filter (object type, channel id, operation name, IO context name) is empty or contains
    /// NUL, `+`, `#` or `/`.
    case invalidFilter(CommunicationEventType, String)
    /// An Advertise or Update filter names a core type that Coaty protocol 3 does not define.
    case unknownCoreType(String)
    /// The source id is not a lowercase RFC 4122 version 4 UUID string.
    case invalidSourceId(String)
    /// A two-way event has no correlation id level.
    case missingCorrelationId(CommunicationEventType)
    /// A one-way event has a correlation id level (or a subscription filter for a non-response
    /// event was given one).
    case unexpectedCorrelationId(CommunicationEventType)
    /// The correlation id is not a lowercase RFC 4122 version 4 UUID string.
    case invalidCorrelationId(String)

    /// A message that says what is wrong and what to do.
    public var description: String {
        switch self {
        case .empty:
            "The topic is empty; a Coaty topic looks like coaty/3/<namespace>/<event>/<sourceId>."
        case .tooLong(let count):
            "The topic has \(count) UTF-8 bytes; MQTT allows at most 65535. Use shorter names."
        case .notCoatyTopic:
            "The topic does not start with 'coaty/'; treat it as a Raw topic."
        case .reservedCoatyPrefix:
            "Raw topics must not start with 'coaty/', which is reserved for Coaty events; choose another topic."
        case .invalidMQTTTopic(let error):
            "Not a valid MQTT topic: \(error)"
        case .wrongLevelCount(let count):
            "The topic has \(count) levels; a Coaty topic has 5 (one-way events) or 6 (two-way events)."
        case .emptyLevel(let index):
            "Level \(index) of the topic is empty; every Coaty topic level must be non-empty."
        case .forbiddenCharacter(let byte):
            "The topic contains the forbidden byte 0x\(String(byte, radix: 16)); NUL, '+' and '#' are not allowed."
        case .unsupportedProtocolVersion(let version):
            "Unsupported Coaty protocol version '\(version)'; only version 3 is supported."
        case .invalidNamespace(let namespace):
            "Invalid namespace '\(namespace)': it must be non-empty without NUL, '+', '#' or '/' (use [A-Za-z0-9._-])."
        case .invalidSharedSubscriptionGroup(let group):
            "Invalid shared-subscription group '\(group)': it must be non-empty without NUL, '+', '#' or '/'."
        case .sharedSubscriptionsUnsupported(let type):
            "The broker type '\(type)' has no shared subscriptions ($share/…): a shared-subscription group would receive nothing; use a broker with MQTT shared subscriptions (mosquitto, EMQX, HiveMQ) for recorder groups."
        case .unknownEventType(let level):
            "Unknown event level '\(level)'; expected a code such as ADV, DAD, CHN, DSC, RSV, QRY, RTV, UPD, CPL, CLL, RTN, ASC, IOV."
        case .missingFilter(let type):
            "\(type) topics need a filter after ':' (core type, '::' object type, channel id, operation or IO context name)."
        case .unexpectedFilter(let type):
            "\(type) topics must not have a ':' filter in the event level."
        case .invalidFilter(let type, let filter):
            "Invalid \(type) filter '\(filter)': it must be non-empty without NUL, '+', '#' or '/' (use [A-Za-z0-9._-])."
        case .unknownCoreType(let name):
            "Unknown core type '\(name)'; use one of \(coreTypeNamesList), or '::<objectType>' for an object type."
        case .invalidSourceId(let id):
            "Invalid source id '\(id)': it must be a lowercase RFC 4122 version 4 UUID."
        case .missingCorrelationId(let type):
            "\(type) is a two-way event and needs a correlation id level after the source id."
        case .unexpectedCorrelationId(let type):
            "\(type) must not carry a correlation id (only two-way event topics and response subscriptions do)."
        case .invalidCorrelationId(let id):
            "Invalid correlation id '\(id)': it must be a lowercase RFC 4122 version 4 UUID."
        }
    }
}

private let coreTypeNamesList = CoreType.allCases.map(\.rawValue).joined(separator: ", ")

/// Shortens user-provided text carried by an error to at most 80 characters.
func excerpt<S: StringProtocol>(_ text: S) -> String {
    let head = text.prefix(81)
    return head.count <= 80 ? String(head) : String(head.prefix(77)) + "..."
}
