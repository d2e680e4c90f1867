import CoatyMQTT
import Testing

/// Topic and configuration validation; needs no broker.
@Suite struct MQTTValidationTests {
    @Test func linksLibmosquitto() {
        #expect(libmosquittoVersion >= 1_006_000)
    }

    @Test(arguments: ["", "a/+/b", "a/#", "#", "+", "nul\u{0}byte", String(repeating: "x", count: 65_536)])
    func invalidPublishTopicsAreRejected(topic: String) async throws {
        #expect(throws: MQTTTopicError.self) { try MQTTTopicFilter.validateTopicName(topic) }
        let client = MQTTClient(configuration: try MQTTConfiguration(url: "mqtt://127.0.0.1:1", clientId: "v"))
        let error = await #expect(throws: MQTTError.self) { try await client.publish(topic, payload: [1]) }
        #expect(error?.kind == .invalidTopic)
    }

    @Test(arguments: [Duration.seconds(1), .seconds(4), .milliseconds(4999), .seconds(65_536), .seconds(-5)])
    func keepAliveOutOfLibmosquittosRangeIsAConfigurationError(keepAlive: Duration) async throws {
        var configuration = try MQTTConfiguration(url: "mqtt://127.0.0.1:1", clientId: "k")
        configuration.keepAlive = keepAlive
        let client = MQTTClient(configuration: configuration)
        let error = await #expect(throws: MQTTError.self) { try await client.connect() }
        #expect(error?.kind == .invalidConfiguration)
        #expect(error?.message.contains("keep-alive") == true)
    }

    @Test(arguments: ["a", "a/b", "/", "a//b", "$SYS/x", "ünïcode/topic", String(repeating: "x", count: 65_535)])
    func validPublishTopicsAreAccepted(topic: String) throws {
        try MQTTTopicFilter.validateTopicName(topic)
    }

    @Test(arguments: [
        "", "a/b+", "a/+b/c", "a/#/b", "a#", "#/a", "a/b#", "nul\u{0}", String(repeating: "x", count: 65_536),
    ])
    func invalidFiltersAreRejected(filter: String) async throws {
        #expect(throws: MQTTTopicError.self) { try MQTTTopicFilter.validate(filter) }
        let client = MQTTClient(configuration: try MQTTConfiguration(url: "mqtt://127.0.0.1:1", clientId: "v"))
        let error = await #expect(throws: MQTTError.self) { try await client.subscribe(filter) }
        #expect(error?.kind == .invalidTopic)
        let unsubscribeError = await #expect(throws: MQTTError.self) { try await client.unsubscribe(filter) }
        #expect(unsubscribeError?.kind == .invalidTopic)
    }

    @Test(arguments: ["#", "+", "a/+", "+/+", "a/#", "+/b/#", "/#", "a//+", "coaty/3/-/ADV:Task/+", "$SYS/#"])
    func validFiltersAreAccepted(filter: String) throws {
        try MQTTTopicFilter.validate(filter)
    }

    @Test(arguments: [
        ("a/b", "a/b", true), ("a/b", "a/+", true), ("a/b/c", "a/+", false), ("a", "a/#", true),
        ("a/b/c", "a/#", true), ("b", "a/#", false), ("/x", "+/x", true), ("$SYS/x", "#", false),
        ("$SYS/x", "$SYS/#", true), ("a/b", "#", true), ("a//b", "a/+/b", true),
    ])
    func topicMatching(topic: String, filter: String, expected: Bool) {
        #expect(MQTTTopicFilter.matches(topic: topic, filter: filter) == expected)
    }

    @Test(arguments: [
        ("mqtt://127.0.0.1:1883", "127.0.0.1", 1883, false),
        ("mqtt://broker.example", "broker.example", 1883, false),
        ("mqtts://broker.example", "broker.example", 8883, true),
        ("mqtts://10.0.0.1:18883/", "10.0.0.1", 18883, true),
        ("tcp://localhost:1", "localhost", 1, false),
        ("mqtt://[::1]:1884", "::1", 1884, false),
    ])
    func validURLs(url: String, host: String, port: Int, secure: Bool) throws {
        let configuration = try MQTTConfiguration(url: url, clientId: "c")
        #expect(configuration.host == host)
        #expect(configuration.port == port)
        #expect((configuration.tls != nil) == secure)
        #expect(configuration.tls?.verifyServer != false)
        #expect(configuration.protocolVersion == .v311)
        #expect(configuration.cleanSession)
        #expect(configuration.keepAlive == .seconds(60))
    }

    @Test func credentialsInURL() throws {
        let configuration = try MQTTConfiguration(url: "mqtt://user:pa:ss@host:1", clientId: "c")
        #expect(configuration.username == "user")
        #expect(configuration.password == "pa:ss")
        #expect(configuration.url == "mqtt://host:1")
    }

    @Test(arguments: [
        "", "127.0.0.1:1883", "http://host:1", "mqtt://", "mqtt://host:0", "mqtt://host:70000",
        "mqtt://host:abc", "mqtt://host/path", "mqtt://[::1",
    ])
    func invalidURLs(url: String) {
        let error = #expect(throws: MQTTError.self) { try MQTTConfiguration(url: url, clientId: "c") }
        #expect(error?.kind == .invalidConfiguration)
        #expect(error?.message.contains(url) == true)
    }

    @Test func invalidClientId() {
        let error = #expect(throws: MQTTError.self) { try MQTTConfiguration(url: "mqtt://h", clientId: "") }
        #expect(error?.kind == .invalidConfiguration)
    }

    @Test func missingTLSFileSurfacesAtConnect() async throws {
        var configuration = try MQTTConfiguration(url: "mqtts://127.0.0.1:1", clientId: "tls")
        configuration.tls = MQTTTLSConfiguration(caFile: "/nonexistent/ca.crt")
        let client = MQTTClient(configuration: configuration)
        let error = await #expect(throws: MQTTError.self) { try await client.connect() }
        #expect(error?.kind == .invalidConfiguration)
    }
}
