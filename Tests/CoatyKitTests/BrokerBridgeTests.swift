import CoatyKit
import CoatySync
import CoatyTesting
import Testing

/// Counts the events of an observation, in the background.
private final class EventCount: Sendable {
    let count = CoatyMutex(0)
    var value: Int { count.withLock { $0 } }
}

@Suite(
    "Agents on two bridged mosquitto brokers",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: MosquittoBroker.findExecutable() != nil, "mosquitto is not installed (apt-get install mosquitto)")
)
struct BrokerBridgeTests {
    @Test(
        "A Discover crosses a mosquitto bridge (coaty/# both ways) exactly once and its Resolve comes back exactly once; an Advertise crosses each way once"
    )
    func discoverResolveCrossesOnce() async throws {
        let brokerA = try await MosquittoBroker.start()
        defer { Task { await brokerA.stop() } }
        // B bridges coaty/# both ways to A, as a site broker bridged to a central one.
        let brokerB = try MosquittoBroker(additionalConfiguration: [
            "connection coaty-bridge",
            "address 127.0.0.1:\(brokerA.port)",
            "remote_clientid coaty-bridge-b",
            "topic coaty/# both 0",
            "cleansession true",
            "restart_timeout 1",
        ])
        try await brokerB.start()
        defer { Task { await brokerB.stop() } }
        let deadline = ContinuousClock.now + .seconds(30)
        while !brokerA.diagnostics().contains("coaty-bridge-b") {
            try #require(ContinuousClock.now < deadline, "the bridge did not connect:\n\(brokerB.diagnostics())")
            try await Task.sleep(for: .milliseconds(50))
        }

        let requester = try CommunicationManager.mqtt(url: brokerA.url, identity: Identity(name: "requester on A"))
        let responder = try CommunicationManager.mqtt(url: brokerB.url, identity: Identity(name: "responder on B"))
        try await requester.start()
        try await responder.start()
        defer {
            Task {
                await requester.stop()
                await responder.stop()
            }
        }
        // Also counted on A's side: a Discover echoed back over the bridge would arrive twice there.
        let discoversOnA = try requester.observeDiscover()
        let discoversOnB = try responder.observeDiscover()
        let advertisesOnA = try requester.observeAdvertise(Lamp.self)
        let advertisesOnB = try responder.observeAdvertise(Lamp.self)
        for observation in [discoversOnA, discoversOnB] { await observation.subscribed() }
        for observation in [advertisesOnA, advertisesOnB] { await observation.subscribed() }
        // Subscriptions reach the other broker through the bridge's own `coaty/#` subscription,
        // which is in place once the bridge is connected.
        let (seenOnA, seenOnB, tasksOnA, tasksOnB) = (EventCount(), EventCount(), EventCount(), EventCount())
        let counting = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { for await _ in discoversOnA { seenOnA.count.withLock { $0 += 1 } } }
                group.addTask {
                    for await discover in discoversOnB where discover.data.externalId == "bridged" {
                        seenOnB.count.withLock { $0 += 1 }
                        let lamp = Lamp(name: "found", isOn: true)
                        guard let found = try? AnyCoatyObject(json: ["externalId": "bridged"], merging: lamp) else {
                            continue
                        }
                        try? await discover.resolve(object: found)
                    }
                }
                group.addTask { for await _ in advertisesOnA { tasksOnA.count.withLock { $0 += 1 } } }
                group.addTask { for await _ in advertisesOnB { tasksOnB.count.withLock { $0 += 1 } } }
            }
        }
        defer { counting.cancel() }

        // Every Resolve within 3 s after the first is collected: a loop would bring a second one.
        var resolves: [ResolveEvent] = []
        let responses = requester.publishDiscover(.externalId("bridged"))
        let collecting = Task {
            var collected: [ResolveEvent] = []
            for try await resolve in responses { collected.append(resolve) }
            return collected
        }
        let collectDeadline = ContinuousClock.now + .seconds(20)
        while seenOnB.value == 0, ContinuousClock.now < collectDeadline { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .seconds(3))
        collecting.cancel()
        resolves = (try? await collecting.value) ?? []
        #expect(seenOnB.value == 1, "the responder on B received the Discover \(seenOnB.value) times")
        #expect(seenOnA.value == 1, "the Discover reached A's own observer \(seenOnA.value) times")
        #expect(resolves.count == 1, "the requester on A received \(resolves.count) Resolves")
        #expect(resolves.first?.sourceId == responder.identity.objectId)

        // One Advertise each way.
        try await requester.publishAdvertise(Lamp(name: "from A", isOn: true))
        try await responder.publishAdvertise(Lamp(name: "from B", isOn: false))
        let advertiseDeadline = ContinuousClock.now + .seconds(20)
        while tasksOnA.value < 2 || tasksOnB.value < 2, ContinuousClock.now < advertiseDeadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .seconds(2))
        #expect(tasksOnA.value == 2, "A received \(tasksOnA.value) Lamp Advertises, expected its own and B's")
        #expect(tasksOnB.value == 2, "B received \(tasksOnB.value) Lamp Advertises, expected its own and A's")
    }
}
