import CoatyKit
import CoatySensorThings
import Testing

@Suite("Sensor source options")
struct SensorSourceOptionsTests {
    @Test("The agent configuration's controller options set Coaty JS's flags over the initializer's")
    func controllerOptions() async throws {
        let manager = try CommunicationManager.mqtt(url: "mqtt://127.0.0.1:1", identity: Identity(name: "offline"))
        var initial = SensorSourceController.Options()
        initial.ignoreSensorQueryEvents = true
        let source = SensorSourceController(communicationManager: manager, options: initial)
        try await source.onInit(
            ControllerContext(
                communicationManager: manager,
                options: [
                    "skipSensorAdvertise": true, "ignoreSensorQueryEvents": false, "skipSensorDeadvertise": "yes",
                ],
                logger: manager.logger
            )
        )
        #expect(source.options.skipSensorAdvertise)
        #expect(!source.options.ignoreSensorQueryEvents)
        #expect(!source.options.skipSensorDeadvertise, "only booleans count")
        #expect(!source.options.ignoreSensorDiscoverEvents)
        #expect(source.options.channelId(Sensor.example) == Sensor.example.objectId.uuidString)
    }
}

extension Sensor {
    static let example = Sensor(
        name: "example",
        description: "an example",
        encodingType: .undefined,
        metadata: .null,
        unitOfMeasurement: .degreeCelsius,
        observationType: .measurement,
        observedProperty: ObservedProperty(name: "T", definition: "urn:t", description: "T")
    )
}
