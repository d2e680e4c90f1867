import CoatyCore
import CoatyTesting
import CoatySync
import Testing

/// Reads `count` messages from a transport's mailbox.
func receive(_ transport: InProcessTransport, count: Int) async -> [TransportMessage] {
    var received: [TransportMessage] = []
    received.reserveCapacity(count)
    guard count > 0 else { return received }
    for await message in transport.messages {
        received.append(message)
        if received.count == count { break }
    }
    return received
}

/// Reads `count` states from a connection state sequence iterator.
func states(
    _ iterator: inout InProcessTransport.ConnectionStates.AsyncIterator,
    count: Int
) async -> [TransportConnectionState] {
    var result: [TransportConnectionState] = []
    while result.count < count, let state = await iterator.next() {
        result.append(state)
    }
    return result
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// A connected transport.
func connected(_ broker: InProcessBroker, _ clientId: String, will: TransportMessage? = nil) async throws
    -> InProcessTransport
{
    let transport = broker.makeTransport(clientId: clientId)
    try await transport.connect(will: will)
    return transport
}

@Suite("In-process broker")
struct InProcessBrokerTests {
    struct Delivery: Sendable, CustomStringConvertible {
        var filter: String
        var topic: String
        var delivered: Bool
        var description: String { "\(filter) \(delivered ? "→" : "↛") \(topic)" }
    }

    static let deliveries: [Delivery] = [
        Delivery(filter: "a/b", topic: "a/b", delivered: true),
        Delivery(filter: "a/b", topic: "a/c", delivered: false),
        Delivery(filter: "a/+", topic: "a/b", delivered: true),
        Delivery(filter: "a/+", topic: "a/b/c", delivered: false),
        Delivery(filter: "a/#", topic: "a", delivered: true),
        Delivery(filter: "a/#", topic: "a/b/c", delivered: true),
        Delivery(filter: "#", topic: "x/y", delivered: true),
        Delivery(filter: "#", topic: "$SYS/load", delivered: false),
        Delivery(filter: "+/load", topic: "$SYS/load", delivered: false),
        Delivery(filter: "$SYS/#", topic: "$SYS/load", delivered: true),
        Delivery(
            filter: "coaty/3/+/ADV:Task/+",
            topic: "coaty/3/ns/ADV:Task/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
            delivered: true
        ),
        Delivery(
            filter: "coaty/3/-/DSC/+/+",
            topic: "coaty/3/-/DSC/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
            delivered: false
        ),
    ]

    @Test("wildcard subscriptions deliver with MQTT matching", arguments: deliveries)
    func wildcardDelivery(_ delivery: Delivery) async throws {
        let broker = InProcessBroker()
        let subscriber = try await connected(broker, "sub")
        let publisher = try await connected(broker, "pub")
        try await subscriber.subscribe(delivery.filter)
        try await publisher.publish(topic: delivery.topic, payload: bytes("x"))
        // Delivery is synchronous: the mailbox holds the message as soon as publish returns.
        #expect(subscriber.pendingMessageCount == (delivery.delivered ? 1 : 0))
        if delivery.delivered {
            #expect(await receive(subscriber, count: 1).map(\.topic) == [delivery.topic])
        }
        #expect(publisher.pendingMessageCount == 0)
    }

    @Test("a client receives its own publications (no echo suppression)")
    func ownEcho() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        try await agent.subscribe("coaty/3/-/ADV:Task/+")
        let topic = "coaty/3/-/ADV:Task/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        try await agent.publish(topic: topic, payload: bytes("{}"))
        let received = await receive(agent, count: 1)
        #expect(received == [TransportMessage(topic: topic, payload: bytes("{}"))])
    }

    @Test("every subscriber receives each publisher's messages in publish order, 100k messages")
    func ordering() async throws {
        let broker = InProcessBroker(configuration: .init(recordsPublications: false))
        let first = try await connected(broker, "first")
        let second = try await connected(broker, "second")
        try await first.subscribe("data/#")
        try await second.subscribe("data/+")
        let count = 100_000
        for i in 0..<count {
            try first.publishNow(
                TransportMessage(topic: i.isMultiple(of: 2) ? "data/even" : "data/odd", payload: bytes("\(i)"))
            )
        }
        for subscriber in [first, second] {
            let received = await receive(subscriber, count: count)
            #expect(received.count == count)
            let inOrder = received.enumerated().allSatisfy { index, message in message.payload == bytes("\(index)") }
            #expect(inOrder)
            #expect(subscriber.pendingMessageCount == 0)
        }
    }

    @Test("publications from several tasks arrive in the same order at every subscriber")
    func sameOrderEverywhere() async throws {
        let broker = InProcessBroker(configuration: .init(recordsPublications: false))
        let a = try await connected(broker, "a")
        let b = try await connected(broker, "b")
        try await a.subscribe("t/#")
        try await b.subscribe("t/#")
        let perPublisher = 2_000
        try await withThrowingTaskGroup(of: Void.self) { group in
            for p in 0..<4 {
                let publisher = try await connected(broker, "p\(p)")
                group.addTask {
                    for i in 0..<perPublisher {
                        try await publisher.publish(topic: "t/\(p)", payload: bytes("\(i)"))
                    }
                }
            }
            try await group.waitForAll()
        }
        let fromA = await receive(a, count: 4 * perPublisher)
        let fromB = await receive(b, count: 4 * perPublisher)
        #expect(fromA == fromB)
        for p in 0..<4 {
            let payloads = fromA.filter { $0.topic == "t/\(p)" }.map(\.payload)
            #expect(payloads == (0..<perPublisher).map { bytes("\($0)") })
        }
    }

    @Test("unsubscribe stops delivery; other matching subscriptions still deliver")
    func unsubscribe() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        try await agent.subscribe("a/+")
        try await agent.subscribe("a/b")
        try await agent.unsubscribe("a/+")
        try await agent.publish(topic: "a/c", payload: bytes("1"))
        #expect(agent.pendingMessageCount == 0)
        try await agent.publish(topic: "a/b", payload: bytes("2"))
        #expect(await receive(agent, count: 1).map(\.payload) == [bytes("2")])
        try await agent.unsubscribe("a/b")
        try await agent.unsubscribe("never/subscribed")
        try await agent.publish(topic: "a/b", payload: bytes("3"))
        #expect(agent.pendingMessageCount == 0)
        #expect(broker.subscriptions(ofClient: "agent").isEmpty)
    }

    @Test("overlapping subscriptions deliver one copy each by default, one in total when configured")
    func overlappingSubscriptions() async throws {
        for perSubscription in [true, false] {
            let broker = InProcessBroker(configuration: .init(deliversCopyPerMatchingSubscription: perSubscription))
            let agent = try await connected(broker, "agent")
            try await agent.subscribe("a/#")
            try await agent.subscribe("a/+")
            try await agent.subscribe("a/+")  // the same filter twice is one subscription
            try await agent.publish(topic: "a/b", payload: bytes("x"))
            #expect(agent.pendingMessageCount == (perSubscription ? 2 : 1))
            #expect(broker.subscriptions(ofClient: "agent") == ["a/#", "a/+"])
        }
    }

    @Test("the delivered QoS is the lower of publication and subscription QoS")
    func qosDowngrade() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        try await agent.subscribe("q/low", qos: .atMostOnce)
        try await agent.subscribe("q/high", qos: .exactlyOnce)
        try await agent.publish(TransportMessage(topic: "q/low", payload: [1], qos: .atLeastOnce))
        try await agent.publish(TransportMessage(topic: "q/high", payload: [2], qos: .atLeastOnce))
        #expect(await receive(agent, count: 2).map(\.qos) == [.atMostOnce, .atLeastOnce])
    }

    @Test("invalid topics and filters are rejected")
    func invalidTopics() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        await #expect(throws: TransportError.invalidTopic("a/#", .wildcardInTopicName)) {
            try await agent.publish(topic: "a/#", payload: [])
        }
        await #expect(throws: TransportError.invalidTopic("a#", .misplacedWildcard)) {
            try await agent.subscribe("a#")
        }
        await #expect(throws: TransportError.invalidTopic("", .empty)) {
            try await agent.unsubscribe("")
        }
        #expect(broker.publications.isEmpty)
    }

    // MARK: Retained messages

    @Test("retained messages reach later subscribers flagged retain, and can be cleared")
    func retained() async throws {
        let broker = InProcessBroker()
        let publisher = try await connected(broker, "pub")
        let early = try await connected(broker, "early")
        try await early.subscribe("r/#")
        try await publisher.publish(TransportMessage(topic: "r/1", payload: bytes("one"), retain: true))
        try await publisher.publish(TransportMessage(topic: "r/2", payload: bytes("two"), retain: true))
        try await publisher.publish(TransportMessage(topic: "r/2", payload: bytes("two'"), retain: true))
        // Established subscriptions get retain == false.
        #expect(await receive(early, count: 3).map(\.retain) == [false, false, false])
        #expect(broker.retainedMessages.map(\.topic) == ["r/1", "r/2"])

        let late = try await connected(broker, "late")
        try await late.subscribe("r/+")
        let replay = await receive(late, count: 2)
        #expect(replay.map(\.topic) == ["r/1", "r/2"])
        #expect(replay.map(\.payload) == [bytes("one"), bytes("two'")])
        #expect(replay.allSatisfy { $0.retain })

        // An empty retained payload clears the topic.
        try await publisher.publish(TransportMessage(topic: "r/1", payload: [], retain: true))
        #expect(broker.retainedMessages.map(\.topic) == ["r/2"])
        let later = try await connected(broker, "later")
        try await later.subscribe("r/1")
        #expect(later.pendingMessageCount == 0)
    }

    @Test("retained messages are lost on restart unless the broker persists them")
    func retainedAcrossRestart() async throws {
        for persistent in [false, true] {
            let broker = InProcessBroker(configuration: .init(keepsRetainedMessagesAcrossRestarts: persistent))
            let publisher = try await connected(broker, "pub")
            try await publisher.publish(TransportMessage(topic: "r", payload: [1], retain: true))
            broker.simulateRestart()
            #expect(broker.retainedMessages.count == (persistent ? 1 : 0))
        }
    }

    // MARK: Last will

    @Test("the will is published when a client is killed, not on a clean disconnect")
    func willOnKill() async throws {
        let broker = InProcessBroker()
        let observer = try await connected(broker, "observer")
        try await observer.subscribe("coaty/3/-/DAD/+")
        let will = TransportMessage(
            topic: "coaty/3/-/DAD/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
            payload: bytes(#"{"objectIds":["0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"]}"#)
        )

        let clean = try await connected(broker, "clean", will: will)
        await clean.disconnect()
        #expect(clean.connectionState == .disconnected)
        #expect(observer.pendingMessageCount == 0)
        #expect(broker.publications.isEmpty)

        let killed = try await connected(broker, "killed", will: will)
        killed.kill()
        #expect(killed.connectionState == .disconnected)
        #expect(await receive(observer, count: 1) == [will])
        #expect(broker.publications == [InProcessBroker.Publication(clientId: "killed", message: will, isWill: true)])
        // A killed client does not reconnect by itself.
        broker.simulateRestart()
        #expect(killed.connectionState == .disconnected)
    }

    @Test("a connection loss publishes the will and the client reconnects with its subscriptions")
    func connectionLoss() async throws {
        let broker = InProcessBroker()
        let observer = try await connected(broker, "observer")
        try await observer.subscribe("will/#")
        let agent = try await connected(broker, "agent", will: TransportMessage(topic: "will/agent", payload: [9]))
        try await agent.subscribe("data")
        var stateIterator = agent.connectionStates().makeAsyncIterator()

        agent.simulateConnectionLoss()
        #expect(await receive(observer, count: 1).map(\.topic) == ["will/agent"])
        #expect(await states(&stateIterator, count: 3) == [.connected, .reconnecting, .connected])
        try await observer.publish(topic: "data", payload: [1])
        #expect(await receive(agent, count: 1).map(\.payload) == [[1]])
    }

    @Test("a connection loss without reconnect waits for restoreConnection")
    func connectionLossUntilRestored() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        try await agent.subscribe("data")
        agent.simulateConnectionLoss(reconnect: false)
        #expect(agent.connectionState == .reconnecting)
        #expect(broker.connectedClientIds.isEmpty)
        await #expect(throws: TransportError.notConnected) { try await agent.publish(topic: "data", payload: []) }
        broker.simulateRestart()
        #expect(agent.connectionState == .reconnecting)
        agent.restoreConnection()
        #expect(agent.connectionState == .connected)
        try await agent.publish(topic: "data", payload: [2])
        #expect(await receive(agent, count: 1).map(\.payload) == [[2]])
    }

    @Test("updating the will reconnects without publishing the old will; the new will applies")
    func updateWill() async throws {
        let broker = InProcessBroker()
        let observer = try await connected(broker, "observer")
        try await observer.subscribe("will/#")
        let agent = try await connected(broker, "agent", will: TransportMessage(topic: "will/old", payload: [1]))
        var stateIterator = agent.connectionStates().makeAsyncIterator()
        try await agent.updateWill(TransportMessage(topic: "will/new", payload: [2]))
        #expect(await states(&stateIterator, count: 3) == [.connected, .reconnecting, .connected])
        #expect(observer.pendingMessageCount == 0)
        agent.kill()
        #expect(await receive(observer, count: 1).map(\.topic) == ["will/new"])
    }

    @Test("updating the will silently when so configured")
    func updateWillSilently() async throws {
        let broker = InProcessBroker(configuration: .init(reconnectsToUpdateWill: false))
        let agent = try await connected(broker, "agent", will: TransportMessage(topic: "will/old", payload: [1]))
        try await agent.updateWill(nil)
        #expect(agent.connectionState == .connected)
        agent.kill()
        #expect(broker.publications.isEmpty)
    }

    // MARK: Broker availability

    @Test("broker offline: clients reconnect when it comes back and keep their subscriptions")
    func brokerOfflineOnline() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent", will: TransportMessage(topic: "will", payload: [0]))
        try await agent.subscribe("x/+")
        var stateIterator = agent.connectionStates().makeAsyncIterator()

        broker.goOffline()
        #expect(!broker.isOnline)
        #expect(agent.connectionState == .reconnecting)
        await #expect(throws: TransportError.notConnected) { try await agent.publish(topic: "x/1", payload: []) }
        #expect(!broker.publish(TransportMessage(topic: "x/1", payload: [])))
        // Subscribing while reconnecting waits for the connection; the filter is remembered at once.
        let subscribing = Task { try await agent.subscribe("y") }
        while !broker.subscriptions(ofClient: "agent").contains("y") { await Task.yield() }

        broker.goOnline()
        try await subscribing.value
        #expect(await states(&stateIterator, count: 3) == [.connected, .reconnecting, .connected])
        try await agent.publish(topic: "x/1", payload: [1])
        try await agent.publish(topic: "y", payload: [2])
        #expect(await receive(agent, count: 2).map(\.payload) == [[1], [2]])
        // The broker going away is not an unclean client disconnect: no will.
        #expect(broker.publications(matching: "will").isEmpty)
    }

    @Test("connect waits while the broker is offline and completes when it comes online")
    func connectWaitsForBroker() async throws {
        let broker = InProcessBroker()
        broker.goOffline()
        let agent = broker.makeTransport(clientId: "agent")
        var stateIterator = agent.connectionStates().makeAsyncIterator()
        #expect(await states(&stateIterator, count: 1) == [.disconnected])
        let connecting = Task { try await agent.connect(will: nil) }
        #expect(await states(&stateIterator, count: 1) == [.connecting])
        broker.goOnline()
        try await connecting.value
        #expect(await states(&stateIterator, count: 1) == [.connected])
        try await agent.subscribe("s")
        try await agent.publish(topic: "s", payload: [7])
        #expect(await receive(agent, count: 1).map(\.payload) == [[7]])
    }

    @Test("cancelling a pending connect throws CancellationError and leaves the transport disconnected")
    func connectCancelled() async throws {
        let broker = InProcessBroker()
        broker.goOffline()
        let agent = broker.makeTransport(clientId: "agent")
        var stateIterator = agent.connectionStates().makeAsyncIterator()
        let connecting = Task { try await agent.connect(will: nil) }
        #expect(await states(&stateIterator, count: 2) == [.disconnected, .connecting])
        connecting.cancel()
        await #expect(throws: CancellationError.self) { try await connecting.value }
        #expect(agent.connectionState == .disconnected)
        broker.goOnline()
        #expect(agent.connectionState == .disconnected)
    }

    @Test("disconnect while connecting stops the attempt")
    func disconnectWhileConnecting() async throws {
        let broker = InProcessBroker()
        broker.goOffline()
        let agent = broker.makeTransport(clientId: "agent")
        var stateIterator = agent.connectionStates().makeAsyncIterator()
        let connecting = Task { try await agent.connect(will: nil) }
        #expect(await states(&stateIterator, count: 2) == [.disconnected, .connecting])
        await agent.disconnect()
        await #expect(throws: TransportError.self) { try await connecting.value }
        #expect(agent.connectionState == .disconnected)
    }

    @Test("a refusing broker fails new connections and holds reconnecting clients back")
    func refusedConnections() async throws {
        let broker = InProcessBroker()
        let veteran = try await connected(broker, "veteran")
        try await veteran.subscribe("v")
        broker.refuseConnections(reason: "not authorized")

        let newcomer = broker.makeTransport(clientId: "newcomer")
        await #expect(throws: TransportError.connectionRefused(reason: "not authorized")) {
            try await newcomer.connect(will: nil)
        }
        #expect(newcomer.connectionState == .disconnected)
        #expect(veteran.connectionState == .connected)

        veteran.simulateConnectionLoss()
        #expect(veteran.connectionState == .reconnecting)
        broker.acceptConnections()
        #expect(veteran.connectionState == .connected)
        try await veteran.publish(topic: "v", payload: [1])
        #expect(await receive(veteran, count: 1).map(\.payload) == [[1]])
        try await newcomer.connect(will: nil)
        #expect(broker.connectedClientIds == ["veteran", "newcomer"])
    }

    @Test("a disconnected transport can connect again and keeps its subscriptions")
    func reconnectAfterDisconnect() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        try await agent.subscribe("k")
        await agent.disconnect()
        await #expect(throws: TransportError.notConnected) { try await agent.publish(topic: "k", payload: []) }
        try await agent.connect(will: nil)
        try await agent.connect(will: nil)  // connecting again while connected is harmless
        try await agent.publish(topic: "k", payload: [3])
        #expect(await receive(agent, count: 1).map(\.payload) == [[3]])
        #expect(broker.connectedClientIds == ["agent"])
    }

    @Test("subscribing needs a connection: before connect and after disconnect it throws")
    func subscribeNeedsConnection() async throws {
        let broker = InProcessBroker()
        let agent = broker.makeTransport(clientId: "agent")
        await #expect(throws: TransportError.notConnected) { try await agent.subscribe("a") }
        #expect(broker.subscriptions(ofClient: "agent").isEmpty)
        try await agent.connect(will: nil)
        try await agent.subscribe("a")
        await agent.disconnect()
        await #expect(throws: TransportError.notConnected) { try await agent.subscribe("b") }
        #expect(broker.subscriptions(ofClient: "agent") == ["a"])
    }

    @Test("a subscription waiting for the connection is dropped when the wait is cancelled")
    func subscribeWaitCancelled() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        broker.goOffline()
        let subscribing = Task { try await agent.subscribe("w") }
        while !broker.subscriptions(ofClient: "agent").contains("w") { await Task.yield() }
        subscribing.cancel()
        await #expect(throws: CancellationError.self) { try await subscribing.value }
        #expect(broker.subscriptions(ofClient: "agent").isEmpty)
        #expect(agent.connectionState == .reconnecting)
    }

    @Test("a subscription waiting for the connection fails when the transport disconnects")
    func subscribeWaitStopped() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        agent.simulateConnectionLoss(reconnect: false)
        let subscribing = Task { try await agent.subscribe("w") }
        while !broker.subscriptions(ofClient: "agent").contains("w") { await Task.yield() }
        await agent.disconnect()
        await #expect(throws: TransportError.notConnected) { try await subscribing.value }
        #expect(broker.subscriptions(ofClient: "agent").isEmpty)
    }

    // MARK: Consumption

    @Test("messages end after disconnect once the mailbox is drained, and resume after connect")
    func messagesEndAfterDisconnect() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        try await agent.subscribe("m")
        try await agent.publish(topic: "m", payload: [1])
        try await agent.publish(topic: "m", payload: [2])
        let consumer = Task { () -> [[UInt8]] in
            var payloads: [[UInt8]] = []
            for await message in agent.messages { payloads.append(message.payload) }
            return payloads
        }
        while agent.pendingMessageCount > 0 { await Task.yield() }
        await agent.disconnect()
        #expect(await consumer.value == [[1], [2]])

        try await agent.connect(will: nil)
        try await agent.publish(topic: "m", payload: [3])
        #expect(await receive(agent, count: 1).map(\.payload) == [[3]])
    }

    @Test("a killed transport's message sequence delivers what was buffered, then ends")
    func messagesEndAfterKill() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        try await agent.subscribe("m")
        try await agent.publish(topic: "m", payload: [1])
        agent.kill()
        var payloads: [[UInt8]] = []
        for await message in agent.messages { payloads.append(message.payload) }
        #expect(payloads == [[1]])
    }

    @Test("message iteration ends when the consuming task is cancelled")
    func iterationEndsOnCancel() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        try await agent.subscribe("m")
        try await agent.publish(topic: "m", payload: [1])
        let consumer = Task { () -> Int in
            var count = 0
            for await _ in agent.messages { count += 1 }
            return count
        }
        // The consumer gets the first message, then waits; cancelling ends the loop.
        while agent.pendingMessageCount > 0 { await Task.yield() }
        consumer.cancel()
        #expect(await consumer.value == 1)
    }

    @Test("breaking out of a loop loses no messages")
    func noLossBetweenLoops() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        try await agent.subscribe("m")
        for i in 0..<10 { try await agent.publish(topic: "m", payload: [UInt8(i)]) }
        let first = await receive(agent, count: 3)
        let rest = await receive(agent, count: 7)
        #expect((first + rest).map(\.payload) == (0..<10).map { [UInt8($0)] })
    }

    @Test("concurrent publishing, subscribing, unsubscribing and connection losses stay consistent")
    func concurrentStress() async throws {
        let broker = InProcessBroker(configuration: .init(recordsPublications: false))
        var clients: [InProcessTransport] = []
        for i in 0..<4 {
            let client = try await connected(broker, "c\(i)", will: TransportMessage(topic: "will/\(i)", payload: [1]))
            try await client.subscribe("s/#")
            clients.append(client)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (i, client) in clients.enumerated() {
                group.addTask {
                    for round in 0..<2_000 {
                        switch round % 5 {
                        case 0: try await client.subscribe("x/\(round % 7)")
                        case 1: try await client.unsubscribe("x/\((round + 3) % 7)")
                        case 2: if round % 50 == 2 { client.simulateConnectionLoss() }
                        default:
                            do {
                                try await client.publish(topic: "x/\(round % 7)", payload: [UInt8(i)])
                            } catch TransportError.notConnected {
                                // Another task's connection loss raced with this publication.
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(broker.connectedClientIds == ["c0", "c1", "c2", "c3"])
        // Every client still receives on its original subscription, after everything else it got.
        try await clients[0].publish(topic: "s/final", payload: [42])
        for client in clients {
            var last: TransportMessage?
            while client.pendingMessageCount > 0 {
                last = await receive(client, count: 1).first
            }
            #expect(last?.topic == "s/final")
        }
    }

    @Test("injected publications and the recording")
    func injectionAndRecording() async throws {
        let broker = InProcessBroker()
        let agent = try await connected(broker, "agent")
        try await agent.subscribe("#")
        #expect(broker.publish(TransportMessage(topic: "coaty/3/-/XYZ/garbage", payload: [1])))
        try await agent.publish(topic: "a/b", payload: [2])
        #expect(await receive(agent, count: 2).map(\.topic) == ["coaty/3/-/XYZ/garbage", "a/b"])
        #expect(broker.publications.map(\.clientId) == [nil, "agent"])
        #expect(broker.publications(matching: "a/+").map(\.message.payload) == [[2]])
        broker.clearPublications()
        #expect(broker.publications.isEmpty)
    }
}

/// The delivery contract of `CoatyTransport` on the in-process transport: pushed batches, in
/// order, one at a time, held while paused.
@Suite("In-process delivery to a handler")
struct InProcessDeliveryTests {
    /// Collects what a handler is given, and whether two batches ever overlapped.
    final class Collector: Sendable {
        struct State {
            var payloads: [[UInt8]] = []
            var batches = 0
            var inside = 0
            var overlapped = false
        }
        let state = CoatyMutex(State())

        func handle(_ batch: [TransportMessage]) {
            state.withLock { state in
                state.inside += 1
                if state.inside > 1 { state.overlapped = true }
                state.batches += 1
            }
            let payloads = batch.map(\.payload)
            state.withLock { state in
                state.payloads += payloads
                state.inside -= 1
            }
        }

        var payloads: [[UInt8]] { state.withLock { $0.payloads } }
    }

    @Test("messages are pushed in publish order, by the publishing task, never as an empty batch")
    func pushedInOrder() async throws {
        let broker = InProcessBroker()
        let subscriber = try await connected(broker, "sub")
        let collector = Collector()
        subscriber.deliverMessages(to: collector.handle)
        try await subscriber.subscribe("a/#")
        let publisher = try await connected(broker, "pub")
        for i in 0..<300 { try publisher.publishNow(TransportMessage(topic: "a/\(i)", payload: [UInt8(i % 256)])) }
        // Delivered by the time publish returns: the publishing task delivered it.
        #expect(collector.payloads == (0..<300).map { [UInt8($0 % 256)] })
        #expect(subscriber.pendingMessageCount == 0)
        #expect(collector.state.withLock { $0.batches } == 300)
    }

    @Test("paused, messages wait in the mailbox; resumed, they are delivered in order")
    func pauseHoldsDelivery() async throws {
        let broker = InProcessBroker()
        let subscriber = try await connected(broker, "sub")
        let collector = Collector()
        subscriber.deliverMessages(to: collector.handle)
        try await subscriber.subscribe("a")
        let publisher = try await connected(broker, "pub")
        try publisher.publishNow(TransportMessage(topic: "a", payload: [0]))
        subscriber.setReceivingPaused(true)
        #expect(subscriber.isReceivingPaused)
        for i in 1...200 { try publisher.publishNow(TransportMessage(topic: "a", payload: [UInt8(i)])) }
        #expect(collector.payloads == [[0]])
        #expect(subscriber.pendingMessageCount == 200)
        subscriber.setReceivingPaused(false)
        let deadline = ContinuousClock.now + .seconds(10)
        while collector.payloads.count < 201, ContinuousClock.now < deadline { await Task.yield() }
        #expect(collector.payloads == (0...200).map { [UInt8($0)] })
        #expect(subscriber.pendingMessageCount == 0)
    }

    @Test("a pause asked for inside the handler holds the rest of the mailbox after the batch under way")
    func pauseFromInsideTheHandler() async throws {
        let broker = InProcessBroker()
        let subscriber = try await connected(broker, "sub")
        let collector = Collector()
        try await subscriber.subscribe("a")
        let publisher = try await connected(broker, "pub")
        for i in 0..<200 { try publisher.publishNow(TransportMessage(topic: "a", payload: [UInt8(i)])) }
        // The handler set now takes the mailbox: at most one batch of 64 before the pause holds.
        subscriber.deliverMessages { [subscriber] batch in
            collector.handle(batch)
            subscriber.setReceivingPaused(true)
        }
        let first = collector.payloads.count
        #expect(first > 0 && first <= 64)
        #expect(subscriber.pendingMessageCount == 200 - first)
        #expect(collector.payloads == (0..<first).map { [UInt8($0)] })
    }

    @Test("publishers on many tasks: every message once, each publisher's in its order, batches never overlap")
    func concurrentPublishers() async throws {
        let broker = InProcessBroker()
        let subscriber = try await connected(broker, "sub")
        let collector = Collector()
        subscriber.deliverMessages(to: collector.handle)
        try await subscriber.subscribe("p/+")
        let publishers = 8
        let count = 500
        try await withThrowingTaskGroup(of: Void.self) { group in
            for p in 0..<publishers {
                let transport = try await connected(broker, "pub\(p)")
                group.addTask {
                    for i in 0..<count {
                        try await transport.publish(TransportMessage(topic: "p/\(p)", payload: [UInt8(p), UInt8(i % 256), UInt8(i / 256)]))
                    }
                }
            }
            try await group.waitForAll()
        }
        let payloads = collector.payloads
        #expect(payloads.count == publishers * count)
        for p in 0..<publishers {
            let mine = payloads.filter { $0[0] == UInt8(p) }.map { Int($0[1]) + Int($0[2]) * 256 }
            #expect(mine == Array(0..<count), "publisher \(p) in order, each once")
        }
        #expect(!collector.state.withLock { $0.overlapped })
    }
}
