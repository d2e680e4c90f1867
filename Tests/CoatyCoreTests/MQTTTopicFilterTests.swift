import CoatyCore
import Testing

@Suite("MQTT topic filters")
struct MQTTTopicFilterTests {
    struct Match: Sendable, CustomStringConvertible {
        var filter: String
        var topic: String
        var matches: Bool
        var description: String { "\(filter) \(matches ? "~" : "!~") \(topic)" }
        init(_ filter: String, _ topic: String, _ matches: Bool) {
            self.filter = filter
            self.topic = topic
            self.matches = matches
        }
    }

    /// Cases from MQTT 3.1.1 §4.7 and the usual broker test suites.
    static let matchCases: [Match] = [
        // Exact
        Match("a", "a", true),
        Match("a", "b", false),
        Match("a", "ab", false),
        Match("ab", "a", false),
        Match("a/b", "a/b", true),
        Match("a/b", "a/c", false),
        Match("a/b", "a", false),
        Match("a", "a/b", false),
        Match("a/b", "a/b/c", false),
        Match("A", "a", false),
        Match("/", "/", true),
        Match("/a", "/a", true),
        Match("a/", "a/", true),
        Match("a/", "a", false),
        Match("a", "a/", false),
        Match("a//b", "a//b", true),
        Match("a//b", "a/b", false),
        // Single-level wildcard
        Match("+", "a", true),
        Match("+", "a/b", false),
        Match("+", "/a", false),
        Match("+/+", "/a", true),
        Match("/+", "/a", true),
        Match("a/+", "a/b", true),
        Match("a/+", "a/", true),
        Match("a/+", "a", false),
        Match("a/+", "a/b/c", false),
        Match("a/+/c", "a/b/c", true),
        Match("a/+/c", "a//c", true),
        Match("a/+/c", "a/b/d", false),
        Match("+/+/+", "a/b/c", true),
        Match("+/b", "a/b", true),
        Match("+/b", "/b", true),
        Match("+", "", false),
        Match("+/+", "/", true),
        Match("sport/tennis/+", "sport/tennis/player1", true),
        Match("sport/tennis/+", "sport/tennis/player1/ranking", false),
        Match("sport/+", "sport", false),
        Match("sport/+", "sport/", true),
        // Multi-level wildcard
        Match("#", "a", true),
        Match("#", "a/b/c", true),
        Match("#", "/", true),
        Match("#", "/a", true),
        Match("a/#", "a", true),
        Match("a/#", "a/", true),
        Match("a/#", "a/b", true),
        Match("a/#", "a/b/c", true),
        Match("a/#", "ab", false),
        Match("a/#", "b/a", false),
        Match("a/b/#", "a", false),
        Match("a/b/#", "a/b", true),
        Match("+/#", "a", true),
        Match("+/#", "a/b/c", true),
        Match("+/b/#", "a/b", true),
        Match("+/b/#", "a/c", false),
        Match("sport/tennis/player1/#", "sport/tennis/player1", true),
        Match("sport/tennis/player1/#", "sport/tennis/player1/ranking", true),
        Match("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true),
        Match("sport/#", "sport", true),
        // $-topics
        Match("#", "$SYS", false),
        Match("#", "$SYS/broker/load", false),
        Match("+/broker/load", "$SYS/broker/load", false),
        Match("+", "$SYS", false),
        Match("$SYS/#", "$SYS/broker/load", true),
        Match("$SYS/+/load", "$SYS/broker/load", true),
        Match("$SYS", "$SYS", true),
        Match("a/#", "a/$SYS", true),
        Match("a/+", "a/$x", true),
        // Coaty
        Match("coaty/3/+/ADV:Task/+", "coaty/3/-/ADV:Task/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", true),
        Match("coaty/3/-/ADV:Task/+", "coaty/3/-/ADV::com.x/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", false),
        Match("coaty/3/-/DSC/+/+", "coaty/3/-/DSC/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", false),
        Match("coaty/3/-/ADV:Task/+", "coaty/3/-/ADV:Task/x/y", false),
        // Unicode
        Match("ä/+/ö", "ä/€/ö", true),
        Match("ä", "a", false),
    ]

    @Test("topic matching", arguments: matchCases)
    func matching(_ testCase: Match) throws {
        #expect(MQTTTopicFilter.matches(topic: testCase.topic, filter: testCase.filter) == testCase.matches)
        if MQTTTopicFilter.isValidTopicName(testCase.topic) {
            #expect(try MQTTTopicFilter(testCase.filter).matches(testCase.topic) == testCase.matches)
        }
    }

    @Test("a filter without wildcards matches exactly the equal topic", arguments: matchCases.map(\.topic))
    func literalFilter(_ topic: String) {
        guard MQTTTopicFilter.isValidTopicName(topic) else { return }
        #expect(MQTTTopicFilter.matches(topic: topic, filter: topic))
        #expect(!MQTTTopicFilter.matches(topic: topic + "x", filter: topic))
    }

    @Test(
        "valid and invalid topic filters",
        arguments: [
            ("a", nil), ("#", nil), ("+", nil), ("/", nil), ("a/+/b", nil), ("a/#", nil), ("+/+", nil), ("/#", nil),
            ("+/#", nil), ("$SYS/#", nil), ("a//b", nil), ("€", nil),
            ("", MQTTTopicError.empty),
            ("a#", .misplacedWildcard), ("a/#/b", .misplacedWildcard), ("#/", .misplacedWildcard),
            ("##", .misplacedWildcard),
            ("a+", .misplacedWildcard), ("+a", .misplacedWildcard), ("a/b+/c", .misplacedWildcard),
            ("++", .misplacedWildcard),
            ("a/\u{0}", .containsNUL),
        ] as [(String, MQTTTopicError?)]
    )
    func filterValidation(_ filter: String, _ expected: MQTTTopicError?) {
        if let expected {
            #expect(throws: expected) { try MQTTTopicFilter.validate(filter) }
            #expect(throws: expected) { try MQTTTopicFilter(filter) }
            #expect(!MQTTTopicFilter.isValid(filter))
        } else {
            #expect(MQTTTopicFilter.isValid(filter))
            #expect((try? MQTTTopicFilter(filter))?.filter == filter)
        }
    }

    @Test(
        "valid and invalid topic names",
        arguments: [
            ("a", nil), ("/", nil), ("a/b", nil), ("$SYS/x", nil), ("a b", nil), ("€/ü", nil),
            ("", MQTTTopicError.empty), ("a/+", .wildcardInTopicName), ("#", .wildcardInTopicName),
            ("a+b", .wildcardInTopicName), ("a\u{0}b", .containsNUL),
        ] as [(String, MQTTTopicError?)]
    )
    func topicNameValidation(_ topic: String, _ expected: MQTTTopicError?) {
        if let expected {
            #expect(throws: expected) { try MQTTTopicFilter.validateTopicName(topic) }
            #expect(!MQTTTopicFilter.isValidTopicName(topic))
        } else {
            #expect(MQTTTopicFilter.isValidTopicName(topic))
        }
    }

    @Test("the 65535-byte limit")
    func lengthLimit() {
        let maximum = String(repeating: "a", count: 65_535)
        #expect(MQTTTopicFilter.isValidTopicName(maximum))
        #expect(MQTTTopicFilter.isValid(maximum))
        #expect(throws: MQTTTopicError.tooLong(byteCount: 65_536)) {
            try MQTTTopicFilter.validateTopicName(maximum + "a")
        }
        #expect(throws: MQTTTopicError.tooLong(byteCount: 65_536)) { try MQTTTopicFilter.validate(maximum + "a") }
        // Three bytes per character: 21846 characters are 65538 bytes.
        #expect(throws: MQTTTopicError.tooLong(byteCount: 65_538)) {
            try MQTTTopicFilter.validate(String(repeating: "€", count: 21_846))
        }
    }

    @Test("empty inputs never match")
    func emptyInputs() {
        #expect(!MQTTTopicFilter.matches(topic: "", filter: "#"))
        #expect(!MQTTTopicFilter.matches(topic: "a", filter: ""))
    }
}
