import CoatyKit
import AgentProcessTestSupport
import CoatyTesting
import Foundation
import Synchronization
import Testing

/// The manager's held acknowledgements over a real mosquitto: the transport says when one is due
/// (no polling), everything through it was delivered to the observers by then, and acknowledging
/// lets the rest in.
@Suite(
    "Held acknowledgements on a real mosquitto",
    .timeLimit(.minutes(2)),
    .enabled(if: BrokerAvailability.shouldRun, "mosquitto is not installed (apt-get install mosquitto)")
)
struct HeldAcknowledgementsTests {
    @Test func theTransportSignalsADueAcknowledgementAndReadsOnWhenAcknowledged() async throws {
        try await withBroker { broker in
            let identity = Identity(name: "durable")
            var configuration = try MQTTConfiguration.coaty(url: broker.url, identityId: identity.objectId)
            configuration.cleanSession = false
            configuration.holdsAcknowledgements = true
            var options = CommunicationManager.Options()
            options.qos = .atLeastOnce
            let manager = try CommunicationManager(
                transport: MQTTTransport(configuration: configuration),
                identity: identity,
                options: options
            )
            let acknowledgements = manager.acknowledgements
            let signals = Atomic<Int>(0)
            acknowledgements.onDue { signals.add(1, ordering: .relaxed) }
            let observation = try manager.observeRaw("held/test")
            try await manager.start()
            await observation.subscribed()
            #expect(acknowledgements.due == nil)

            let count = 20
            try await withAgent(on: broker, name: "publisher") { publisher in
                for i in 0..<count {
                    try await publisher.publishRaw(topic: "held/test", payload: Array("\(i)".utf8), qos: .atLeastOnce)
                }
            }
            var received: [String] = []
            var iterator = observation.makeAsyncIterator()
            while received.count < count {
                // Whatever arrived is held until acknowledged; the signal came with it.
                let deadline = ContinuousClock.now + .seconds(10)
                while acknowledgements.due == nil {
                    #expect(ContinuousClock.now < deadline, "no acknowledgement due after \(received.count) messages")
                    if ContinuousClock.now >= deadline { return }
                    try await Task.sleep(for: .milliseconds(5))
                }
                let due = try #require(acknowledgements.due)
                #expect(signals.load(ordering: .relaxed) > 0)
                #expect(acknowledgements.delivered >= due)
                // Delivered means in the observation's buffer: take exactly what it holds.
                for _ in 0..<observation.progress.waiting {
                    guard let event = await iterator.next() else { break }
                    received.append(String(decoding: event.payload, as: UTF8.self))
                }
                acknowledgements.acknowledge(through: due)
            }
            #expect(received == (0..<count).map { "\($0)" })
            await manager.stop()
        }
    }
}
