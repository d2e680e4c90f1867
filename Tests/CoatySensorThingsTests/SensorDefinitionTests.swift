import CoatyKit
import CoatySensorThings
import CoatyTesting
import Foundation
import Logging
import ServiceLifecycle
import Testing

/// A Sensor Things agent configuration in Coaty JS's layout with `sensors` definitions.
func sensorConfiguration(_ definitions: [JSONValue], extra: JSONObject = [:]) -> JSONValue {
    var options = extra
    options["sensors"] = .array(definitions)
    return ["controllers": ["SensorSourceController": .object(options)]]
}

/// The JSON of a sensor, as a configuration file holds it.
func sensorJSON(_ sensor: Sensor) throws -> JSONValue { try AnyCoatyObject(sensor).jsonValue }

@Suite("Sensor definitions of the `sensors` controller option")
struct SensorDefinitionTests {
    let manager: CommunicationManager

    init() throws {
        manager = try CommunicationManager.mqtt(url: "mqtt://127.0.0.1:1", identity: Identity(name: "offline"))
    }

    /// Runs the source's `onInit` with the controller options of a configuration.
    func initialize(_ source: SensorSourceController, _ configuration: JSONValue) async throws {
        let parsed = try AgentConfiguration(json: configuration)
        try await source.onInit(
            ControllerContext(
                communicationManager: manager,
                options: parsed.controllers["SensorSourceController"]?.objectValue ?? [:],
                logger: manager.logger
            )
        )
    }

    @Test("A configuration file's definitions register their sensors with the IOs they name, in order")
    func registersDefinitions() async throws {
        let first = Sensor.example
        var second = Sensor.example
        second.objectId = CoatyUUID()
        second.name = "second"
        let text = JSONValue.object([
            "controllers": [
                "SensorSourceController": [
                    "skipSensorAdvertise": true,
                    "sensors": [
                        ["sensor": try sensorJSON(first), "io": "MockSensorIo", "parameters": ["values": [1, 2]]],
                        [
                            "sensor": try sensorJSON(second), "io": "MockSensorIo", "parameters": ["value": "on"],
                            "observationPublicationType": "advertise", "samplingInterval": 1500,
                        ],
                    ],
                ]
            ]
        ]).serializedString()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sensors-\(UUID()).json").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let configuration = try AgentConfiguration(contentsOfFile: file)

        let source = SensorSourceController(communicationManager: manager)
        try await initialize(source, configuration.json)
        #expect(source.registeredSensors == [first, second])
        #expect(source.options.skipSensorAdvertise)
        let containers = source.registeredSensorContainers
        #expect(containers[0].publication == .none)
        #expect(containers[1].publication == .advertise(every: .milliseconds(1500)))
        #expect(try await containers[0].io.read() == 1)
        #expect(try await containers[0].io.read() == 2)
        #expect(try await containers[1].io.read() == "on")
        #expect(source.findSensor { $0.name == "second" } == second)
        #expect(source.findSensor { $0.name == "none" } == nil)
    }

    @Test("Coaty JS's MockSensorIo without parameters reads 0 until written")
    func mockWithoutParameters() async throws {
        let io = MockSensorIo(parameters: nil)
        #expect(try await io.read() == 0)
        try await io.write(3)
        #expect(try await io.read() == 3)
    }

    @Test("LinuxTemperatureSensorIo's parameters name the file to read")
    func linuxTemperatureParameters() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("temp-\(UUID())").path
        try Data("47500\n".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let definition = SensorDefinition(
            sensor: .example,
            io: "LinuxTemperatureSensorIo",
            parameters: ["path": .string(file)]
        )
        let io = try definition.makeIo(with: .standard)
        #expect(try await io.read() == 47.5)
        #expect(SensorIoRegistry.standard.names == ["LinuxTemperatureSensorIo", "MockSensorIo"])
    }

    @Test("Applications register their own IO factories, which read the definition's parameters")
    func customFactory() async throws {
        struct ScaledIo: SensorIo {
            let factor: Double
            func read() async throws -> JSONValue { .double(10 * factor) }
        }
        struct MissingPin: Error, CustomStringConvertible {
            var description: String { "parameters.pin is required" }
        }
        var options = SensorSourceController.Options()
        options.sensorIos.register("CPULoadSensorIo") { parameters in
            ScaledIo(factor: parameters?["prescaler"]?.doubleValue ?? 1)
        }
        options.sensorIos.register("GpioIo") { parameters in
            guard parameters?["pin"] != nil else { throw MissingPin() }
            return MockSensorIo()
        }
        let source = SensorSourceController(communicationManager: manager, options: options)
        try await initialize(
            source,
            sensorConfiguration([
                ["sensor": try sensorJSON(.example), "io": "CPULoadSensorIo", "parameters": ["prescaler": 1.5]]
            ])
        )
        #expect(try await source.registeredSensorContainers.first?.io.read() == 15)

        let failing = SensorSourceController(communicationManager: manager, options: options)
        let error = await #expect(throws: AgentConfigurationError.self) {
            try await initialize(failing, sensorConfiguration([["sensor": try sensorJSON(.example), "io": "GpioIo"]]))
        }
        #expect(error?.field == "controllers.SensorSourceController.sensors[0].parameters")
        #expect(error?.reason == "GpioIo cannot be made: parameters.pin is required")
    }

    /// A bad definition, and the field its error names.
    struct BadCase: Sendable, CustomTestStringConvertible {
        let label: String
        let definitions: JSONValue
        let field: String
        let reasonContains: String
        var testDescription: String { label }
    }

    static let badCases: [BadCase] = {
        let sensor = (try? sensorJSON(.example)) ?? .null
        var incomplete = sensor.objectValue ?? [:]
        incomplete["observedProperty"] = nil
        let thing = (try? AnyCoatyObject(Thing(name: "t", description: "a thing")).jsonValue) ?? .null
        let path = "controllers.SensorSourceController.sensors"
        return [
            BadCase(
                label: "an IO name no factory has",
                definitions: [["sensor": sensor, "io": "Aio"]],
                field: path + "[0].io",
                reasonContains: "'Aio' is not a registered SensorIo; use one of LinuxTemperatureSensorIo, MockSensorIo"
            ),
            BadCase(
                label: "a missing io",
                definitions: [["sensor": sensor]],
                field: path + "[0].io",
                reasonContains: "missing"
            ),
            BadCase(
                label: "a sensor without its observedProperty",
                definitions: [
                    ["sensor": sensor, "io": "MockSensorIo"], ["sensor": .object(incomplete), "io": "MockSensorIo"],
                ],
                field: path + "[1].sensor",
                reasonContains: "observedProperty"
            ),
            BadCase(
                label: "a thing instead of a sensor",
                definitions: [["sensor": thing, "io": "MockSensorIo"]],
                field: path + "[0].sensor.objectType",
                reasonContains: "coaty.sensorThings.Thing"
            ),
            BadCase(
                label: "a missing sensor",
                definitions: [["io": "MockSensorIo"]],
                field: path + "[0].sensor",
                reasonContains: "missing"
            ),
            BadCase(
                label: "a channel publication without samplingInterval",
                definitions: [["sensor": sensor, "io": "MockSensorIo", "observationPublicationType": "channel"]],
                field: path + "[0].samplingInterval",
                reasonContains: "positive number of milliseconds"
            ),
            BadCase(
                label: "a non-positive samplingInterval",
                definitions: [
                    [
                        "sensor": sensor, "io": "MockSensorIo", "observationPublicationType": "advertise",
                        "samplingInterval": 0,
                    ]
                ],
                field: path + "[0].samplingInterval",
                reasonContains: "positive"
            ),
            BadCase(
                label: "an unknown publication type",
                definitions: [["sensor": sensor, "io": "MockSensorIo", "observationPublicationType": "sometimes"]],
                field: path + "[0].observationPublicationType",
                reasonContains: "\"none\", \"advertise\" or \"channel\""
            ),
            BadCase(
                label: "sensors not an array",
                definitions: ["sensor": sensor],
                field: path,
                reasonContains: "array"
            ),
            BadCase(
                label: "a definition not an object",
                definitions: ["MockSensorIo"],
                field: path + "[0]",
                reasonContains: "object"
            ),
        ]
    }()

    @Test("A bad definition is one error naming its field, and registers nothing", arguments: badCases)
    func badDefinition(_ bad: BadCase) async throws {
        let source = SensorSourceController(communicationManager: manager)
        let configuration: JSONValue = [
            "controllers": ["SensorSourceController": ["sensors": bad.definitions]]
        ]
        let error = await #expect(throws: AgentConfigurationError.self) {
            try await initialize(source, configuration)
        }
        #expect(error?.field == bad.field, "\(String(describing: error))")
        #expect(error?.reason.contains(bad.reasonContains) == true, "\(String(describing: error))")
        #expect(source.registeredSensors.isEmpty)
    }
}

@Suite(
    "A sensor agent configured from JSON over a real mosquitto",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: MosquittoBroker.findExecutable() != nil || ProcessInfo.processInfo.environment["CI"] == "true")
)
struct ConfiguredSensorSourceTests {
    @Test(
        "The configured sensor is advertised, discovered and tracked; observations go out on its channel through the publish hooks"
    )
    func configuredAgent() async throws {
        let network = try await SensorThingsNetwork.start(startingSource: false)
        let sensor = network.sensor("configured")
        let configuration = try AgentConfiguration(
            json: sensorConfiguration([
                [
                    "sensor": try sensorJSON(sensor), "io": "MockSensorIo", "parameters": ["values": [7, 8]],
                    "observationPublicationType": "channel", "samplingInterval": 100,
                ]
            ])
        )
        let (willPublish, willSink) = AsyncStream.makeStream(of: Observation.self)
        let (didPublish, didSink) = AsyncStream.makeStream(of: Observation.self)
        var options = SensorSourceController.Options()
        options.createObservation = { registration, observation in
            var observation = observation
            observation.resultQuality = ["configured " + registration.sensor.name]
            return observation
        }
        options.observationWillPublish = { _, observation in willSink.yield(observation) }
        options.observationDidPublish = { _, observation in didSink.yield(observation) }
        let source = SensorSourceController(communicationManager: network.source, options: options)
        let lifecycle = ObjectLifecycleController(communicationManager: network.source)
        let container = try AgentContainer(
            communicationManager: network.source,
            controllers: [lifecycle, source],
            controllerOptions: configuration.controllers
        )
        let observer = SensorObserverController(communicationManager: network.observer)
        let tracker = ThingSensorObservationObserverController(communicationManager: network.observer)
        let advertised = try observer.observeAdvertisedSensors()
        await advertised.subscribed()
        var advertisedSensors = advertised.makeAsyncIterator()
        let channeled = try observer.observeChanneledObservations(sensorId: sensor.objectId)
        await channeled.subscribed()
        var observations = channeled.makeAsyncIterator()
        var changes = tracker.registeredSensorsChanges().makeAsyncIterator()
        #expect(try await next(&changes) == RegisteredSensorsChangeInfo())

        let group = ServiceGroup(services: [container], gracefulShutdownSignals: [], logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // Registered from the configuration in onInit; advertised once online.
            #expect(try await next(&advertisedSensors) == sensor)
            #expect(source.registeredSensors == [sensor])
            #expect(try await observer.discoverSensors().first(timeout: .seconds(10)) == sensor)

            // Sampled every 100 ms, shaped by createObservation, published between the hooks.
            let observation = try await next(&observations)
            #expect([7, 8].contains(observation.result))
            #expect(observation.resultQuality == ["configured configured"])
            #expect(observation.parentObjectId == sensor.objectId)
            var willIterator = willPublish.makeAsyncIterator()
            var didIterator = didPublish.makeAsyncIterator()
            #expect(try await next(&willIterator).resultQuality == ["configured configured"])
            #expect(try await next(&didIterator).resultQuality == ["configured configured"])

            // An observer tracking the thing sees the configured sensor added.
            tasks.addTask { try await tracker.run() }
            _ = try await lifecycle.advertiseDiscoverableObject(network.thing)
            var change = try await next(&changes)
            while change.added.isEmpty { change = try await next(&changes) }
            #expect(change.added == [RegisteredSensor(sensor: sensor, thing: network.thing)])

            await group.triggerGracefulShutdown()
            tasks.cancelAll()
            try? await tasks.waitForAll()
        }
        willSink.finish()
        didSink.finish()
        await network.stop()
    }

    @Test("An agent whose configuration names an unknown IO does not start, and says which field is wrong")
    func unknownIoStopsTheAgent() async throws {
        let network = try await SensorThingsNetwork.start(startingSource: false)
        let configuration = try AgentConfiguration(
            json: sensorConfiguration([["sensor": try sensorJSON(network.sensor("x")), "io": "InputGpio"]])
        )
        let source = SensorSourceController(communicationManager: network.source)
        let container = try AgentContainer(
            communicationManager: network.source,
            controllers: [source],
            controllerOptions: configuration.controllers
        )
        let error = await #expect(throws: AgentConfigurationError.self) { try await container.run() }
        #expect(error?.field == "controllers.SensorSourceController.sensors[0].io")
        #expect(network.source.communicationState == .offline)
        await network.stop()
    }
}
