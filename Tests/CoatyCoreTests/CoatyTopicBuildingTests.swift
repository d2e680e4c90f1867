import CoatyCore
import Testing

@Suite("Coaty topic building and subscription filters")
struct CoatyTopicBuildingTests {
    let s = TopicIds.source
    let c = TopicIds.correlation

    struct Case: Sendable, CustomStringConvertible {
        var event: CoatyTopic.Event
        var expectedLevel: String
        var description: String { expectedLevel }
    }

    static let cases: [Case] = [
        Case(event: .advertise(.coreType(.task)), expectedLevel: "ADV:Task"),
        Case(event: .advertise(.objectType("com.x.Light")), expectedLevel: "ADV::com.x.Light"),
        Case(event: .advertise(.objectType("com.x:y")), expectedLevel: "ADV::com.x:y"),
        Case(event: .deadvertise, expectedLevel: "DAD"),
        Case(event: .channel(id: "alerts"), expectedLevel: "CHN:alerts"),
        Case(event: .channel(id: "a:b"), expectedLevel: "CHN:a:b"),
        Case(event: .associate(ioContextName: "Lights"), expectedLevel: "ASC:Lights"),
        Case(event: .ioValue, expectedLevel: "IOV"),
        Case(event: .discover, expectedLevel: "DSC"),
        Case(event: .resolve, expectedLevel: "RSV"),
        Case(event: .query, expectedLevel: "QRY"),
        Case(event: .retrieve, expectedLevel: "RTV"),
        Case(event: .update(.coreType(.identity)), expectedLevel: "UPD:Identity"),
        Case(event: .update(.objectType("com.x.Light")), expectedLevel: "UPD::com.x.Light"),
        Case(event: .complete, expectedLevel: "CPL"),
        Case(event: .call(operation: "switchLight"), expectedLevel: "CLL:switchLight"),
        Case(event: .return, expectedLevel: "RTN"),
    ]

    @Test("built topics have the protocol shape and parse back to the same parts", arguments: cases)
    func roundTrip(_ testCase: Case) throws {
        let twoWay = testCase.event.eventType.isTwoWay
        let built = try CoatyTopic(
            event: testCase.event,
            namespace: "ns-1",
            sourceId: s,
            correlationId: twoWay ? c : nil
        )
        let expected = "coaty/3/ns-1/\(testCase.expectedLevel)/\(s)" + (twoWay ? "/\(c)" : "")
        #expect(built.name == expected)
        #expect(testCase.event.level == testCase.expectedLevel)

        let parsed = try CoatyTopic(parsing: built.name)
        #expect(parsed == built)
        #expect(parsed.event == testCase.event)
        #expect(parsed.namespace == "ns-1")
        #expect(parsed.sourceId == s)
        #expect(parsed.correlationId.map(String.init) == (twoWay ? c : nil))
        #expect(built.eventFilter.map(String.init) == testCase.event.filter)
    }

    @Test("every core type builds and parses", arguments: CoreType.allCases)
    func coreTypes(_ coreType: CoreType) throws {
        let built = try CoatyTopic(event: .advertise(.coreType(coreType)), namespace: "-", sourceId: s)
        #expect(built.name == "coaty/3/-/ADV:\(coreType.rawValue)/\(s)")
        let parsed = try CoatyTopic(parsing: built.name)
        #expect(parsed.coreType == coreType)
        #expect(parsed.coreTypeName.map(String.init) == coreType.rawValue)
        let update = try CoatyTopic(event: .update(.coreType(coreType)), namespace: "-", sourceId: s, correlationId: c)
        #expect(try CoatyTopic(parsing: update.name).event == .update(.coreType(coreType)))
    }

    @Test("typed ids build the same topics and are decoded from parsed topics")
    func typedIds() throws {
        let source = try #require(CoatyUUID(s))
        let correlation = try #require(CoatyUUID(c))
        let built = try CoatyTopic(event: .query, namespace: "-", sourceId: source, correlationId: correlation)
        #expect(built == (try CoatyTopic(event: .query, namespace: "-", sourceId: s, correlationId: c)))
        #expect(built.sourceUUID == source)
        #expect(built.correlationUUID == correlation)
        let oneWay = try CoatyTopic(parsing: "coaty/3/-/DAD/\(s)")
        #expect(oneWay.sourceUUID == source)
        #expect(oneWay.correlationUUID == nil)
        #expect(
            try CoatyTopic.subscriptionFilter(for: .retrieve, namespace: "-", correlationId: correlation)
                == "coaty/3/-/RTV/+/\(c)"
        )
        for _ in 0..<100 {
            let fresh = CoatyUUID()
            let topic = try CoatyTopic(event: .resolve, namespace: "x", sourceId: fresh, correlationId: CoatyUUID())
            #expect(try CoatyTopic(parsing: topic.name).sourceUUID == fresh)
        }
        // A UUID that is not version 4 is rejected like its text.
        let version1 = CoatyUUID(high: 0x0123_4567_89ab_1def, low: 0x8123_4567_89ab_cdef)
        #expect(throws: CoatyTopicError.invalidSourceId(version1.uuidString)) {
            try CoatyTopic(event: .deadvertise, namespace: "-", sourceId: version1)
        }
        #expect(throws: CoatyTopicError.invalidCorrelationId(version1.uuidString)) {
            try CoatyTopic.subscriptionFilter(for: .complete, namespace: "-", correlationId: version1)
        }
    }

    struct Bad: Sendable, CustomStringConvertible {
        var event: CoatyTopic.Event
        var namespace = "-"
        var sourceId = TopicIds.source
        var correlationId: String?
        var error: CoatyTopicError
        var description: String { "\(event) ns=\(namespace.prefix(20)) → \(error)" }
    }

    static let badCases: [Bad] = [
        Bad(event: .deadvertise, namespace: "", error: .invalidNamespace("")),
        Bad(event: .deadvertise, namespace: "a/b", error: .invalidNamespace("a/b")),
        Bad(event: .deadvertise, namespace: "a+", error: .invalidNamespace("a+")),
        Bad(event: .deadvertise, namespace: "#", error: .invalidNamespace("#")),
        Bad(event: .deadvertise, namespace: "a\u{0}", error: .invalidNamespace("a\u{0}")),
        Bad(event: .advertise(.objectType("")), error: .invalidFilter(.advertise, "")),
        Bad(event: .advertise(.objectType("com/x")), error: .invalidFilter(.advertise, "com/x")),
        Bad(event: .advertise(.objectType("com.+")), error: .invalidFilter(.advertise, "com.+")),
        Bad(event: .channel(id: ""), error: .invalidFilter(.channel, "")),
        Bad(event: .channel(id: "a#"), error: .invalidFilter(.channel, "a#")),
        Bad(event: .channel(id: "a\u{0}"), error: .invalidFilter(.channel, "a\u{0}")),
        Bad(event: .call(operation: "a/b"), correlationId: TopicIds.correlation, error: .invalidFilter(.call, "a/b")),
        Bad(event: .associate(ioContextName: "+"), error: .invalidFilter(.associate, "+")),
        Bad(event: .update(.objectType("")), correlationId: TopicIds.correlation, error: .invalidFilter(.update, "")),
        Bad(
            event: .deadvertise,
            sourceId: TopicIds.source.uppercased(),
            error: .invalidSourceId(TopicIds.source.uppercased())
        ),
        Bad(event: .deadvertise, sourceId: "me", error: .invalidSourceId("me")),
        Bad(event: .deadvertise, correlationId: TopicIds.correlation, error: .unexpectedCorrelationId(.deadvertise)),
        Bad(
            event: .advertise(.coreType(.task)),
            correlationId: TopicIds.correlation,
            error: .unexpectedCorrelationId(.advertise)
        ),
        Bad(event: .discover, error: .missingCorrelationId(.discover)),
        Bad(event: .return, error: .missingCorrelationId(.return)),
        Bad(event: .discover, correlationId: "1", error: .invalidCorrelationId("1")),
        Bad(
            event: .deadvertise,
            namespace: String(repeating: "n", count: 70_000),
            error: .tooLong(byteCount: 70_000 + 8 + 5 + 36)
        ),
    ]

    @Test("building rejects invalid parts", arguments: badCases)
    func badParts(_ bad: Bad) {
        #expect(throws: bad.error) {
            try CoatyTopic(
                event: bad.event,
                namespace: bad.namespace,
                sourceId: bad.sourceId,
                correlationId: bad.correlationId
            )
        }
    }

    // MARK: Subscription filters

    struct FilterCase: Sendable, CustomStringConvertible {
        var event: CoatyTopic.Event
        var crossNamespacing: Bool
        var correlationId: String?
        var expected: String
        var description: String { expected }
    }

    static let filterCases: [FilterCase] = [
        FilterCase(event: .advertise(.coreType(.task)), crossNamespacing: false, expected: "coaty/3/ns/ADV:Task/+"),
        FilterCase(event: .advertise(.coreType(.task)), crossNamespacing: true, expected: "coaty/3/+/ADV:Task/+"),
        FilterCase(
            event: .advertise(.objectType("com.x.L")),
            crossNamespacing: false,
            expected: "coaty/3/ns/ADV::com.x.L/+"
        ),
        FilterCase(event: .deadvertise, crossNamespacing: false, expected: "coaty/3/ns/DAD/+"),
        FilterCase(event: .deadvertise, crossNamespacing: true, expected: "coaty/3/+/DAD/+"),
        FilterCase(event: .channel(id: "c1"), crossNamespacing: false, expected: "coaty/3/ns/CHN:c1/+"),
        FilterCase(event: .associate(ioContextName: "ctx"), crossNamespacing: false, expected: "coaty/3/ns/ASC:ctx/+"),
        FilterCase(event: .ioValue, crossNamespacing: true, expected: "coaty/3/+/IOV/+"),
        FilterCase(event: .discover, crossNamespacing: false, expected: "coaty/3/ns/DSC/+/+"),
        FilterCase(event: .discover, crossNamespacing: true, expected: "coaty/3/+/DSC/+/+"),
        FilterCase(event: .query, crossNamespacing: false, expected: "coaty/3/ns/QRY/+/+"),
        FilterCase(event: .update(.coreType(.task)), crossNamespacing: false, expected: "coaty/3/ns/UPD:Task/+/+"),
        FilterCase(event: .update(.objectType("com.x")), crossNamespacing: true, expected: "coaty/3/+/UPD::com.x/+/+"),
        FilterCase(event: .call(operation: "op"), crossNamespacing: false, expected: "coaty/3/ns/CLL:op/+/+"),
        FilterCase(
            event: .resolve,
            crossNamespacing: false,
            correlationId: TopicIds.correlation,
            expected: "coaty/3/ns/RSV/+/\(TopicIds.correlation)"
        ),
        FilterCase(
            event: .resolve,
            crossNamespacing: true,
            correlationId: TopicIds.correlation,
            expected: "coaty/3/+/RSV/+/\(TopicIds.correlation)"
        ),
        FilterCase(
            event: .retrieve,
            crossNamespacing: false,
            correlationId: TopicIds.correlation,
            expected: "coaty/3/ns/RTV/+/\(TopicIds.correlation)"
        ),
        FilterCase(
            event: .complete,
            crossNamespacing: false,
            correlationId: TopicIds.correlation,
            expected: "coaty/3/ns/CPL/+/\(TopicIds.correlation)"
        ),
        FilterCase(
            event: .return,
            crossNamespacing: true,
            correlationId: TopicIds.correlation,
            expected: "coaty/3/+/RTN/+/\(TopicIds.correlation)"
        ),
        FilterCase(event: .return, crossNamespacing: false, correlationId: nil, expected: "coaty/3/ns/RTN/+/+"),
    ]

    @Test("subscription filters have the protocol shape", arguments: filterCases)
    func subscriptionFilter(_ testCase: FilterCase) throws {
        let filter = try CoatyTopic.subscriptionFilter(
            for: testCase.event,
            namespace: "ns",
            crossNamespacing: testCase.crossNamespacing,
            correlationId: testCase.correlationId
        )
        #expect(filter == testCase.expected)
        #expect(MQTTTopicFilter.isValid(filter))
    }

    @Test("subscription filters match the topics of the event they subscribe", arguments: cases)
    func filterMatchesPublication(_ testCase: Case) throws {
        let event = testCase.event
        let type = event.eventType
        let correlation = type.isTwoWay ? c : nil
        let own = try CoatyTopic(event: event, namespace: "ns", sourceId: s, correlationId: correlation).name
        let foreign = try CoatyTopic(event: event, namespace: "other", sourceId: s, correlationId: correlation).name
        let responseId = type.isResponse ? c : nil
        let local = try CoatyTopic.subscriptionFilter(for: event, namespace: "ns", correlationId: responseId)
        let cross = try CoatyTopic.subscriptionFilter(
            for: event,
            namespace: "ns",
            crossNamespacing: true,
            correlationId: responseId
        )
        #expect(MQTTTopicFilter.matches(topic: own, filter: local))
        #expect(!MQTTTopicFilter.matches(topic: foreign, filter: local))
        #expect(MQTTTopicFilter.matches(topic: own, filter: cross))
        #expect(MQTTTopicFilter.matches(topic: foreign, filter: cross))
        if type.isResponse {
            let otherResponse = try CoatyTopic(
                event: event,
                namespace: "ns",
                sourceId: s,
                correlationId: TopicIds.other
            )
            #expect(!MQTTTopicFilter.matches(topic: otherResponse.name, filter: local))
        }
    }

    @Test("an object-type subscription does not receive core-type publications")
    func objectTypeVersusCoreType() throws {
        let filter = try CoatyTopic.subscriptionFilter(for: .advertise(.objectType("coaty.Task")), namespace: "-")
        let coreTopic = try CoatyTopic(event: .advertise(.coreType(.task)), namespace: "-", sourceId: s).name
        #expect(!MQTTTopicFilter.matches(topic: coreTopic, filter: filter))
    }

    @Test("subscription filters reject invalid parts")
    func badSubscriptionFilters() {
        #expect(throws: CoatyTopicError.invalidNamespace("")) {
            try CoatyTopic.subscriptionFilter(for: .discover, namespace: "")
        }
        #expect(throws: CoatyTopicError.invalidNamespace("a/b")) {
            try CoatyTopic.subscriptionFilter(for: .discover, namespace: "a/b", crossNamespacing: true)
        }
        #expect(throws: CoatyTopicError.unexpectedCorrelationId(.discover)) {
            try CoatyTopic.subscriptionFilter(for: .discover, namespace: "-", correlationId: TopicIds.correlation)
        }
        #expect(throws: CoatyTopicError.unexpectedCorrelationId(.advertise)) {
            try CoatyTopic.subscriptionFilter(
                for: .advertise(.coreType(.task)),
                namespace: "-",
                correlationId: TopicIds.correlation
            )
        }
        #expect(throws: CoatyTopicError.invalidCorrelationId("X")) {
            try CoatyTopic.subscriptionFilter(for: .resolve, namespace: "-", correlationId: "X")
        }
        #expect(throws: CoatyTopicError.invalidFilter(.channel, "#")) {
            try CoatyTopic.subscriptionFilter(for: .channel(id: "#"), namespace: "-")
        }
    }

    @Test("objects are published on the core type topic, and on the object type topic when it differs")
    func publishingFilters() {
        #expect(
            CoatyTopic.TypeFilter.publishing(objectType: "coaty.Task", coreType: .task) == [.coreType(.task)]
        )
        #expect(
            CoatyTopic.TypeFilter.publishing(objectType: "com.x.Light", coreType: .coatyObject)
                == [.coreType(.coatyObject), .objectType("com.x.Light")]
        )
        #expect(
            CoatyTopic.TypeFilter.publishing(objectType: "coaty.User", coreType: .task)
                == [.coreType(.task), .objectType("coaty.User")]
        )
    }

    @Test("observing a core type's own object type subscribes the core type topic", arguments: CoreType.allCases)
    func observingCoreObjectType(_ coreType: CoreType) throws {
        let filter = CoatyTopic.TypeFilter.observing(objectType: coreType.objectType)
        #expect(filter == .coreType(coreType))
        // Every publication of such an object reaches that subscription.
        let subscription = try CoatyTopic.subscriptionFilter(for: .advertise(filter), namespace: "-")
        for published in CoatyTopic.TypeFilter.publishing(objectType: coreType.objectType, coreType: coreType) {
            let topic = try CoatyTopic(event: .advertise(published), namespace: "-", sourceId: s)
            #expect(MQTTTopicFilter.matches(topic: topic.name, filter: subscription))
        }
    }

    @Test("observing another object type subscribes its own topic, which receives its publications")
    func observingObjectType() throws {
        #expect(CoatyTopic.TypeFilter.observing(objectType: "com.x.Light") == .objectType("com.x.Light"))
        #expect(CoatyTopic.TypeFilter.observing(objectType: "coaty.Unknown") == .objectType("coaty.Unknown"))
        let subscription = try CoatyTopic.subscriptionFilter(
            for: .update(.observing(objectType: "com.x.Light")),
            namespace: "-"
        )
        let published = CoatyTopic.TypeFilter.publishing(objectType: "com.x.Light", coreType: .coatyObject)
        let matching = try published.filter { filter in
            let topic = try CoatyTopic(event: .update(filter), namespace: "-", sourceId: s, correlationId: c)
            return MQTTTopicFilter.matches(topic: topic.name, filter: subscription)
        }
        #expect(matching == [.objectType("com.x.Light")])
    }

    // MARK: Raw topics

    @Test(
        "Raw publication topics",
        arguments: [
            ("a/b", nil),
            ("coaty", nil),
            ("/coaty/3/x", nil),
            ("$SYS/x", nil),
            ("coaty/3/-/DAD", CoatyTopicError.reservedCoatyPrefix),
            ("coaty/", CoatyTopicError.reservedCoatyPrefix),
            ("", CoatyTopicError.invalidMQTTTopic(.empty)),
            ("a/+", CoatyTopicError.invalidMQTTTopic(.wildcardInTopicName)),
            ("a/#", CoatyTopicError.invalidMQTTTopic(.wildcardInTopicName)),
            ("a\u{0}", CoatyTopicError.invalidMQTTTopic(.containsNUL)),
        ] as [(String, CoatyTopicError?)]
    )
    func rawTopic(_ topic: String, _ expected: CoatyTopicError?) {
        if let expected {
            #expect(throws: expected) { try CoatyTopic.validateRawTopic(topic) }
        } else {
            #expect(throws: Never.self) { try CoatyTopic.validateRawTopic(topic) }
        }
    }

    @Test("Raw subscription filters are any valid MQTT filter")
    func rawSubscription() {
        #expect(throws: Never.self) { try CoatyTopic.validateRawSubscriptionFilter("#") }
        #expect(throws: Never.self) { try CoatyTopic.validateRawSubscriptionFilter("sensors/+/temp") }
        #expect(throws: CoatyTopicError.invalidMQTTTopic(.misplacedWildcard)) {
            try CoatyTopic.validateRawSubscriptionFilter("a#")
        }
    }
}

@Suite("Communication event types")
struct CommunicationEventTypeTopicTests {
    @Test("codes round-trip", arguments: CommunicationEventType.allCases)
    func codes(_ type: CommunicationEventType) {
        if let code = type.topicCode {
            #expect(code.utf8.count == 3)
            #expect(CommunicationEventType(topicCode: code) == type)
        } else {
            #expect(type == .raw)
        }
        #expect(type.description == type.name)
    }

    @Test("unknown codes", arguments: ["", "AD", "ADVX", "adv", "RAW", "Raw", "XYZ", "AD\u{0}"])
    func unknownCodes(_ code: String) {
        #expect(CommunicationEventType(topicCode: code) == nil)
    }

    @Test("one-way and two-way, filters, request and response pairing")
    func classification() {
        let oneWay: Set<CommunicationEventType> = [.advertise, .deadvertise, .channel, .associate, .ioValue, .raw]
        let requests: Set<CommunicationEventType> = [.discover, .query, .update, .call]
        let responses: Set<CommunicationEventType> = [.resolve, .retrieve, .complete, .return]
        let filtered: Set<CommunicationEventType> = [.advertise, .update, .channel, .call, .associate]
        for type in CommunicationEventType.allCases {
            #expect(type.isOneWay == oneWay.contains(type), "\(type)")
            #expect(type.isTwoWay == !oneWay.contains(type), "\(type)")
            #expect(type.isRequest == requests.contains(type), "\(type)")
            #expect(type.isResponse == responses.contains(type), "\(type)")
            #expect(type.requiresFilter == filtered.contains(type), "\(type)")
            if let response = type.responseType {
                #expect(response.requestType == type)
            }
        }
        #expect(CommunicationEventType.discover.responseType == .resolve)
        #expect(CommunicationEventType.query.responseType == .retrieve)
        #expect(CommunicationEventType.update.responseType == .complete)
        #expect(CommunicationEventType.call.responseType == .return)
        #expect(CommunicationEventType.advertise.responseType == nil)
        #expect(CommunicationEventType.resolve.requestType == .discover)
        #expect(CommunicationEventType.raw.requestType == nil)
    }
}
