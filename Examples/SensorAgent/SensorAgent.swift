// sensor-agent: advertises readings of a custom object type periodically, and observes them as
// typed Swift values. Run two of them, or watch them with the CLI:
//   coaty observe advertise --object-type com.example.sensor.Reading
//
// With --sensor-things it speaks Coaty JS's Sensor Things instead: a Thing with a temperature
// Sensor (this machine's sysfs temperature when it has one, else a mock), whose Observations are
// published on the sensor's channel and observed with a SensorObserverController, as a Coaty JS
// agent using @coaty/core/sensor-things would see them.
//
//   swift run sensor-agent [--broker mqtt://127.0.0.1:1883] [--count N] [--interval SECONDS] [--sensor-things]

import ArgumentParser
import CoatyKit
import CoatySensorThings
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

    @Flag(help: "Publish a Sensor Things Thing, Sensor and Observations (Coaty JS's model) instead of readings.")
    var sensorThings = false

    func run() async throws {
        if sensorThings {
            try await runSensorThings()
            return
        }
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

    /// The --sensor-things mode: a SensorSourceController publishes the sensor's observations on
    /// its channel every `interval` seconds; a SensorObserverController discovers the sensor and
    /// observes them.
    func runSensorThings() async throws {
        let agent = try CommunicationManager.mqtt(
            url: broker,
            identity: Identity(name: "Sensor agent"),
            registry: CoatyObjectRegistry(SensorThingsTypes.all)
        )
        // The thing belongs to this agent: when the agent goes, observers drop its sensors.
        let thing = Thing(
            name: "This machine",
            description: "The host of sensor-agent",
            parentObjectId: agent.identity.objectId
        )
        let io: any SensorIo
        if let temperature = try? LinuxTemperatureSensorIo() {
            io = temperature
            FileHandle.standardError.write(Data("reading \(temperature.input)\n".utf8))
        } else {
            io = MockSensorIo(values: [20.5, 21, 21.5])
            FileHandle.standardError.write(Data("no temperature sensor here: using mock values\n".utf8))
        }
        let sensor = Sensor(
            name: "Temperature",
            description: "A temperature of this machine",
            encodingType: .undefined,
            metadata: .null,
            unitOfMeasurement: .degreeCelsius,
            observationType: .measurement,
            observedProperty: ObservedProperty(
                name: "Temperature",
                definition: "http://dbpedia.org/page/Temperature",
                description: "The temperature in degrees Celsius"
            ),
            parentObjectId: thing.objectId
        )
        let source = SensorSourceController(communicationManager: agent)
        let observer = SensorObserverController(communicationManager: agent)
        let observations = try observer.observeChanneledObservations(sensorId: sensor.objectId)
        try await agent.start()
        await observations.subscribed()
        try await agent.publishAdvertise(thing)
        try await source.register(sensor, io: io, publication: .channel(every: .seconds(interval)))

        let count = self.count
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await source.run() }  // answers Discover/Query, publishes periodically
            try await source.subscribed()
            if let found = try await observer.discoverSensors().first(timeout: .seconds(5)) {
                print("discovered sensor \(found.name) of thing \(thing.name)")
            }
            var observed = 0
            for await observation in observations {
                observed += 1
                print("observed observation #\(observed) of \(sensor.name): \(observation.result) °C")
                if observed == count { break }
            }
            group.cancelAll()
        }
        try await source.unregister(sensor.objectId)  // deadvertises the sensor
        await agent.stop()
    }
}
