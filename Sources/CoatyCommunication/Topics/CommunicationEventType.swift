import CoatyFilter
import CoatyModel

/// The kind of a Coaty communication event, as named by the event level of a Coaty topic.
///
/// Every case but ``raw`` has a three-letter wire code (``topicCode``) that starts the event level
/// of its topic, e.g. `ADV` in `coaty/3/-/ADV:Task/<sourceId>`. One-way events (Advertise,
/// Deadvertise, Channel, Associate, IoValue) are published without a correlation id; two-way
/// events (requests Discover, Query, Update, Call and their responses Resolve, Retrieve, Complete,
/// Return) always carry one.
///
/// ```swift
/// CommunicationEventType(topicCode: "DSC")   // .discover
/// CommunicationEventType.discover.responseType   // .resolve
/// ```
public enum CommunicationEventType: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Advertise (`ADV`): one-way, requires a filter (`:<CoreType>` or `::<objectType>`).
    case advertise
    /// Deadvertise (`DAD`): one-way, no filter.
    case deadvertise
    /// Channel (`CHN`): one-way, requires the channel id as filter.
    case channel
    /// Associate (`ASC`): one-way, requires the IO context name as filter.
    case associate
    /// IoValue (`IOV`): one-way, no filter; the source id is the IoSource's objectId.
    case ioValue
    /// Discover (`DSC`): request answered by ``resolve``, no filter.
    case discover
    /// Resolve (`RSV`): response to ``discover``, no filter.
    case resolve
    /// Query (`QRY`): request answered by ``retrieve``, no filter.
    case query
    /// Retrieve (`RTV`): response to ``query``, no filter.
    case retrieve
    /// Update (`UPD`): request answered by ``complete``, requires a filter like Advertise.
    case update
    /// Complete (`CPL`): response to ``update``, no filter.
    case complete
    /// Call (`CLL`): request answered by ``return``, requires the operation name as filter.
    case call
    /// Return (`RTN`): response to ``call``, no filter.
    case `return`
    /// Raw: a publication on any valid MQTT topic that does not start with `coaty/`.
    case raw

    /// The three-letter code of the event level (`"ADV"`, `"DSC"`, …), or `nil` for ``raw``.
    public var topicCode: String? {
        switch self {
        case .advertise: "ADV"
        case .deadvertise: "DAD"
        case .channel: "CHN"
        case .associate: "ASC"
        case .ioValue: "IOV"
        case .discover: "DSC"
        case .resolve: "RSV"
        case .query: "QRY"
        case .retrieve: "RTV"
        case .update: "UPD"
        case .complete: "CPL"
        case .call: "CLL"
        case .return: "RTN"
        case .raw: nil
        }
    }

    /// The event name used in logs and the CLI output (`"Advertise"`, `"IoValue"`, `"Raw"`, …).
    public var name: String {
        switch self {
        case .advertise: "Advertise"
        case .deadvertise: "Deadvertise"
        case .channel: "Channel"
        case .associate: "Associate"
        case .ioValue: "IoValue"
        case .discover: "Discover"
        case .resolve: "Resolve"
        case .query: "Query"
        case .retrieve: "Retrieve"
        case .update: "Update"
        case .complete: "Complete"
        case .call: "Call"
        case .return: "Return"
        case .raw: "Raw"
        }
    }

    /// The event name, e.g. `"Advertise"`.
    public var description: String { name }

    /// Whether the event is published without a correlation id (Advertise, Deadvertise, Channel,
    /// Associate, IoValue, and Raw).
    public var isOneWay: Bool {
        switch self {
        case .advertise, .deadvertise, .channel, .associate, .ioValue, .raw: true
        default: false
        }
    }

    /// Whether the event is part of a request/response pair and its topic carries a correlation id.
    public var isTwoWay: Bool { !isOneWay }

    /// Whether the event is a request (Discover, Query, Update, Call).
    public var isRequest: Bool {
        switch self {
        case .discover, .query, .update, .call: true
        default: false
        }
    }

    /// Whether the event is a response (Resolve, Retrieve, Complete, Return).
    public var isResponse: Bool {
        switch self {
        case .resolve, .retrieve, .complete, .return: true
        default: false
        }
    }

    /// Whether the event level of the topic must carry a filter (Advertise, Update, Channel,
    /// Call, Associate). Every other Coaty event must have none; Raw has no event level.
    public var requiresFilter: Bool {
        switch self {
        case .advertise, .update, .channel, .call, .associate: true
        default: false
        }
    }

    /// The response type answering this request type, or `nil` if this is not a request.
    public var responseType: CommunicationEventType? {
        switch self {
        case .discover: .resolve
        case .query: .retrieve
        case .update: .complete
        case .call: .return
        default: nil
        }
    }

    /// The request type this response type answers, or `nil` if this is not a response.
    public var requestType: CommunicationEventType? {
        switch self {
        case .resolve: .discover
        case .retrieve: .query
        case .complete: .update
        case .return: .call
        default: nil
        }
    }

    /// Creates the event type for a three-letter topic code.
    ///
    /// - Parameter topicCode: a code such as `"ADV"`; case-sensitive.
    /// - Returns: `nil` if the code is not one of the thirteen Coaty codes.
    public init?(topicCode: some StringProtocol) {
        var utf8 = topicCode.utf8.makeIterator()
        guard let b0 = utf8.next(), let b1 = utf8.next(), let b2 = utf8.next(), utf8.next() == nil,
            let type = Self(codeBytes: b0, b1, b2)
        else { return nil }
        self = type
    }

    /// Looks up an event type by the three bytes of its topic code without allocating.
    @inline(__always)
    init?(codeBytes b0: UInt8, _ b1: UInt8, _ b2: UInt8) {
        switch (UInt32(b0) << 16) | (UInt32(b1) << 8) | UInt32(b2) {
        case 0x41_44_56: self = .advertise  // ADV
        case 0x44_41_44: self = .deadvertise  // DAD
        case 0x43_48_4E: self = .channel  // CHN
        case 0x41_53_43: self = .associate  // ASC
        case 0x49_4F_56: self = .ioValue  // IOV
        case 0x44_53_43: self = .discover  // DSC
        case 0x52_53_56: self = .resolve  // RSV
        case 0x51_52_59: self = .query  // QRY
        case 0x52_54_56: self = .retrieve  // RTV
        case 0x55_50_44: self = .update  // UPD
        case 0x43_50_4C: self = .complete  // CPL
        case 0x43_4C_4C: self = .call  // CLL
        case 0x52_54_4E: self = .return  // RTN
        default: return nil
        }
    }
}
