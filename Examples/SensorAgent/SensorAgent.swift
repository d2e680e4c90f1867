// sensor-agent: advertises readings of a custom object type periodically, and observes them as
// typed Swift values. Run two of them, or watch them with the CLI:
//   coaty observe advertise --object-type com.example.sensor.Reading
//
// With --sensor-things it speaks Coaty JS's Sensor Things instead: a Thing with a temperature
// Sensor (this machine's sysfs temperature when it has one, else a mock), whose Observations are
// published on the sensor's channel and observed with a SensorObserverController, as a Coaty JS
// agent using @coaty/core/sensor-things would see them.
//
// With --config FILE (and --sensor-things) the sensors come from a Coaty JS style agent
// configuration, as a Coaty JS SensorSourceController reads its `sensors` option; the agent
// observes the channeled observations of the first one:
//
//   { "controllers": { "SensorSourceController": { "sensors": [ {
//       "sensor": { "objectId": "…", "coreType": "CoatyObject", "objectType": "coaty.sensorThings.Sensor",
//                   "name": "CPU load", "description": "…", "encodingType": "", "metadata": {},
//                   "unitOfMeasurement": { "name": "Percentage", "symbol": "%", "definition": "…" },
//                   "observationType": "http://www.opengis.net/def/observationType/OGC-OM/2.0/OM_Measurement",
//                   "observedProperty": { "name": "CPU load", "description": "…", "definition": "…" } },
//       "io": "MockSensorIo", "parameters": { "values": [12, 15, 11] },
//       "observationPublicationType": "channel", "samplingInterval": 1000 } ] } } }
//
//   swift run sensor-agent [--broker mqtt://127.0.0.1:1883] [--count N] [--interval SECONDS] [--sensor-things [--config FILE]]

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

    @Option(
        help:
            "With --sensor-things: a Coaty agent configuration (JSON) whose controllers.SensorSourceController.sensors define the sensors (Coaty JS's SensorDefinitions) instead of this machine's temperature."
    )
    var config: String?

    func validate() throws {
        if config != nil, !sensorThings { throw ValidationError("--config needs --sensor-things.") }
    }

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
        // From a configuration: Coaty JS's `sensors` option of the SensorSourceController.
        let configured = try config.map { file in
            let options = try AgentConfiguration(contentsOfFile: file).controllers["SensorSourceController"]?
                .objectValue
            return (options: options ?? [:], definitions: try SensorDefinition.definitions(in: options ?? [:], at: ""))
        }
        if let configured, configured.definitions.isEmpty {
            throw ValidationError("\(config ?? ""): controllers.SensorSourceController.sensors defines no sensor.")
        }
        let watched = configured?.definitions[0].sensor ?? sensor
        let observations = try observer.observeChanneledObservations(sensorId: watched.objectId)
        try await agent.start()
        await observations.subscribed()
        try await agent.publishAdvertise(thing)
        if let configured {
            try await source.registerSensors(inOptions: configured.options, at: "controllers.SensorSourceController")
        } else {
            try await source.register(sensor, io: io, publication: .channel(every: .seconds(interval)))
        }

        let count = self.count
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await source.run() }  // answers Discover/Query, publishes periodically
            try await source.subscribed()
            if let found = try await observer.discoverSensors().first(timeout: .seconds(5)) {
                print("discovered sensor \(found.name)" + (configured == nil ? " of thing \(thing.name)" : ""))
            }
            var observed = 0
            for await observation in observations {
                observed += 1
                let symbol = watched.unitOfMeasurement.symbol
                let unit = symbol == "degC" ? " °C" : symbol.map { " " + $0 } ?? ""
                print("observed observation #\(observed) of \(watched.name): \(observation.result)\(unit)")
                if observed == count { break }
            }
            group.cancelAll()
        }
        for registered in source.registeredSensors {
            try await source.unregister(registered.objectId)  // deadvertises the sensor
        }
        await agent.stop()
    }
}
