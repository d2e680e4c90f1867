import ArgumentParser
import CoatyKit
import Foundation
import Logging

/// `coaty demo`: the first-run showcase.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show agents exchanging messages through a broker (starts one when none is reachable).",
        discussion: """
            Uses the broker at --broker when it answers; otherwise starts a local mosquitto on a
            free loopback port, runs a sensor and an observer, prints the flow, and stops
            everything it started.

            Examples:
              coaty demo
              coaty demo --readings 10
            """
    )

    @Option(help: "The broker to try first (mqtt://HOST:PORT).")
    var broker: String = ProcessInfo.processInfo.environment["COATY_BROKER"] ?? "mqtt://127.0.0.1:1883"

    @Option(help: "How many readings the sensor publishes.")
    var readings: Int = 5

    func validate() throws {
        guard (1...10_000).contains(readings) else { throw ValidationError("--readings must be between 1 and 10000") }
    }

    func run() async throws {
        var logger = Logger(label: "coaty.demo")
        logger.logLevel = .warning
        var startedBroker: MosquittoBroker?
        var url = broker
        if !(await Self.isReachable(url, logger: logger)) {
            let local = try MosquittoBroker()
            try await local.start()
            startedBroker = local
            url = local.url
            print("▶ started a local mosquitto at \(url)")
        } else {
            print("▶ using the broker at \(url)")
        }
        do {
            try await runScenario(url: url, logger: logger)
        } catch {
            await startedBroker?.stop()
            throw error
        }
        await startedBroker?.stop()
    }

    private func runScenario(url: String, logger: Logger) async throws {

        let topic = "coaty-demo/readings/thermometer-1"
        let observer = MQTTClient(configuration: try MQTTConfiguration(url: url, clientId: "coaty-demo-observer-\(getpid())"), logger: logger)
        let sensor = MQTTClient(configuration: try MQTTConfiguration(url: url, clientId: "coaty-demo-sensor-\(getpid())"), logger: logger)
        try await observer.connect()
        try await sensor.connect()
        try await observer.subscribe("coaty-demo/readings/#")
        print("▶ observer subscribed to coaty-demo/readings/#")

        let count = readings
        let received = try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                var seen = 0
                for try await message in observer.messages {
                    seen += 1
                    print("  observer ← \(message.topic)  \(String(decoding: message.payload, as: UTF8.self))")
                    if seen == count { break }
                }
                return seen
            }
            group.addTask {
                for seq in 1...count {
                    let celsius = 20 + Double(seq % 7) * 0.4
                    let payload = #"{"sensor":"thermometer-1","seq":\#(seq),"celsius":\#(celsius)}"#
                    print("  sensor   → \(topic)")
                    try await sensor.publish(topic, payload: Array(payload.utf8))
                    try await Task.sleep(for: .milliseconds(150))
                }
                return -1
            }
            group.addTask {
                try await Task.sleep(for: .seconds(10))
                return -2
            }
            var seen = 0
            for try await result in group where result >= 0 || result == -2 {
                seen = max(result, 0)
                break
            }
            group.cancelAll()
            return seen
        }
        await sensor.disconnect()
        await observer.disconnect()
        print("✔ summary: sensor published \(count), observer received \(received)")
        if received != count { throw ExitCode.failure }
    }

    /// Whether a broker answers at `url` within a second.
    static func isReachable(_ url: String, logger: Logger) async -> Bool {
        guard var configuration = try? MQTTConfiguration(url: url, clientId: "coaty-demo-probe-\(getpid())") else { return false }
        configuration.connectTimeout = .seconds(1)
        let client = MQTTClient(configuration: configuration, logger: logger)
        do {
            try await client.connect()
            await client.disconnect()
            return true
        } catch {
            return false
        }
    }
}
