import CoatyCore
import Testing

/// Lowercase version 4 UUIDs used as source and correlation ids.
enum TopicIds {
    static let source = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    static let correlation = "d2c1b0a9-8f7e-4d6c-b5a4-93827160f5e4"
    static let other = "ffffffff-ffff-4fff-bfff-ffffffffffff"
}

@Suite("Coaty topic parsing")
struct CoatyTopicParsingTests {
    let s = TopicIds.source
    let c = TopicIds.correlation

    struct Valid: Sendable, CustomStringConvertible {
        var topic: String
        var type: CommunicationEventType
        var namespace: String
        var filter: String?
        var correlated: Bool
        var description: String { topic }
    }

    static let validCases: [Valid] = {
        let s = TopicIds.source
        let c = TopicIds.correlation
        return [
            Valid(
                topic: "coaty/3/-/ADV:Task/\(s)",
                type: .advertise,
                namespace: "-",
                filter: "Task",
                correlated: false
            ),
            Valid(
                topic: "coaty/3/-/ADV::com.x.Light/\(s)",
                type: .advertise,
                namespace: "-",
                filter: ":com.x.Light",
                correlated: false
            ),
            Valid(
                topic: "coaty/3/ns.a_b-1/ADV:Identity/\(s)",
                type: .advertise,
                namespace: "ns.a_b-1",
                filter: "Identity",
                correlated: false
            ),
            Valid(
                topic: "coaty/3/-/ADV::com.x:y/\(s)",
                type: .advertise,
                namespace: "-",
                filter: ":com.x:y",
                correlated: false
            ),
            Valid(
                topic: "coaty/3/-/ADV::coaty.Task/\(s)",
                type: .advertise,
                namespace: "-",
                filter: ":coaty.Task",
                correlated: false
            ),
            Valid(topic: "coaty/3/-/DAD/\(s)", type: .deadvertise, namespace: "-", filter: nil, correlated: false),
            Valid(
                topic: "coaty/3/-/CHN:alerts/\(s)",
                type: .channel,
                namespace: "-",
                filter: "alerts",
                correlated: false
            ),
            Valid(topic: "coaty/3/-/CHN:a:b/\(s)", type: .channel, namespace: "-", filter: "a:b", correlated: false),
            Valid(
                topic: "coaty/3/-/ASC:Lights/\(s)",
                type: .associate,
                namespace: "-",
                filter: "Lights",
                correlated: false
            ),
            Valid(topic: "coaty/3/-/IOV/\(s)", type: .ioValue, namespace: "-", filter: nil, correlated: false),
            Valid(topic: "coaty/3/-/DSC/\(s)/\(c)", type: .discover, namespace: "-", filter: nil, correlated: true),
            Valid(topic: "coaty/3/-/RSV/\(s)/\(c)", type: .resolve, namespace: "-", filter: nil, correlated: true),
            Valid(topic: "coaty/3/-/QRY/\(s)/\(c)", type: .query, namespace: "-", filter: nil, correlated: true),
            Valid(topic: "coaty/3/-/RTV/\(s)/\(c)", type: .retrieve, namespace: "-", filter: nil, correlated: true),
            Valid(
                topic: "coaty/3/-/UPD:Task/\(s)/\(c)",
                type: .update,
                namespace: "-",
                filter: "Task",
                correlated: true
            ),
            Valid(
                topic: "coaty/3/-/UPD::com.x.Light/\(s)/\(c)",
                type: .update,
                namespace: "-",
                filter: ":com.x.Light",
                correlated: true
            ),
            Valid(topic: "coaty/3/-/CPL/\(s)/\(c)", type: .complete, namespace: "-", filter: nil, correlated: true),
            Valid(
                topic: "coaty/3/-/CLL:switchLight/\(s)/\(c)",
                type: .call,
                namespace: "-",
                filter: "switchLight",
                correlated: true
            ),
            Valid(topic: "coaty/3/-/RTN/\(s)/\(c)", type: .return, namespace: "-", filter: nil, correlated: true),
            Valid(topic: "coaty/3/äöü/DAD/\(s)", type: .deadvertise, namespace: "äöü", filter: nil, correlated: false),
        ]
    }()

    @Test("valid topics parse into their components", arguments: validCases)
    func validTopic(_ valid: Valid) throws {
        let topic = try CoatyTopic(parsing: valid.topic)
        #expect(topic.name == valid.topic)
        #expect(topic.eventType == valid.type)
        #expect(topic.namespace == valid.namespace)
        #expect(topic.eventFilter.map(String.init) == valid.filter)
        #expect(topic.sourceId == s)
        #expect(topic.correlationId.map(String.init) == (valid.correlated ? c : nil))
        #expect(topic.eventLevel == valid.type.topicCode! + (valid.filter.map { ":" + $0 } ?? ""))
        #expect(CoatyTopic.classify(valid.topic) == .coaty(topic))
    }

    @Test("typed filter accessors follow the first-colon split")
    func typedAccessors() throws {
        let objectType = try CoatyTopic(parsing: "coaty/3/-/ADV::com.x:y/\(s)")
        #expect(objectType.objectType == "com.x:y")
        #expect(objectType.coreTypeName == nil)
        #expect(objectType.event == .advertise(.objectType("com.x:y")))

        let coreType = try CoatyTopic(parsing: "coaty/3/-/UPD:Task/\(s)/\(c)")
        #expect(coreType.coreTypeName == "Task")
        #expect(coreType.objectType == nil)
        #expect(coreType.event == .update(.coreType(.task)))
        #expect(coreType.coreType == .task)

        let channel = try CoatyTopic(parsing: "coaty/3/-/CHN:a:b/\(s)")
        #expect(channel.channelId == "a:b")
        #expect(channel.operation == nil)
        #expect(channel.event == .channel(id: "a:b"))

        let call = try CoatyTopic(parsing: "coaty/3/-/CLL:op/\(s)/\(c)")
        #expect(call.operation == "op")
        #expect(call.channelId == nil)
        #expect(call.event == .call(operation: "op"))

        let associate = try CoatyTopic(parsing: "coaty/3/-/ASC:ctx/\(s)")
        #expect(associate.ioContextName == "ctx")
        #expect(associate.event == .associate(ioContextName: "ctx"))

        let discover = try CoatyTopic(parsing: "coaty/3/-/DSC/\(s)/\(c)")
        #expect(discover.eventFilter == nil)
        #expect(discover.objectType == nil && discover.coreTypeName == nil && discover.channelId == nil)
        #expect(discover.event == .discover)
    }

    struct Invalid: Sendable, CustomStringConvertible {
        var topic: String
        var error: CoatyTopicError
        var description: String { "\(topic.prefix(100)) → \(error)" }
    }

    static let invalidCases: [Invalid] = {
        let s = TopicIds.source
        let c = TopicIds.correlation
        let upper = s.uppercased()
        return [
            // Structure
            Invalid(topic: "", error: .empty),
            Invalid(topic: "coaty", error: .notCoatyTopic),
            Invalid(topic: "coat/3/-/DAD/\(s)", error: .notCoatyTopic),
            Invalid(topic: "/coaty/3/-/DAD/\(s)", error: .notCoatyTopic),
            Invalid(topic: "Coaty/3/-/DAD/\(s)", error: .notCoatyTopic),
            Invalid(topic: "coaty/3", error: .wrongLevelCount(2)),
            Invalid(topic: "coaty/3/-/DAD", error: .wrongLevelCount(4)),
            Invalid(topic: "coaty/3/-/DSC/\(s)/\(c)/x", error: .wrongLevelCount(7)),
            Invalid(topic: "coaty/3//DAD/\(s)", error: .emptyLevel(index: 2)),
            Invalid(topic: "coaty/3/-//\(s)", error: .emptyLevel(index: 3)),
            Invalid(topic: "coaty/3/-/DAD/", error: .emptyLevel(index: 4)),
            Invalid(topic: "coaty/3/-/DSC/\(s)/", error: .emptyLevel(index: 5)),
            Invalid(topic: "coaty/3/-/DAD/\(s)/", error: .emptyLevel(index: 5)),
            // Version
            Invalid(topic: "coaty/2/-/DAD/\(s)", error: .unsupportedProtocolVersion("2")),
            Invalid(topic: "coaty/03/-/DAD/\(s)", error: .unsupportedProtocolVersion("03")),
            Invalid(topic: "coaty/4/-/DAD/\(s)", error: .unsupportedProtocolVersion("4")),
            Invalid(topic: "coaty//-/DAD/\(s)", error: .unsupportedProtocolVersion("")),
            Invalid(topic: "coaty/v3/-/DAD/\(s)", error: .unsupportedProtocolVersion("v3")),
            // Forbidden characters
            Invalid(topic: "coaty/3/+/DAD/\(s)", error: .forbiddenCharacter(UInt8(ascii: "+"))),
            Invalid(topic: "coaty/3/#", error: .forbiddenCharacter(UInt8(ascii: "#"))),
            Invalid(topic: "coaty/3/a\u{0}b/DAD/\(s)", error: .forbiddenCharacter(0)),
            Invalid(topic: "coaty/3/-/CHN:a+b/\(s)", error: .forbiddenCharacter(UInt8(ascii: "+"))),
            Invalid(topic: "coaty/3/-/ADV::com.x#/\(s)", error: .forbiddenCharacter(UInt8(ascii: "#"))),
            Invalid(topic: "coaty/3/-/CLL:op\u{0}/\(s)/\(c)", error: .forbiddenCharacter(0)),
            // Event level
            Invalid(topic: "coaty/3/-/XYZ/\(s)", error: .unknownEventType("XYZ")),
            Invalid(topic: "coaty/3/-/adv:Task/\(s)", error: .unknownEventType("adv:Task")),
            Invalid(topic: "coaty/3/-/AD/\(s)", error: .unknownEventType("AD")),
            Invalid(topic: "coaty/3/-/ADVERTISE:Task/\(s)", error: .unknownEventType("ADVERTISE:Task")),
            Invalid(topic: "coaty/3/-/Advertise:Task/\(s)", error: .unknownEventType("Advertise:Task")),
            Invalid(topic: "coaty/3/-/DADX/\(s)", error: .unknownEventType("DADX")),
            // Required filters
            Invalid(topic: "coaty/3/-/ADV/\(s)", error: .missingFilter(.advertise)),
            Invalid(topic: "coaty/3/-/CHN/\(s)", error: .missingFilter(.channel)),
            Invalid(topic: "coaty/3/-/ASC/\(s)", error: .missingFilter(.associate)),
            Invalid(topic: "coaty/3/-/UPD/\(s)/\(c)", error: .missingFilter(.update)),
            Invalid(topic: "coaty/3/-/CLL/\(s)/\(c)", error: .missingFilter(.call)),
            Invalid(topic: "coaty/3/-/ADV:/\(s)", error: .invalidFilter(.advertise, "")),
            Invalid(topic: "coaty/3/-/ADV::/\(s)", error: .invalidFilter(.advertise, ":")),
            Invalid(topic: "coaty/3/-/UPD::/\(s)/\(c)", error: .invalidFilter(.update, ":")),
            Invalid(topic: "coaty/3/-/CHN:/\(s)", error: .invalidFilter(.channel, "")),
            Invalid(topic: "coaty/3/-/CLL:/\(s)/\(c)", error: .invalidFilter(.call, "")),
            Invalid(topic: "coaty/3/-/ASC:/\(s)", error: .invalidFilter(.associate, "")),
            Invalid(topic: "coaty/3/-/ADV:Light/\(s)", error: .unknownCoreType("Light")),
            Invalid(topic: "coaty/3/-/ADV:task/\(s)", error: .unknownCoreType("task")),
            Invalid(topic: "coaty/3/-/UPD:coaty.Task/\(s)/\(c)", error: .unknownCoreType("coaty.Task")),
            // Forbidden filters
            Invalid(topic: "coaty/3/-/DAD:x/\(s)", error: .unexpectedFilter(.deadvertise)),
            Invalid(topic: "coaty/3/-/IOV:x/\(s)", error: .unexpectedFilter(.ioValue)),
            Invalid(topic: "coaty/3/-/DSC:Task/\(s)/\(c)", error: .unexpectedFilter(.discover)),
            Invalid(topic: "coaty/3/-/QRY:Task/\(s)/\(c)", error: .unexpectedFilter(.query)),
            Invalid(topic: "coaty/3/-/RSV:x/\(s)/\(c)", error: .unexpectedFilter(.resolve)),
            Invalid(topic: "coaty/3/-/RTV:x/\(s)/\(c)", error: .unexpectedFilter(.retrieve)),
            Invalid(topic: "coaty/3/-/CPL:x/\(s)/\(c)", error: .unexpectedFilter(.complete)),
            Invalid(topic: "coaty/3/-/RTN:x/\(s)/\(c)", error: .unexpectedFilter(.return)),
            Invalid(topic: "coaty/3/-/DAD:/\(s)", error: .unexpectedFilter(.deadvertise)),
            // Source id
            Invalid(topic: "coaty/3/-/DAD/\(upper)", error: .invalidSourceId(upper)),
            Invalid(
                topic: "coaty/3/-/DAD/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4",
                error:
                    .invalidSourceId("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4")
            ),
            Invalid(
                topic: "coaty/3/-/DAD/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4dd",
                error:
                    .invalidSourceId("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4dd")
            ),
            Invalid(
                topic: "coaty/3/-/DAD/0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d",
                error:
                    .invalidSourceId("0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d")
            ),
            Invalid(
                topic: "coaty/3/-/DAD/0a1b2c3d-4e5f-1a6b-8c7d-9e0f1a2b3c4d",
                error:
                    .invalidSourceId("0a1b2c3d-4e5f-1a6b-8c7d-9e0f1a2b3c4d")
            ),
            Invalid(
                topic: "coaty/3/-/DAD/0a1b2c3d-4e5f-4a6b-cc7d-9e0f1a2b3c4d",
                error:
                    .invalidSourceId("0a1b2c3d-4e5f-4a6b-cc7d-9e0f1a2b3c4d")
            ),
            Invalid(
                topic: "coaty/3/-/DAD/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4g",
                error:
                    .invalidSourceId("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4g")
            ),
            Invalid(
                topic: "coaty/3/-/DAD/0a1b2c3d_4e5f-4a6b-8c7d-9e0f1a2b3c4d",
                error:
                    .invalidSourceId("0a1b2c3d_4e5f-4a6b-8c7d-9e0f1a2b3c4d")
            ),
            Invalid(topic: "coaty/3/-/DAD/agent-1", error: .invalidSourceId("agent-1")),
            Invalid(topic: "coaty/3/-/DSC/x/\(c)", error: .invalidSourceId("x")),
            // Correlation id
            Invalid(topic: "coaty/3/-/ADV:Task/\(s)/\(c)", error: .unexpectedCorrelationId(.advertise)),
            Invalid(topic: "coaty/3/-/DAD/\(s)/\(c)", error: .unexpectedCorrelationId(.deadvertise)),
            Invalid(topic: "coaty/3/-/CHN:x/\(s)/\(c)", error: .unexpectedCorrelationId(.channel)),
            Invalid(topic: "coaty/3/-/ASC:x/\(s)/\(c)", error: .unexpectedCorrelationId(.associate)),
            Invalid(topic: "coaty/3/-/IOV/\(s)/\(c)", error: .unexpectedCorrelationId(.ioValue)),
            Invalid(topic: "coaty/3/-/DSC/\(s)", error: .missingCorrelationId(.discover)),
            Invalid(topic: "coaty/3/-/RSV/\(s)", error: .missingCorrelationId(.resolve)),
            Invalid(topic: "coaty/3/-/QRY/\(s)", error: .missingCorrelationId(.query)),
            Invalid(topic: "coaty/3/-/RTV/\(s)", error: .missingCorrelationId(.retrieve)),
            Invalid(topic: "coaty/3/-/UPD:Task/\(s)", error: .missingCorrelationId(.update)),
            Invalid(topic: "coaty/3/-/CPL/\(s)", error: .missingCorrelationId(.complete)),
            Invalid(topic: "coaty/3/-/CLL:op/\(s)", error: .missingCorrelationId(.call)),
            Invalid(topic: "coaty/3/-/RTN/\(s)", error: .missingCorrelationId(.return)),
            Invalid(topic: "coaty/3/-/DSC/\(s)/\(c.uppercased())", error: .invalidCorrelationId(c.uppercased())),
            Invalid(topic: "coaty/3/-/RSV/\(s)/token-1", error: .invalidCorrelationId("token-1")),
            // Length
            Invalid(
                topic: "coaty/3/" + String(repeating: "n", count: 65_535) + "/DAD/\(s)",
                error: .tooLong(byteCount: 65_535 + 8 + 5 + 36)
            ),
        ]
    }()

    @Test("invalid topics are rejected with the rule they break", arguments: invalidCases)
    func invalidTopic(_ invalid: Invalid) {
        #expect(throws: invalid.error) { try CoatyTopic(parsing: invalid.topic) }
        let classification = CoatyTopic.classify(invalid.topic)
        if invalid.error == .notCoatyTopic {
            #expect(classification == .raw)
        } else {
            #expect(classification == .invalid(invalid.error))
        }
    }

    @Test("the 65535-byte limit is inclusive")
    func lengthLimit() throws {
        let fixed = "coaty/3//DAD/".utf8.count + 36
        let namespace = String(repeating: "n", count: 65_535 - fixed)
        let topic = "coaty/3/\(namespace)/DAD/\(s)"
        #expect(topic.utf8.count == 65_535)
        #expect(try CoatyTopic(parsing: topic).namespace.utf8.count == namespace.utf8.count)
        #expect(throws: CoatyTopicError.tooLong(byteCount: 65_536)) {
            try CoatyTopic(parsing: "coaty/3/\(namespace)n/DAD/\(s)")
        }
    }

    @Test("the length limit counts UTF-8 bytes, not characters")
    func lengthInBytes() {
        // 22000 three-byte characters: 66000 bytes but only 22000 characters.
        let namespace = String(repeating: "€", count: 22_000)
        #expect(throws: CoatyTopicError.tooLong(byteCount: 66_000 + 8 + 5 + 36)) {
            try CoatyTopic(parsing: "coaty/3/\(namespace)/DAD/\(s)")
        }
    }

    @Test("errors carry at most 80 characters of the offending text")
    func errorExcerpt() {
        let long = String(repeating: "x", count: 500)
        #expect(throws: CoatyTopicError.invalidSourceId(String(repeating: "x", count: 77) + "...")) {
            try CoatyTopic(parsing: "coaty/3/-/DAD/\(long)")
        }
    }

    @Test("Raw topics are classified as raw", arguments: ["a/b", "coaty", "coatyx/3", "/coaty/3/-/DAD", "$SYS/x", "c"])
    func rawTopics(_ topic: String) {
        #expect(CoatyTopic.classify(topic) == .raw)
        #expect(!CoatyTopic.isCoatyTopic(topic))
    }

    @Test("bridged or non-contiguous strings parse too")
    func substringInput() throws {
        let full = "xx" + "coaty/3/-/DAD/\(s)"
        let topic = String(full.dropFirst(2))
        #expect(try CoatyTopic(parsing: topic).sourceId == s)
    }

    @Test("error descriptions say what to do", arguments: invalidCases.map(\.error))
    func descriptions(_ error: CoatyTopicError) {
        #expect(!error.description.isEmpty)
        #expect(error.description.hasSuffix(".") || error.description.contains(":"))
    }
}
