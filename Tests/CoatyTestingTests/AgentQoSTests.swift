import CoatyCore
import CoatyTesting
import Testing

/// QoS 1 is opt-in per agent (`Options.qos`, as Coaty JS's `mqttClientOptions.qos`): then every
/// publication, join event and subscription of the agent is at least QoS 1.
struct AgentQoSTests {
    @Test func anAgentWithQoS1PublishesAndSubscribesAtQoS1() async throws {
        let broker = InProcessBroker()
        let identity = Identity(name: "qos1")
        let transport = broker.makeTransport(clientId: CoatyConnection.clientId(identityId: identity.objectId))
        let manager = try CommunicationManager(transport: transport, identity: identity, options: .init(qos: .atLeastOnce))
        try await manager.start()
        let lights = try manager.observeAdvertise(coreType: .coatyObject)
        await lights.subscribed()
        try await manager.publishAdvertise(Light(name: "l", isOn: true))
        try await manager.publishChannel("c", objects: [])
        _ = try await manager.publishDiscover(.objectId(CoatyUUID())).first(timeout: .milliseconds(100))
        let published = broker.publications.filter { !$0.isWill && $0.clientId == transport.clientId }
        #expect(Set(published.map { $0.message.topic.split(separator: "/")[3].prefix(3) }).isSuperset(of: ["ADV", "CHN", "DSC"]))
        for publication in published {
            #expect(publication.message.qos == .atLeastOnce, "\(publication.message.topic)")
        }
        let filters = broker.subscriptions(ofClient: transport.clientId)
        #expect(!filters.isEmpty)
        for filter in filters {
            #expect(broker.subscriptionQoS(ofClient: transport.clientId, filter: filter) == .atLeastOnce, "\(filter)")
        }
        await manager.stop()
    }

    @Test func theDefaultStaysQoS0() throws {
        #expect(CommunicationManager.Options().qos == .atMostOnce)
    }
}
