import ArgumentParser
import CoatyKit
import CoatySQLite
import CoatyStore
import CoatyRecording
import CoatyLocalBroker
import Foundation
import Logging

// The demo's custom object types: a whole Coaty object type in a few lines each.

/// A temperature reading, advertised by the sensor agent.
struct Reading: CoatyObject, Hashable {
    static let objectType = "com.example.demo.Reading"
    var objectId = CoatyUUID()
    var name: String
    var parentObjectId: CoatyUUID?
    var sequence: Int
    var celsius: Double
}

/// The thermometer the readings come from; found by Discover.
struct Thermometer: CoatyObject, Hashable {
    static let objectType = "com.example.demo.Thermometer"
    var objectId = CoatyUUID()
    var name: String
    var externalId: String?
    var room: String
}

/// `coaty demo`: the first-run showcase.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show Coaty agents at work (starts a local broker when none is reachable).",
        discussion: """
            Uses the broker at --broker when it answers; otherwise starts a local mosquitto \
            on a free loopback port. Then, in one process, a sensor agent, an observer agent \
            and a recorder agent talk through the broker: the observer discovers the \
            thermometer (Discover → Resolve), receives typed readings (Advertise of \
            com.example.demo.Reading), asks the sensor for the average (Call → Return), and \
            queries the recorder, which persisted every reading into a temporary SQLite file \
            (Query → Retrieve). Everything the demo started is stopped and removed at the end.

            Examples:
              coaty demo
              coaty demo --readings 10
              coaty demo --broker mqtt://broker.local:1883 --namespace demo
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "How many readings the sensor publishes.")
    var readings: Int = 5

    func validate() throws {
        guard (1...10_000).contains(readings) else { throw ValidationError("--readings must be between 1 and 10000") }
    }

    func run() async throws {
        let logger = connection.makeLogger(label: "coaty.demo")
        // `--broker auto`: the broker found over DNS-SD; when none is found, the demo starts its own as usual.
        let connection = (try? await self.connection.resolvingDiscoveredBrokers(logger: logger)) ?? self.connection
        var startedBroker: MosquittoBroker?
        var url = connection.broker
        if await Self.isReachable(connection, logger: logger) {
            Output.line("▶ using the broker at \(connection.brokerForMessages)")
        } else {
            let local: MosquittoBroker
            do {
                local = try MosquittoBroker()
                try await local.start()
            } catch {
                throw CLIError(
                    "No broker answers at \(connection.brokerForMessages) and no local one could be started: \(error)"
                )
            }
            startedBroker = local
            url = local.url
            Output.line("▶ no broker at \(connection.brokerForMessages); started a local mosquitto at \(url)")
        }
        do {
            try await DemoScenario(connection: connection, url: url, readings: readings, logger: logger).run()
        } catch {
            await startedBroker?.stop()
            throw error
        }
        if let startedBroker {
            await startedBroker.stop()
            Output.line("▶ stopped the local mosquitto")
        }
    }

    /// Whether a broker accepts a connection with the options within a second or so.
    static func isReachable(_ options: ConnectionOptions, logger: Logger) async -> Bool {
        guard var configuration = try? options.mqttConfiguration(identityId: CoatyUUID()) else { return false }
        configuration.connectTimeout = .milliseconds(Int64(min(options.connectTimeout, 1.5) * 1000))
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

/// What the sensor agent has published, shared with its Call handler.
actor ReadingLog {
    private(set) var celsius: [Double] = []

    func append(_ value: Double) { celsius.append(value) }

    var average: Double? { celsius.isEmpty ? nil : celsius.reduce(0, +) / Double(celsius.count) }
}

/// The agents of the demo and their conversation.
struct DemoScenario {
    let connection: ConnectionOptions
    let url: String
    let readings: Int
    let logger: Logger

    static let averageOperation = "com.example.demo.averageCelsius"

    func makeAgent(_ name: String, registry: CoatyObjectRegistry) throws -> CommunicationManager {
        let identity = Identity(name: name)
        var configuration = try connection.mqttConfiguration(identityId: identity.objectId)
        if url != connection.broker {
            // The local broker: plain MQTT, no credentials.
            configuration = try MQTTConfiguration.coaty(url: url, identityId: identity.objectId)
        }
        return try CommunicationManager(
            transport: MQTTTransport(configuration: configuration, logger: logger),
            identity: identity,
            registry: registry,
            options: connection.managerOptions,
            logger: logger
        )
    }

    func run() async throws {
        let registry = CoatyObjectRegistry([Reading.self, Thermometer.self])
        let sensor = try makeAgent("Thermometer agent", registry: registry)
        let observer = try makeAgent("Dashboard agent", registry: registry)
        let recorderAgent = try makeAgent("Recorder agent", registry: registry)
        let thermometer = Thermometer(name: "Kitchen thermometer", externalId: "thermometer-1", room: "kitchen")
        let log = ReadingLog()

        // The sensor answers Discovers of its thermometer and Calls for the average.
        let discovers = try sensor.observeDiscover()
        let calls = try sensor.observeCall(operation: Self.averageOperation)
        // The observer prints typed readings.
        let typedReadings = try observer.observeAdvertise(Reading.self)

        // The recorder agent persists every Advertise into a temporary SQLite file and answers
        // Queries (and Discovers) from it.
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-demo-\(CoatyUUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let databasePath = directory + "/demo.sqlite"
        let recorder = CoatyRecorder(
            manager: recorderAgent,
            connection: try SQLiteDatabase(path: databasePath).makeConnection(),
            configuration: .init(coreTypes: [.coatyObject], answersDiscovers: false),
            logger: logger
        )
        // Owned by this command: cancelled when the demo ends.
        let recording = Task { try await recorder.run() }
        defer { recording.cancel() }

        let agents = [sensor, observer, recorderAgent]
        for agent in agents {
            do {
                try await agent.start()
            } catch let error as CommunicationError {
                for agent in agents { await agent.stop() }
                throw CLIError(CLIAgent.describe(error, url: url, seconds: connection.connectTimeout))
            }
        }
        await discovers.subscribed()
        await calls.subscribed()
        await typedReadings.subscribed()
        await recorder.ready()
        Output.line(
            "▶ agents online: sensor \"\(sensor.identity.name)\", observer \"\(observer.identity.name)\", "
                + "recorder \"\(recorderAgent.identity.name)\" (SQLite: \(databasePath))"
        )

        var summary = Summary()
        do {
            summary = try await withThrowingTaskGroup(of: Summary?.self) { group in
                group.addTask {
                    for await discover in discovers {
                        guard discover.data.externalId == thermometer.externalId else { continue }
                        Output.line("  sensor   ← Discover externalId \"\(thermometer.externalId ?? "")\" → Resolve")
                        try await discover.resolve(object: thermometer)
                    }
                    return nil
                }
                group.addTask {
                    for await call in calls {
                        let average = await log.average
                        Output.line("  sensor   ← Call \(call.operation) → Return \(Self.format(average))")
                        if let average {
                            try await call.returnResult(.double(average))
                        } else {
                            try await call.returnError(code: 1, message: "No readings yet")
                        }
                    }
                    return nil
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(30))
                    throw CLIError("The demo did not finish within 30 s; try --log-level debug to see why.")
                }
                group.addTask {
                    try await conversation(
                        sensor: sensor,
                        observer: observer,
                        readings: typedReadings,
                        log: log,
                        recorder: recorder
                    )
                }
                return try await group.firstDecision(or: Summary())
            }
        } catch {
            recorder.stop()
            for agent in agents { await agent.stop() }
            throw error
        }
        recorder.stop()
        _ = try? await recording.value
        for agent in agents { await agent.stop() }
        Output.line(
            "✔ summary: sensor published \(summary.published), observer received \(summary.received); "
                + "Discover → \(summary.resolved) Resolve; Call → Return \(Self.format(summary.average)); "
                + "recorder stored \(summary.stored), Query → Retrieve \(summary.retrieved)"
        )
        let expectedRetrieved = min(3, summary.published)
        guard summary.received == summary.published, summary.resolved == 1, summary.average != nil,
            summary.stored == summary.published, summary.retrieved == expectedRetrieved
        else {
            throw CLIError("The demo's agents did not exchange every message (see the summary above).")
        }
        if url == connection.broker {
            let namespace =
                connection.namespace == CoatyTopic.defaultNamespace ? "" : " --namespace \(connection.namespace)"
            Output.line(
                "  try: coaty observe advertise --object-type \(Reading.objectType)"
                    + " --broker \(connection.brokerForMessages)\(namespace)"
            )
        }
    }

    struct Summary: Sendable {
        var published = 0
        var received = 0
        var resolved = 0
        var average: Double?
        var stored = 0
        var retrieved = 0
    }

    /// The observer's side: discover the thermometer, receive the readings, call for the average.
    func conversation(
        sensor: CommunicationManager,
        observer: CommunicationManager,
        readings typedReadings: EventObservation<AdvertiseEvent<Reading>>,
        log: ReadingLog,
        recorder: CoatyRecorder
    ) async throws -> Summary {
        var summary = Summary()

        // 1. Discover → Resolve.
        Output.line("  observer → Discover externalId \"thermometer-1\"")
        let resolve = try await observer.publishDiscover(
            .externalId("thermometer-1", objectTypes: [Thermometer.objectType])
        ).first(timeout: .seconds(5))
        guard let found = resolve?.data.object?.as(Thermometer.self) else {
            throw CLIError("The sensor did not answer the Discover within 5 s.")
        }
        summary.resolved = 1
        Output.line("  observer ← Resolve: \(Thermometer.objectType) \"\(found.name)\" in the \(found.room)")

        // 2. Advertise typed readings; the observer prints each as it arrives.
        let count = readings
        summary.received = try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                var received = 0
                for await event in typedReadings {
                    let reading = event.object
                    received += 1
                    Output.line(
                        "  observer ← Reading #\(reading.sequence): \(Self.format(reading.celsius)) (typed \(Reading.self))"
                    )
                    if received == count { break }
                }
                return received
            }
            for sequence in 1...count {
                let celsius = 20 + Double((sequence * 7) % 10) * 0.3
                let reading = Reading(
                    name: "Kitchen temperature",
                    parentObjectId: found.objectId,
                    sequence: sequence,
                    celsius: (celsius * 10).rounded() / 10
                )
                Output.line("  sensor   → Advertise \(Reading.objectType) #\(sequence)")
                try await sensor.publishAdvertise(reading)
                await log.append(reading.celsius)
                summary.published += 1
                if count <= 20 { try await Task.sleep(for: .milliseconds(120)) }
            }
            let received = try await group.next() ?? 0
            group.cancelAll()
            return received
        }

        // 3. Call → Return.
        Output.line("  observer → Call \(Self.averageOperation)")
        let returned = try await observer.publishCall(
            Self.averageOperation,
            data: CallEventData(parameters: ["unit": "celsius"])
        ).first(timeout: .seconds(5))
        summary.average = returned?.data.result?.doubleValue
        Output.line("  observer ← Return: average \(Self.format(summary.average))")

        // 4. Query → Retrieve, answered by the recorder from its SQLite file.
        let filter = ObjectFilter.where("name", .equals("Kitchen temperature")).orderBy("celsius", .descending).take(3)
        Output.line("  observer → Query \(Reading.objectType), the 3 warmest (\(filter))")
        let retrieve = try await observer.publishQuery(
            QueryEventData(objectTypes: [Reading.objectType], objectFilter: filter)
        ).first(timeout: .seconds(5))
        let statistics = recorder.statistics
        summary.stored = statistics.stored
        Output.line("  recorder ← Query → Retrieve from SQLite (\(statistics.stored) objects stored)")
        let warmest = retrieve?.data.objects.compactMap { $0.as(Reading.self) } ?? []
        summary.retrieved = warmest.count
        let listed = warmest.map { "#\($0.sequence) \(Self.format($0.celsius))" }.joined(separator: ", ")
        Output.line("  observer ← Retrieve: \(warmest.count) readings: \(listed)")
        return summary
    }

    static func format(_ celsius: Double?) -> String {
        guard let celsius else { return "none" }
        return String(format: "%.2f °C", celsius)
    }
}
