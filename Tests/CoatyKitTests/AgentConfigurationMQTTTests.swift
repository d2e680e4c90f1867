import AgentProcessTestSupport
import CoatyKit
import CoatyTesting
import Foundation
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

    @Test("Failover brokers go with credentials, keep-alive and TLS, from every object readConnection reads")
    func failoverBrokersWithConnectionOptions() throws {
        // servers in binding.options, brokerUrl in mqttClientOptions: the primary comes from brokerUrl.
        let json: JSONValue = [
            "communication": [
                "servers": [["host": "ignored.example", "protocol": "mqtts"]],
                "mqttClientOptions": [
                    "brokerUrl": "mqtts://a.example:8883",
                    "username": "light",
                    "password": "s3cret",
                    "keepalive": 20,
                ],
                "binding": [
                    "options": [
                        "servers": [
                            ["host": "b.example", "port": 8884, "protocol": "mqtts"],
                            ["host": "a.example", "port": 8883, "protocol": "mqtts"],
                        ],
                        "tlsOptions": ["rejectUnauthorized": false],
                    ]
                ],
            ]
        ]
        let configuration = try AgentConfiguration(json: json)
        #expect(configuration.brokerURL == "mqtts://a.example:8883")
        #expect(
            configuration.fallbackBrokerURLs == ["mqtts://b.example:8884"],
            "binding.options wins; a is the primary"
        )
        #expect(try AgentConfiguration(json: configuration.json) == configuration, "servers and credentials round trip")
        let id = CoatyUUID()
        let mqtt = try MQTTConfiguration.coaty(configuration: configuration, identityId: id)
        #expect(mqtt.brokers.map(\.url) == ["mqtts://a.example:8883", "mqtts://b.example:8884"])
        #expect(mqtt.fallbackBrokers == [MQTTBrokerAddress(host: "b.example", port: 8884, usesTLS: true)])
        #expect(mqtt.username == "light" && mqtt.password == "s3cret")
        #expect(mqtt.keepAlive == .seconds(20))
        #expect(mqtt.tls == MQTTTLSConfiguration(verifyServer: false))

        // Without any brokerUrl the first server is the primary one.
        let serversOnly = try AgentConfiguration(
            json: [
                "communication": [
                    "mqttClientOptions": [
                        "servers": [["host": "c.example", "port": 1], ["host": "d.example", "port": 2]]
                    ]
                ]
            ]
        )
        #expect(serversOnly.brokerURL == "mqtt://c.example:1")
        #expect(serversOnly.fallbackBrokerURLs == ["mqtt://d.example:2"])

        // Mixed schemes are refused when the MQTT configuration is made.
        let mixed = AgentConfiguration(brokerURL: "mqtts://a.example", fallbackBrokerURLs: ["mqtt://b.example"])
        #expect(throws: MQTTError.self) { try MQTTConfiguration.coaty(configuration: mixed, identityId: id) }
    }

    @Test("MQTTConfiguration.coaty(configuration:identityId:) maps credentials, keep-alive and TLS files")
    func mqttConfigurationFromAgentConfiguration() throws {
        let id = CoatyUUID()
        let secure = try MQTTConfiguration.coaty(
            configuration: AgentConfiguration(
                brokerURL: "mqtts://u:p@broker:8883",
                username: "light",
                password: "s3cret",
                keepAlive: 20,
                caFile: "/etc/ca.pem",
                certificateFile: "/etc/c.pem",
                privateKeyFile: "/etc/c.key",
                verifiesServer: false
            ),
            identityId: id
        )
        #expect(secure.clientId == CoatyConnection.clientId(identityId: id))
        #expect(secure.username == "light")
        #expect(secure.password == "s3cret")
        #expect(secure.keepAlive == .seconds(20))
        #expect(
            secure.tls
                == MQTTTLSConfiguration(
                    caFile: "/etc/ca.pem",
                    certificateFile: "/etc/c.pem",
                    privateKeyFile: "/etc/c.key",
                    verifyServer: false
                )
        )
        #expect(secure.will == nil, "the communication manager sets Coaty's will")

        let plain = try MQTTConfiguration.coaty(
            configuration: AgentConfiguration(brokerURL: "mqtt://u:p@broker"),
            identityId: id
        )
        #expect(plain.username == "u" && plain.password == "p", "credentials in the URL stay unless configured")
        #expect(plain.keepAlive == .seconds(60))
        #expect(plain.tls == nil)
        let verified = try MQTTConfiguration.coaty(
            configuration: AgentConfiguration(brokerURL: "mqtts://b"),
            identityId: id
        )
        #expect(verified.tls == MQTTTLSConfiguration(), "system CAs, verified")

        let manager = try CommunicationManager.mqtt(
            configuration: AgentConfiguration(identityId: id, username: "light", keepAlive: 15)
        )
        let transport = try #require(manager.transport as? MQTTTransport)
        #expect(transport.configuration.username == "light")
        #expect(transport.configuration.keepAlive == .seconds(15))
        #expect(transport.configuration.clientId == CoatyConnection.clientId(identityId: manager.identity.objectId))
    }
}

/// A configuration file's credentials and keep-alive against a real mosquitto that requires a password.
@Suite(
    "AgentConfiguration over a real mosquitto",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: BrokerAvailability.shouldRun)
)
struct AgentConfigurationBrokerTests {
    @Test(
        "credentials and keep-alive from a Coaty JS configuration file take effect; a wrong password is refused; the environment's credentials work too"
    )
    func credentialsFromFile() async throws {
        try await withPasswordBroker(user: "light", password: "s3cret") { broker, directory in
            let identityId = CoatyUUID()
            let goodFile = try writeConfigurationFile(
                AgentConfiguration(
                    name: "Configured",
                    identityId: identityId,
                    brokerURL: broker.url,
                    username: "light",
                    password: "s3cret",
                    keepAlive: 7
                ),
                in: directory,
                name: "good.json"
            )
            let configuration = try AgentConfiguration.load(file: goodFile, environment: [:])
            let agent = try CommunicationManager.mqtt(configuration: configuration)
            let transport = try #require(agent.transport as? MQTTTransport)
            #expect(transport.configuration.keepAlive == .seconds(7))
            try await agent.start()

            // A second agent with the credentials from the environment finds the first by its configured id.
            let environmentConfiguration = try AgentConfiguration.load(environment: [
                "COATY_BROKER": broker.url, "COATY_USERNAME": "light", "COATY_PASSWORD": "s3cret",
            ])
            let finder = try CommunicationManager.mqtt(configuration: environmentConfiguration)
            try await finder.start()
            let resolved = try await finder.publishDiscover(.objectId(identityId)).first(timeout: .seconds(20))
            #expect(resolved?.data.object?.objectId == identityId)
            #expect(resolved?.data.object?.name == "Configured")
            await finder.stop()
            await agent.stop()

            let wrongFile = try writeConfigurationFile(
                AgentConfiguration(brokerURL: broker.url, username: "light", password: "wrong"),
                in: directory,
                name: "wrong.json"
            )
            let refused = try CommunicationManager.mqtt(
                configuration: AgentConfiguration.load(file: wrongFile, environment: [:])
            )
            let error = await #expect(throws: (any Error).self) { try await refused.start() }
            #expect(!"\(error.map { "\($0)" } ?? "")".contains("wrong"), "the password is not in the error")
            #expect(
                "\(error.map { "\($0)" } ?? "")".contains("credentials"),
                "the error says the credentials were refused"
            )
        }
    }
}
