import CoatyKit
import Foundation
import Testing

/// Rough measurements on a real mosquitto, printed, never asserted; run them in release mode with
/// `COATY_MEASURE=1 swift test -c release --filter CommunicationMeasurements`.
@Suite(
    "Communication measurements",
    .serialized,
    .enabled(if: ProcessInfo.processInfo.environment["COATY_MEASURE"] == "1" && MosquittoBroker.findExecutable() != nil)
)
struct CommunicationMeasurements {
    @Test("Discover→Resolve round trip and typed Advertise throughput")
    func measure() async throws {
        // Without TCP_NODELAY on the broker, a response that follows the echo of its own request
        // waits for the requester's delayed ACK (~40 ms on Linux).
        let noDelay = ProcessInfo.processInfo.environment["COATY_MEASURE_NODELAY"] != "0"
        let broker = try MosquittoBroker(additionalConfiguration: noDelay ? ["set_tcp_nodelay true"] : [])
        try await broker.start()
        print("MEASURE broker set_tcp_nodelay=\(noDelay)")
        defer { Task { await broker.stop() } }
        let registry = CoatyObjectRegistry([Lamp.self])
        let requester = try CommunicationManager.mqtt(
            url: broker.url,
            identity: Identity(name: "A"),
            registry: registry
        )
        let responder = try CommunicationManager.mqtt(
            url: broker.url,
            identity: Identity(name: "B"),
            registry: registry
        )
        try await requester.start()
        try await responder.start()

        // Discover → Resolve with the built-in identity responder, sequentially.
        let clock = ContinuousClock()
        var durations: [Duration] = []
        for index in 0..<2_200 {
            let start = clock.now
            _ = try await requester.publishDiscover(.objectId(responder.identity.objectId)).first(timeout: .seconds(5))
            if index >= 200 { durations.append(clock.now - start) }
        }
        durations.sort()
        let p50 = durations[durations.count / 2]
        let p99 = durations[durations.count * 99 / 100]
        print("MEASURE discover-resolve p50=\(p50) p99=\(p99) n=\(durations.count)")

        // A foreign client publishes typed Advertise payloads; the agent observes them typed.
        let count = 100_000
        let observation = try requester.observeAdvertise(Lamp.self)
        await observation.subscribed()
        let foreign = MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientId: "measure-publisher"))
        try await foreign.connect()
        let source = CoatyUUID()
        let topic = "coaty/3/-/ADV::com.example.Lamp/\(source)"
        let payload = Array(
            #"{"object":{"objectType":"com.example.Lamp","coreType":"CoatyObject","objectId":"\#(CoatyUUID())","name":"Lamp in the kitchen next to the window","isOn":true,"parentObjectId":"\#(source)"},"privateData":{"room":"kitchen","floor":3}}"#
                .utf8
        )
        let consumer = Task {
            var received = 0
            for await _ in observation {
                received += 1
                if received == count { break }
            }
            return received
        }
        let start = clock.now
        for _ in 0..<count { try await foreign.publish(topic, payload: payload) }
        let received = await consumer.value
        let elapsed = clock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            "MEASURE advertise-typed \(payload.count)B msgs=\(received) rate=\(Int(Double(received) / seconds))/s"
                + " dropped=\(requester.statistics)"
        )
        await foreign.disconnect()
        await requester.stop()
        await responder.stop()
    }
}
