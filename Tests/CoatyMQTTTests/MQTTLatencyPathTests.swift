import CoatyMQTT
import CoatySync
import CoatyTesting
import Foundation
import Synchronization
import Testing

/// Things appended from several threads, read by the test.
final class Log<Item: Sendable>: Sendable {
    private let items = CoatyMutex<[Item]>([])

    func append(_ item: Item) { items.withLock { $0.append(item) } }

    var all: [Item] { items.withLock { $0 } }
}

/// The request path without SUBACK/UNSUBACK round trips (`subscribeNow`, `unsubscribeNow`) and delivery to a
/// message handler on the network thread (`setMessageHandler(_:)`), against a real mosquitto.
@Suite(.serialized, .enabled(if: BrokerAvailability.shouldRun, BrokerAvailability.skipMessage))
struct MQTTLatencyPathTests {
    /// `subscribeNow` does not wait for the broker: with the broker frozen (SIGSTOP) it returns `true` while no
    /// SUBACK can come, and the acknowledgement arrives through the callback once the broker runs again.
    @Test func subscribeNowReturnsBeforeTheAcknowledgement() async throws {
        let broker = try await MosquittoBroker.start()
        let client = try await connectedClient(broker.url)
        let pid = try #require(broker.processIdentifier)
        let acks = Log<String>()
        #expect(kill(pid, SIGSTOP) == 0)
        let queued = client.subscribeNow("frozen/now") { error in acks.append(error == nil ? "acknowledged" : "error") }
        try? await Task.sleep(for: .milliseconds(150))
        let beforeContinuing = acks.all
        #expect(kill(pid, SIGCONT) == 0)
        #expect(queued)
        #expect(beforeContinuing.isEmpty, "no SUBACK from a frozen broker")
        try await eventually(10, "the SUBACK") { !acks.all.isEmpty }
        #expect(acks.all == ["acknowledged"])
    }

    /// While the connection is down nothing can be queued: `subscribeNow` refuses (and remembers nothing) until
    /// the client is connected again.
    @Test func subscribeNowRefusesDuringAnOutage() async throws {
        let (broker, client) = try await clientInOutage()
        #expect(!client.subscribeNow("outage/now") { _ in Issue.record("no callback after a refusal") })
        #expect(client.subscriptions["outage/now"] == nil)
        try await broker.start()
        try await waitForState(client, .connected)
        let acks = Log<Bool>()
        #expect(client.subscribeNow("outage/now") { error in acks.append(error == nil) })
        try await eventually(10, "the SUBACK after the reconnect") { !acks.all.isEmpty }
        #expect(acks.all == [true])
    }

    /// `subscribeNow` queues the SUBSCRIBE at once (a publication right behind it is delivered) and reports the
    /// SUBACK through its callback, with no task awaiting it; `unsubscribeNow` ends delivery at once (a publication
    /// right behind it is not delivered) and reports the UNSUBACK.
    @Test func subscribeNowAndUnsubscribeNow() async throws {
        let broker = try await MosquittoBroker.start()
        let client = try await connectedClient(broker.url)
        let acks = Log<String>()
        let rounds = 20
        let receiving = Task { try await receive(client, until: { $0.topic == "now/end" }, within: 20) }
        for round in 0..<rounds {
            let topic = "now/\(round)"
            #expect(client.subscribeNow(topic) { error in acks.append(error == nil ? "subscribed" : "\(error!)") })
            #expect(client.subscriptions[topic] == .atMostOnce)
            try await client.publish(topic, payload: [UInt8(round)])
            client.unsubscribeNow(topic) { error in acks.append(error == nil ? "unsubscribed" : "\(error!)") }
            #expect(client.subscriptions[topic] == nil)
            try await client.publish(topic, payload: [255])
        }
        #expect(client.subscribeNow("now/end") { _ in })
        try await client.publish("now/end", payload: [0])
        let received = try await receiving.value
        #expect(received.map(\.topic) == (0..<rounds).map { "now/\($0)" } + ["now/end"])
        #expect(!received.contains { $0.payload == [255] })
        try await eventually(10, "every acknowledgement") { acks.all.count == 2 * rounds }
        #expect(acks.all.filter { $0 == "subscribed" }.count == rounds)
        #expect(acks.all.filter { $0 == "unsubscribed" }.count == rounds)
        // An invalid filter is reported, not acknowledged.
        let invalid = Log<Bool>()
        client.unsubscribeNow("now/#/x") { error in invalid.append(error is MQTTError) }
        #expect(invalid.all == [true])
    }

    /// With a handler, every message arrives there once and in order (none through `messages`), also those
    /// received in bursts.
    @Test func messageHandlerGetsEveryMessageInOrder() async throws {
        let broker = try await MosquittoBroker.start()
        let configuration = try MQTTConfiguration(url: broker.url, clientId: uniqueClientId("handler"))
        let client = MQTTClient(configuration: configuration)
        let received = Log<String>()
        let threads = Log<Bool>()
        client.setMessageHandler { batch in
            threads.append(Thread.isMainThread)
            for message in batch { received.append(String(decoding: message.payload, as: UTF8.self)) }
        }
        try await withTimeout(15, "connect") { try await client.connect() }
        try await client.subscribe("handler/#")
        let count = 2_000
        for index in 0..<count { try await client.publish("handler/\(index % 7)", payload: Array("\(index)".utf8)) }
        try await eventually(15, "\(count) messages at the handler") { received.all.count >= count }
        #expect(received.all == (0..<count).map(String.init))
        #expect(!threads.all.isEmpty && !threads.all.contains(true))
        await client.disconnect()
        #expect(received.all.count == count)
    }

    /// The handler is never called after `disconnect()` returned (the messages received before the end are handed
    /// over first), and never twice at once, also when the client connects again right away.
    @Test func messageHandlerEndsWithTheSession() async throws {
        let broker = try await MosquittoBroker.start()
        let configuration = try MQTTConfiguration(url: broker.url, clientId: uniqueClientId("handler-end"))
        let client = MQTTClient(configuration: configuration)
        let calls = Log<Int>()
        let inFlight = Atomic<Int>(0)
        let overlaps = Atomic<Int>(0)
        client.setMessageHandler { batch in
            if inFlight.add(1, ordering: .sequentiallyConsistent).newValue > 1 {
                overlaps.add(1, ordering: .sequentiallyConsistent)
            }
            Thread.sleep(forTimeInterval: 0.005)  // widen any overlap, and keep messages waiting
            calls.append(batch.count)
            inFlight.subtract(1, ordering: .sequentiallyConsistent)
        }
        for round in 0..<3 {
            try await withTimeout(15, "connect") { try await client.connect() }
            try await client.subscribe("end/#")
            let before = calls.all.count
            for index in 0..<2_000 { try await client.publish("end/\(round)", payload: Array("\(index)".utf8)) }
            // Disconnect while the handler is busy and more messages wait in the receive buffer.
            try await eventually(10, "the first messages of round \(round)") { calls.all.count > before }
            await client.disconnect()
            let atReturn = calls.all.count
            try await Task.sleep(for: .milliseconds(150))
            #expect(calls.all.count == atReturn, "the handler was called after disconnect() returned")
        }
        #expect(overlaps.load(ordering: .sequentiallyConsistent) == 0)
    }

    /// A slow handler under a steady stream holds the network loop back instead of overflowing the receive buffer
    /// (the broker's queue takes the excess), and does not hold back acknowledgements: a `subscribe` completes while
    /// the stream still runs, and its callback lands behind the messages handled before it, in order.
    @Test func aSlowHandlerSlowsTheLoopWithoutStarvingAcknowledgements() async throws {
        let broker = try await MosquittoBroker.start()
        let configuration = try MQTTConfiguration(url: broker.url, clientId: uniqueClientId("flooded"))
        let client = MQTTClient(configuration: configuration)
        let received = Log<Int>()
        client.setMessageHandler { batch in
            Thread.sleep(forTimeInterval: 0.001)  // at most 64 messages per millisecond: slower than the flood
            for message in batch { received.append(Int(String(decoding: message.payload, as: UTF8.self)) ?? -1) }
        }
        try await withTimeout(15, "connect") { try await client.connect() }
        try await client.subscribe("flood/#")
        let publisher = try await connectedClient(broker.url, "flooder")
        let flooding = Atomic<Bool>(true)
        let flood = Task {
            var index = 0
            while flooding.load(ordering: .relaxed) && index < 2_000_000 {
                try await publisher.publish("flood/x", payload: Array("\(index)".utf8))
                index += 1
            }
            return index
        }
        try await eventually(10, "the stream at the handler") { received.all.count > 1_000 }
        // The callback of a SUBSCRIBE sent during the stream runs in the dispatch round after its SUBACK was read,
        // behind the messages read before it: it lands behind them in the same log. The broker handles this client's
        // fence publication before its SUBSCRIBE, so it forwards the fence before the SUBACK.
        try await client.publish("flood/fence", payload: Array("-3".utf8))
        #expect(client.subscribeNow("marker/topic") { _ in received.append(-2) })
        try await withTimeout(10, "the SUBACK during the stream") { try await client.subscribe("other/topic") }
        let atSubscribe = received.all.count
        try await eventually(10, "the stream still running after the SUBACK") {
            received.all.count > atSubscribe + 1_000
        }
        flooding.store(false, ordering: .relaxed)
        let sent = try await flood.value
        #expect(client.subscriptions["other/topic"] == .atMostOnce)
        #expect(client.droppedMessageCount == 0, "the receive buffer overflowed")
        let log = received.all
        let marker = try #require(log.firstIndex(of: -2))
        let fence = try #require(log.firstIndex(of: -3))
        #expect(fence < marker, "the SUBACK overtook a message received before it")
        let numbers = log.filter { $0 >= 0 }
        #expect(!numbers.isEmpty && numbers.count <= sent)
        #expect(zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 }, "messages out of order")
        await client.disconnect()
        await publisher.disconnect()
    }

    /// A handler set while messages wait in the receive buffer (no consumer took them) gets them at the next wake-up,
    /// and the acknowledgements queued behind them follow.
    @Test func aHandlerSetMidSessionTakesWhatWaits() async throws {
        let broker = try await MosquittoBroker.start()
        let client = try await connectedClient(broker.url, "late-handler")
        try await client.subscribe("late/#")
        for index in 0..<50 { try await client.publish("late/x", payload: Array("\(index)".utf8)) }
        // The broker forwards the messages before it answers a later SUBSCRIBE: once that is acknowledged, the
        // messages wait in the buffer (nothing consumes them yet).
        try await client.subscribe("late-sync/#")
        let received = Log<String>()
        client.setMessageHandler { batch in
            for message in batch { received.append(String(decoding: message.payload, as: UTF8.self)) }
        }
        try await withTimeout(10, "a SUBACK behind the waiting messages") { try await client.subscribe("late2/#") }
        try await eventually(10, "the waiting messages at the handler") { received.all.count == 50 }
        #expect(received.all == (0..<50).map(String.init))
        await client.disconnect()
    }
}
