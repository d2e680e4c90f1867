import CoatyCore
import CommunicationTestSupport
import CoatyTesting
import Testing

/// QoS 1 is opt-in per agent (`Options.qos`, as Coaty JS's `mqttClientOptions.qos`): then every
/// publication, join event and subscription of the agent is at least QoS 1.
struct AgentQoSTests {
    @Test func anAgentWithQoS1PublishesAndSubscribesAtQoS1() async throws {
        let broker = InProcessBroker()
        let identity = Identity(name: "qos1")
        let transport = broker.makeTransport(clientId: CoatyConnection.clientId(identityId: identity.objectId))
        let manager = try CommunicationManager(
            transport: transport,
            identity: identity,
            options: .init(qos: .atLeastOnce)
        )
        try await manager.start()
        let lights = try manager.observeAdvertise(coreType: .coatyObject)
        await lights.subscribed()
        try await manager.publishAdvertise(Light(name: "l", isOn: true))
        try await manager.publishChannel("c", objects: [])
        _ = try await manager.publishDiscover(.objectId(CoatyUUID())).first(timeout: .milliseconds(100))
        let published = broker.publications.filter { !$0.isWill && $0.clientId == transport.clientId }
        #expect(
            Set(published.map { $0.message.topic.split(separator: "/")[3].prefix(3) }).isSuperset(of: [
                "ADV", "CHN", "DSC",
            ])
        )
        for publication in published {
            #expect(publication.message.qos == .atLeastOnce, "\(publication.message.topic)")
        }
        // One snapshot of every request, those since ended included (a response topic).
        let requests = broker.subscribeRequests(ofClient: transport.clientId)
        #expect(!requests.isEmpty)
        for request in requests {
            #expect(request.qos == .atLeastOnce, "\(request.filter)")
        }
        await manager.stop()
    }

    @Test func theDefaultStaysQoS0() throws {
        #expect(CommunicationManager.Options().qos == .atMostOnce)
    }
}

/// QoS 1 per publication, on an agent that keeps Coaty's default QoS 0.
struct PublicationQoSTests {
    @Test func aPublicationAsksForQoS1() async throws {
        let broker = InProcessBroker()
        let identity = Identity(name: "per publication")
        let transport = broker.makeTransport(clientId: CoatyConnection.clientId(identityId: identity.objectId))
        let manager = try CommunicationManager(transport: transport, identity: identity)
        try await manager.start()
        try await manager.publishAdvertise(Light(name: "important", isOn: true), qos: .atLeastOnce)
        try await manager.publishChannel("c", objects: [], qos: .atLeastOnce)
        try await manager.publishRaw(topic: "raw/q", payload: [1], qos: .atLeastOnce)
        try await manager.publishAdvertise(Light(name: "ordinary", isOn: false))
        let published = broker.publications.filter { !$0.isWill && $0.clientId == transport.clientId }
        let important = published.filter {
            $0.message.topic.contains("ADV::")
                && String(decoding: $0.message.payload, as: UTF8.self).contains("important")
        }
        #expect(important.count == 1)
        #expect(important.allSatisfy { $0.message.qos == .atLeastOnce })
        #expect(published.filter { $0.message.topic.contains("/CHN:") }.map(\.message.qos) == [.atLeastOnce])
        #expect(published.filter { $0.message.topic == "raw/q" }.map(\.message.qos) == [.atLeastOnce])
        let ordinary = published.filter { String(decoding: $0.message.payload, as: UTF8.self).contains("ordinary") }
        #expect(!ordinary.isEmpty)
        #expect(ordinary.allSatisfy { $0.message.qos == .atMostOnce })
        await manager.stop()
    }
}
