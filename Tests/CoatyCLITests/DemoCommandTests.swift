import CoatyKit
import CoatyTesting
import Foundation
import Testing

@Suite("coaty demo and exit codes", .serialized)
struct DemoCommandTests {
    @Test("coaty demo starts its own broker, shows the flow and stops it", .enabled(if: BrokerAvailability.shouldRun))
    func demoRunsEndToEnd() async throws {
        // Port 1 never has a broker, so the demo must start its own.
        let result = try await runCoaty(["demo", "--broker", "mqtt://127.0.0.1:1", "--readings", "3"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stdout.contains("started a local mosquitto"))
        let lines = result.stdout.split(separator: "\n")
        // Discover → Resolve, answered by the sensor agent with its typed thermometer.
        #expect(lines.contains { $0.contains("sensor   ← Discover") && $0.contains("→ Resolve") })
        #expect(lines.contains { $0.contains("observer ← Resolve: com.example.demo.Thermometer") })
        // Typed readings, in order.
        let received = lines.filter { $0.contains("observer ← Reading #") }
        #expect(received.count == 3)
        #expect(received.map { $0.contains("(typed Reading)") } == [true, true, true])
        #expect(received.first?.contains("Reading #1:") == true)
        // Call → Return with the average of what was published.
        #expect(lines.contains { $0.contains("sensor   ← Call com.example.demo.averageCelsius → Return") })
        #expect(lines.contains { $0.contains("observer ← Return: average") })
        // Query → Retrieve, answered by the recorder from its temporary SQLite file.
        #expect(lines.contains { $0.contains("recorder ← Query → Retrieve from SQLite (3 objects stored)") })
        #expect(lines.contains { $0.contains("observer ← Retrieve: 3 readings: ") })
        #expect(result.stdout.contains("sensor published 3, observer received 3; Discover → 1 Resolve"))
        #expect(result.stdout.contains("recorder stored 3, Query → Retrieve 3"))
        // The temporary database is removed at the end.
        let databaseLine = try #require(lines.first { $0.contains("(SQLite: ") })
        let path = try #require(databaseLine.split(separator: "(SQLite: ").last?.dropLast())
        #expect(!FileManager.default.fileExists(atPath: String(path)))
        #expect(lines.last == "▶ stopped the local mosquitto")
        #expect(result.stderr.isEmpty, "stderr: \(result.stderr)")
    }

    @Test("coaty demo uses a reachable broker and leaves it running", .enabled(if: BrokerAvailability.shouldRun))
    func demoUsesReachableBroker() async throws {
        try await withBroker { broker in
            let result = try await runCoaty(["demo", "--readings", "2"], environment: ["COATY_BROKER": broker.url])
            #expect(result.status == 0, "stderr: \(result.stderr)")
            #expect(result.stdout.contains("using the broker at \(broker.url)"))
            #expect(!result.stdout.contains("started a local mosquitto"))
            #expect(result.stdout.contains("sensor published 2, observer received 2"))
            #expect(broker.isRunning)
        }
    }

    @Test("usage errors exit with 2 and say what is wrong on stderr")
    func usageErrorExitsWithTwo() async throws {
        let bad = try await runCoaty(["demo", "--readings", "0"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--readings"))
        #expect(bad.stdout.isEmpty)

        let unknown = try await runCoaty(["no-such-command"])
        #expect(unknown.status == 2)
        #expect(!unknown.stderr.isEmpty)
    }

    @Test("--help lists the commands and exits 0")
    func helpExitsZero() async throws {
        let help = try await runCoaty(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("demo"))
    }
}
