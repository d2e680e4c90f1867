// sensor-agent: advertises readings of a custom object type periodically, and observes them as
// typed Swift values. Run two of them, or watch them with the CLI:
//   coaty observe advertise --object-type com.example.sensor.Reading
//
//   swift run sensor-agent [--broker mqtt://127.0.0.1:1883] [--count N] [--interval SECONDS]

import ArgumentParser
import CoatyKit
import Foundation

/// A custom object type: a Codable struct with its object type. `objectType` and `coreType`
/// ("CoatyObject") are written on the wire for you.
struct Reading: CoatyObject, Hashable {
    static let objectType = "com.example.sensor.Reading"
    var objectId = CoatyUUID()
    var name: String
    var sequence: Int
    var celsius: Double
}

@main
struct SensorAgent: AsyncParsableCommand {
    @Option(help: "The broker, mqtt://HOST:PORT or mqtts://HOST:PORT; $COATY_BROKER sets the default.")
    var broker = ProcessInfo.processInfo.environment["COATY_BROKER"] ?? "mqtt://127.0.0.1:1883"

    @Option(help: "Advertise and observe this many readings, then exit (default: run until interrupted).")
    var count: Int?

    @Option(help: "Seconds between two readings.")
    var interval: Double = 1

    func run() async throws {
        // Register the type: received readings then decode straight into `Reading`.
        let agent = try CommunicationManager.mqtt(
            url: broker,
            identity: Identity(name: "Sensor agent"),
            registry: CoatyObjectRegistry([Reading.self])
        )
        let readings = try agent.observeAdvertise(Reading.self)
        try await agent.start()
        await readings.subscribed()  // the broker delivers to us from now on

        // Observe typed readings: ours too, since Coaty has no echo suppression.
        let count = self.count
        let observing = Task {
            var observed = 0
            for await event in readings {
                let reading = event.object
                print("observed reading #\(reading.sequence) of \(reading.name): \(reading.celsius) °C")
                observed += 1
                if observed == count { break }
            }
        }

        // Advertise a reading every `interval` seconds; published on ADV:CoatyObject and on
        // ADV::com.example.sensor.Reading, as Coaty JS does for custom object types.
        var sequence = 0
        while sequence != count {
            sequence += 1
            let celsius = (200 + Double.random(in: -20...20)).rounded() / 10
            try await agent.publishAdvertise(Reading(name: "Kitchen thermometer", sequence: sequence, celsius: celsius))
            print("advertised reading #\(sequence)")
            try await Task.sleep(for: .seconds(interval))
        }

        // Give the last readings a moment to come back, then stop.
        let deadline = Task {
            try await Task.sleep(for: .seconds(5))
            observing.cancel()
        }
        await observing.value
        deadline.cancel()
        await agent.stop()
    }
}
