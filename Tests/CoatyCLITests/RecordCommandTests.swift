import CoatyKit
import CoatyStoreTestSupport
import CoatyTesting
import Foundation
import GRDB
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A temporary directory for one test, removed afterwards.
func withTemporaryDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("coaty-cli-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    return try await body(directory)
}

@Suite("coaty record", .serialized, .enabled(if: BrokerAvailability.shouldRun))
struct RecordCommandTests {
    /// Runs `coaty query` until its single Retrieve has `expected` objects (the recorder commits
    /// asynchronously), returning the objects of the last answer.
    func queryUntil(
        _ arguments: [String],
        broker: MosquittoBroker,
        count expected: Int
    ) async throws -> [JSONValue] {
        var objects: [JSONValue] = []
        for _ in 0..<20 {
            let result = try await runCoaty(
                ["query"] + arguments + ["--count", "1", "--timeout", "5", "--broker", broker.url]
            )
            #expect(result.status == 0, "stderr: \(result.stderr)")
            let lines = try result.jsonLines()
            #expect(lines.count == 1, "exactly one Retrieve: \(result.stdout)")
            objects = lines.first?.at("data.objects")?.arrayValue ?? []
            if objects.count == expected { return objects }
            try await Task.sleep(for: .milliseconds(200))
        }
        return objects
    }

    @Test(
        "record stores Advertise objects, answers Query and Discover from SQLite, removes children on Deadvertise, deadvertises on SIGTERM, and keeps the file"
    )
    func recordsAndAnswers() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/objects.sqlite"
            try await withBroker { broker in
                try await withAgent(on: broker, name: "publisher") { agent in
                    let identities = try agent.observeAdvertise(coreType: .identity)
                    let deadvertises = try agent.observeDeadvertise()
                    await deadvertises.subscribed()
                    let recorder = try await startReadyCoaty(
                        ["record", "--db", path, "--verbose", "--broker", broker.url],
                        name: "recorder",
                        observer: agent
                    )
                    let recorderIdentity = try #require(
                        try await first(identities, timeout: 1) { $0.object.name == "recorder" }
                    )

                    let registry = CoatyObjectRegistry()
                    var tasks: [AnyCoatyObject] = []
                    for i in 0..<5 {
                        var json = try #require(Samples.task("Task \(i)").objectValue)
                        json["externalId"] = .string("ext-\(i)")
                        tasks.append(try registry.decode(json))
                    }
                    var childJSON = try #require(Samples.light("Child lamp").objectValue)
                    childJSON["parentObjectId"] = .string(tasks[0].objectId.uuidString)
                    let child = try registry.decode(childJSON)
                    for object in tasks + [child] { try await agent.publishAdvertise(object) }

                    let all = try await queryUntil(["--core-types", "Task"], broker: broker, count: 5)
                    #expect(Set(all.compactMap { $0["name"]?.stringValue }) == Set((0..<5).map { "Task \($0)" }))

                    let filtered = try await queryUntil(
                        [
                            "--object-types", "coaty.Task", "--filter",
                            #"{"conditions":["name",[12,"Task _"]],"orderByProperties":[["name","Desc"]],"skip":1,"take":2}"#,
                        ],
                        broker: broker,
                        count: 2
                    )
                    #expect(filtered.compactMap { $0["name"]?.stringValue } == ["Task 3", "Task 2"])

                    let discover = try await runCoaty(
                        [
                            "discover", "--external-id", "ext-2", "--count", "1", "--timeout", "10", "--broker",
                            broker.url,
                        ]
                    )
                    #expect(discover.status == 0, "stderr: \(discover.stderr)")
                    let resolve = try #require(try discover.jsonLines().first)
                    #expect(resolve.at("data.object.name") == "Task 2")
                    #expect(resolve["sourceId"] == .string(recorderIdentity.object.objectId.uuidString))

                    // The Deadvertise of a task removes its child too.
                    try await agent.publishDeadvertise([tasks[0].objectId])
                    let lamps = try await queryUntil(["--object-types", "com.example.Light"], broker: broker, count: 0)
                    #expect(lamps.isEmpty)

                    recorder.signal(SIGTERM)
                    let gone = try await first(deadvertises, timeout: 30) {
                        $0.objectIds.contains(recorderIdentity.object.objectId)
                    }
                    #expect(gone != nil, "the recorder deadvertises its identity on SIGTERM")
                    let result = await recorder.finish(timeout: 30)
                    #expect(result.status == 0, "stderr: \(result.stderr)")

                    // --verbose: one JSON line per stored and removed object.
                    let lines = try result.jsonLines()
                    let stored = Set(
                        lines.filter { $0["event"] == "Stored" }.compactMap { $0["objectId"]?.stringValue }
                    )
                    for object in tasks + [child] { #expect(stored.contains(object.objectId.uuidString)) }
                    let storedTask = lines.first { $0["objectId"] == .string(tasks[1].objectId.uuidString) }
                    #expect(storedTask?["eventType"] == "Advertise")
                    #expect(storedTask?["sourceId"] == .string(agent.identity.objectId.uuidString))
                    let removed = lines.filter { $0["event"] == "Removed" }.flatMap {
                        $0["objectIds"]?.arrayValue ?? []
                    }
                    // Also the identities of the CLI agents that came and went (they deadvertise on exit).
                    let removedIds = Set(removed.compactMap(\.stringValue))
                    #expect(removedIds.isSuperset(of: [tasks[0].objectId.uuidString, child.objectId.uuidString]))
                    #expect(removedIds.isDisjoint(with: tasks.dropFirst().map(\.objectId.uuidString)))
                    #expect(lines.contains { $0["event"] == "Retrieved" })
                    #expect(lines.contains { $0["event"] == "Resolved" })

                    // A new recorder on the same file answers from what the first one committed.
                    let again = try await startReadyCoaty(
                        ["record", "--db", path, "--broker", broker.url],
                        name: "recorder again",
                        observer: agent
                    )
                    let kept = try await queryUntil(["--core-types", "Task"], broker: broker, count: 4)
                    #expect(
                        Set(kept.compactMap { $0["name"]?.stringValue }) == ["Task 1", "Task 2", "Task 3", "Task 4"]
                    )
                    again.signal(SIGINT)
                    let againResult = await again.finish(timeout: 30)
                    #expect(againResult.status == 0, "stderr: \(againResult.stderr)")
                    #expect(againResult.stdout.isEmpty, "no --verbose, no stdout")
                }
            }
        }
    }

    @Test("record --index keeps a JSON index in the file and answers ordered, paged Queries through it")
    func recordWithIndex() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/indexed.sqlite"
            try await withBroker { broker in
                try await withAgent(on: broker, name: "publisher") { agent in
                    let recorder = try await startReadyCoaty(
                        ["record", "--db", path, "--index", "com.example.Bench:seq", "--broker", broker.url],
                        name: "recorder",
                        observer: agent
                    )
                    let registry = CoatyObjectRegistry()
                    for i in 0..<20 {
                        let json: JSONObject = [
                            "objectId": .string(CoatyUUID().uuidString), "objectType": "com.example.Bench",
                            "coreType": "CoatyObject", "name": .string("b\(i)"), "seq": .int(Int64(i)),
                            "value": .int(Int64(i % 3)),
                        ]
                        try await agent.publishAdvertise(try registry.decode(json))
                    }
                    let page = try await queryUntil(
                        [
                            "--object-types", "com.example.Bench", "--filter",
                            #"{"conditions":["value",[7,1]],"orderByProperties":[["seq","Desc"]],"skip":1,"take":3}"#,
                        ],
                        broker: broker,
                        count: 3
                    )
                    // seq with value 1: 19, 16, 13, 10, …; skip 1, take 3.
                    #expect(page.compactMap { $0["seq"]?.intValue } == [16, 13, 10])
                    recorder.signal(SIGINT)
                    let result = await recorder.finish(timeout: 30)
                    #expect(result.status == 0, "stderr: \(result.stderr)")
                    let indexes = try await DatabaseQueue(path: path).read { db in
                        try String.fetchAll(
                            db,
                            sql: "SELECT collection || ':' || property FROM coaty_json_indexes ORDER BY property"
                        )
                    }
                    // Declared on seq; created automatically on value, which the Query searches.
                    #expect(indexes == ["com.example.Bench:seq", "com.example.Bench:value"])
                }
            }
        }
    }

    @Test("record --group: two members each store a share of the Advertise events, every one exactly once")
    func groupMembersShareTheEvents() async throws {
        try await withTemporaryDirectory { directory in
            try await withBroker { broker in
                try await withAgent(on: broker, name: "publisher") { agent in
                    var members: [CoatyProcess] = []
                    for index in 0..<2 {
                        members.append(
                            try await startReadyCoaty(
                                ["record", "--group", "recorders", "--db", directory + "/m\(index).sqlite"]
                                    + ["--broker", broker.url],
                                name: "member \(index)",
                                observer: agent
                            )
                        )
                    }
                    let count = 200
                    var ids: Set<String> = []
                    for i in 0..<count {
                        let task = CoatyTask(
                            name: "Task \(i)",
                            status: .pending,
                            creatorId: agent.identity.objectId,
                            creationTimestamp: 1
                        )
                        ids.insert(task.objectId.uuidString)
                        try await agent.publishAdvertise(task)
                    }
                    // Each file holds the tasks its member got; together they hold each task once.
                    var perMember: [[String]] = []
                    for _ in 0..<100 {
                        perMember = []
                        for index in 0..<2 {
                            perMember.append(
                                try await DatabaseQueue(path: directory + "/m\(index).sqlite").read { db in
                                    try String.fetchAll(
                                        db,
                                        sql: "SELECT objectId FROM coaty_rows WHERE coreType = 'Task'"
                                    )
                                }
                            )
                        }
                        if perMember.map(\.count).reduce(0, +) >= count { break }
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    #expect(perMember.map(\.count).reduce(0, +) == count, "\(perMember.map(\.count))")
                    #expect(Set(perMember.flatMap { $0 }) == ids)
                    #expect(perMember.allSatisfy { !$0.isEmpty }, "each member stores a share")
                    for member in members {
                        member.signal(SIGINT)
                        let result = await member.finish(timeout: 30)
                        #expect(result.status == 0, "stderr: \(result.stderr)")
                    }
                }
            }
        }
    }

    @Test("record --group and --member are checked: a usage error, exit 2")
    func groupUsageErrors() async throws {
        let cases: [(arguments: [String], says: String)] = [
            (["--group", "a/b"], "--group must be a non-empty name"),
            (["--member", "m1"], "--member names a member of a --group"),
        ]
        for (arguments, says) in cases {
            let result = try await runCoaty(["record", "--broker", "mqtt://127.0.0.1:1"] + arguments, timeout: 30)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(says), "\(arguments): \(result.stderr)")
        }
    }

    @Test("record --accept-updates applies an Update of a stored object and answers Complete")
    func acceptsUpdates() async throws {
        try await withTemporaryDirectory { directory in
            try await withBroker { broker in
                try await withAgent(on: broker, name: "publisher") { agent in
                    let recorder = try await startReadyCoaty(
                        ["record", "--db", directory + "/u.sqlite", "--accept-updates", "--broker", broker.url],
                        name: "recorder",
                        observer: agent
                    )
                    var json = try #require(Samples.task("Before").objectValue)
                    let task = try CoatyObjectRegistry().decode(json)
                    try await agent.publishAdvertise(task)
                    _ = try await queryUntil(["--core-types", "Task"], broker: broker, count: 1)

                    json["name"] = "After"
                    let update = try await runCoaty(
                        [
                            "update", JSONValue.object(json).serializedString(), "--count", "1", "--timeout", "10",
                            "--broker", broker.url,
                        ]
                    )
                    #expect(update.status == 0, "stderr: \(update.stderr)")
                    let complete = try #require(try update.jsonLines().first)
                    #expect(complete["event"] == "Complete")
                    #expect(complete.at("data.object.name") == "After")
                    let stored = try await queryUntil(["--core-types", "Task"], broker: broker, count: 1)
                    #expect(stored.first?["name"] == "After")

                    recorder.signal(SIGTERM)
                    #expect(await recorder.finish(timeout: 30).status == 0)
                }
            }
        }
    }

    @Test("record --channel stores the objects of Channel events on that channel only")
    func recordsChannels() async throws {
        try await withTemporaryDirectory { directory in
            try await withBroker { broker in
                try await withAgent(on: broker, name: "publisher") { agent in
                    let recorder = try await startReadyCoaty(
                        [
                            "record", "--db", directory + "/c.sqlite", "--channel", "telemetry", "--broker", broker.url,
                        ],
                        name: "recorder",
                        observer: agent
                    )
                    let kept = try CoatyObjectRegistry().decode(Samples.light("Kept"))
                    let ignored = try CoatyObjectRegistry().decode(Samples.light("Ignored"))
                    try await agent.publishChannel("other", objects: [ignored])
                    try await agent.publishChannel("telemetry", objects: [kept])
                    let lights = try await queryUntil(
                        ["--object-types", "com.example.Light"],
                        broker: broker,
                        count: 1
                    )
                    #expect(lights.map { $0["name"] } == ["Kept"])
                    recorder.signal(SIGTERM)
                    #expect(await recorder.finish(timeout: 30).status == 0)
                }
            }
        }
    }

    @Test("record survives garbage payloads and a broker restart, and keeps storing afterwards")
    func survivesGarbageAndRestart() async throws {
        try await withTemporaryDirectory { directory in
            try await withBroker { broker in
                let recorder = try await withAgent(on: broker, name: "publisher") { agent in
                    let recorder = try await startReadyCoaty(
                        ["record", "--db", directory + "/r.sqlite", "--broker", broker.url],
                        name: "recorder",
                        observer: agent
                    )
                    // Garbage on Coaty topics: dropped by the recorder's agent, never fatal.
                    let raw = MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientId: "garbage"))
                    try await raw.connect()
                    let source = CoatyUUID()
                    for payload in ["not json", #"{"object":{}}"#, "[1,2]", #"{"object":{"coreType":"Task"}}"#] {
                        try await raw.publish("coaty/3/-/ADV:Task/\(source)", payload: Array(payload.utf8))
                    }
                    try await raw.publish("coaty/3/-/ADV:Task/NOT-A-UUID", payload: Array("{}".utf8))
                    await raw.disconnect()
                    try await agent.publishAdvertise(try CoatyObjectRegistry().decode(Samples.task("Before restart")))
                    _ = try await queryUntil(["--core-types", "Task"], broker: broker, count: 1)
                    return recorder
                }

                await broker.stop()
                try await Task.sleep(for: .milliseconds(300))
                try await broker.start()
                try await withAgent(on: broker, name: "publisher again") { agent in
                    let task = try CoatyObjectRegistry().decode(Samples.task("After restart"))
                    // The recorder reconnects on its own (1 s, then backing off): publish until stored.
                    var names: [String] = []
                    for _ in 0..<30 where names.count < 2 {
                        try await agent.publishAdvertise(task)
                        try await Task.sleep(for: .milliseconds(500))
                        let result = try await runCoaty(
                            ["query", "--core-types", "Task", "--count", "1", "--timeout", "3", "--broker", broker.url]
                        )
                        names = (try result.jsonLines().first?.at("data.objects")?.arrayValue ?? [])
                            .compactMap { $0["name"]?.stringValue }
                    }
                    #expect(Set(names) == ["Before restart", "After restart"])
                }
                recorder.signal(SIGTERM)
                let result = await recorder.finish(timeout: 30)
                #expect(result.status == 0, "stderr: \(result.stderr)")
            }
        }
    }

    @Test(
        "record fails with one line and exit 1 when the SQLite file cannot be opened; a bad --channel is a usage error"
    )
    func recordErrors() async throws {
        let unopenable = try await runCoaty(
            ["record", "--db", "/nonexistent-\(UUID().uuidString)/x.sqlite", "--broker", "mqtt://127.0.0.1:1"],
            timeout: 30
        )
        #expect(unopenable.status == 1)
        #expect(unopenable.stderrLines.count == 1, "stderr: \(unopenable.stderr)")
        #expect(unopenable.stderr.contains("Cannot open the SQLite database"))

        let badChannel = try await runCoaty(["record", "--channel", "a/b"], timeout: 30)
        #expect(badChannel.status == 2, "stderr: \(badChannel.stderr)")

        let badURL = try await runCoaty(["record", "--db", "postgres://127.0.0.1/x"], timeout: 30)
        #expect(badURL.status == 1)
        #expect(badURL.stderr.contains("the user is missing"), "stderr: \(badURL.stderr)")
    }

    /// Writes a configuration file with Coaty JS's `databases` layout.
    func writeDatabases(_ databases: JSONValue, in directory: String) throws -> String {
        let file = directory + "/agent.json"
        let text = JSONValue.object(["databases": databases]).serializedString()
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }

    @Test(
        "record without --db stores into the configuration's database: db of the file, replaced by COATY_DATABASE_DB, overridden by --db"
    )
    func recordsIntoConfiguredDatabase() async throws {
        try await withTemporaryDirectory { directory in
            let configured = directory + "/configured.sqlite"
            let fromVariable = directory + "/variable.sqlite"
            let explicit = directory + "/explicit.sqlite"
            let file = try writeDatabases(
                [
                    "db": ["adapter": "SqLiteNodeAdapter", "connectionString": .string(configured)],
                    "other": ["adapter": "PostgresAdapter", "connectionString": "postgres://coaty@127.0.0.1:1/x"],
                ],
                in: directory
            )
            try await withBroker { broker in
                try await withAgent(on: broker, name: "publisher") { agent in
                    let runs: [(arguments: [String], environment: [String: String], expected: String)] = [
                        (["--config", file], [:], configured),
                        ([], ["COATY_CONFIG": file, "COATY_DATABASE_DB": "sqlite:" + fromVariable], fromVariable),
                        (["--config", file, "--db", explicit], [:], explicit),
                    ]
                    for (index, run) in runs.enumerated() {
                        let recorder = try await startReadyCoaty(
                            ["record", "--verbose", "--broker", broker.url] + run.arguments,
                            name: "recorder \(index)",
                            observer: agent,
                            environment: run.environment
                        )
                        let task = try CoatyObjectRegistry().decode(Samples.task("Run \(index)"))
                        try await agent.publishAdvertise(task)
                        let tasks = try await queryUntil(["--core-types", "Task"], broker: broker, count: 1)
                        #expect(tasks.map { $0["name"] } == [.string("Run \(index)")])
                        recorder.signal(SIGTERM)
                        let result = await recorder.finish(timeout: 30)
                        #expect(result.status == 0, "stderr: \(result.stderr)")
                        #expect(
                            FileManager.default.fileExists(atPath: run.expected),
                            "run \(index) stores into \(run.expected)"
                        )
                    }
                }
            }
        }
    }

    @Test("record names the configuration's problem in one line and exits 1; --db with --database is a usage error")
    func configuredDatabaseErrors() async throws {
        try await withTemporaryDirectory { directory in
            let file = try writeDatabases(
                [
                    "history": ["adapter": "SqLiteNodeAdapter", "connectionString": .string(directory + "/h.sqlite")],
                    "mongo": ["adapter": "MongoAdapter", "connectionString": "mongodb://x"],
                    "empty": ["adapter": "SqLiteNodeAdapter"],
                ],
                in: directory
            )
            let cases: [(arguments: [String], environment: [String: String], says: String)] = [
                (
                    ["--database", "missing"], [:],
                    "databases.missing: is not configured; the configuration has empty, history, mongo"
                ),
                (["--database", "mongo"], [:], "databases.mongo.adapter: MongoAdapter is not a store of coaty record"),
                (["--database", "empty"], [:], "databases.empty.connectionString: is missing or empty"),
                ([], [:], "databases: has empty, history, mongo and none named db; name the one to use"),
                (
                    ["--database", "db"], ["COATY_DATABASE_DB": "mysql://x"],
                    "COATY_DATABASE_DB: 'mysql://x' is not a database URL"
                ),
            ]
            for (arguments, environment, says) in cases {
                let result = try await runCoaty(
                    ["record", "--config", file, "--broker", "mqtt://127.0.0.1:1"] + arguments,
                    environment: environment,
                    timeout: 30
                )
                #expect(result.status == 1, "\(arguments): \(result.stderr)")
                #expect(result.stderrLines.count == 1, "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains(says), "\(arguments): \(result.stderr)")
            }
            let missingFile = try await runCoaty(
                ["record", "--config", directory + "/none.json", "--broker", "mqtt://127.0.0.1:1"],
                timeout: 30
            )
            #expect(missingFile.status == 1)
            #expect(missingFile.stderr.contains("none.json: cannot read the file"), "\(missingFile.stderr)")

            let both = try await runCoaty(["record", "--db", "x.sqlite", "--database", "db"], timeout: 30)
            #expect(both.status == 2, "stderr: \(both.stderr)")
            #expect(both.stderr.contains("--db and --database"))
        }
    }
}

@Suite(
    "coaty record on PostgreSQL",
    .serialized,
    .enabled(if: BrokerAvailability.shouldRun && PostgresTestServer.shouldRun)
)
struct RecordPostgresCommandTests {
    @Test("record --db postgres://… stores Advertise objects in PostgreSQL and answers a Query from them")
    func recordsIntoPostgres() async throws {
        let server = try await PostgresTestServer.start()
        defer { server.stop() }
        let url = try server.makeDatabase()
        try await withBroker { broker in
            try await withAgent(on: broker, name: "publisher") { agent in
                let recorder = try await startReadyCoaty(
                    ["record", "--db", url, "--verbose", "--broker", broker.url],
                    name: "pg recorder",
                    observer: agent
                )
                let registry = CoatyObjectRegistry()
                for i in 0..<3 { try await agent.publishAdvertise(try registry.decode(Samples.task("PG \(i)"))) }
                let objects = try await RecordCommandTests().queryUntil(
                    [
                        "--core-types", "Task", "--filter", #"{"orderByProperties":[["name","Desc"]],"take":2}"#,
                    ],
                    broker: broker,
                    count: 2
                )
                #expect(objects.compactMap { $0["name"]?.stringValue } == ["PG 2", "PG 1"])
                recorder.signal(SIGTERM)
                let result = await recorder.finish(timeout: 30)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                #expect(try result.jsonLines().filter { $0["event"] == "Stored" }.count >= 3)
            }
        }
    }

    @Test(
        "record --group: three members on one PostgreSQL store 30 000 Advertise events once each at QoS 1, answer each Discover once, and lose nothing when one is killed"
    )
    func groupSurvivesAKilledMember() async throws {
        let server = try await PostgresTestServer.start()
        defer { server.stop() }
        let url = try server.makeDatabase()
        try await withBroker { broker in
            try await withAgent(on: broker, name: "requester") { agent in
                var members: [CoatyProcess] = []
                for index in 0..<3 {
                    members.append(
                        try await startReadyCoaty(
                            [
                                "record", "--group", "recorders", "--db", url, "--broker", broker.url, "--log-level",
                                "info",
                            ],
                            name: "member \(index)",
                            observer: agent
                        )
                    )
                }
                let publisherId = CoatyUUID()
                let publisher = MQTTClient(
                    configuration: try MQTTConfiguration(url: broker.url, clientId: "group-test-publisher")
                )
                try await publisher.connect()
                let count = 30_000
                var ids: [CoatyUUID] = []
                for i in 0..<count {
                    let id = CoatyUUID()
                    ids.append(id)
                    let payload =
                        #"{"object":{"objectType":"coaty.Task","coreType":"Task","objectId":"\#(id)","name":"T\#(i)","creatorId":"\#(publisherId)","creationTimestamp":1,"status":0}}"#
                    try await publisher.publish(
                        "coaty/3/-/ADV:Task/\(publisherId)",
                        payload: Array(payload.utf8),
                        qos: .atLeastOnce
                    )
                    // Mid-run, one member dies without a word.
                    if i == count / 3 { members[1].signal(SIGKILL) }
                }
                var stored = 0
                for _ in 0..<600 {
                    stored =
                        Int(
                            try server.query("SELECT count(*) FROM coaty_rows WHERE \"coreType\" = 'Task'", in: url)
                                .first ?? ""
                        ) ?? 0
                    if stored >= count { break }
                    try await Task.sleep(for: .milliseconds(200))
                }
                #expect(stored == count, "every Advertise stored once, the killed member's share too")
                let distinct = try server.query(
                    "SELECT count(DISTINCT \"objectId\") FROM coaty_rows WHERE \"coreType\" = 'Task'",
                    in: url
                )
                #expect(distinct.first == "\(count)")

                // Each Discover answered once, by one of the two members left.
                for id in ids.suffix(20) {
                    let resolves = try await agent.publishDiscover(.objectId(id))
                        .responses(timeout: .milliseconds(500)).collect()
                    #expect(resolves.count == 1)
                    #expect(resolves.first?.data.object?.objectId == id)
                }
                await publisher.disconnect()
                var tookOver = false
                for (index, member) in members.enumerated() where index != 1 {
                    member.signal(SIGINT)
                    let result = await member.finish(timeout: 60)
                    #expect(result.status == 0, "stderr: \(result.stderr)")
                    if result.stderr.contains("took over the broker session") { tookOver = true }
                }
                #expect(tookOver, "a member took over the killed member's session")
                _ = await members[1].finish(timeout: 5)
            }
        }
    }

    @Test("record fails with one line and exit 1 when PostgreSQL cannot be reached within the connect timeout")
    func unreachablePostgres() async throws {
        let result = try await runCoaty(
            ["record", "--db", "postgres://coaty:secret@127.0.0.1:1/coaty", "--connect-timeout", "2"],
            timeout: 60
        )
        #expect(result.status == 1)
        #expect(result.stderrLines.count == 1, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("PostgreSQL"))
        #expect(!result.stderr.contains("secret"), "the password is not printed")
    }
}
