/// MQTT topic name and topic filter validation (MQTT 3.1.1 section 4.7), applied before anything reaches the broker.
public enum MQTTTopic {
    /// Checks a topic name for a publication: non-empty, at most 65535 UTF-8 bytes, no NUL, no `+` or `#`.
    /// - Parameter topic: The topic name.
    /// - Throws: ``MQTTError`` with kind `.invalidTopic` naming the topic and the rule it breaks.
    public static func validateName(_ topic: String) throws {
        // Fast path (every publish): a valid name in contiguous UTF-8, checked without per-byte iterator overhead.
        let valid = topic.utf8.withContiguousStorageIfAvailable { bytes in
            !bytes.isEmpty && bytes.count <= 65_535
                && !bytes.contains { $0 == 0 || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") }
        }
        if valid == true { return }
        var count = 0
        for byte in topic.utf8 {
            switch byte {
            case 0: throw invalid(topic, "contains a NUL character")
            case UInt8(ascii: "+"), UInt8(ascii: "#"):
                throw invalid(topic, "contains a wildcard (+ or #); wildcards are only allowed in subscriptions")
            default: count += 1
            }
        }
        if count == 0 { throw invalid(topic, "is empty") }
        if count > 65_535 { throw invalid(topic, "is longer than 65535 bytes") }
    }

    /// Checks a topic filter for a subscription: non-empty, at most 65535 UTF-8 bytes, no NUL,
    /// `+` only as a whole level, `#` only as the whole last level.
    /// - Parameter filter: The topic filter.
    /// - Throws: ``MQTTError`` with kind `.invalidTopic` naming the filter and the rule it breaks.
    public static func validateFilter(_ filter: String) throws {
        let bytes = filter.utf8
        if bytes.isEmpty { throw invalid(filter, "is empty", what: "topic filter") }
        if bytes.count > 65_535 { throw invalid(filter, "is longer than 65535 bytes", what: "topic filter") }
        var levelStart = true
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            let next = bytes.index(after: index)
            let atLevelEnd = next == bytes.endIndex || bytes[next] == UInt8(ascii: "/")
            switch byte {
            case 0:
                throw invalid(filter, "contains a NUL character", what: "topic filter")
            case UInt8(ascii: "+"):
                if !(levelStart && atLevelEnd) {
                    throw invalid(filter, "uses + inside a level; + must fill a whole level", what: "topic filter")
                }
            case UInt8(ascii: "#"):
                if !(levelStart && next == bytes.endIndex) {
                    throw invalid(filter, "uses # other than as the whole last level", what: "topic filter")
                }
            default:
                break
            }
            levelStart = byte == UInt8(ascii: "/")
            index = next
        }
    }

    /// Whether a topic name matches a topic filter (MQTT 3.1.1 rules; `$`-topics are not matched by leading wildcards).
    /// - Parameters:
    ///   - topic: A topic name.
    ///   - filter: A topic filter, possibly with `+` and `#`.
    /// - Returns: `true` when the broker would deliver a message on `topic` to a subscription on `filter`.
    public static func matches(_ topic: String, filter: String) -> Bool {
        let topicLevels = topic.split(separator: "/", omittingEmptySubsequences: false)
        let filterLevels = filter.split(separator: "/", omittingEmptySubsequences: false)
        if topic.hasPrefix("$"), let first = filterLevels.first, first == "+" || first == "#" { return false }
        var index = 0
        while index < filterLevels.count {
            let level = filterLevels[index]
            if level == "#" { return true }
            if index >= topicLevels.count { return false }
            if level != "+" && level != topicLevels[index] { return false }
            index += 1
        }
        return index == topicLevels.count
    }

    private static func invalid(_ topic: String, _ why: String, what: String = "topic") -> MQTTError {
        let shown = topic.utf8.count > 200 ? String(topic.prefix(200)) + "…" : topic
        return MQTTError(.invalidTopic, "Invalid MQTT \(what) \"\(shown)\": it \(why).")
    }
}
