// store-benchmark: CoatyStore + CoatySQLite against raw baselines, in the same run, against a
// broker this program starts with a pinned configuration.
//
//   Benchmarks/run store [--json] [--objects N] [--runs K] [--queries Q]
//
// (which builds `store-benchmark` with `swift build -c release` and runs
// `.build/release/store-benchmark`). Scenarios:
//   1. Ingest from the wire into SQLite: a foreign raw MQTT client (CoatyMQTT, in a child
//      process) advertises N objects as Coaty JSON on `coaty/3/-/ADV:CoatyObject/<source>`; a
//      `CoatyRecorder` over `SQLiteDatabase` (a temp file) stores them. Objects/s from the first
//      publish until all N are committed; zero loss is checked (row count = N). Baseline: a raw
//      GRDB insert of the same JSON rows (same table and indexes) with a prepared statement, in
//      transactions of the recorder's default batch size on a connection with SQLiteDatabase's
//      settings (the same durability); for reference also in one transaction with GRDB's default
//      settings, as reported before. K runs,
//      alternating, medians reported.
//   2. Selective Queries over the N stored objects: `StoreRepository.fetch` with an ObjectFilter
//      pushed into SQL against a full in-memory scan with `ObjectMatcher.apply` over the same N
//      objects: (a) objectType equals (an indexed column) and a numeric `between` on a JSON
//      property (a necessary condition in SQL, re-checked by ObjectMatcher), take 20; (b)
//      objectType and externalId equal (indexed columns, exact, take as LIMIT). p50 and p99 over Q
//      repetitions; both sides are checked to return the same objects in the same order.
//   3. Queries of one object type (the recorder's path): a range on a JSON property (take 20) and an
//      ordered page (orderBy sequence desc, skip 1000, take 50), without and with declared indexes
//      on those properties, against the in-memory scan (scan-then-sort).
import BenchmarkSupport
import CoatyKit
import CoatySQLite
import CoatyStore
import CoatyRecording
import CoatyTesting
import Foundation
import GRDB
import Logging

// MARK: - The objects

/// The lowercase objectId of object `i`.
func objectId(_ i: Int) -> String {
    String(format: "00000000-0000-4000-8000-%012x", i)
}

/// Object `i` as a foreign agent advertises it: one of ten object types, one of 1000 external
/// ids, a numeric `value` spread over 0…999.99.
func objectJSON(_ i: Int) -> String {
    let value = Double((i &* 7919) % 100_000) / 100
    return #"""
        {"objectType":"com.example.bench.Sensor\#(i % 10)","coreType":"CoatyObject","objectId":"\#(objectId(i))",\#
        "name":"Sensor reading \#(i)","externalId":"meter-\#(i % 1000)","value":\#(value),"unit":"°C","sequence":\#(i),"room":"B7-\#(i % 50)"}
        """#
}

let advertiseTopic = "coaty/3/-/ADV:CoatyObject/5f3c2a10-7b1e-4d2a-9c3e-0a1b2c3d4e5f"

/// The selective queries: one object type of ten and a 1 % range of a numeric JSON property (pushed
/// into SQL as a necessary condition, re-checked by ObjectMatcher), or one external id of 1000
/// (exact on indexed columns, take pushed into SQL as LIMIT); at most 20 objects each.
let selectiveFilters: [(name: String, filter: ObjectFilter)] = {
    var range = ObjectFilter.where("objectType", .equals("com.example.bench.Sensor3")).and("value", .between(500, 510))
    range.take = 20
    var indexed = ObjectFilter.where("objectType", .equals("com.example.bench.Sensor3"))
        .and("externalId", .equals("meter-123"))
    indexed.take = 20
    return [
        ("objectType = Sensor3 AND value BETWEEN 500 AND 510 (JSON property), take 20", range),
        ("objectType = Sensor3 AND externalId = meter-123 (indexed columns), take 20", indexed),
    ]
}()

// MARK: - Roles

/// `publish HOST PORT COUNT`: a plain MQTT client publishes COUNT Advertise events, prints the
/// monotonic time of its first publish, and disconnects when its standard input ends.
func runPublisher(_ args: [String]) async throws {
    let count = Int(args[2])!
    let payloads = (0..<count).map { Array(#"{"object":\#(objectJSON($0))}"#.utf8) }
    var configuration = try MQTTConfiguration(url: "mqtt://\(args[0]):\(args[1])", clientId: "foreign-\(getpid())")
    configuration.keepAlive = .seconds(60)
    var logger = Logger(label: "store-benchmark.publisher")
    logger.logLevel = .warning
    let client = MQTTClient(configuration: configuration, logger: logger)
    try await client.connect()
    let first = monotonicNanoseconds()
    for payload in payloads {
        try await client.publish(advertiseTopic, payload: payload)
    }
    emit(["published": .int(Int64(count)), "firstPublishNs": .int(Int64(first))])
    // Stay connected until the driver is done: QoS 0 messages still queued in this client must
    // not be cut off by the disconnect.
    waitForEndOfInput()
    await client.disconnect()
}

// MARK: - Ingest

/// A fresh temporary directory, removed by the caller.
func temporaryDirectory() throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("coaty-store-bench-\(UUID().uuidString)")
        .path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// The number of Coaty objects stored in a SQLite file, read through a fresh connection.
func storedCount(_ path: String) async throws -> Int {
    try await StoreRepository(
        connection: try SQLiteDatabase(path: path).makeConnection(),
        coatyObjects: AnyCoatyObject.self
    )
    .count()
}

/// Ours: a recorder over SQLite fed by a foreign publisher process; objects/s and counters.
func ingestOurs(port: Int, count: Int, path: String) async throws -> (perSecond: Double, details: JSONObject) {
    let identity = Identity(name: "recorder")
    // The defaults a user gets: back-pressure holds the reads while the store is behind (the
    // benchmark's broker keeps the backlog); anything dropped is counted and fails the run.
    let configuration = try MQTTConfiguration.coaty(url: "mqtt://127.0.0.1:\(port)", identityId: identity.objectId)
    let metrics = CountingMetrics()
    let manager = try CommunicationManager(
        transport: MQTTTransport(configuration: configuration, metricsFactory: metrics),
        identity: identity,
        metricsFactory: metrics
    )
    // Only CoatyObject's topic: the identity Advertise (core type Identity) is not recorded.
    let recorder = CoatyRecorder(
        manager: manager,
        connection: try SQLiteDatabase(path: path).makeConnection(),
        configuration: .init(coreTypes: [.coatyObject])
    )
    let run = Task { try await recorder.run() }
    try await manager.start()
    await recorder.ready()

    let cpuStart = processCPUMicroseconds()
    let publisher = try Child(currentExecutable, ["publish", "127.0.0.1", String(port), String(count)])
    var end: UInt64 = 0
    var lastProgress = (stored: -1, at: monotonicNanoseconds())
    while true {
        let stored = recorder.statistics.stored
        let now = monotonicNanoseconds()
        if stored >= count {
            end = now
            break
        }
        if stored != lastProgress.stored {
            lastProgress = (stored, now)
        } else if now - lastProgress.at > 5_000_000_000 {
            break
        }
        // Every 10 ms: the end is known to 0.2 % of a 5 s run, and the poll's own wake-ups (1000 a
        // second at 1 ms, 2–3 µs of CPU per stored object) no longer compete with the recorder for
        // the machine's cores.
        try await Task.sleep(for: .milliseconds(10))
    }
    let cpuPerObject = (processCPUMicroseconds() - cpuStart) / Double(count)
    publisher.closeInput()
    let published = try publisher.readJSON()
    publisher.wait()
    recorder.stop()
    try await run.value
    await manager.stop()

    let statistics = recorder.statistics
    let rows = try await storedCount(path)
    let details: JSONObject = [
        "published": .int(Int64(published.integer("published"))),
        "received": .int(Int64(statistics.received)),
        "stored": .int(Int64(statistics.stored)),
        "rows": .int(Int64(rows)),
        "batches": .int(Int64(statistics.batches)),
        "peakQueueDepth": .int(Int64(statistics.peakQueueDepth)),
        "backPressureWaits": .int(Int64(statistics.backPressureWaits)),
        "failedWrites": .int(Int64(statistics.failedWrites)),
        "mqttDropped": .int(Int64(metrics.total("coaty_mqtt_dropped_messages_total"))),
        "observerOverflow": .int(Int64(manager.statistics.observerOverflow)),
        "recorderCPUMicrosecondsPerObject": .int(Int64(cpuPerObject.rounded())),
    ]
    guard end > 0, rows == count else {
        throw BenchmarkError("ingest lost objects: \(count) published, \(rows) rows: \(JSONValue.object(details))")
    }
    let first = UInt64(published.integer("firstPublishNs"))
    return (Double(count) / (Double(end - first) / 1e9), details)
}

/// How the raw GRDB baseline inserts.
enum BaselineInsert {
    /// The recorder's way: transactions of the recorder's default batch size, on a connection
    /// with `SQLiteDatabase`'s settings (WAL, synchronous NORMAL, mmap, autocheckpoint): the same
    /// durability and the same commits per row, without anything else the recorder does.
    case batched
    /// Everything in one transaction on a connection with GRDB's default settings (synchronous
    /// FULL, autocheckpoint every 1000 pages): the reference of earlier reports.
    case oneTransaction
}

/// The baseline: the same rows (object JSON, receipt metadata JSON, promoted columns) inserted
/// with a prepared raw GRDB statement into the same table; rows/s.
func ingestBaseline(count: Int, path: String, _ insert: BaselineInsert = .batched) async throws -> Double {
    try await ingestBaselineTimed(count: count, path: path, insert).perSecond
}

/// The process's CPU time (user + system), in microseconds.
func processCPUMicroseconds() -> Double {
    var usage = rusage()
    #if os(Linux)
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    #else
        getrusage(RUSAGE_SELF, &usage)
    #endif
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
}

/// ``ingestBaseline(count:path:_:)`` with the process's CPU time per row during the insert (µs).
func ingestBaselineTimed(count: Int, path: String, _ insert: BaselineInsert = .batched) async throws -> (
    perSecond: Double, cpuPerRow: Double
) {
    _ = try SQLiteDatabase(path: path)  // the same schema and indexes
    let metadata =
        #"{"sourceId":"5f3c2a10-7b1e-4d2a-9c3e-0a1b2c3d4e5f","eventType":"Advertise","topic":"\#(advertiseTopic)","receivedAt":1700000000.5}"#
    let rows = (0..<count).map { i in
        (
            objectType: "com.example.bench.Sensor\(i % 10)", objectId: objectId(i), json: objectJSON(i),
            name: "Sensor reading \(i)", externalId: "meter-\(i % 1000)"
        )
    }
    var configuration = Configuration()
    let batchSize: Int
    switch insert {
    case .batched:
        configuration.prepareDatabase { db in
            for pragma in SQLiteDatabase.pragmas { try db.execute(sql: pragma) }
        }
        batchSize = CoatyRecorder.Configuration().maxBatchSize
    case .oneTransaction:
        batchSize = count
    }
    let pool = try DatabasePool(path: path, configuration: configuration)
    let start = monotonicNanoseconds()
    let cpuStart = processCPUMicroseconds()
    for first in stride(from: 0, to: count, by: batchSize) {
        let batch = rows[first..<min(first + batchSize, count)]
        try await pool.write { db in
            let statement = try db.cachedStatement(
                sql: """
                    INSERT INTO coaty_rows (collection, key, object, metadata, objectId, objectType, coreType, name, externalId)
                    VALUES (?, ?, ?, ?, ?, ?, 'CoatyObject', ?, ?)
                    """
            )
            for row in batch {
                try statement.execute(arguments: [
                    row.objectType, row.objectId, row.json, metadata, row.objectId, row.objectType, row.name,
                    row.externalId,
                ])
            }
        }
    }
    let end = monotonicNanoseconds()
    let cpu = (processCPUMicroseconds() - cpuStart) / Double(count)
    let stored = try await storedCount(path)
    guard stored == count else { throw BenchmarkError("baseline stored \(stored) of \(count) rows") }
    return (Double(count) / (Double(end - start) / 1e9), cpu)
}

// MARK: - Query

/// p50/p99 in milliseconds of `repetitions` runs of `body`, and its last result.
func latencies<T>(_ repetitions: Int, _ body: () async throws -> T) async rethrows -> (
    p50: Double, p99: Double, result: T
) {
    var result = try await body()  // warm-up
    var samples: [UInt64] = []
    for _ in 0..<repetitions {
        let start = monotonicNanoseconds()
        result = try await body()
        samples.append(monotonicNanoseconds() - start)
    }
    let percentiles = LatencyPercentiles(nanoseconds: samples)
    return (percentiles.p50 / 1000, percentiles.p99 / 1000, result)
}

// MARK: - Driver

/// Times a pushed-down query against the in-memory scan with `scan` over `objects`, checks both
/// return the same objects in the same order, and gives its p50 and p99 rows.
func compareQuery(
    _ name: String,
    queries: Int,
    scan: ObjectFilter,
    over objects: [JSONValue],
    pushed query: () async throws -> [String]
) async throws -> (count: Int, rows: [BenchmarkRow]) {
    let pushed = try await latencies(queries, query)
    let scanned = await latencies(queries) { ObjectMatcher.apply(scan, to: objects) }
    let scannedIds = scanned.result.compactMap { $0["objectId"]?.stringValue }
    guard pushed.result == scannedIds, !scannedIds.isEmpty else {
        throw BenchmarkError(
            "\(name): SQL returned \(pushed.result.count) objects, the scan \(scannedIds.count), or others"
        )
    }
    return (
        scannedIds.count,
        [
            BenchmarkRow(
                "Query p50 (ms): \(name)",
                better: .lower,
                ours: pushed.p50,
                baseline: scanned.p50,
                decimals: 3
            ),
            BenchmarkRow(
                "Query p99 (ms): same query",
                better: .lower,
                ours: pushed.p99,
                baseline: scanned.p99,
                decimals: 3
            ),
        ]
    )
}

func drive(_ options: BenchmarkOptions) async throws {
    let (count, runs, queries) = (options["--objects"], options["--runs"], options["--queries"])
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var ours: [Double] = []
    var baseline: [Double] = []
    var oneTransaction: [Double] = []
    var details: JSONObject = [:]
    var recorded = ""
    try await withBroker { broker in
        for run in 0..<runs {
            baseline.append(try await ingestBaseline(count: count, path: "\(directory)/baseline-\(run).sqlite"))
            oneTransaction.append(
                try await ingestBaseline(count: count, path: "\(directory)/one-\(run).sqlite", .oneTransaction)
            )
            recorded = "\(directory)/recorder-\(run).sqlite"
            let result = try await ingestOurs(port: broker.port, count: count, path: recorded)
            ours.append(result.perSecond)
            details = result.details
        }
    }

    // The selective query over what the last recorder run stored, and over the same objects in memory.
    let repository = StoreRepository(
        connection: try SQLiteDatabase(path: recorded).makeConnection(),
        coatyObjects: AnyCoatyObject.self
    )
    let objects = try (0..<count).map { try JSONValue(parsing: objectJSON($0)) }
    var queryRows: [BenchmarkRow] = []
    var matches: JSONObject = [:]
    for (name, filter) in selectiveFilters {
        let found = try await compareQuery(name, queries: queries, scan: filter, over: objects) {
            try await repository.fetch(FetchOptions(filter: filter)).map(\.objectId.uuidString)
        }
        matches[name] = .int(Int64(found.count))
        queryRows += found.rows
    }

    // Queries of one object type (as a recorder answers a Query with objectTypes), without and
    // with declared indexes on the JSON properties they compare and order by.
    let database = try SQLiteDatabase(path: recorded)
    let storage = ConnectionRecorderStorage(database.makeConnection())
    let sensor = "com.example.bench.Sensor3"
    let typedFilters: [(name: String, filter: ObjectFilter, scan: ObjectFilter)] = [
        (
            "value BETWEEN 500 AND 510 (JSON property), take 20",
            ObjectFilter.where("value", .between(500, 510)).take(20),
            ObjectFilter.where("objectType", .equals(.string(sensor))).and("value", .between(500, 510)).take(20)
        ),
        (
            "orderBy sequence desc, skip 1000, take 50",
            ObjectFilter().orderBy("sequence", .descending).skip(1000).take(50),
            ObjectFilter.where("objectType", .equals(.string(sensor))).orderBy("sequence", .descending).skip(1000)
                .take(50)
        ),
    ]
    for indexed in [false, true] {
        if indexed {
            try await database.createIndex(collection: sensor, property: "value")
            try await database.createIndex(collection: sensor, property: "sequence")
        }
        for (name, filter, scanFilter) in typedFilters {
            let label = "one object type, \(indexed ? "indexed" : "no index"): \(name)"
            queryRows += try await compareQuery(label, queries: queries, scan: scanFilter, over: objects) {
                try await storage.objects(in: .collections([sensor]), filter: filter, joins: [])
                    .compactMap { $0["objectId"]?.stringValue }
            }.rows
        }
    }

    // The in-memory backend with a property index on value, over the same objects.
    let memory = InMemoryDatabase()
    let memoryConnection = memory.makeConnection()
    try await memory.createIndex(collection: sensor, property: "value")
    try await memoryConnection.write { tx in
        for object in objects {
            let index = StoreIndex(object["objectType"]?.stringValue ?? "", object["objectId"]?.stringValue ?? "")
            tx.write(StoreRow(index: index, object: object), mode: .upsert)
        }
    }
    let memoryStorage = ConnectionRecorderStorage(memoryConnection)
    queryRows += try await compareQuery(
        "in-memory backend, one object type, indexed: \(typedFilters[0].name)",
        queries: queries,
        scan: typedFilters[0].scan,
        over: objects
    ) {
        try await memoryStorage.objects(in: .collections([sensor]), filter: typedFilters[0].filter, joins: [])
            .compactMap { $0["objectId"]?.stringValue }
    }.rows

    BenchmarkReport(
        title:
            "CoatyStore + CoatySQLite vs raw baselines (\(count) objects; ingest median of \(runs) runs; query p50/p99 of \(queries) runs)",
        parameters: options.parameters,
        rows: [
            BenchmarkRow(
                "ingest wire → recorder → SQLite (objects/s; baseline: raw GRDB insert, batches of the recorder's size, same settings)",
                better: .higher,
                ours: median(ours),
                baseline: median(baseline)
            ),
            BenchmarkRow(
                "ingest, same runs (objects/s; baseline: raw GRDB insert, one transaction, GRDB's default settings)",
                better: .higher,
                ours: median(ours),
                baseline: median(oneTransaction)
            ),
        ] + queryRows,
        details: [
            "last ingest run": .object(details),
            "ingest runs (objects/s)": .object([
                "ours": .array(ours.map { .int(Int64($0)) }),
                "baseline": .array(baseline.map { .int(Int64($0)) }),
                "one transaction": .array(oneTransaction.map { .int(Int64($0)) }),
            ]),
            "objects returned": .object(matches),
        ],
        notes: [
            "ingest: every object was committed in every run (checked: row count = \(count), read through a fresh connection).",
            "query: ours = StoreRepository<AnyCoatyObject>.fetch over SQLite (SQL pushdown, typed objects);"
                + " baseline = ObjectMatcher.apply over the same \(count) objects parsed in memory;"
                + " both returned the same objects in the same order (checked).",
            "one object type: ours = the recorder's Query path (ConnectionRecorderStorage.objects in the type's"
                + " collection, JSON); indexed = SQLiteDatabase.createIndex on value and sequence of that type"
                + " (coaty record --index; coaty record's defaults create it on the first such Query, so a recorder"
                + " answers from the indexed row after that; no index = --auto-index 0); baseline = the scan with"
                + " objectType = Sensor3 added, over all \(count) objects in memory (scan-then-sort for the ordered one).",
        ]
    ).print(json: options.json)
}

/// `answer-costs DB OBJECT-ID [N]`: the stages of answering a Discover from a recorder's SQLite file,
/// each timed over N rounds (µs per round): a profiling aid for `Benchmarks/run coatyjs`.
func runAnswerCosts(_ args: [String]) async throws {
    let database = try SQLiteDatabase(path: args[0])
    let storage = ConnectionRecorderStorage(database.makeConnection())
    let id = args[1]
    let rounds = args.count > 2 ? Int(args[2])! : 20_000
    func time(_ name: String, _ body: () async throws -> Void) async rethrows {
        let start = monotonicNanoseconds()
        for _ in 0..<rounds { try await body() }
        let perRound = Double(monotonicNanoseconds() - start) / Double(rounds) / 1000
        emit("\(name): \(String(format: "%.2f", perRound)) µs")
    }
    let registry = CoatyObjectRegistry()
    var json: JSONValue = .null
    try await time("storage.objects(where: objectId)") {
        json = try await storage.objects(where: "objectId", equals: id)[0]
    }
    let object = try registry.decode(json)
    try await time("registry.decode") { _ = try registry.decode(json) }
    try await time("Resolve payload serialize") {
        _ = JSONValue.object(try ResolveEventData(object: object).json).serializedBytes()
    }
    let text = json.serializedString()
    try await time("JSON parse of the row") { _ = try JSONValue(parsing: text) }
    let filter = try JSONValueDecoder().decode(
        ObjectFilter.self,
        from: #"{"conditions":["value",[0,500]],"orderByProperties":[["seq","Desc"]],"take":10}"#
    )
    var page: [JSONValue] = []
    try await time("storage.objects(in: Bench, value < 500 orderBy seq desc take 10)") {
        page = try await storage.objects(in: .collections(["com.example.Bench"]), filter: filter, joins: [])
    }
    var objects: [AnyCoatyObject] = []
    try await time("registry.decode of the page") { objects = try page.map { try registry.decode($0) } }
    await time("Retrieve payload serialize") {
        _ = JSONValue.object(RetrieveEventData(objects: objects).json).serializedBytes()
    }
    let pool = try DatabasePool(path: args[0])
    try await time("GRDB sync read, cached statement, one String") {
        _ = try pool.read { db in
            try String.fetchOne(
                db.cachedStatement(sql: "SELECT object FROM coaty_rows WHERE objectId = ?"),
                arguments: [id]
            )
        }
    }
    var readOnly = Configuration()
    readOnly.readonly = true
    let queue = try DatabaseQueue(path: args[0], configuration: readOnly)
    try await time("GRDB read-only DatabaseQueue.inDatabase, cached statement, one String") {
        _ = try queue.inDatabase { db in
            try String.fetchOne(
                db.cachedStatement(sql: "SELECT object FROM coaty_rows WHERE objectId = ?"),
                arguments: [id]
            )
        }
    }
    try await time("GRDB unsafeRead, cached statement, one String") {
        _ = try pool.unsafeRead { db in
            try String.fetchOne(
                db.cachedStatement(sql: "SELECT object FROM coaty_rows WHERE objectId = ?"),
                arguments: [id]
            )
        }
    }
}

/// `ingest-costs DIR [N]`: the recorder's writer alone (`ConnectionRecorderStorage.apply` of N
/// received objects in batches of 4096, as the recorder commits them) against the raw GRDB
/// insert of the same rows, and the decode of the N payloads: a profiling aid for the ingest row.
/// With `INGEST_COSTS_WRITER_ONLY` set in the environment it stops after the writer (for `perf`).
func runIngestCosts(_ args: [String]) async throws {
    let count = args.count > 1 ? Int(args[1])! : 100_000
    let registry = CoatyObjectRegistry()
    let texts = (0..<count).map { objectJSON($0) }
    var start = monotonicNanoseconds()
    _ = try texts.map { try registry.decode(bytes: Array($0.utf8)) }
    emit("decode \(count) payloads: \(Double(monotonicNanoseconds() - start) / Double(count) / 1000) µs each")
    // As the network thread decodes an Advertise event's payload (from its text, for a generic observer).
    let payloads = texts.map { Array(#"{"object":\#($0)}"#.utf8) }
    start = monotonicNanoseconds()
    var received: [AnyCoatyObject] = []
    received.reserveCapacity(count)
    for payload in payloads {
        if let data = try? AdvertiseEventData(bytes: payload, registry: registry) { received.append(data.object) }
    }
    emit(
        "decode \(received.count) Advertise payloads as received: \(Double(monotonicNanoseconds() - start) / Double(count) / 1000) µs each"
    )
    let receipt = ReceiptMetadata(sourceId: CoatyUUID(), eventType: "Advertise", topic: advertiseTopic)
    let storage = ConnectionRecorderStorage(try SQLiteDatabase(path: args[0] + "/writer.sqlite").makeConnection())
    // The objects as received (with their text, which the store writes as is), as the recorder has them.
    let batches = stride(from: 0, to: count, by: 4096).map { batch in
        received[batch..<min(batch + 4096, count)].map { RecorderMutation.store($0, receipt) }
    }
    start = monotonicNanoseconds()
    let cpuStart = processCPUMicroseconds()
    for batch in batches {
        _ = try await storage.apply(batch)
    }
    let ours = Double(count) / (Double(monotonicNanoseconds() - start) / 1e9)
    let cpu = (processCPUMicroseconds() - cpuStart) / Double(count)
    if ProcessInfo.processInfo.environment["INGEST_COSTS_WRITER_ONLY"] != nil {
        return emit("writer alone: \(Int(ours)) objects/s, \(Int(cpu)) µs CPU each")
    }
    let baseline = try await ingestBaselineTimed(count: count, path: args[0] + "/raw.sqlite")
    emit(
        "writer alone: \(Int(ours)) objects/s, \(Int(cpu)) µs CPU each; raw GRDB insert: \(Int(baseline.perSecond)) rows/s,"
            + " \(Int(baseline.cpuPerRow)) µs CPU each; ratio \(ours / baseline.perSecond), CPU ratio \(baseline.cpuPerRow / cpu)"
    )
}

/// `ingest-ours [N]`: only the ingest row's "ours" (a broker, a publisher child, the recorder
/// over SQLite with the defaults), once: a profiling aid (`perf record` sees nothing else).
func runIngestOurs(_ args: [String]) async throws {
    let count = args.first.map { Int($0)! } ?? 100_000
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try await withBroker { broker in
        let result = try await ingestOurs(port: broker.port, count: count, path: "\(directory)/recorder.sqlite")
        emit("ours: \(Int(result.perSecond)) objects/s; \(JSONValue.object(result.details))")
    }
}

await benchmarkMain(
    "store-benchmark",
    roles: [
        "publish": runPublisher, "answer-costs": runAnswerCosts, "ingest-costs": runIngestCosts,
        "ingest-ours": runIngestOurs,
    ],
    defaults: ["--objects": 100_000, "--runs": 3, "--queries": 50],
    driver: drive
)
