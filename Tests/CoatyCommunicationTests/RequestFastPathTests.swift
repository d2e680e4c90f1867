import CoatyCore
import CoatyTesting
import CommunicationTestSupport
import Testing

@testable import CoatyCommunication

/// The shortcuts of the request paths ("Close to the floor"): a Resolve encoded straight from its object, two-way
/// topic names and response filters from a prefix built once per event, ids decoded once per topic. Each must give
/// exactly what the checked, general way gives.
@Suite("Request fast paths")
struct RequestFastPathTests {
    @Test("a Resolve of one typed object (with and without private data) has the bytes of the general way")
    func resolveBytes() async throws {
        let broker = InProcessBroker()
        let requester = try TestAgent(broker, name: "requester")
        let responder = try TestAgent(broker, name: "responder")
        try await requester.manager.start()
        try await responder.manager.start()
        let light = Light(name: "Lamp \"7\" — ünïcode", isOn: true)
        let privateData: JSONObject = ["room": .string("B7"), "level": .int(4)]
        let discovers = try responder.manager.observeDiscover()
        await discovers.subscribed()
        let answering = Task {
            var answered = 0
            for await discover in discovers {
                try await discover.resolve(object: light, privateData: answered == 0 ? nil : privateData)
                answered += 1
                if answered == 2 { break }
            }
        }
        for expectedPrivate in [nil, privateData] {
            let resolve = try #require(
                try await requester.manager.publishDiscover(.objectId(light.objectId)).first(timeout: .seconds(10))
            )
            #expect(resolve.data.object?.as(Light.self) == light)
            #expect(resolve.data.privateData == expectedPrivate)
        }
        try await answering.value
        let sent = broker.publications(matching: "coaty/3/-/RSV/+/+").map(\.message.payload)
        #expect(sent.count == 2)
        let general = try [nil, privateData].map { data in
            try ResolveEventData(object: AnyCoatyObject(light), privateData: data).json.serializedBytes()
        }
        #expect(sent == general)
        await requester.manager.stop()
        await responder.manager.stop()
    }

    @Test("two-way topic names and response filters from the cached prefix equal the checked ones")
    func twoWayNames() throws {
        for crossNamespacing in [false, true] {
            let manager = try TestAgent(InProcessBroker(), namespace: "plant-7", crossNamespacing: crossNamespacing)
                .manager
            let events: [CoatyTopic.Event] = [
                .discover, .query, .resolve, .retrieve, .complete, .return, .call(operation: "switch.on"),
                .update(.observing(objectType: Light.objectType)),
            ]
            for event in events {
                // The first call of each event builds its prefix, the next ones use it.
                for _ in 0..<3 {
                    let id = CoatyUUID()
                    let name = try manager.twoWayTopicName(event, correlationId: id)
                    #expect(name == (try manager.topic(event, correlationId: id).name))
                    let parsed = try CoatyTopic(parsing: name)
                    #expect(parsed.correlationUUID == id)
                    #expect(parsed.sourceUUID == manager.identity.objectId)
                    if event.eventType.isResponse {
                        #expect(
                            try manager.responseFilter(event, correlationId: id)
                                == (try manager.subscriptionFilter(event, correlationId: id))
                        )
                    }
                }
            }
        }
    }

    @Test("a correlation id that is not a version 4 UUID goes the checked way and is refused there")
    func notVersion4() throws {
        let manager = try TestAgent(InProcessBroker()).manager
        _ = try manager.twoWayTopicName(.discover, correlationId: CoatyUUID())  // the prefix exists now
        // Version 1 (and a wrong variant): what a topic must not carry.
        let version1 = try #require(CoatyUUID("6fa459ea-ee8a-1ca4-894e-db77e160355e"))
        let wrongVariant = try #require(CoatyUUID("6fa459ea-ee8a-4ca4-c94e-db77e160355e"))
        for id in [version1, wrongVariant] {
            #expect(!CommunicationManager.isVersion4(id))
            #expect(throws: CommunicationError.self) { try manager.twoWayTopicName(.discover, correlationId: id) }
            #expect(throws: CommunicationError.self) { try manager.responseFilter(.resolve, correlationId: id) }
        }
        #expect(CommunicationManager.isVersion4(CoatyUUID()))
    }

    @Test("a topic's source and correlation ids, decoded once, are the ids of its text")
    func topicIds() throws {
        let source = CoatyUUID()
        let correlation = CoatyUUID()
        let built = try CoatyTopic(event: .query, namespace: "-", sourceId: source, correlationId: correlation)
        let parsed = try CoatyTopic(parsing: built.name)
        for topic in [built, parsed] {
            #expect(topic.sourceUUID == source)
            #expect(topic.correlationUUID == correlation)
            #expect(topic.sourceId == source.uuidString)
        }
        let oneWay = try CoatyTopic(parsing: "coaty/3/-/ADV::com.example.Light/\(source)")
        #expect(oneWay.sourceUUID == source)
        #expect(oneWay.correlationUUID == nil)
        #expect(built == parsed)
    }
}
