// CoatyMicro: in-process micro benchmarks with ordo-one/benchmark (they replace the hand-written
// loops of the former codec-benchmark). Each of ours is paired with
// a baseline doing the same work in the same run ("… — baseline: …"): compare the two rows.
//
//   cd Benchmarks/Micro && swift package --allow-writing-to-package-directory benchmark
//   (or Benchmarks/run micro; --filter REGEX selects the benchmarks whose whole name matches)
//
// Metrics: wall clock and allocations (malloc interposer) per iteration, and CPU instructions
// where the machine has hardware counters (a VM without them leaves that row out; the project's
// repeatable instruction counts are `Benchmarks/run agent --instructions`, under callgrind).

import Benchmark
import CoatyCore
import CoatySQLite
import Foundation
import GRDB

// MARK: - Fixtures

/// The custom object type of the codec benchmarks, as an application declares it.
struct Light: CoatyObject, Hashable {
    static let objectType = "com.example.Light"
    var objectId = CoatyUUID()
    var name: String
    var parentObjectId: CoatyUUID?
    var isOn: Bool
    var luminance: Double
    var colorTemperature: Int
    var room: String
}

/// The same shapes as plain `Codable` structs, for Foundation's coders.
struct PlainLight: Codable {
    var objectType: String
    var coreType: String
    var objectId: UUID
    var name: String
    var parentObjectId: UUID?
    var isOn: Bool
    var luminance: Double
    var colorTemperature: Int
    var room: String
}

/// The private data of the payload, for Foundation.
struct PlainPrivateData: Codable {
    var sender: String
    var sequence: Int
}

/// An Advertise payload, for Foundation.
struct PlainAdvertise: Codable {
    var object: PlainLight
    var privateData: PlainPrivateData?
}

/// Our typed Advertise payload for the encoder.
struct TypedAdvertise<Object: Codable>: Codable {
    var object: Object
    var privateData: JSONObject?
}

/// A ~300-byte Advertise payload as another agent sends it.
let payload = Array(
    """
    {"object":{"objectType":"com.example.Light","coreType":"CoatyObject",\
    "objectId":"3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a11","name":"Light 17",\
    "parentObjectId":"8f14e45f-ceea-467a-9f4e-3a2b1c0d9e22","isOn":true,"luminance":0.75,\
    "colorTemperature":2700,"room":"B7-4.12"},\
    "privateData":{"sender":"ui","sequence":123456}}
    """.utf8
)

/// The lowercase objectId of object `i`.
func objectId(_ i: Int) -> String {
    String(format: "00000000-0000-4000-8000-%012x", i)
}

/// Object `i` of the matcher and store benchmarks: one of ten object types, one of 1000 external
/// ids, a numeric `value` over 0…999.99 (the objects of `Benchmarks/run store`).
func objectJSON(_ i: Int) -> String {
    let value = Double((i &* 7919) % 100_000) / 100
    return #"""
        {"objectType":"com.example.bench.Sensor\#(i % 10)","coreType":"CoatyObject","objectId":"\#(objectId(i))",\#
        "name":"Sensor reading \#(i)","externalId":"meter-\#(i % 1000)","value":\#(value),"unit":"°C","sequence":\#(i),"room":"B7-\#(i % 50)"}
        """#
}

/// The receipt the recorder stores beside each object.
let receipt = ReceiptMetadata(
    sourceId: CoatyUUID("5f3c2a10-7b1e-4d2a-9c3e-0a1b2c3d4e5f"),
    eventType: "Advertise",
    topic: "coaty/3/-/ADV:CoatyObject/5f3c2a10-7b1e-4d2a-9c3e-0a1b2c3d4e5f",
    receivedAt: Date(timeIntervalSince1970: 1_700_000_000.5)
)

/// A database file in a fresh directory, for a benchmark's run; see ``removeTemporaryDatabase(_:)``.
func temporaryDatabasePath(_ name: String) throws -> String {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coaty-micro-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory.appendingPathComponent(name).path
}

/// Removes the directory of ``temporaryDatabasePath(_:)`` with the database and its WAL.
func removeTemporaryDatabase(_ path: String) {
    try? FileManager.default.removeItem(at: URL(fileURLWithPath: path).deletingLastPathComponent())
}

/// Fails the run when a benchmark's two sides disagree (a benchmark of the wrong work is worse
/// than none).
func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        FileHandle.standardError.write(Data("CoatyMicro: \(message())\n".utf8))
        exit(1)
    }
}

// MARK: - Benchmarks

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .instructions],
        warmupIterations: 10,
        scalingFactor: .kilo,
        maxDuration: .seconds(3),
        maxIterations: 1_000
    )

    // Codec: one received payload, 1 000 times per iteration (scalingFactor .kilo).
    let registry = CoatyObjectRegistry([Light.self])
    let foundationDecoder = JSONDecoder()
    let payloadData = Data(payload)
    check(
        (try? AdvertiseEventData(bytes: payload, registry: registry).object.as(Light.self)?.room) == "B7-4.12",
        "the payload does not decode to the Light"
    )

    Benchmark("codec: parse the payload → JSONValue") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try JSONValue(parsing: payload)) }
    }
    Benchmark("codec: Advertise payload → registered Light (AnyCoatyObject)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try AdvertiseEventData(bytes: payload, registry: registry))
        }
    }
    let coreOnly = CoatyObjectRegistry()
    check(
        (try? coreOnly.decode(JSONValue(parsing: payload)["object"]!).as(BaseObject.self)?.custom.count) == 4,
        "the core view does not keep the four custom members"
    )
    Benchmark("codec: Advertise payload → core BaseObject with the custom members") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try AdvertiseEventData(bytes: payload, registry: coreOnly))
        }
    }
    let typedDecoder = JSONValueDecoder(registry: registry)
    Benchmark("codec: Advertise payload → Advertise<Light> typed (no AnyCoatyObject)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try typedDecoder.decode(TypedAdvertise<Light>.self, from: payload))
        }
    }
    Benchmark("codec: Advertise payload → typed Light — baseline: Foundation JSONDecoder, plain Codable") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try foundationDecoder.decode(PlainAdvertise.self, from: payloadData))
        }
    }

    let light = Light(
        objectId: CoatyUUID("3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a11")!,
        name: "Light 17",
        parentObjectId: CoatyUUID("8f14e45f-ceea-467a-9f4e-3a2b1c0d9e22"),
        isOn: true,
        luminance: 0.75,
        colorTemperature: 2700,
        room: "B7-4.12"
    )
    let privateData: JSONObject = ["sender": "ui", "sequence": 123_456]
    let plain = try! foundationDecoder.decode(PlainAdvertise.self, from: payloadData)
    let encoder = JSONValueEncoder()
    let foundationEncoder = JSONEncoder()

    Benchmark("codec: encode Advertise<Light> → bytes") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try encoder.encodeToBytes(TypedAdvertise(object: light, privateData: privateData)))
        }
    }
    Benchmark("codec: encode Light → bytes, streamed (the publish path)") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try encoder.encodeToBytes(light)) }
    }
    Benchmark("codec: encode Light → JSONValue tree → bytes") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try encoder.encode(light).serializedBytes()) }
    }
    let any = try! AnyCoatyObject(light)
    Benchmark("codec: encode an Advertise of AnyCoatyObject → bytes") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(JSONValue.object(["object": .object(any.json), "privateData": .object(privateData)]).serializedBytes())
        }
    }
    Benchmark("codec: new CoatyUUID()") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(CoatyUUID()) }
    }
    Benchmark("codec: new CoatyUUID() — baseline: Foundation UUID()") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(UUID()) }
    }
    Benchmark("codec: encode Advertise<Light> → bytes — baseline: Foundation JSONEncoder, plain Codable") {
        benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try foundationEncoder.encode(plain))
        }
    }

    // Matcher: a Query's filter over 10 000 parsed objects (one object type of ten, a 1 % range
    // of a numeric member: about 10 objects, take 5), once per iteration.
    let objects = (0..<10_000).map { try! JSONValue(parsing: Array(objectJSON($0).utf8)) }
    let filter = ObjectFilter.where("objectType", .equals("com.example.bench.Sensor3"))
        .and("value", .between(500, 510))
        .take(5)
    let compiled = CompiledObjectFilter(filter)
    /// The same selection written by hand over the JSON, as an application without a filter
    /// language would.
    func handWritten(_ objects: [JSONValue]) -> [JSONValue] {
        var selected: [JSONValue] = []
        for object in objects {
            guard object["objectType"]?.stringValue == "com.example.bench.Sensor3",
                let value = object["value"]?.doubleValue, value >= 500, value <= 510
            else { continue }
            selected.append(object)
            if selected.count == 5 { break }
        }
        return selected
    }
    check(compiled.apply(to: objects) == handWritten(objects), "the filter and the hand-written selection differ")
    check(handWritten(objects).count == 5, "the selection is not 5 objects")

    Benchmark("matcher: compiled ObjectFilter over 10 000 objects", configuration: .init(scalingFactor: .one)) {
        benchmark in
        for _ in benchmark.scaledIterations { blackHole(compiled.apply(to: objects)) }
    }
    Benchmark("matcher: ObjectMatcher.apply (compiles per call) over 10 000 objects", configuration: .init(scalingFactor: .one)) {
        benchmark in
        for _ in benchmark.scaledIterations { blackHole(ObjectMatcher.apply(filter, to: objects)) }
    }
    Benchmark(
        "matcher: over 10 000 objects — baseline: the same selection hand-written in Swift",
        configuration: .init(scalingFactor: .one)
    ) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(handWritten(objects)) }
    }

    // Store: 1 000 received objects upserted into SQLite in one transaction per iteration (the
    // same 1 000 keys each time, so every iteration replaces the rows in place), through the
    // typed writer; the baseline binds the same values into the same upsert with raw GRDB.
    let decoder = CoatyObjectRegistry()
    let texts = (0..<1_000).map { Array(objectJSON($0).utf8) }
    let received = texts.map { try! decoder.decode(bytes: $0) }
    let metadataText = String(decoding: (try! JSONValueEncoder().encodeToBytes(receipt)), as: UTF8.self)

    Benchmark("store: SQLite upsert of 1 000 objects with receipts (typed writer)", configuration: .init(scalingFactor: .one)) {
        benchmark in
        let path = try temporaryDatabasePath("ours.sqlite")
        defer { removeTemporaryDatabase(path) }
        let connection = try SQLiteDatabase(path: path).makeConnection()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await connection.write { tx in
                let writer = AnyCoatyObject.writer(tx)
                for object in received { try await writer.write(object, metadata: receipt) }
            }
        }
        benchmark.stopMeasurement()
        let count = try await StoreRepository(connection: connection, coatyObjects: AnyCoatyObject.self).count()
        check(count == received.count, "ours stored \(count) rows, not \(received.count)")
    }
    Benchmark(
        "store: SQLite upsert of 1 000 objects — baseline: raw GRDB, prepared statement, same schema and settings",
        configuration: .init(scalingFactor: .one)
    ) { benchmark in
        let path = try temporaryDatabasePath("baseline.sqlite")
        defer { removeTemporaryDatabase(path) }
        _ = try SQLiteDatabase(path: path)  // the same schema and indexes
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            for pragma in SQLiteDatabase.pragmas { try db.execute(sql: pragma) }
        }
        let pool = try DatabasePool(path: path, configuration: configuration)
        let rows = (0..<1_000).map { i in
            let object = received[i]
            return (
                collection: object.objectType, key: object.objectId.uuidString, text: String(decoding: texts[i], as: UTF8.self),
                name: object.name, externalId: object.externalId
            )
        }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await pool.write { db in
                let statement = try db.cachedStatement(
                    sql: """
                        INSERT INTO coaty_rows (collection, key, object, metadata, objectId, objectType, coreType, name,
                        externalId, parentObjectId, locationId) VALUES (?, ?, ?, ?, ?, ?, 'CoatyObject', ?, ?, NULL, NULL)
                        ON CONFLICT (collection, key) DO UPDATE SET object = excluded.object,
                        metadata = excluded.metadata, objectId = excluded.objectId, objectType = excluded.objectType,
                        coreType = excluded.coreType, name = excluded.name, externalId = excluded.externalId,
                        parentObjectId = excluded.parentObjectId, locationId = excluded.locationId
                        """
                )
                for row in rows {
                    try statement.execute(arguments: [
                        row.collection, row.key, row.text, metadataText, row.key, row.collection, row.name,
                        row.externalId,
                    ])
                }
            }
        }
        benchmark.stopMeasurement()
        let count = try await pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM coaty_rows") ?? 0 }
        check(count == rows.count, "the baseline stored \(count) rows, not \(rows.count)")
    }
}
