import CoatyKit
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The port of the "operator endpoint listening on http://127.0.0.1:PORT" line `process` logs.
func loggedOperatorPort(of process: CoatyProcess) async throws -> Int {
    let line = try #require(
        await process.stderrLine(containing: "operator endpoint listening on http://127.0.0.1:"),
        "no listening line on stderr"
    )
    let address = try #require(line.range(of: "http://127.0.0.1:"))
    let port = Int(line[address.upperBound...].prefix { $0.isNumber })
    return try #require(port)
}

/// Scrapes `/metrics` of `port` until `done` holds for the parsed exposition (30 s at most); returns
/// the last one.
func scrapeUntil(_ port: Int, _ done: (PrometheusExposition) -> Bool) async throws -> PrometheusExposition {
    let deadline = ContinuousClock.now + .seconds(30)
    while true {
        let response = try await httpRequest(port: port, path: "/metrics")
        #expect(response.status == 200)
        let exposition = try PrometheusExposition(parsing: response.body)
        if done(exposition) || ContinuousClock.now > deadline { return exposition }
        try await Task.sleep(for: .milliseconds(100))
    }
}

@Suite("coaty --http-port", .serialized, .enabled(if: BrokerAvailability.shouldRun))
struct OperatorEndpointCommandTests {
    @Test("coaty record --http-port 0 logs its port and serves /metrics with what it stored, and /health")
    func recordServesMetrics() async throws {
        try await withTemporaryDirectory { directory in
            try await withBroker { broker in
                try await withAgent(on: broker, name: "publisher") { agent in
                    let recorder = try await startReadyCoaty(
                        [
                            "record", "--db", directory + "/objects.sqlite", "--http-port", "0", "--log-level", "info",
                            "--broker", broker.url,
                        ],
                        name: "recorder",
                        observer: agent
                    )
                    let port = try await loggedOperatorPort(of: recorder)
                    #expect(try await httpRequest(port: port, path: "/health/live").status == 200)
                    #expect(try await httpRequest(port: port, path: "/health/ready").status == 200)
                    let registry = CoatyObjectRegistry()
                    for i in 0..<3 { try await agent.publishAdvertise(try registry.decode(Samples.task("Task \(i)"))) }
                    let exposition = try await scrapeUntil(port) {
                        $0.value("coaty_recorder_stored_total", ["core_type": "Task"]) == 3
                    }
                    #expect(exposition.value("coaty_recorder_stored_total", ["core_type": "Task"]) == 3)
                    #expect(exposition.value("coaty_communication_online") == 1)
                    #expect(exposition.types["coaty_recorder_received_total"] == "counter")
                    #expect(try await httpRequest(port: port, path: "/unknown").status == 404)

                    recorder.signal(SIGTERM)
                    let result = await recorder.finish(timeout: 30)
                    #expect(result.status == 0, "stderr: \(result.stderr)")
                }
            }
        }
    }

    @Test("coaty record takes the endpoint from the configuration file's operator section")
    func recordEndpointFromConfiguration() async throws {
        try await withTemporaryDirectory { directory in
            let file = directory + "/agent.json"
            try Data(#"{"operator": {"httpPort": 0, "httpHost": "127.0.0.1"}}"#.utf8)
                .write(to: URL(fileURLWithPath: file))
            try await withBroker { broker in
                try await withAgent(on: broker, name: "watcher") { agent in
                    let recorder = try await startReadyCoaty(
                        [
                            "record", "--config", file, "--db", directory + "/objects.sqlite", "--log-level", "info",
                            "--broker", broker.url,
                        ],
                        name: "configured recorder",
                        observer: agent
                    )
                    let port = try await loggedOperatorPort(of: recorder)
                    #expect(try await httpRequest(port: port, path: "/health/ready").status == 200)
                    recorder.signal(SIGTERM)
                    #expect(await recorder.finish(timeout: 30).status == 0)
                }
            }
        }
    }

    @Test("coaty observe advertise --http-port 0 counts received events by type and is ready while connected")
    func observeServesMetrics() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker, name: "publisher") { agent in
                let observer = try await startReadyCoaty(
                    [
                        "observe", "advertise", "--core-type", "Task", "--http-port", "0", "--log-level", "info",
                        "--broker", broker.url,
                    ],
                    name: "observer",
                    observer: agent
                )
                let port = try await loggedOperatorPort(of: observer)
                #expect(try await httpRequest(port: port, path: "/health/ready").status == 200)
                let registry = CoatyObjectRegistry()
                try await agent.publishAdvertise(try registry.decode(Samples.task("Observed")))
                let exposition = try await scrapeUntil(port) {
                    $0.value("coaty_communication_events_received_total", ["event": "Advertise"]) == 1
                }
                #expect(exposition.value("coaty_communication_events_received_total", ["event": "Advertise"]) == 1)
                observer.signal(SIGTERM)
                let result = await observer.finish(timeout: 30)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                #expect(result.stdoutLines.count == 1)
            }
        }
    }
}
