import CoatyKit
import CoatyTesting
import Foundation
import Testing

/// The reliability rules of the protocol against a real mosquitto: broker restarts with deferred
/// publications, namespaces, and many requests in flight.
@Suite(
    "Agent reliability over a real mosquitto",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: MosquittoBroker.findExecutable() != nil || ProcessInfo.processInfo.environment["CI"] == "true")
)
struct AgentReliabilityTests {
    /// An agent over MQTT (to `broker`, or to `url` when given) whose reconnect attempts wait `reconnectDelay`.
    func agent(
        _ broker: MosquittoBroker,
        url: String? = nil,
        name: String,
        namespace: String = CoatyTopic.defaultNamespace,
        crossNamespacing: Bool = false,
        reconnectDelay: Duration = .milliseconds(200)
    ) throws -> CommunicationManager {
        let identity = Identity(name: name)
        var configuration = try MQTTConfiguration(
            url: url ?? broker.url,
            clientId: CoatyConnection.clientId(identityId: identity.objectId)
        )
        configuration.reconnectDelay = reconnectDelay
        configuration.maxReconnectDelay = reconnectDelay
        return try CommunicationManager(
            transport: MQTTTransport(configuration: configuration),
            identity: identity,
            registry: CoatyObjectRegistry([Lamp.self]),
            options: .init(namespace: namespace, crossNamespacing: crossNamespacing)
        )
    }

    /// Waits until `manager` reports `state`.
    func waitFor(_ state: CommunicationState, of manager: CommunicationManager) async {
        for await current in manager.communicationStates() where current == state { return }
    }

    @Test(
        "After a broker restart an agent reconnects, sends what it published offline in order, and its observations deliver again"
    )
    func brokerRestartWithDeferredPublications() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        // The publisher goes through a proxy that refuses its reconnection until the test's
        // subscriber is there (a fixed reconnect delay raced with that subscription on a loaded machine).
        let proxy = try await FaultInjectingProxy(targetPort: broker.port)
        defer { Task { await proxy.stop() } }
        let publisher = try agent(broker, url: proxy.mqttURL, name: "publisher")
        let observer = try agent(broker, name: "observer")
        try await publisher.start()
        try await observer.start()
        let lamps = try observer.observeAdvertise(Lamp.self)
        await lamps.subscribed()

        await proxy.refuseConnections(for: .seconds(3600))
        await broker.stop()
        await waitFor(.offline, of: publisher)
        for i in 0..<5 { try await publisher.publishAdvertise(Lamp(name: "offline \(i)", isOn: true)) }
        // A custom object type is advertised twice: on its core type and on its object type.
        #expect(publisher.statistics.deferredPending == 10)

        try await broker.start()
        let raw = MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientId: "restart-watcher"))
        try await raw.connect()
        try await raw.subscribe("coaty/3/-/ADV::com.example.Lamp/+")
        await proxy.passThrough()
        var names: [String] = []
        for try await message in raw.messages {
            let json = try JSONValue(parsing: message.payload)
            names.append(json["object"]?["name"]?.stringValue ?? "")
            if names.count == 5 { break }
        }
        #expect(names == (0..<5).map { "offline \($0)" })
        #expect(publisher.statistics.deferredPending == 0)
        await raw.disconnect()

        // The observer resubscribed on its reconnection: a new Advertise reaches it.
        let received = Task { () -> Bool in
            for await event in lamps where event.object.name == "after restart" { return true }
            return false
        }
        await waitFor(.online, of: observer)
        let publishing = Task {
            for _ in 0..<100 {
                try await publisher.publishAdvertise(Lamp(name: "after restart", isOn: false))
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        let timeout = Task {
            try await Task.sleep(for: .seconds(20))
            received.cancel()
        }
        #expect(await received.value)
        publishing.cancel()
        timeout.cancel()
        await publisher.stop()
        await observer.stop()
    }

    @Test("Events of another namespace are not received, unless cross-namespacing is on")
    func crossNamespacing() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let publisher = try agent(broker, name: "one", namespace: "one")
        let local = try agent(broker, name: "two", namespace: "two")
        let cross = try agent(broker, name: "cross", namespace: "two", crossNamespacing: true)
        for manager in [publisher, local, cross] { try await manager.start() }
        let localLamps = try local.observeAdvertise(Lamp.self)
        let crossLamps = try cross.observeAdvertise(Lamp.self)
        await localLamps.subscribed()
        await crossLamps.subscribed()

        try await publisher.publishAdvertise(Lamp(name: "from one", isOn: true))
        var crossIterator = crossLamps.makeAsyncIterator()
        let crossed = await crossIterator.next()
        #expect(crossed?.object.name == "from one")
        #expect(crossed?.topic.namespace == "one")

        // Same namespace reaches the local observer; the earlier one never did (FIFO per client).
        try await cross.publishAdvertise(Lamp(name: "from two", isOn: true))
        var localIterator = localLamps.makeAsyncIterator()
        #expect(await localIterator.next()?.object.name == "from two")
        for manager in [publisher, local, cross] { await manager.stop() }
    }

    @Test("1000 concurrent Calls in flight each get their own Return")
    func concurrentCalls() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let requester = try agent(broker, name: "requester")
        let responder = try agent(broker, name: "responder")
        try await requester.start()
        try await responder.start()
        let calls = try responder.observeCall(operation: "com.example.echo")
        await calls.subscribed()
        let answering = Task {
            for await call in calls {
                try? await call.returnResult(call.data.parameter("n") ?? .null)
            }
        }
        let results = try await withThrowingTaskGroup(of: (Int64, JSONValue?).self) { group in
            for n in Int64(0)..<1000 {
                group.addTask {
                    let response = try await requester.publishCall(
                        "com.example.echo",
                        data: CallEventData(parameters: ["n": .int(n)])
                    ).first(timeout: .seconds(60))
                    return (n, response?.data.result)
                }
            }
            var results: [Int64: JSONValue?] = [:]
            for try await (n, result) in group { results[n] = result }
            return results
        }
        #expect(results.count == 1000)
        #expect(results.allSatisfy { $0.value == .int($0.key) })
        // Every response topic was subscribed right behind its Call and is unsubscribed again.
        let transport = try #require(requester.transport as? MQTTTransport)
        let deadline = ContinuousClock.now + .seconds(10)
        while transport.subscribedFilters.keys.contains(where: { $0.contains("/RTN/") }),
            ContinuousClock.now < deadline
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(!transport.subscribedFilters.keys.contains { $0.contains("/RTN/") })
        answering.cancel()
        await requester.stop()
        await responder.stop()
    }
}
