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

    @Test("Failover brokers from MQTT.js's servers, COATY_BROKER's list and code reach the MQTT configuration")
    func failoverBrokers() throws {
        let json: JSONValue = [
            "communication": [
                "brokerUrl": "mqtt://a.example",
                "mqttClientOptions": [
                    "servers": [
                        ["host": "a.example", "port": 1883, "protocol": "mqtt"],
                        ["host": "b.example", "port": 1884],
                    ]
                ],
            ]
        ]
        var configuration = try AgentConfiguration(json: json)
        #expect(configuration.brokerURL == "mqtt://a.example")
        #expect(configuration.fallbackBrokerURLs == ["mqtt://b.example:1884"])
        let reread = try AgentConfiguration(json: configuration.json)
        #expect(reread == configuration, "the servers list survives a round trip")
        let manager = try CommunicationManager.mqtt(configuration: configuration)
        let transport = try #require(manager.transport as? MQTTTransport)
        #expect(transport.configuration.brokers.map(\.url) == ["mqtt://a.example:1883", "mqtt://b.example:1884"])

        let onlyServers = try AgentConfiguration(
            json: ["communication": ["servers": [["host": "c.example", "protocol": "mqtts"]]]]
        )
        #expect(onlyServers.brokerURL == "mqtts://c.example")
        #expect(onlyServers.fallbackBrokerURLs.isEmpty)

        try configuration.applyEnvironment(["COATY_BROKER": "mqtt://x:1, mqtt://y:2"])
        #expect(configuration.brokerURL == "mqtt://x:1")
        #expect(configuration.fallbackBrokerURLs == ["mqtt://y:2"])
        #expect(throws: AgentConfigurationError.self) {
            try AgentConfiguration(json: ["communication": ["servers": [["port": 1883]]]])
        }
    }
}
