import CoatyKit
import Testing

@Suite("AgentConfiguration onto MQTT")
struct AgentConfigurationMQTTTests {
    @Test("CommunicationManager.mqtt(configuration:) uses the broker URL, identity and options")
    func managerFromConfiguration() throws {
        let id = CoatyUUID()
        let configuration = AgentConfiguration(
            name: "Kit agent",
            identityId: id,
            brokerURL: "mqtts://broker.example:8883",
            namespace: "kit",
            shouldEnableCrossNamespacing: true
        )
        let manager = try CommunicationManager.mqtt(configuration: configuration)
        let transport = try #require(manager.transport as? MQTTTransport)
        #expect(transport.configuration.url == "mqtts://broker.example:8883")
        #expect(transport.configuration.clientId == CoatyConnection.clientId(identityId: id))
        #expect(manager.identity.objectId == id)
        #expect(manager.identity.name == "Kit agent")
        #expect(manager.options.namespace == "kit")
        #expect(manager.options.crossNamespacing)
    }
}
