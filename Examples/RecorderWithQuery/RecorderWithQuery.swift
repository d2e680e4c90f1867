// recorder-with-query: a recorder agent (CoatyStore's CoatyRecorder) persists every Advertise it
// receives into a SQLite file; a sensor agent advertises a few readings into it; at the end a
// query of our own runs over the stored objects through the typed repository layer.
//
//   swift run recorder-with-query [--broker mqtt://127.0.0.1:1883] [--db PATH] [--count 10] [--take 3]
//
// While it runs, other agents can query it too, e.g.
//   coaty query --object-types com.example.recorder.Reading

import ArgumentParser
import CoatyKit
import CoatySQLite
import CoatyStore
import CoatyRecording
import Foundation

/// A reading of a room's temperature: the custom object type we record and query.
struct RoomReading: CoatyObject, Hashable {
    static let objectType = "com.example.recorder.Reading"
    var objectId = CoatyUUID()
    var name: String
    var room: String
    var celsius: Double
}

@main
struct RecorderWithQuery: AsyncParsableCommand {
    @Option(help: "The broker, mqtt://HOST:PORT or mqtts://HOST:PORT; $COATY_BROKER sets the default.")
    var broker = ProcessInfo.processInfo.environment["COATY_BROKER"] ?? "mqtt://127.0.0.1:1883"

    @Option(help: "The SQLite file (default: a temporary file, removed at exit).")
    var db: String?

    @Option(help: "How many readings the sensor advertises: 18 °C, 19 °C, …")
    var count = 10

    @Option(help: "How many of the warmest readings the query returns.")
    var take = 3

    func run() async throws {
        let registry = CoatyObjectRegistry([RoomReading.self])
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("recorder-\(CoatyUUID()).sqlite")
        let database = try SQLiteDatabase(path: db ?? temporary.path)
        defer { if db == nil { for suffix in ["", "-wal", "-shm"] { unlink(temporary.path + suffix) } } }

        // The recorder agent. The recorder runs before the manager starts, so its subscriptions
        // exist before the identity Advertise says "ready".
        let recorderAgent = try CommunicationManager.mqtt(url: broker, identity: Identity(name: "Recorder"))
        let recorder = CoatyRecorder(manager: recorderAgent, connection: database.makeConnection())
        let recorded = recorder.events()
        let recording = Task { try await recorder.run() }
        try await recorderAgent.start()
        await recorder.ready()
        print("recording into \(database.path)")

        // A sensor agent advertising readings in two rooms.
        let sensor = try CommunicationManager.mqtt(url: broker, identity: Identity(name: "Sensor"))
        try await sensor.start()
        for index in 0..<count {
            let room = index.isMultiple(of: 2) ? "kitchen" : "office"
            try await sensor.publishAdvertise(
                RoomReading(name: "Reading \(index + 1)", room: room, celsius: 18 + Double(index))
            )
        }

        // Wait until the recorder committed them (at most 10 s; stopping the recorder ends its events).
        let watchdog = Task {
            try await Task.sleep(for: .seconds(10))
            recorder.stop()
        }
        var stored = 0
        for await event in recorded {
            guard case .stored(_, RoomReading.objectType, _) = event else { continue }
            stored += 1
            if stored == count { break }
        }
        watchdog.cancel()

        // Our own query: the warmest kitchen readings of at least 20 °C, warmest first. Application
        // code holds an AnyRepository and never names the backend after this line.
        let readings = AnyRepository(
            StoreRepository(connection: database.makeConnection(), coatyObjects: RoomReading.self, registry: registry)
        )
        let filter = ObjectFilter.where("room", .equals("kitchen"))
            .and("celsius", .greaterThanOrEqual(20))
            .orderBy("celsius", .descending)
            .take(take)
        let warmest = try await readings.fetch(FetchOptions(filter: filter))
        print("recorded \(try await readings.count()) readings; the \(take) warmest in the kitchen from 20 °C:")
        for reading in warmest {
            print("  \(reading.name): \(reading.room), \(reading.celsius) °C")
        }

        await sensor.stop()
        recorder.stop()
        try await recording.value
        await recorderAgent.stop()
    }
}
