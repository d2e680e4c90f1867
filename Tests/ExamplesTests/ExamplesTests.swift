import AgentProcessTestSupport
import CoatyKit
import CoatySQLite
import CoatyStore
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Starts the example `name` and waits until its agent advertised its identity `identityName`.
func startReadyExample(
    _ name: String,
    _ arguments: [String],
    identityName: String,
    observer: CommunicationManager
) async throws -> ReadyProcess {
    try await startReadyProcess(
        executable: try builtExecutable(named: name),
        arguments,
        name: identityName,
        observer: observer
    )
}

/// Runs the example `name` to its end, killing it after `timeout` seconds.
func runExample(_ name: String, _ arguments: [String], timeout: Double = 60) async throws -> ProcessResult {
    try await TestProcess(executable: try builtExecutable(named: name), arguments).finish(timeout: timeout)
}

/// Each example executable runs against a real mosquitto started by the test, as a user runs it.
@Suite("Examples", .serialized, .enabled(if: BrokerAvailability.shouldRun))
struct ExamplesTests {
    @Test("hello-client discovers hello-service, prints its greeting and exits 0; bad params get Invalid params")
    func helloServiceAndClient() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let service = try await startReadyExample(
                    "hello-service",
                    ["--broker", broker.url, "--count", "2"],
                    identityName: "Hello service",
                    observer: agent
                )
                // A call without a name: Coaty's predefined error.
                let invalid = try await agent.publishCall("com.example.hello.greet").first(timeout: .seconds(30))
                #expect(invalid?.data.error == .invalidParameters)
                #expect(invalid?.sourceId == service.identity.objectId)

                let client = try await runExample("hello-client", ["--broker", broker.url, "--name", "Ada"])
                #expect(client.status == 0, "stderr: \(client.stderr)")
                let lines = client.stdoutLines
                try #require(lines.count == 2, "stdout: \(client.stdout)")
                #expect(lines[0].hasPrefix("discovered Greeter "))
                #expect(lines[0].hasSuffix("of agent \(service.identity.objectId)"))
                #expect(lines[1] == "result: Hello, Ada!")

                let served = await service.process.finish(timeout: 30)
                #expect(served.status == 0, "stderr: \(served.stderr)")
                #expect(served.stdoutLines.contains("greeted Ada"), "stdout: \(served.stdout)")
            }
        }
    }

    @Test("hello-client exits 1 with a message on stderr when no service answers")
    func helloClientWithoutService() async throws {
        try await withBroker { broker in
            let client = try await runExample("hello-client", ["--broker", broker.url, "--timeout", "0.5"])
            #expect(client.status == 1)
            #expect(client.stdout.isEmpty, "stdout: \(client.stdout)")
            #expect(client.stderr.contains("no hello service answered"), "stderr: \(client.stderr)")
        }
    }

    @Test("sensor-agent observes its N readings typed; they are advertised on both topics with their fields")
    func sensorAgent() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let byObjectType = try agent.observeAdvertise(objectType: "com.example.sensor.Reading")
                let byCoreType = try agent.observeAdvertise(coreType: .coatyObject)
                await byObjectType.subscribed()
                await byCoreType.subscribed()

                let result = try await runExample(
                    "sensor-agent",
                    ["--broker", broker.url, "--count", "5", "--interval", "0.05"]
                )
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let observed = result.stdoutLines.filter { $0.hasPrefix("observed reading #") }
                #expect(observed.count == 5, "stdout: \(result.stdout)")
                for sequence in 1...5 {
                    #expect(
                        observed.contains { $0.hasPrefix("observed reading #\(sequence) of Kitchen thermometer: ") }
                    )
                }

                let readings = try await collect(byObjectType, count: 5)
                #expect(readings.compactMap { $0.object.json["sequence"]?.intValue } == [1, 2, 3, 4, 5])
                #expect(readings.allSatisfy { $0.object.json["celsius"]?.doubleValue != nil })
                #expect(readings.allSatisfy { $0.object.coreType == .coatyObject })
                let onCoreTopic = try await collect(byCoreType, count: 5) {
                    $0.object.objectType == "com.example.sensor.Reading"
                }
                #expect(Set(onCoreTopic.map(\.object.objectId)) == Set(readings.map(\.object.objectId)))
            }
        }
    }

    @Test(
        "sensor-agent --sensor-things advertises a Thing and its Sensor, discovers it, and observes N channeled observations"
    )
    func sensorAgentSensorThings() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let sensors = try agent.observeAdvertise(objectType: "coaty.sensorThings.Sensor")
                let things = try agent.observeAdvertise(objectType: "coaty.sensorThings.Thing")
                await sensors.subscribed()
                await things.subscribed()

                let result = try await runExample(
                    "sensor-agent",
                    ["--broker", broker.url, "--count", "3", "--interval", "0.05", "--sensor-things"]
                )
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = result.stdoutLines
                #expect(
                    lines.first == "discovered sensor Temperature of thing This machine",
                    "stdout: \(result.stdout)"
                )
                for number in 1...3 {
                    #expect(lines.contains { $0.hasPrefix("observed observation #\(number) of Temperature: ") })
                }
                #expect(lines.count == 4, "stdout: \(result.stdout)")

                let thing = try #require(try await collect(things, count: 1).first?.object)
                let sensor = try #require(try await collect(sensors, count: 1).first?.object)
                #expect(sensor.parentObjectId == thing.objectId)
                #expect(sensor.json["unitOfMeasurement"]?["symbol"] == "degC")
                #expect(
                    sensor.json["observationType"]
                        == "http://www.opengis.net/def/observationType/OGC-OM/2.0/OM_Measurement"
                )
            }
        }
    }

    @Test("sensor-agent --sensor-things --config registers the sensors a Coaty JS style configuration defines")
    func sensorAgentConfigured() async throws {
        let sensorId = CoatyUUID()
        let sensor: JSONValue = [
            "objectId": .string(sensorId.uuidString), "coreType": "CoatyObject",
            "objectType": "coaty.sensorThings.Sensor", "name": "CPU load", "description": "The CPU load",
            "encodingType": "", "metadata": [:],
            "unitOfMeasurement": ["name": "Percentage", "symbol": "%", "definition": "urn:percent"],
            "observationType": "http://www.opengis.net/def/observationType/OGC-OM/2.0/OM_Measurement",
            "observedProperty": ["name": "CPU load", "description": "CPU load", "definition": "urn:cpu-load"],
        ]
        let configuration: JSONValue = [
            "controllers": [
                "SensorSourceController": [
                    "sensors": [
                        [
                            "sensor": sensor, "io": "MockSensorIo", "parameters": ["values": [12, 15]],
                            "observationPublicationType": "channel", "samplingInterval": 50,
                        ]
                    ]
                ]
            ]
        ]
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sensor-agent-\(UUID()).json").path
        try Data(configuration.serializedString().utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let sensors = try agent.observeAdvertise(objectType: "coaty.sensorThings.Sensor")
                await sensors.subscribed()
                let result = try await runExample(
                    "sensor-agent",
                    ["--broker", broker.url, "--count", "2", "--sensor-things", "--config", file]
                )
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = result.stdoutLines
                #expect(lines.first == "discovered sensor CPU load", "stdout: \(result.stdout)")
                #expect(lines.contains("observed observation #1 of CPU load: 12 %"), "stdout: \(result.stdout)")
                #expect(lines.contains("observed observation #2 of CPU load: 15 %"), "stdout: \(result.stdout)")
                let advertised = try #require(try await collect(sensors, count: 1).first?.object)
                #expect(advertised.objectId == sensorId)
            }
        }
    }

    @Test(
        "service-group-agent shuts down gracefully: status then identity deadvertised, exit 0",
        arguments: [
            "SIGTERM", "SIGINT", "--duration",
        ]
    )
    func serviceGroupAgent(stop: String) async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let statuses = try agent.observeAdvertise(objectType: "com.example.service.Status")
                let deadvertises = try agent.observeDeadvertise()
                await statuses.subscribed()
                await deadvertises.subscribed()
                var arguments = ["--broker", broker.url, "--interval", "0.1"]
                if stop == "--duration" { arguments += ["--duration", "1"] }
                let started = try await startReadyExample(
                    "service-group-agent",
                    arguments,
                    identityName: "Service group agent",
                    observer: agent
                )
                let status = try #require(try await first(statuses), "no status advertised")
                #expect(status.sourceId == started.identity.objectId)
                switch stop {
                case "SIGTERM": started.process.signal(SIGTERM)
                case "SIGINT": started.process.signal(SIGINT)
                default: break
                }
                let result = await started.process.finish(timeout: 30)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                #expect(result.stdoutLines.last == "stopped gracefully", "stdout: \(result.stdout)")

                let identityId = started.identity.objectId
                let gone = try await collect(deadvertises, count: 2) { $0.sourceId == identityId }
                #expect(gone.map(\.objectIds) == [[status.object.objectId], [identityId]])
            }
        }
    }

    @Test(
        "service-group-agent configured by a Coaty JS file (broker, namespace, credentials, keep-alive, identity): killed, the broker publishes Coaty's last will"
    )
    func serviceGroupAgentFromConfigurationFile() async throws {
        try await withPasswordBroker(user: "agent", password: "s3cret") { broker, directory in
            let identityId = CoatyUUID()
            let file = try writeConfigurationFile(
                AgentConfiguration(
                    name: "Configured agent",
                    identityId: identityId,
                    brokerURL: broker.url,
                    namespace: "plant4",
                    username: "agent",
                    password: "s3cret",
                    keepAlive: 10
                ),
                in: directory
            )
            // The observer needs the credentials too, and the agent's namespace.
            let observer = try CommunicationManager.mqtt(
                configuration: AgentConfiguration(
                    brokerURL: broker.url,
                    namespace: "plant4",
                    username: "agent",
                    password: "s3cret"
                )
            )
            try await observer.start()
            let deadvertises = try observer.observeDeadvertise()
            await deadvertises.subscribed()
            let started = try await startReadyProcess(
                executable: try builtExecutable(named: "service-group-agent"),
                ["--interval", "0.2"],
                name: "Configured agent",
                observer: observer,
                environment: ["COATY_CONFIG": file]
            )
            #expect(started.identity.objectId == identityId)
            #expect(started.identity.json["name"] == "Configured agent")

            started.process.signal(SIGKILL)
            _ = await started.process.finish(timeout: 30)
            // No clean stop: only the will can tell. Coaty's will is the Deadvertise of the identity.
            let will = try await first(deadvertises, timeout: 30) { $0.sourceId == identityId }
            #expect(will?.objectIds == [identityId])
            #expect(will?.topic.name == "coaty/3/plant4/DAD/\(identityId)")
            await observer.stop()
        }
    }

    @Test("recorder-with-query records the readings into SQLite and prints the query's objects in order")
    func recorderWithQuery() async throws {
        try await withBroker { broker in
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("examples-test-\(CoatyUUID())").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = directory + "/readings.sqlite"

            let result = try await runExample(
                "recorder-with-query",
                ["--broker", broker.url, "--db", path, "--count", "10", "--take", "3"]
            )
            #expect(result.status == 0, "stderr: \(result.stderr)")
            // Readings 1…10 at 18…27 °C, odd ones in the kitchen (18, 20, …, 26 °C).
            #expect(
                Array(result.stdoutLines.dropFirst()) == [
                    "recorded 10 readings; the 3 warmest in the kitchen from 20 °C:",
                    "  Reading 9: kitchen, 26.0 °C",
                    "  Reading 7: kitchen, 24.0 °C",
                    "  Reading 5: kitchen, 22.0 °C",
                ],
                "stdout: \(result.stdout)"
            )

            // The file holds every reading, with how it was received.
            let objects = StoreRepository(
                connection: try SQLiteDatabase(path: path).makeConnection(),
                coatyObjects: AnyCoatyObject.self
            )
            let stored = try await objects.fetch(
                FetchOptions(filter: .where("objectType", .equals("com.example.recorder.Reading")).orderBy("celsius"))
            )
            #expect(stored.compactMap { $0.json["celsius"]?.doubleValue } == (18...27).map(Double.init))
            #expect(stored.allSatisfy { $0.json["room"] != nil })
        }
    }
}
