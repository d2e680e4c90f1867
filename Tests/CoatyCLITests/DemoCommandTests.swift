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
        let received = result.stdout.split(separator: "\n").filter { $0.contains("observer ←") }
        #expect(received.count == 3)
        #expect(result.stdout.contains("sensor published 3, observer received 3"))
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
