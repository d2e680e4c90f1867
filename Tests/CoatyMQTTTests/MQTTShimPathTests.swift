import AgentProcessTestSupport
import CoatySync
import CoatyTesting
import Foundation
import Synchronization
import Testing

@testable import CoatyMQTT

#if canImport(Glibc)
    import Glibc
#endif

/// The C shim's fast paths (the direct QoS 0 PUBLISH on a dup'd socket, the loop's own wake-up, libmosquitto without
/// its socket pair) against QoS 1, concurrent publishers, reconnects and TLS, on a real mosquitto. Every payload is
/// stamped with its publisher and index and derived from both, so a lost, doubled, reordered or garbled message
/// shows. The tests pass with any trick switched off too (`COATY_SHIM_DISABLE=all`, and the portable build).
@Suite(.serialized, .enabled(if: BrokerAvailability.shouldRun, BrokerAvailability.skipMessage))
struct MQTTShimPathTests {
    /// Whether this run may take the direct path (not switched off by `COATY_SHIM_DISABLE`).
    static let directPathOn = !MQTTClient.shimDisabledTricks.contains("direct")

    /// Sizes from 40 B to 1.2 MB: the large ones exceed the socket buffer (written in parts), and those over 1 MiB
    /// always go through libmosquitto's queue.
    static func mixedSize(_ index: Int) -> Int {
        if index % 50 == 49 { return 1_200_000 }
        if index % 10 == 3 { return 200_000 }
        return index % 3 == 0 ? 5_000 : 40
    }

    /// QoS 0 and QoS 1 publishes from many tasks at once: every message arrives exactly once, intact, in order per
    /// publisher, and with the QoS it was published with; the QoS 0 ones took the direct path.
    @Test func directAndQoS1PublishesFromManyTasksArriveExactlyOnceInOrder() async throws {
        let broker = try await MosquittoBroker.start()
        let receiver = try await connectedClient(broker.url, "mixed-sub")
        try await receiver.subscribe("mixed/#", qos: .atLeastOnce)
        let sender = try await connectedClient(broker.url, "mixed-pub")
        let (tasks, count) = (6, 150)
        let collecting = Task { try await receive(receiver, count: tasks * count, within: 90) }
        try await publishStamped(sender, "mixed", tasks: tasks, count: count, size: Self.mixedSize) {
            $0 % 4 == 1 ? .atLeastOnce : .atMostOnce
        }
        let received = try await collecting.value
        expectStamped(received, "mixed", tasks: tasks, count: count)
        #expect(
            received.allSatisfy { message in
                StampedPayload.parse(message.payload).map {
                    message.qos == ($0.index % 4 == 1 ? .atLeastOnce : .atMostOnce)
                }
                    ?? false
            },
            "every message delivered with the QoS it was published with"
        )
        if Self.directPathOn { #expect(sender.directPublishCount > 0, "QoS 0 publishes took the direct path") }
        #expect(receiver.droppedMessageCount == 0)
        #expect(sender.connectionState == .connected)
        await sender.disconnect()
        await receiver.disconnect()
    }

    /// Eight tasks publish QoS 0 messages of mixed sizes while the broker is frozen for a moment: direct writes from
    /// several threads, packets waiting in the client while the socket is full and large packets queued in
    /// libmosquitto meet. Every message arrives exactly once, intact, in order per publisher; none is unsent.
    @Test func concurrentPublishersAgainstAFullSocketLoseAndGarbleNothing() async throws {
        let broker = try await MosquittoBroker.start()
        let receiver = try await connectedClient(broker.url, "full-sub")
        try await receiver.subscribe("full/#")
        let sender = try await connectedClient(broker.url, "full-pub")
        let pid = try #require(broker.processIdentifier)
        let (tasks, count) = (8, 200)
        let collecting = Task { try await receive(receiver, count: tasks * count, within: 90) }
        #expect(Glibc.kill(pid, SIGSTOP) == 0)
        defer { Glibc.kill(pid, SIGCONT) }
        let thawing = Task {
            try? await Task.sleep(for: .milliseconds(300))
            return Glibc.kill(pid, SIGCONT)
        }
        try await publishStamped(sender, "full", tasks: tasks, count: count, size: Self.mixedSize) { _ in .atMostOnce }
        #expect(await thawing.value == 0)
        let received = try await collecting.value
        expectStamped(received, "full", tasks: tasks, count: count)
        #expect(sender.unsentMessageCount == 0)
        if Self.directPathOn { #expect(sender.directPublishCount > 0, "QoS 0 publishes took the direct path") }
        #expect(receiver.droppedMessageCount == 0)
        #expect(sender.connectionState == .connected)
        await sender.disconnect()
        await receiver.disconnect()
    }

    /// Publishers keep going while the broker ends the publisher's connection (another client takes its client
    /// id) and the client reconnects. Nothing arrives garbled; every acknowledged QoS 1 message arrives; the QoS 0
    /// messages that arrive (some may be lost with the connection) keep their order per publisher, none twice. After
    /// the reconnect the direct path writes on the new socket: a batch published then arrives whole, in order.
    @Test func publishingAcrossAForcedReconnectGarblesNothingAndReattachesTheDirectPath() async throws {
        let broker = try await MosquittoBroker.start()
        let receiver = try await connectedClient(broker.url, "takeover-sub")
        try await receiver.subscribe("takeover/#", qos: .atLeastOnce)
        let clientId = uniqueClientId("takeover-pub")
        var configuration = try MQTTConfiguration(url: broker.url, clientId: clientId)
        configuration.reconnectDelay = .milliseconds(100)
        configuration.maxReconnectDelay = .milliseconds(200)
        let sender = MQTTClient(configuration: configuration)
        try await withTimeout(15, "connect") { try await sender.connect() }
        let states = sender.connectionStates()
        let transitions = Task {
            var seen: [MQTTConnectionState] = []
            for await state in states {
                seen.append(state)
                if seen.count >= 3 { break }
            }
            return seen
        }
        let (tasks, batch) = (4, 200)
        // Collected from the start, so the broker never holds a backlog; ends with the last message of the batch
        // published after the reconnect.
        let collecting = Task {
            try await receive(
                receiver,
                until: { $0.topic == "takeover/\(tasks)" && StampedPayload.parse($0.payload)?.index == batch - 1 },
                within: 90
            )
        }
        final class Shared: Sendable {
            let acknowledged = CoatyMutex<Set<StampedPayload.Stamp>>([])
            let stop = Atomic(false)
        }
        let shared = Shared()
        let publishers = Task {
            await withTaskGroup(of: Void.self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        var index = 0
                        while !shared.stop.load(ordering: .relaxed), index < 20_000 {
                            let qos: MQTTQoS = index % 3 == 0 ? .atLeastOnce : .atMostOnce
                            let size = index % 20 == 7 ? 100_000 : 40 + index % 200
                            let payload = StampedPayload.make(task: task, index: index, size: size)
                            do {
                                try await sender.publish("takeover/\(task)", payload: payload, qos: qos)
                                if qos == .atLeastOnce {
                                    shared.acknowledged.withLock { _ = $0.insert(.init(task: task, index: index)) }
                                }
                            } catch {
                                try? await Task.sleep(for: .milliseconds(2))  // refused while reconnecting
                            }
                            index += 1
                            if index % 16 == 0 { try? await Task.sleep(for: .milliseconds(1)) }
                        }
                    }
                }
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        // Another client with the same id: the broker ends the sender's session; it reconnects 100 ms later.
        let intruder = MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientId: clientId))
        try await withTimeout(15, "the intruder to connect") { try await intruder.connect() }
        await intruder.disconnect()
        let seen = try await withTimeout(15, "the sender to reconnect") { await transitions.value }
        #expect(seen == [.connected, .reconnecting, .connected])
        try await Task.sleep(for: .milliseconds(200))
        shared.stop.store(true, ordering: .relaxed)
        await publishers.value
        // Once a QoS 1 publish is acknowledged, nothing the client queued before it waits: the batch may go direct.
        try await sender.publish("takeover/marker", payload: [1], qos: .atLeastOnce)
        let directBefore = sender.directPublishCount
        for index in 0..<batch {
            let payload = StampedPayload.make(task: tasks, index: index, size: Self.mixedSize(index))
            try await sender.publish("takeover/\(tasks)", payload: payload)
        }
        let received = try await collecting.value
        #expect(received.count > batch)
        let stamped = received.filter { $0.topic != "takeover/marker" }
        let garbled = stamped.filter { message in
            StampedPayload.parse(message.payload).map { "takeover/\($0.task)" != message.topic } ?? true
        }
        #expect(garbled.isEmpty, "garbled: \(garbled.prefix(3).map(\.topic))")
        let stamps = stamped.compactMap { StampedPayload.parse($0.payload) }
        let missing = shared.acknowledged.withLock { $0 }.subtracting(stamps)
        #expect(missing.isEmpty, "acknowledged but not received: \(missing.count)")
        for task in 0...tasks {
            let qos0 = stamped.filter { $0.topic == "takeover/\(task)" && $0.qos == .atMostOnce }
                .compactMap { StampedPayload.parse($0.payload)?.index }
            #expect(zip(qos0, qos0.dropFirst()).allSatisfy { $0 < $1 }, "QoS 0 of task \(task): in order, none twice")
        }
        let after = stamps.filter { $0.task == tasks }.map(\.index)
        #expect(after == Array(0..<batch), "the batch after the reconnect, whole and in order")
        if Self.directPathOn {
            #expect(sender.directPublishCount > directBefore, "the direct path wrote on the new connection")
        }
        #expect(receiver.droppedMessageCount == 0)
        #expect(sender.connectionState == .connected)
        await sender.disconnect()
        await receiver.disconnect()
    }

    /// The broker restarts on the same port: both clients reconnect, and the publisher's direct path writes on the
    /// new socket (not on a duplicate of the old one): QoS 0 and QoS 1 publishes from many tasks arrive exactly once,
    /// intact, in order.
    @Test func theDirectPathReattachesAfterABrokerRestart() async throws {
        let broker = try await MosquittoBroker.start()
        func client(_ prefix: String) async throws -> MQTTClient {
            try await connectedClient(broker.url, prefix) {
                $0.reconnectDelay = .milliseconds(100)
                $0.maxReconnectDelay = .milliseconds(200)
            }
        }
        let receiver = try await client("restart-sub")
        try await receiver.subscribe("restart/#", qos: .atLeastOnce)
        let sender = try await client("restart-pub")
        let (tasks, count) = (4, 100)
        var collecting = Task { try await receive(receiver, count: tasks * count, within: 60) }
        try await publishStamped(sender, "restart", tasks: tasks, count: count, size: Self.mixedSize) { _ in .atMostOnce
        }
        expectStamped(try await collecting.value, "restart", tasks: tasks, count: count)
        let directBefore = sender.directPublishCount

        await broker.stop()
        try await waitForState(sender, .reconnecting)
        try await waitForState(receiver, .reconnecting)
        try await broker.start()
        try await waitForState(receiver, .connected)  // re-subscribed
        try await waitForState(sender, .connected)

        collecting = Task { try await receive(receiver, count: tasks * count, within: 60) }
        try await publishStamped(sender, "restart", tasks: tasks, count: count, size: Self.mixedSize) {
            $0 % 4 == 1 ? .atLeastOnce : .atMostOnce
        }
        expectStamped(try await collecting.value, "restart", tasks: tasks, count: count)
        if Self.directPathOn {
            #expect(directBefore > 0)
            #expect(sender.directPublishCount > directBefore, "the direct path wrote on the new connection")
        }
        #expect(sender.unsentMessageCount == 0)
        await sender.disconnect()
        await receiver.disconnect()
        await broker.stop()
    }

    /// Over TLS the direct path is never taken (it would write plaintext into the TLS stream, and the broker would
    /// end the connection): QoS 0 and QoS 1 publishes of mixed sizes from many tasks arrive exactly once, intact, in
    /// order, with the TLS connection up throughout. The same publishes over plain TCP to the same broker do take it.
    @Test func publicationsOverTLSArriveIntactWithoutTheDirectPath() async throws {
        let directory = try TemporaryDirectory()
        let (broker, pki, tlsURL) = try await startTLSBroker(in: directory)
        let receiver = try await connectedClient(broker.url, "tls-sub")
        try await receiver.subscribe("tls/#", qos: .atLeastOnce)
        let (tasks, count) = (4, 150)
        for (url, secure) in [(tlsURL, true), (broker.url, false)] {
            let sender = try await connectedClient(url, "tls-pub") {
                if secure { $0.tls = MQTTTLSConfiguration(caFile: pki.caFile) }
            }
            let collecting = Task { try await receive(receiver, count: tasks * count, within: 90) }
            try await publishStamped(sender, "tls", tasks: tasks, count: count, size: Self.mixedSize) {
                $0 % 4 == 1 ? .atLeastOnce : .atMostOnce
            }
            expectStamped(try await collecting.value, "tls", tasks: tasks, count: count)
            if secure {
                #expect(sender.directPublishCount == 0, "no direct write on a TLS connection")
            } else if Self.directPathOn {
                #expect(sender.directPublishCount > 0, "plain TCP takes the direct path")
            }
            #expect(sender.connectionState == .connected)
            #expect(sender.unsentMessageCount == 0)
            await sender.disconnect()
        }
        await receiver.disconnect()
    }
}

/// A payload that names its publisher and index (`task:index:`) followed by bytes derived from both, so a corrupt,
/// cut or misattributed payload does not parse.
enum StampedPayload {
    /// A publisher's message number.
    struct Stamp: Hashable, Sendable {
        var task: Int
        var index: Int
    }

    /// The payload of message `index` of publisher `task`, `size` bytes long (at least its stamp).
    static func make(task: Int, index: Int, size: Int) -> [UInt8] {
        var payload = Array("\(task):\(index):".utf8)
        let body = max(0, size - payload.count)
        payload.reserveCapacity(payload.count + body)
        for offset in 0..<body { payload.append(byte(offset, task, index)) }
        return payload
    }

    /// The stamp of an intact payload, or `nil` when it is not one `make` produced.
    static func parse(_ payload: [UInt8]) -> Stamp? {
        let fields = payload.prefix(40).split(
            separator: UInt8(ascii: ":"),
            maxSplits: 2,
            omittingEmptySubsequences: false
        )
        guard fields.count == 3, let task = Int(String(decoding: fields[0], as: UTF8.self)),
            let index = Int(String(decoding: fields[1], as: UTF8.self))
        else { return nil }
        let start = fields[0].count + fields[1].count + 2
        for offset in 0..<(payload.count - start) where payload[start + offset] != byte(offset, task, index) {
            return nil
        }
        return Stamp(task: task, index: index)
    }

    private static func byte(_ offset: Int, _ task: Int, _ index: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: offset &* 31 &+ task &* 7 &+ index &* 13 &+ offset >> 8)
    }
}

/// Publishes `count` stamped messages from each of `tasks` concurrent tasks on `<prefix>/<task>`, one after the other
/// per task, with the QoS and size each index asks for.
func publishStamped(
    _ client: MQTTClient,
    _ prefix: String,
    tasks: Int,
    count: Int,
    size: @escaping @Sendable (Int) -> Int,
    qos: @escaping @Sendable (Int) -> MQTTQoS
) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for task in 0..<tasks {
            group.addTask {
                for index in 0..<count {
                    let payload = StampedPayload.make(task: task, index: index, size: size(index))
                    try await client.publish("\(prefix)/\(task)", payload: payload, qos: qos(index))
                }
            }
        }
        try await group.waitForAll()
    }
}

/// Expects exactly the messages `publishStamped` sent: each intact and on its publisher's topic, each once, in order
/// per publisher.
func expectStamped(
    _ received: [MQTTMessage],
    _ prefix: String,
    tasks: Int,
    count: Int,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let garbled = received.filter { message in
        StampedPayload.parse(message.payload).map { "\(prefix)/\($0.task)" != message.topic } ?? true
    }
    #expect(garbled.isEmpty, "garbled or misattributed: \(garbled.count)", sourceLocation: sourceLocation)
    let stamps = received.compactMap { StampedPayload.parse($0.payload) }
    for task in 0..<tasks {
        let indices = stamps.filter { $0.task == task }.map(\.index)
        let firstMisplaced = zip(indices, 0...).first { $0 != $1 }
        #expect(
            indices == Array(0..<count),
            "task \(task): \(indices.count) of \(count), first misplaced \(String(describing: firstMisplaced))",
            sourceLocation: sourceLocation
        )
    }
}
