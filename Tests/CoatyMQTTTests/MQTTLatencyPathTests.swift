import CoatyMQTT
import Foundation
import Synchronization
import Testing

/// Things appended from several threads, read by the test.
final class Log<Item: Sendable>: Sendable {
    private let items = Mutex<[Item]>([])

    func append(_ item: Item) { items.withLock { $0.append(item) } }

    var all: [Item] { items.withLock { $0 } }
}

/// The request path without a SUBACK round trip (`subscribe(_:qos:whenSent:)`) and delivery to a message handler
/// on the dispatcher thread (`setMessageHandler(_:)`), against a real mosquitto.
@Suite(.serialized, .enabled(if: BrokerAvailability.shouldRun, BrokerAvailability.skipMessage))
struct MQTTLatencyPathTests {
    /// A publication made as soon as `whenSent` is called reaches the new subscription: the SUBSCRIBE is queued
    /// ahead of it. If `whenSent` came before the packet was queued, the broker would see the PUBLISH first and
    /// drop it (no subscriber yet), and the receive below would time out.
    @Test func publicationRightAfterWhenSentReachesTheNewSubscription() async throws {
        let broker = try await MosquittoBroker.start()
        let client = try await connectedClient(broker.url)
        let rounds = 50
        let receiving = Task { try await receive(client, count: rounds, within: 20) }
        for round in 0..<rounds {
            let topic = "sent/\(round)"
            let order = Log<String>()
            let (sent, signal) = AsyncStream<Void>.makeStream()
            let subscribing = Task {
                try await client.subscribe(topic, qos: .atMostOnce) {
                    order.append("sent")
                    signal.yield()
                    signal.finish()
                }
                order.append("acknowledged")
            }
            for await _ in sent { break }
            try await client.publish(topic, payload: Array("\(round)".utf8))
            try await subscribing.value
            #expect(order.all == ["sent", "acknowledged"])
        }
        let received = try await receiving.value
        #expect(received.map(\.topic) == (0..<rounds).map { "sent/\($0)" })
    }

    /// `whenSent` does not wait for the broker: with the broker frozen (SIGSTOP) it is called while the SUBACK
    /// cannot come, and the subscription completes once the broker runs again.
    @Test func whenSentComesBeforeTheAcknowledgement() async throws {
        let broker = try await MosquittoBroker.start()
        let client = try await connectedClient(broker.url)
        let pid = try #require(broker.processIdentifier)
        let order = Log<String>()
        #expect(kill(pid, SIGSTOP) == 0)
        let subscribing = Task {
            try await client.subscribe("frozen/sent", qos: .atMostOnce) { order.append("sent") }
            order.append("acknowledged")
        }
        do {
            try await eventually(10, "whenSent") { order.all == ["sent"] }
            try await Task.sleep(for: .milliseconds(100))
            #expect(order.all == ["sent"], "no SUBACK from a frozen broker")
        } catch {
            kill(pid, SIGCONT)
            throw error
        }
        #expect(kill(pid, SIGCONT) == 0)
        try await withTimeout(10, "the SUBACK") { try await subscribing.value }
        #expect(order.all == ["sent", "acknowledged"])
    }

    /// While the connection is down the SUBSCRIBE cannot be queued: `whenSent` comes after the SUBACK of the
    /// re-subscription, once the broker is back.
    @Test func whenSentDuringAnOutageComesWithTheAcknowledgement() async throws {
        let broker = try await MosquittoBroker.start()
        let client = try await connectedClient(broker.url) {
            $0.reconnectDelay = .milliseconds(100)
            $0.maxReconnectDelay = .milliseconds(200)
        }
        await broker.stop()
        try await waitForState(client, .reconnecting)
        #expect(!client.subscribeNow("outage/now") { _ in Issue.record("no callback after a refusal") })
        #expect(client.subscriptions["outage/now"] == nil)
        let order = Log<String>()
        let subscribing = Task {
            try await client.subscribe("outage/sent", qos: .atMostOnce) { order.append("sent") }
            order.append("acknowledged")
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(order.all.isEmpty, "nothing can be sent while the broker is down")
        try await broker.start()
        try await withTimeout(20, "the subscription after the reconnect") { try await subscribing.value }
        #expect(order.all == ["sent", "acknowledged"])
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
}
