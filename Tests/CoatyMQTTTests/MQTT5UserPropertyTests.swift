import AgentProcessTestSupport
import CoatyTesting
import Foundation
import Testing

@testable import CoatyMQTT

/// MQTT 5 user properties through the shim, against a real mosquitto started by each test.
@Suite struct MQTT5UserPropertyTests {
    static let properties = [
        MQTTUserProperty(name: "traceparent", value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        MQTTUserProperty(name: "tracestate", value: "vendor=é,other=1"),
        MQTTUserProperty(name: "traceparent", value: "a repeated name, kept in order"),
        MQTTUserProperty(name: "", value: ""),
    ]

    /// Properties travel at QoS 0 and 1, in order, repeated names and empty strings included, to an MQTT 5
    /// subscriber; an MQTT 3.1.1 subscriber gets the same messages without them (the broker drops them).
    @Test func userPropertiesReachMQTT5SubscribersOnly() async throws {
        let broker = try await MosquittoBroker.start()
        let subscriber5 = try await connectedClient(broker.url, "up-sub5") { $0.protocolVersion = .v5 }
        let subscriber3 = try await connectedClient(broker.url, "up-sub3")
        try await subscriber5.subscribe("up/#")
        try await subscriber3.subscribe("up/#")
        let publisher = try await connectedClient(broker.url, "up-pub") { $0.protocolVersion = .v5 }
        try await publisher.publish(MQTTMessage(topic: "up/0", payload: [0], userProperties: Self.properties))
        try await publisher.publish(
            MQTTMessage(topic: "up/1", payload: [1], qos: .atLeastOnce, userProperties: Self.properties)
        )
        try await publisher.publish(MQTTMessage(topic: "up/plain", payload: [2]))
        let received5 = try await receive(subscriber5, count: 3)
        #expect(received5.map(\.topic) == ["up/0", "up/1", "up/plain"])
        #expect(received5.map(\.payload) == [[0], [1], [2]])
        #expect(received5[0].userProperties == Self.properties)
        #expect(received5[1].userProperties == Self.properties)
        #expect(received5[2].userProperties.isEmpty)
        let received3 = try await receive(subscriber3, count: 3)
        #expect(received3.map(\.payload) == [[0], [1], [2]])
        #expect(received3.allSatisfy { $0.userProperties.isEmpty })
        await publisher.disconnect()
        await subscriber5.disconnect()
        await subscriber3.disconnect()
        await broker.stop()
    }

    /// An MQTT 3.1.1 publisher has no place for user properties: the message goes out without them.
    @Test func anMQTT311PublisherLeavesThemOut() async throws {
        let broker = try await MosquittoBroker.start()
        let subscriber = try await connectedClient(broker.url, "up-sub") { $0.protocolVersion = .v5 }
        try await subscriber.subscribe("up3/#")
        let publisher = try await connectedClient(broker.url, "up-pub3")
        try await publisher.publish(MQTTMessage(topic: "up3/a", payload: [7], userProperties: Self.properties))
        let received = try await receive(subscriber, count: 1)
        #expect(received.first?.payload == [7])
        #expect(received.first?.userProperties == [])
        await publisher.disconnect()
        await subscriber.disconnect()
        await broker.stop()
    }

    /// A persistent session over MQTT 5 would end at every disconnect (libmosquitto 2.0 sends no session expiry
    /// interval on an asynchronous connect): refused with a clear error instead of silently not persisting.
    @Test func aPersistentSessionOverMQTT5IsRefused() async throws {
        let broker = try await MosquittoBroker.start()
        var configuration = try MQTTConfiguration(url: broker.url, clientId: uniqueClientId("up-durable"))
        configuration.protocolVersion = .v5
        configuration.cleanSession = false
        let client = MQTTClient(configuration: configuration)
        let error = await #expect(throws: MQTTError.self) { try await client.connect() }
        #expect(error?.kind == .invalidConfiguration)
        #expect(error.map { "\($0)" }?.contains("MQTT 3.1.1") == true)
        await broker.stop()
    }
}
