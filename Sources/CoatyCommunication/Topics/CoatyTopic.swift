import CoatyFilter
public import CoatyModel

/// A validated Coaty protocol 3 event topic:
/// `coaty/3/<namespace>/<EVT[:filter]>/<sourceId>[/<correlationId>]`.
///
/// Parse received topics with ``init(parsing:)`` (or ``classify(_:)`` to tell Coaty, Raw and
/// invalid topics apart) and build publication topics with
/// ``init(event:namespace:sourceId:correlationId:)-(_,_,CoatyUUID,_)``.
/// Parsing works on the UTF-8 bytes of the topic, allocates nothing, and never traps: every rule
/// of the protocol is checked and a violation is reported as a ``CoatyTopicError``.
///
/// The components are views (`Substring`) into ``name``, so reading them does not allocate either;
/// convert with `String(_:)` when a component must outlive the topic.
///
/// ```swift
/// let topic = try CoatyTopic(parsing: "coaty/3/-/ADV::com.example.Light/\(agentId)")
/// topic.eventType     // .advertise
/// topic.objectType    // "com.example.Light"
///
/// let publish = try CoatyTopic(event: .discover, namespace: "-", sourceId: agentId, correlationId: requestId)
/// publish.name        // "coaty/3/-/DSC/<agentId>/<requestId>"
/// ```
public struct CoatyTopic: Sendable, Hashable, CustomStringConvertible {
    /// The Coaty protocol version spoken on the wire (`3`).
    public static let protocolVersion = 3
    /// The default namespace (`-`).
    public static let defaultNamespace = "-"
    /// The maximum length of a topic in UTF-8 bytes (the MQTT limit, 65535).
    public static let maximumByteCount = 65535
    /// The complete topic string, as published on MQTT.
    public let name: String
    /// The event type named by the event level (never ``CommunicationEventType/raw``).
    public let eventType: CommunicationEventType
    /// UTF-8 offset of the `/` that ends the namespace level (the namespace starts at offset 8).
    let namespaceEnd: Int32
    /// UTF-8 offset of the first byte of the source id.
    let sourceStart: Int32
    /// The source id as a ``CoatyUUID``, decoded once when the topic is parsed or built (every received event asks).
    public let sourceUUID: CoatyUUID
    /// The correlation id of a two-way event (zero for one-way events), decoded once with ``sourceUUID``.
    let correlation: CoatyUUID

    /// The length of `coaty/3/`, where the namespace begins.
    static let namespaceStart = 8

    // MARK: Components

    /// The namespace level (`-` by default).
    public var namespace: Substring { slice(Self.namespaceStart, Int(namespaceEnd)) }

    /// The event level, e.g. `ADV::com.example.Light` or `DSC`.
    public var eventLevel: Substring { slice(Int(namespaceEnd) + 1, Int(sourceStart) - 1) }

    /// The filter of the event level: the text after the first `:`, or `nil` if there is none.
    ///
    /// For an object-type Advertise or Update the filter starts with `:` (`ADV::x` has filter `:x`).
    public var eventFilter: Substring? {
        let start = Int(namespaceEnd) + 5
        let end = Int(sourceStart) - 1
        return start < end ? slice(start, end) : nil
    }

    /// The core type name of an Advertise or Update topic on `ADV:<CoreType>` / `UPD:<CoreType>`.
    public var coreTypeName: Substring? {
        guard eventType == .advertise || eventType == .update, let filter = eventFilter,
            filter.utf8.first != ASCII.colon
        else { return nil }
        return filter
    }

    /// The core type of an Advertise or Update topic on `ADV:<CoreType>` / `UPD:<CoreType>`.
    public var coreType: CoreType? {
        coreTypeName.flatMap { CoreType(rawValue: String($0)) }
    }

    /// The object type of an Advertise or Update topic on `ADV::<objectType>` / `UPD::<objectType>`.
    public var objectType: Substring? {
        guard eventType == .advertise || eventType == .update, let filter = eventFilter,
            filter.utf8.first == ASCII.colon
        else { return nil }
        return filter.dropFirst()
    }

    /// The channel id of a Channel topic.
    public var channelId: Substring? { eventType == .channel ? eventFilter : nil }

    /// The operation name of a Call topic.
    public var operation: Substring? { eventType == .call ? eventFilter : nil }

    /// The IO context name of an Associate topic.
    public var ioContextName: Substring? { eventType == .associate ? eventFilter : nil }

    /// The source id: the publishing agent's identity id (for IoValue, the IoSource's objectId).
    public var sourceId: Substring { slice(Int(sourceStart), Int(sourceStart) + 36) }

    /// The correlation id of a two-way event, `nil` for one-way events.
    public var correlationId: Substring? {
        eventType.isTwoWay ? slice(Int(sourceStart) + 37, Int(sourceStart) + 73) : nil
    }

    /// The correlation id of a two-way event as a ``CoatyUUID``, `nil` for one-way events.
    public var correlationUUID: CoatyUUID? { eventType.isTwoWay ? correlation : nil }

    /// Decodes the 36 validated UUID bytes at `offset` of a topic's bytes (zero where there are none).
    static func uuid(in bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> CoatyUUID {
        guard offset >= 0, offset + 36 <= bytes.count else { return CoatyUUID(high: 0, low: 0) }
        // Parsing or building validated the bytes, so the fallback is never taken.
        return CoatyUUID.parse(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[offset..<(offset + 36)])))
            ?? CoatyUUID(high: 0, low: 0)
    }

    /// The source and correlation ids of a valid topic's bytes.
    static func ids(in bytes: UnsafeBufferPointer<UInt8>, sourceStart: Int, twoWay: Bool) -> (CoatyUUID, CoatyUUID) {
        (uuid(in: bytes, at: sourceStart), twoWay ? uuid(in: bytes, at: sourceStart + 37) : CoatyUUID(high: 0, low: 0))
    }

    /// The typed event level (allocates the filter string).
    public var event: Event {
        switch eventType {
        case .advertise, .update:
            // Parsing accepted only known core type names, so the fallback is never taken.
            let filter: TypeFilter =
                if let objectType { .objectType(String(objectType)) } else { .coreType(coreType ?? .coatyObject) }
            return eventType == .advertise ? .advertise(filter) : .update(filter)
        case .channel: return .channel(id: String(eventFilter ?? ""))
        case .associate: return .associate(ioContextName: String(eventFilter ?? ""))
        case .call: return .call(operation: String(eventFilter ?? ""))
        case .deadvertise: return .deadvertise
        case .ioValue: return .ioValue
        case .discover: return .discover
        case .resolve: return .resolve
        case .query: return .query
        case .retrieve: return .retrieve
        case .complete: return .complete
        case .return, .raw: return .return
        }
    }

    /// The topic string.
    public var description: String { name }

    @inline(__always)
    private func slice(_ start: Int, _ end: Int) -> Substring {
        let utf8 = name.utf8
        let lower = utf8.index(utf8.startIndex, offsetBy: start)
        let upper = utf8.index(lower, offsetBy: end - start)
        return name[lower..<upper]
    }

    // MARK: Parsing

    /// Parses and validates a received topic.
    ///
    /// Checks, in this order: non-empty, at most 65535 bytes, `coaty/` prefix, no NUL, `+` or `#`,
    /// version `3`, 5 or 6 levels, no empty level, a known event code split from its filter at the
    /// first `:`, filter present exactly when the event type requires one (and a known core type
    /// after `ADV:`/`UPD:`), a lowercase version 4 UUID as source id, a correlation id level exactly
    /// on two-way events, and a lowercase version 4 UUID as correlation id.
    ///
    /// - Parameter topic: the topic of a received MQTT message.
    /// - Throws: ``CoatyTopicError`` naming the first rule the topic breaks;
    ///   ``CoatyTopicError/notCoatyTopic`` for topics that do not start with `coaty/` (Raw topics).
    public init(parsing topic: String) throws(CoatyTopicError) {
        let parsed = withUTF8Bytes(topic) { bytes in
            Self.parse(bytes).map { layout in
                (layout, Self.ids(in: bytes, sourceStart: layout.sourceStart, twoWay: layout.eventType.isTwoWay))
            }
        }
        switch parsed {
        case .success(let (layout, ids)):
            self.name = topic
            self.eventType = layout.eventType
            self.namespaceEnd = Int32(truncatingIfNeeded: layout.namespaceEnd)
            self.sourceStart = Int32(truncatingIfNeeded: layout.sourceStart)
            (self.sourceUUID, self.correlation) = ids
        case .failure(let failure):
            throw failure.error(in: topic)
        }
    }

    /// The result of ``classify(_:)``.
    public enum Classification: Sendable, Hashable {
        /// A valid Coaty event topic.
        case coaty(CoatyTopic)
        /// A topic that does not start with `coaty/`, for Raw observers.
        case raw
        /// A topic starting with `coaty/` that breaks a protocol rule; drop it (never deliver it as Raw).
        case invalid(CoatyTopicError)
    }

    /// Tells a received topic apart as a Coaty event topic, a Raw topic or an invalid Coaty topic.
    ///
    /// - Parameter topic: the topic of a received MQTT message.
    /// - Returns: the parsed topic, `.raw`, or the rule an invalid `coaty/…` topic breaks.
    public static func classify(_ topic: String) -> Classification {
        do {
            return .coaty(try CoatyTopic(parsing: topic))
        } catch .notCoatyTopic {
            return .raw
        } catch {
            return .invalid(error)
        }
    }

    /// Whether `topic` starts with `coaty/`, the prefix reserved for Coaty event topics.
    ///
    /// - Parameter topic: a topic name or topic filter.
    /// - Returns: `true` for `coaty/…`, `false` otherwise (also for `coaty` alone).
    public static func isCoatyTopic(_ topic: String) -> Bool {
        withUTF8Bytes(topic) { bytes in bytes.count >= 6 && bytesEqual(bytes, 0, 6, "coaty/") }
    }

    /// Byte offsets found by a successful parse.
    struct Layout {
        var eventType: CommunicationEventType
        var namespaceEnd: Int
        var sourceStart: Int
    }

    /// A parse failure described by byte ranges, turned into a ``CoatyTopicError`` only when thrown.
    enum Failure: Error {
        case error(CoatyTopicError)
        case range(Kind, Int, Int)
        case typeRange(Kind, CommunicationEventType, Int, Int)

        enum Kind { case version, namespace, event, filter, coreType, sourceId, correlationId }

        func error(in topic: String) -> CoatyTopicError {
            func text(_ start: Int, _ end: Int) -> String {
                let utf8 = topic.utf8
                let lower = utf8.index(utf8.startIndex, offsetBy: start)
                let upper = utf8.index(lower, offsetBy: end - start)
                return excerpt(String(decoding: utf8[lower..<upper], as: UTF8.self))
            }
            switch self {
            case .error(let error): return error
            case .range(let kind, let start, let end), .typeRange(let kind, _, let start, let end):
                let value = text(start, end)
                switch kind {
                case .version: return .unsupportedProtocolVersion(value)
                case .namespace: return .invalidNamespace(value)
                case .event: return .unknownEventType(value)
                case .coreType: return .unknownCoreType(value)
                case .sourceId: return .invalidSourceId(value)
                case .correlationId: return .invalidCorrelationId(value)
                case .filter:
                    if case .typeRange(_, let type, _, _) = self { return .invalidFilter(type, value) }
                    return .invalidFilter(.advertise, value)
                }
            }
        }
    }

    /// Parses the bytes of a topic; see ``init(parsing:)`` for the rules and their order.
    static func parse(_ b: UnsafeBufferPointer<UInt8>) -> Result<Layout, Failure> {
        let n = b.count
        guard n > 0 else { return .failure(.error(.empty)) }
        guard n <= maximumByteCount else { return .failure(.error(.tooLong(byteCount: n))) }
        guard n >= 6, bytesEqual(b, 0, 6, "coaty/") else { return .failure(.error(.notCoatyTopic)) }

        // One pass: find the level separators and reject forbidden bytes.
        var slashCount = 1
        var s1 = n, s2 = n, s3 = n, s4 = n
        var i = 6
        while i < n {
            let c = b[i]
            if c == ASCII.slash {
                slashCount += 1
                switch slashCount {
                case 2: s1 = i
                case 3: s2 = i
                case 4: s3 = i
                case 5: s4 = i
                default: break
                }
            } else if c == ASCII.plus || c == ASCII.hash || c == ASCII.nul {
                return .failure(.error(.forbiddenCharacter(c)))
            }
            i += 1
        }

        // Version level: exactly "3".
        guard bytesEqual(b, 6, s1, "3") else { return .failure(.range(.version, 6, s1)) }

        let levels = slashCount + 1
        guard levels == 5 || levels == 6 else { return .failure(.error(.wrongLevelCount(levels))) }
        // Empty levels (the version level is known to be "3").
        let ends = (s2, s3, s4, n)
        let starts = (s1 + 1, s2 + 1, s3 + 1, s4 + 1)
        if starts.0 == ends.0 { return .failure(.error(.emptyLevel(index: 2))) }
        if starts.1 == ends.1 { return .failure(.error(.emptyLevel(index: 3))) }
        if starts.2 == ends.2 { return .failure(.error(.emptyLevel(index: 4))) }
        if levels == 6 && starts.3 == ends.3 { return .failure(.error(.emptyLevel(index: 5))) }

        // Event level: a three-letter code, then optionally ':' and the filter (first colon).
        let eventStart = s2 + 1
        let eventEnd = s3
        guard eventEnd - eventStart >= 3,
            let type = CommunicationEventType(codeBytes: b[eventStart], b[eventStart + 1], b[eventStart + 2])
        else { return .failure(.range(.event, eventStart, eventEnd)) }
        if eventEnd - eventStart > 3 {
            guard b[eventStart + 3] == ASCII.colon else { return .failure(.range(.event, eventStart, eventEnd)) }
            guard type.requiresFilter else { return .failure(.error(.unexpectedFilter(type))) }
            let filterStart = eventStart + 4
            guard filterStart < eventEnd else { return .failure(.typeRange(.filter, type, filterStart, eventEnd)) }
            if type == .advertise || type == .update {
                if b[filterStart] == ASCII.colon {
                    // `::<objectType>`: the object type may itself contain colons.
                    guard filterStart + 1 < eventEnd else {
                        return .failure(.typeRange(.filter, type, filterStart, eventEnd))
                    }
                } else if !isCoreTypeName(b, filterStart, eventEnd) {
                    return .failure(.range(.coreType, filterStart, eventEnd))
                }
            }
        } else if type.requiresFilter {
            return .failure(.error(.missingFilter(type)))
        }

        // Source id and correlation id.
        let sourceStart = s3 + 1
        guard isLowercaseUUIDv4(UnsafeBufferPointer(rebasing: b[sourceStart..<s4])) else {
            return .failure(.range(.sourceId, sourceStart, s4))
        }
        if type.isTwoWay {
            guard levels == 6 else { return .failure(.error(.missingCorrelationId(type))) }
            guard isLowercaseUUIDv4(UnsafeBufferPointer(rebasing: b[(s4 + 1)..<n])) else {
                return .failure(.range(.correlationId, s4 + 1, n))
            }
        } else if levels == 6 {
            return .failure(.error(.unexpectedCorrelationId(type)))
        }
        return .success(Layout(eventType: type, namespaceEnd: s2, sourceStart: sourceStart))
    }

    /// Whether the bytes at `start..<end` name a core type of protocol 3 (a raw value of ``CoreType``).
    static func isCoreTypeName(_ b: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        switch end - start {
        case 3: bytesEqual(b, start, end, "Log")
        case 4: bytesEqual(b, start, end, "User") || bytesEqual(b, start, end, "Task")
        case 6: bytesEqual(b, start, end, "IoNode")
        case 7: bytesEqual(b, start, end, "IoActor")
        case 8:
            bytesEqual(b, start, end, "IoSource") || bytesEqual(b, start, end, "Identity")
                || bytesEqual(b, start, end, "Location") || bytesEqual(b, start, end, "Snapshot")
        case 9: bytesEqual(b, start, end, "IoContext")
        case 10: bytesEqual(b, start, end, "Annotation")
        case 11: bytesEqual(b, start, end, "CoatyObject")
        default: false
        }
    }
}
