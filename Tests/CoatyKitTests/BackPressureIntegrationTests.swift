import CoatyKit
import CoatyTesting
import Synchronization
import Testing

private let hasMosquitto = MosquittoBroker.findExecutable() != nil

/// Back-pressure between agents on a real mosquitto: a slow consumer loses nothing, and a handler
/// that requests inside its own full observer's loop gets its responses (no deadlock).
@Suite(
    "Back-pressure over a real mosquitto",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: hasMosquitto, "mosquitto is not installed (apt-get install mosquitto)")
)
struct BackPressureIntegrationTests {
    /// A started agent on `broker` that decodes Lamps.
    static func agent(
        _ broker: MosquittoBroker,
        _ name: String,
        options: CommunicationManager.Options = .init()
    ) async throws -> CommunicationManager {
        let manager = try CommunicationManager.mqtt(
            url: broker.url,
            identity: Identity(name: name),
            registry: CoatyObjectRegistry([Lamp.self]),
            options: options
        )
        try await manager.start()
        return manager
    }

    /// Publishes `count` Lamps as fast as the publisher can.
    static func flood(_ publisher: CommunicationManager, count: Int) async throws {
        for index in 0..<count {
            try await publisher.publishAdvertise(Lamp(name: "lamp \(index)", isOn: index % 2 == 0))
        }
    }

    @Test("A consumer slower than the stream gets every event, in order; reading was held, nothing dropped")
    func aSlowConsumerLosesNothing() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let consumer = try await Self.agent(broker, "slow", options: .init(observerBufferLimit: 64))
        let publisher = try await Self.agent(broker, "fast")
        let lamps = try consumer.observeAdvertise(Lamp.self)
        await lamps.subscribed()

        let count = 5000
        let flooding = Task { try await Self.flood(publisher, count: count) }
        var names: [String] = []
        for await lamp in lamps {
            names.append(lamp.object.name)
            if names.count % 100 == 0 { try await Task.sleep(for: .milliseconds(20)) }  // a slow consumer
            if names.count == count { break }
        }
        try await flooding.value
        #expect(names == (0..<count).map { "lamp \($0)" })
        #expect(consumer.statistics.observerOverflow == 0)
        #expect(consumer.statistics.readHolds > 0, "the consumer was slower: reading must have been held")
        await consumer.stop()
        await publisher.stop()
    }

    @Test("A handler that Discovers inside its full observer's loop gets every Resolve; nothing is dropped")
    func aNestedRequestUnderBackPressure() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let handler = try await Self.agent(broker, "handler", options: .init(observerBufferLimit: 8))
        let responder = try await Self.agent(broker, "responder")
        let publisher = try await Self.agent(broker, "publisher")
        let lamps = try handler.observeAdvertise(Lamp.self)
        await lamps.subscribed()

        let count = 2000
        let flooding = Task { try await Self.flood(publisher, count: count) }
        var received = 0
        var resolved = 0
        for await _ in lamps {
            received += 1
            if received % 200 == 1 {
                // The observer is full behind this await: the Resolve must still arrive.
                let resolve = try await handler.publishDiscover(.objectId(responder.identity.objectId))
                    .first(timeout: .seconds(20))
                #expect(resolve?.data.object?.name == "responder")
                if resolve != nil { resolved += 1 }
            }
            if received == count { break }
        }
        try await flooding.value
        #expect(received == count)
        #expect(resolved == 10)
        #expect(handler.statistics.observerOverflow == 0)
        #expect(handler.statistics.readHolds > 0, "the observer was full: reading was held between the requests")
        await handler.stop()
        await responder.stop()
        await publisher.stop()
    }

    @Test("A stalled consumer is reported (warning and statistics) and keeps its events by default")
    func aStalledConsumerIsReported() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let consumer = try await Self.agent(
            broker,
            "stalled",
            options: .init(observerBufferLimit: 16, stallTimeout: .milliseconds(300))
        )
        let publisher = try await Self.agent(broker, "pub")
        let lamps = try consumer.observeAdvertise(Lamp.self)
        await lamps.subscribed()
        let count = 200
        try await Self.flood(publisher, count: count)
        let deadline = ContinuousClock.now + .seconds(20)
        while consumer.statistics.observerStalls == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(consumer.statistics.observerStalls > 0)
        var received = 0
        for await _ in lamps {
            received += 1
            if received == count { break }
        }
        #expect(received == count, "the stall lost nothing")
        #expect(lamps.detachment == nil)
        await consumer.stop()
        await publisher.stop()
    }
}
