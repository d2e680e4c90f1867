import CoatyKit
import CoatyTesting
import Foundation
import Testing

@Suite("coaty with failover brokers", .serialized, .enabled(if: BrokerAvailability.shouldRun))
struct BrokerFailoverCommandTests {
    @Test("observe --broker DEAD --broker LIVE connects to the live broker and receives")
    func observeUsesTheSecondBrokerWhenTheFirstIsDown() async throws {
        try await withBroker { broker in
            let dead = "mqtt://127.0.0.1:\(try MosquittoBroker.freeLoopbackPort(avoiding: broker.port))"
            try await withAgent(on: broker) { agent in
                let observed = try await expectObserverReceivesALamp(
                    connection: ["--broker", dead, "--broker", broker.url, "--log-level", "info"],
                    broker: broker,
                    agent: agent,
                    name: "observer-failover"
                )
                #expect(observed.stderr.contains("Connected to \(broker.url)"), "stderr: \(observed.stderr)")
            }
        }
    }

    @Test("COATY_BROKER takes a comma-separated list")
    func environmentListIsAccepted() async throws {
        try await withBroker { broker in
            let dead = "mqtt://127.0.0.1:\(try MosquittoBroker.freeLoopbackPort(avoiding: broker.port))"
            let lamp = Samples.light("Lamp")
            let sent = try await runCoaty(
                ["advertise", "\(lamp)"],
                environment: ["COATY_BROKER": "\(dead), \(broker.url)"]
            )
            #expect(sent.status == 0, "stderr: \(sent.stderr)")
        }
    }

    @Test("mixing mqtt:// and mqtts:// brokers is refused with a usage error")
    func mixedSchemesAreRefused() async throws {
        let result = try await runCoaty(["advertise", "--broker", "mqtt://a", "--broker", "mqtts://b", "{}"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("--broker"), "stderr: \(result.stderr)")
    }

    @Test("every broker down: the error names them")
    func everyBrokerDownIsReported() async throws {
        let first = try MosquittoBroker.freeLoopbackPort()
        let second = try MosquittoBroker.freeLoopbackPort(avoiding: first)
        let result = try await runCoaty(
            [
                "advertise", "--broker", "mqtt://127.0.0.1:\(first)", "--broker", "mqtt://127.0.0.1:\(second)",
                "\(Samples.light())",
            ],
            timeout: 30
        )
        #expect(result.status != 0)
        #expect(result.stderr.contains("127.0.0.1:\(first)"), "stderr: \(result.stderr)")
        #expect(result.stderr.contains("127.0.0.1:\(second)"), "stderr: \(result.stderr)")
    }
}
