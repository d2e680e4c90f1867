import CoatyCore
import CommunicationTestSupport
import CoatyTesting
import InMemoryLogging
import Logging
import MetricsTestKit
import Testing

extension InMemoryLogHandler {
    /// How many entries at `level` have a message containing `text`.
    func count(_ level: Logger.Level, containing text: String) -> Int {
        entries.filter { $0.level == level && "\($0.message)".contains(text) }.count
    }
}

@Suite(
    "Dropped input: logged at debug, counted in coaty_communication_dropped_total by reason",
    .timeLimit(.minutes(1))
)
struct DropAccountingTests {
    @Test("Invalid topics, payloads and responses, and observer and deferred-queue overflows")
    func droppedInputIsLoggedAndCounted() async throws {
        let broker = InProcessBroker()
        var records = InMemoryLogHandler()
        records.logLevel = .debug
        let metrics = TestMetrics()
        let identity = Identity(name: "counted")
        let manager = try CommunicationManager(
            transport: broker.makeTransport(clientId: CoatyConnection.clientId(identityId: identity.objectId)),
            identity: identity,
            options: .init(deferredPublicationLimit: 1, observerBufferLimit: 2),
            logger: Logger(label: "test") { [records] _ in records },
            metricsFactory: metrics
        )
        func dropped(_ reason: String) throws -> Int64 {
            try metrics.expectCounter("coaty_communication_dropped_total", [("reason", reason)]).totalValue
        }
        try await manager.start()
        let observation = try manager.observeAdvertise(coreType: .task).buffering(.dropOldest(2))
        await observation.subscribed()

        // Invalid topic and invalid payload.
        let source = CoatyUUID()
        broker.publish(TransportMessage(topic: "coaty/3/-/ADV:Task/not-a-uuid", payload: Array("{}".utf8)))
        broker.publish(TransportMessage(topic: "coaty/3/-/ADV:Task/\(source)", payload: Array("{".utf8)))
        // The metric and the log entry follow the statistics: wait for all of them.
        await waitUntil {
            (try? dropped("invalid_topic")) == 1 && (try? dropped("invalid_payload")) == 1
                && records.count(.debug, containing: "invalid payload") == 1
                && records.count(.debug, containing: "invalid Coaty topic") == 1
        }
        #expect(try dropped("invalid_topic") == 1)
        #expect(try dropped("invalid_payload") == 1)
        #expect(records.count(.debug, containing: "invalid Coaty topic") == 1)
        #expect(records.count(.debug, containing: "invalid payload") == 1)

        // Observer overflow (an opt-in drop policy): three events for a buffer of two, none consumed yet.
        let task = CoatyTask(name: "t", status: .pending, creatorId: source, creationTimestamp: 1)
        let payload = AdvertiseEventData(object: try AnyCoatyObject(task)).payloadBytes
        for _ in 0..<3 { broker.publish(TransportMessage(topic: "coaty/3/-/ADV:Task/\(source)", payload: payload)) }
        await waitUntil {
            (try? dropped("observer_overflow")) == 1 && records.count(.warning, containing: "drop policy") == 1
        }
        #expect(manager.statistics.observerOverflow == 1)
        #expect(
            records.count(.warning, containing: "drop policy") == 1,
            "every drop policy's drop is logged at warning"
        )
        #expect(try dropped("observer_overflow") == 1)

        // Invalid response: a Resolve whose object does not match the Discover's core types.
        let responder = try TestAgent(broker)
        try await responder.manager.start()
        let discovers = try responder.manager.observeDiscover()
        await discovers.subscribed()
        let answering = Task {
            for await discover in discovers where discover.sourceId == identity.objectId {
                try? await discover.resolve(object: Light(name: "not a task", isOn: true))
                try? await discover.resolve(object: task)
            }
        }
        // The valid answer comes after the invalid one (one client's messages keep their order).
        let resolves = try await manager.publishDiscover(.coreTypes([.task])).responses(limit: 1).collect()
        #expect(resolves.map(\.data.object?.objectId) == [task.objectId])
        #expect(try dropped("invalid_response") == 1)
        #expect(records.count(.debug, containing: "does not answer its request") == 1)
        answering.cancel()

        // Deferred-queue overflow: two publications while offline, room for one.
        broker.goOffline()
        await awaitState(manager, .offline)
        try await manager.publishChannel("c", objects: [])
        try await manager.publishChannel("c", objects: [])
        #expect(try dropped("deferred_overflow") == 1)
        #expect(records.count(.debug, containing: "Deferred publication queue full") == 1)
        broker.goOnline()
        await awaitState(manager, .online)

        #expect(manager.statistics.invalidTopics == 1)
        #expect(manager.statistics.invalidPayloads == 1)
        #expect(manager.statistics.invalidResponses == 1)
        withExtendedLifetime(observation) {}
        await responder.manager.stop()
        await manager.stop()
    }
}
