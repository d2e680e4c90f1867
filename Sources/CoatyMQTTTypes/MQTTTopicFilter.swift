/// Why a string is not a valid MQTT 3.1.1 topic name or topic filter.
public enum MQTTTopicError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Topic names and filters must have at least one character.
    case empty
    /// Topic names and filters are limited to 65535 UTF-8 bytes.
    case tooLong(byteCount: Int)
    /// Topic names and filters must not contain U+0000.
    case containsNUL
    /// A topic name (used for publishing) must not contain the wildcards `+` or `#`.
    case wildcardInTopicName
    /// `+` must fill a whole level, `#` must be the whole last level.
    case misplacedWildcard

    /// A message that says what is wrong and what to do.
    public var description: String {
        switch self {
        case .empty: "The MQTT topic is empty; give at least one character."
        case .tooLong(let count): "The MQTT topic has \(count) UTF-8 bytes; at most 65535 are allowed."
        case .containsNUL: "The MQTT topic contains a NUL character; remove it."
        case .wildcardInTopicName: "A topic to publish on must not contain '+' or '#'; wildcards belong in filters."
        case .misplacedWildcard:
            "In an MQTT topic filter '+' must be a whole level and '#' the whole last level (e.g. 'a/+/c', 'a/#')."
        }
    }
}

/// A validated MQTT 3.1.1 topic filter with a fast matcher, plus static helpers to validate topic
/// names and filters and to match without building a value.
///
/// Matching follows MQTT 3.1.1 §4.7: `+` matches exactly one level (also an empty one), `#`
/// matches the remaining levels including none (`a/#` matches `a`), and topics starting with `$`
/// are not matched by a filter starting with a wildcard.
///
/// ```swift
/// let filter = try MQTTTopicFilter("sensors/+/temperature")
/// filter.matches("sensors/kitchen/temperature")  // true
/// MQTTTopicFilter.matches(topic: "$SYS/load", filter: "#")  // false
/// ```
public struct MQTTTopicFilter: Sendable, Hashable, CustomStringConvertible {
    /// The maximum length of a topic name or filter in UTF-8 bytes.
    public static let maximumByteCount = 65535

    /// The filter text.
    public let filter: String

    /// Creates a validated topic filter.
    ///
    /// - Parameter filter: an MQTT 3.1.1 topic filter, e.g. `a/+/c` or `a/#`.
    /// - Throws: ``MQTTTopicError`` if the filter is not valid.
    public init(_ filter: String) throws(MQTTTopicError) {
        try Self.validate(filter)
        self.filter = filter
    }

    /// The filter text.
    public var description: String { filter }

    /// Whether the topic name matches this filter.
    ///
    /// - Parameter topic: a topic name (without wildcards).
    /// - Returns: `true` if a message published on `topic` is delivered to this subscription.
    public func matches(_ topic: String) -> Bool {
        Self.matches(topic: topic, filter: filter)
    }

    // MARK: Static helpers

    /// Whether a topic name matches a topic filter.
    ///
    /// Both are assumed valid; for invalid input the result is `false` or unspecified but the call
    /// never traps. Works on UTF-8 bytes without allocating.
    ///
    /// - Parameters:
    ///   - topic: a topic name (without wildcards).
    ///   - filter: a topic filter.
    /// - Returns: whether a message on `topic` is delivered to a subscription on `filter`.
    public static func matches(topic: String, filter: String) -> Bool {
        withUTF8Bytes(topic) { t in
            withUTF8Bytes(filter) { f in matches(topic: t, filter: f) }
        }
    }

    /// Byte-level matching; see ``matches(topic:filter:)``.
    static func matches(topic t: UnsafeBufferPointer<UInt8>, filter f: UnsafeBufferPointer<UInt8>) -> Bool {
        let tn = t.count
        let fn = f.count
        guard tn > 0, fn > 0 else { return false }
        // Topics beginning with '$' are not matched by filters beginning with a wildcard.
        if t[0] == ASCII.dollar && (f[0] == ASCII.plus || f[0] == ASCII.hash) { return false }
        var ti = 0
        var fi = 0
        while true {
            // At the start of a level in both.
            let fc = f[fi]
            if fc == ASCII.hash { return true }
            if fc == ASCII.plus && (fi + 1 == fn || f[fi + 1] == ASCII.slash) {
                while ti < tn && t[ti] != ASCII.slash { ti += 1 }
                fi += 1
            } else {
                while fi < fn && f[fi] != ASCII.slash {
                    if ti >= tn || t[ti] != f[fi] { return false }
                    ti += 1
                    fi += 1
                }
                if ti < tn && t[ti] != ASCII.slash { return false }
            }
            // At the end of a level in both: '/' or the end.
            if fi == fn { return ti == tn }
            if ti == tn {
                // The topic ended; only a trailing "/#" still matches (the parent level).
                return fn - fi == 2 && f[fi + 1] == ASCII.hash
            }
            ti += 1
            fi += 1
            // A trailing '/' in the filter is an empty last level: the topic must end with one too.
            if fi == fn { return ti == tn }
        }
    }

    /// Validates a topic name for publishing: non-empty, at most 65535 bytes, no NUL, `+` or `#`.
    ///
    /// - Parameter topic: the topic name.
    /// - Throws: ``MQTTTopicError``.
    @inlinable
    public static func validateTopicName(_ topic: String) throws(MQTTTopicError) {
        // Every publish passes here: one branch-free pass over the bytes finds whether any is
        // NUL, '+' (0x2B) or '#' (0x23) — `c & 0xF7 == 0x23` holds for exactly those two — and
        // only a name that fails is looked at again, for its error. Inlinable, so a publisher
        // in another module runs it without a call.
        let bad = withUTF8Bytes(topic) { b -> Bool in
            guard !b.isEmpty, b.count <= maximumByteCount else { return true }
            var hits: UInt8 = 0
            for c in b { hits |= ((c & 0xF7) == 0x23 ? 1 : 0) | (c == 0 ? 1 : 0) }
            return hits != 0
        }
        if bad { throw topicNameError(topic) }
    }

    /// Why `topic` is not a valid topic name (it is known not to be).
    @usableFromInline
    static func topicNameError(_ topic: String) -> MQTTTopicError {
        withUTF8Bytes(topic) { b in
            guard !b.isEmpty else { return .empty }
            guard b.count <= maximumByteCount else { return .tooLong(byteCount: b.count) }
            for c in b {
                if c == ASCII.nul { return .containsNUL }
                if c == ASCII.plus || c == ASCII.hash { return .wildcardInTopicName }
            }
            return .empty  // not reached: the caller found a bad byte
        }
    }

    /// Validates a topic filter for subscribing: non-empty, at most 65535 bytes, no NUL, `+` only
    /// as a whole level, `#` only as the whole last level.
    ///
    /// - Parameter filter: the topic filter.
    /// - Throws: ``MQTTTopicError``.
    public static func validate(_ filter: String) throws(MQTTTopicError) {
        let result: MQTTTopicError? = withUTF8Bytes(filter) { b in
            let n = b.count
            guard n > 0 else { return .empty }
            guard n <= maximumByteCount else { return .tooLong(byteCount: n) }
            for i in 0..<n {
                switch b[i] {
                case ASCII.nul:
                    return .containsNUL
                case ASCII.plus:
                    if (i > 0 && b[i - 1] != ASCII.slash) || (i + 1 < n && b[i + 1] != ASCII.slash) {
                        return .misplacedWildcard
                    }
                case ASCII.hash:
                    if (i > 0 && b[i - 1] != ASCII.slash) || i + 1 != n { return .misplacedWildcard }
                default:
                    break
                }
            }
            return nil
        }
        if let result { throw result }
    }

    /// Whether `topic` is a valid topic name for publishing (see ``validateTopicName(_:)``).
    public static func isValidTopicName(_ topic: String) -> Bool {
        (try? validateTopicName(topic)) != nil
    }

    /// Whether `filter` is a valid topic filter for subscribing (see ``validate(_:)``).
    public static func isValid(_ filter: String) -> Bool {
        (try? validate(filter)) != nil
    }
}
