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
        #expect(transport.configuration.maxReconnectDelay == .seconds(1))
    }

    @Test("The MQTT settings of the Coaty protocol: 3.1.1, clean session, keepalive 60 s, reconnect every second")
    func coatyMQTTSettings() throws {
        let id = CoatyUUID()
        let transport = try MQTTTransport(url: "mqtt://127.0.0.1:1883", identityId: id)
        for configuration in [
            try MQTTConfiguration.coaty(url: "mqtt://127.0.0.1:1883", identityId: id), transport.configuration,
        ] {
            #expect(configuration.clientId == CoatyConnection.clientId(identityId: id))
            #expect(configuration.protocolVersion == .v311)
            #expect(configuration.cleanSession)
            #expect(configuration.keepAlive == .seconds(60))
            #expect(configuration.reconnectDelay == .seconds(1))
            #expect(configuration.maxReconnectDelay == .seconds(1), "a fixed reconnect period, no back-off")
            #expect(configuration.will == nil)
        }
    }
}
