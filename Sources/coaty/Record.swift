import ArgumentParser
import CoatyKit
import CoatyOperator
import CoatyPostgres
import CoatySQLite
import CoatyStore
import CoatyRecording
import Foundation
import Logging

/// `coaty record`: the recorder agent.
struct Record: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Persist received objects and answer Query, Discover and Update from the store.",
        discussion: """
            A long-running agent. It stores every object advertised with any core type (and the \
            objects of Channel events on each --channel) with receipt metadata (source id, event \
            type, topic, time), removes objects and their children on Deadvertise, answers every \
            Query with one Retrieve (ObjectFilter with orderBy, skip, take and joins by objectId) \
            and Discovers by objectId or externalId with a Resolve, and with --accept-updates \
            applies Updates of stored objects and answers Complete.

            The store is a SQLite file (WAL mode; created when missing) or, with a \
            postgres:// connection string, a PostgreSQL database (schema created on first use). \
            Without --db it is a database of the agent configuration (--config, else \
            $COATY_CONFIG, in Coaty JS's layout "databases": {"db": {"adapter": \
            "SqLiteNodeAdapter", "connectionString": "objects.sqlite"}}; a variable \
            COATY_DATABASE_<NAME>=sqlite:PATH|postgres://…|memory: adds or replaces one): the one \
            --database names, else "db", else the only one; with none configured, ./coaty.sqlite. \
            The identity Advertise means "ready": it is published after the recorder's \
            subscriptions are acknowledged. On SIGINT/SIGTERM it commits what it received, \
            deadvertises its identity and exits 0. With --verbose, stdout has one JSON line per \
            stored, removed or answered object.

            A Query of one object type ordered by a top-level property, or searching one \
            (a numeric range, equality), walks an index on that property (--index declares one; \
            --auto-index creates one on the first such Query) and reads only the rows it answers with.

            With --http-port (or "operator": {"httpPort": 9464, "httpHost": "127.0.0.1"} in the \
            configuration file) it serves /metrics in Prometheus text format, /health/live, and \
            /health/ready: 200 while connected, subscribed, the store taking writes and its writer \
            not stalled, else 503 with the reason.

            Examples:
              coaty record
              coaty record --db /var/lib/coaty/objects.sqlite --channel telemetry --verbose
              coaty record --index com.example.Light:luminance --auto-index 0
              coaty record --db postgres://coaty@127.0.0.1:5432/coaty --accept-updates
              coaty record --config agent.json --database history
              COATY_DATABASE_DB=sqlite:/var/lib/coaty/objects.sqlite coaty record
              coaty record --http-port 9464          # curl http://127.0.0.1:9464/metrics
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    @Option(
        help: ArgumentHelp(
            "A SQLite file, or postgres://user[:password]@host[:port]/database. Default: the configuration's database (see --database), else ./coaty.sqlite.",
            valueName: "path|url"
        )
    )
    var db: String?

    @Option(
        help: ArgumentHelp(
            "A Coaty agent configuration file (JSON) whose databases may give the store, and whose \"operator\" section (httpPort, httpHost) the HTTP endpoint; only these are used. Default: $COATY_CONFIG.",
            valueName: "path"
        )
    )
    var config: String?

    @Option(
        help: ArgumentHelp(
            "The database of the configuration (and COATY_DATABASE_<NAME> variables) to record into. Default: db, else the only one configured.",
            valueName: "name"
        )
    )
    var database: String?

    @Option(
        name: .customLong("channel"),
        help: ArgumentHelp("Also store the objects of Channel events on this channel id (repeatable).", valueName: "id")
    )
    var channels: [String] = []

    @Flag(
        help: ArgumentHelp(
            "Durable recording: a persistent session at QoS 1 under a client id fixed by --db, and every message acknowledged only once its object is committed; restarted within the broker's session expiry, the recorder stores what was published while it was down or had not committed. Publishers must publish at QoS 1 (--qos 1) for the broker to keep their messages."
        )
    )
    var durable = false

    @Option(
        help: ArgumentHelp(
            "Record as a member of a recorder group: every member subscribes through MQTT shared subscriptions ($share/NAME/…), so the broker gives each Advertise to one member (stored once) and each Discover or Query to one member (answered once). Members are durable (a persistent session at QoS 1, acknowledged after commit); when one is gone, another takes over its broker session, so nothing the broker gave it is lost. Run the members on one shared database (PostgreSQL) to answer from all of it.",
            valueName: "name"
        )
    )
    var group: String?

    @Option(
        help: ArgumentHelp(
            "The member's name in its --group: it fixes the member's client id, so a member restarted under the same name resumes its broker session (unless another member took it over meanwhile). Default: a new id each run.",
            valueName: "name"
        )
    )
    var member: String?

    @Option(
        help: ArgumentHelp(
            "Events each observation may hold while the store is behind, before reading from the broker pauses (back-pressure; nothing is dropped). A recorder's buffer absorbs bursts faster than the store writes, so the broker's own queue limits are not reached; memory is about 1 KiB per held event.",
            valueName: "events"
        )
    )
    var buffer: Int = 262_144

    @Option(
        name: .customLong("index"),
        help: ArgumentHelp(
            "Index a top-level property of one object type (repeatable), e.g. com.example.Light:luminance. Queries with a condition on it or ordered by it then read only the rows they answer with. Kept in the database.",
            valueName: "objectType:property"
        )
    )
    var indexes: [String] = []

    @Option(
        name: .customLong("auto-index"),
        help: ArgumentHelp(
            "The most indexes created automatically per object type: a Query of one object type ordered by, or searching, a top-level property not yet indexed creates that index first (logged), so such Queries read only the rows they answer with. 0 turns it off.",
            valueName: "count"
        )
    )
    var autoIndex = 4

    @Flag(help: "Apply Update events of stored objects and answer them with Complete.")
    var acceptUpdates = false

    @Flag(help: "Print one JSON line per stored, removed or answered object on stdout.")
    var verbose = false

    func validate() throws {
        for channel in channels {
            try validateTopicLevel(.channel(id: channel), option: "--channel", value: channel)
        }
        if db?.isEmpty == true { throw ValidationError("--db must not be empty.") }
        if db != nil, database != nil {
            throw ValidationError("--db and --database both name the store; give one of them.")
        }
        if database?.isEmpty == true { throw ValidationError("--database must not be empty.") }
        if buffer < 1 { throw ValidationError("--buffer must be at least 1.") }
        if autoIndex < 0 { throw ValidationError("--auto-index must be 0 or more.") }
        if durable || group != nil, connection.mqttProtocolVersion == .v5 {
            throw ValidationError(
                "--durable and --group need a persistent session, which MQTT 5 cannot keep here; use --mqtt-version 3.1.1."
            )
        }
        if let group, !CommunicationManager.isValidSharedSubscriptionGroup(group) {
            throw ValidationError("--group must be a non-empty name without '/', '+', '#' or NUL.")
        }
        if member != nil && group == nil {
            throw ValidationError("--member names a member of a --group; give --group too.")
        }
        if group != nil, connection.brokerKind == .rabbitMQ {
            throw ValidationError(
                "--group needs MQTT shared subscriptions, which RabbitMQ's MQTT plugin (--broker-type rabbitmq) does not have."
            )
        }
        for index in indexes where Self.parseIndex(index) == nil {
            throw ValidationError(
                "--index \(index) is not objectType:property (a property named with letters, digits and _)."
            )
        }
    }

    /// Creates the indexes of `--index` (once; each is kept in the database).
    private func declareIndexes(on store: some JSONPropertyIndexing) async throws {
        for index in indexes {
            guard let (objectType, property) = Self.parseIndex(index) else { continue }
            try await store.createIndex(collection: objectType, property: property)
        }
    }

    /// `objectType:property` split at its last colon, when the property is a simple name.
    static func parseIndex(_ text: String) -> (objectType: String, property: String)? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        let objectType = String(text[..<colon])
        let property = String(text[text.index(after: colon)...])
        guard !objectType.isEmpty, JSONIndexDeclarations.isIndexable(property) else { return nil }
        return (objectType, property)
    }

    /// Where the recorder stores objects.
    enum Store: Equatable, CustomStringConvertible {
        /// A SQLite file.
        case sqlite(path: String)
        /// A PostgreSQL database.
        case postgres(url: String)
        /// Memory (a configuration's `InMemoryAdapter` or `memory:`): gone when the recorder exits.
        case memory

        /// `--db`'s value: a `postgres://` URL, else a SQLite file.
        init(db: String) {
            let lowercased = db.lowercased()
            self =
                lowercased.hasPrefix("postgres://") || lowercased.hasPrefix("postgresql://")
                ? .postgres(url: db) : .sqlite(path: db)
        }

        /// The database of the configuration named by `database`, else its default one.
        init?(configuration: AgentConfiguration, database: String?) throws(AgentConfigurationError) {
            let name: String
            let options: DatabaseOptions
            if let database {
                name = database
                options = try configuration.database(named: database)
            } else if let entry = try configuration.defaultDatabase() {
                (name, options) = entry
            } else {
                return nil
            }
            let path = "databases.\(name)"
            switch options.backend {
            case .sqlite: self = .sqlite(path: try options.sqlitePath(at: path))
            case .postgres: self = .postgres(url: try options.postgresURL(at: path))
            case .inMemory: self = .memory
            case .other(let adapter):
                throw AgentConfigurationError(
                    field: path + ".adapter",
                    reason:
                        "\(adapter) is not a store of coaty record; use SqLiteNodeAdapter, PostgresAdapter or InMemoryAdapter"
                )
            }
        }

        /// For messages: the file, the URL without its password, or `memory`.
        var description: String {
            switch self {
            case .sqlite(let path): path
            case .postgres(let url): Record.redacted(url)
            case .memory: "memory"
            }
        }
    }

    /// The store: `--db`, else the configuration's database, else `./coaty.sqlite`.
    func resolveStore(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Store {
        if let db { return Store(db: db) }
        do {
            var configuration = AgentConfiguration()
            if let file = config ?? environment["COATY_CONFIG"] {
                configuration = try AgentConfiguration(contentsOfFile: file)
            }
            // Only the database variables: the connection comes from the options.
            try configuration.applyEnvironment(environment.filter { $0.key.hasPrefix("COATY_DATABASE_") })
            if let store = try Store(configuration: configuration, database: database) { return store }
        } catch {
            throw CLIError("The store of the configuration cannot be used: \(oneLine(String(describing: error))).")
        }
        return .sqlite(path: "./coaty.sqlite")
    }

    /// The `operator` section of the configuration file (`httpPort`, `httpHost`), if any.
    func configuredEndpoint(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> (port: Int?, host: String?) {
        guard let file = config ?? environment["COATY_CONFIG"] else { return (nil, nil) }
        let section: JSONValue?
        do {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
            section = try JSONValue(parsing: Array(bytes))["operator"]
        } catch {
            throw CLIError("Cannot read the configuration \(file): \(oneLine(String(describing: error))).")
        }
        guard let section, !section.isNull else { return (nil, nil) }
        guard section.objectValue != nil else { throw CLIError("\(file): operator must be an object.") }
        var port: Int?
        if let value = section["httpPort"], !value.isNull {
            guard let number = value.doubleValue, number == number.rounded(), (0...65_535).contains(number) else {
                throw CLIError("\(file): operator.httpPort must be a port number (0…65535).")
            }
            port = Int(number)
        }
        var host: String?
        if let value = section["httpHost"], !value.isNull {
            guard let text = value.stringValue, !text.isEmpty else {
                throw CLIError("\(file): operator.httpHost must be a non-empty string.")
            }
            host = text
        }
        return (port, host)
    }

    func run() async throws {
        let store = try resolveStore()
        // A group member is durable: its persistent session is what another member takes over when it is gone.
        let identityId: CoatyUUID? =
            if let group {
                member.map { Self.durableIdentityId(for: store.description, member: "\(group)/\($0)") } ?? CoatyUUID()
            } else {
                durable ? Self.durableIdentityId(for: store.description) : nil
            }
        let endpoint = try configuredEndpoint()
        let operatorSetup = CLIOperator(operatorEndpoint, port: endpoint.port, host: endpoint.host)
        let agent = try await CLIAgent(
            connection,
            defaultName: group.map { "coaty record (group \($0)\(member.map { ", member \($0)" } ?? ""))" }
                ?? "coaty record",
            observerBufferLimit: buffer,
            durableIdentityId: identityId,
            sharedSubscriptionGroup: group,
            metricsFactory: operatorSetup?.metricsFactory
        )
        let signals = ShutdownSignals()
        var configuration = CoatyRecorder.Configuration(
            channelIds: channels,
            acceptUpdates: acceptUpdates,
            acknowledgesAfterCommit: durable || group != nil,
            automaticIndexesPerObjectType: autoIndex
        )
        // A named member's restart resumes its session: it keeps it (and its share) when it stops.
        configuration.keepsGroupSessionOnStop = member != nil
        switch store {
        case .postgres(let url):
            let database: PostgresDatabase
            do {
                database = try PostgresDatabase(url: url, logger: agent.logger)
            } catch {
                throw CLIError("\(error)")
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await database.run() }
                defer { group.cancelAll() }
                let timeout = self.connection.connectTimeout
                let connection = try await interruptible(by: signals) {
                    try await openPostgres(database, store: store, timeout: timeout)
                }
                try await declareIndexes(on: database)
                try await record(
                    agent,
                    store: store,
                    storage: ConnectionRecorderStorage(connection),
                    indexing: database,
                    configuration,
                    signals,
                    operatorSetup
                )
            }
        case .sqlite(let path):
            let database: SQLiteDatabase
            do {
                database = try SQLiteDatabase(path: path)
                try await declareIndexes(on: database)
            } catch {
                throw CLIError("Cannot open the SQLite database at \(path): \(error)")
            }
            try await record(
                agent,
                store: store,
                storage: ConnectionRecorderStorage(database.makeConnection()),
                indexing: database,
                configuration,
                signals,
                operatorSetup
            )
        case .memory:
            let database = InMemoryDatabase()
            try await declareIndexes(on: database)
            try await record(
                agent,
                store: store,
                storage: ConnectionRecorderStorage(database.makeConnection()),
                indexing: database,
                configuration,
                signals,
                operatorSetup
            )
        }
    }

    /// Connects to PostgreSQL (bringing the schema up to date) within `timeout` seconds.
    private func openPostgres(
        _ database: PostgresDatabase,
        store: Store,
        timeout: Double
    ) async throws -> PostgresStoreConnection {
        let redacted = store.description
        do {
            return try await withThrowingTaskGroup(of: PostgresStoreConnection?.self) { group in
                group.addTask { try await database.makeConnection() }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(Int64(timeout * 1000)))
                    return nil
                }
                defer { group.cancelAll() }
                guard let connection = try await group.next() ?? nil else {
                    throw CLIError(
                        "The PostgreSQL database at \(redacted) did not answer within \(CLIAgent.format(timeout)) s."
                    )
                }
                return connection
            }
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("Cannot open the PostgreSQL database at \(redacted): \(oneLine(String(describing: error)))")
        }
    }

    /// The identity id of a durable recorder of `store`: the same for every run on the same store
    /// (its MQTT client id names the broker's persistent session), a version 4 UUID drawn from a
    /// hash of the store's absolute path or URL.
    /// A member of a recorder group (`member`: "group/member") has its own.
    static func durableIdentityId(for store: String, member: String? = nil) -> CoatyUUID {
        let storeKey = store.contains("://") ? store : URL(fileURLWithPath: store).standardizedFileURL.path
        let key = member.map { "\(storeKey)\u{0}\($0)" } ?? storeKey
        var generator = FNVGenerator(key)
        return CoatyUUID(randomUsing: &generator)
    }

    /// A deterministic generator seeded by a string's FNV-1a hash (splitmix64 steps).
    struct FNVGenerator: RandomNumberGenerator {
        var state: UInt64

        init(_ text: String) {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in text.utf8 {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01B3
            }
            state = hash
        }

        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// A connection string without its password, for messages.
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? url
    }

    /// Runs the recorder with `agent` until a signal, then commits, deadvertises and returns.
    private func record(
        _ agent: CLIAgent,
        store: Store,
        storage: some RecorderStorage,
        indexing: (any JSONPropertyIndexing)? = nil,
        _ configuration: CoatyRecorder.Configuration,
        _ signals: ShutdownSignals,
        _ operatorSetup: CLIOperator?
    ) async throws {
        let handover =
            group == nil
            ? nil
            : SessionHandover.mqtt(
                template: agent.mqttConfiguration,
                options: agent.manager.options,
                logger: agent.logger
            )
        let recorder = CoatyRecorder(
            manager: agent.manager,
            storage: storage,
            configuration: configuration,
            indexing: indexing,
            handover: handover,
            logger: agent.logger,
            metricsFactory: operatorSetup?.metricsFactory
        )
        // The endpoint answers (503 until ready) from before the connection to the end.
        try await CLIOperator.serving(operatorSetup, logger: agent.logger, readiness: { .of(recorder) }) {
            try await record(agent, store: store, recorder: recorder, signals)
        }
    }

    /// Runs `recorder` with `agent` until a signal, then commits, deadvertises and returns.
    private func record(
        _ agent: CLIAgent,
        store: Store,
        recorder: CoatyRecorder,
        _ signals: ShutdownSignals
    ) async throws {
        let events = verbose ? recorder.events() : nil
        // Owned by this command: ends with the recorder's events, awaited before it returns.
        let printing = Task {
            guard let events else { return }
            for await event in events {
                if let line = Self.line(for: event) { Output.line(line) }
            }
        }
        // Owned by this command: stopped and awaited below (also when the agent cannot start).
        let recording = Task { try await recorder.run() }
        // Observations first, so the manager subscribes them before advertising the identity.
        await recorder.registered()
        do {
            try await agent.start(interruptedBy: signals)
        } catch {
            recording.cancel()
            _ = try? await recording.value
            throw error
        }
        agent.logger.info("Recording", metadata: ["store": "\(store)", "broker": "\(agent.options.brokerForMessages)"])

        // Until a signal, or until the recorder ends by itself (a failure).
        let failure: (any Error)? = await withTaskGroup(of: (any Error)??.self) { group in
            group.addTask { await signals.next() ? .some(nil) : nil }
            group.addTask {
                do {
                    try await recording.value
                    return .some(nil)
                } catch {
                    return .some(error)
                }
            }
            var failure: (any Error)?
            for await result in group {
                if let result {
                    failure = result
                    break
                }
            }
            // Stopping ends the child task that waits for the recording (a task's value does
            // not end when the task awaiting it is cancelled).
            recorder.stop()
            group.cancelAll()
            return failure
        }
        _ = try? await recording.value
        await agent.stop()
        if let handover = recorder.handover, recorder.leftGroupDrained {
            // The member left its group: end its broker session (nothing is queued there any more).
            do {
                try await handover.end(agent.manager.identity.objectId)
            } catch {
                agent.logger.warning(
                    "Could not end this group member's broker session",
                    metadata: ["error": "\(error)"]
                )
            }
        }
        await printing.value
        agent.logger.info("Recorder stopped", metadata: ["statistics": "\(recorder.statistics)"])
        let statistics = recorder.statistics
        Summary.print(
            "coaty record: received \(statistics.received) events, stored \(statistics.stored), "
                + "removed \(statistics.removed), failed \(statistics.failedWrites), "
                + "dropped \(agent.manager.statistics.observerOverflow)"
                + (statistics.droppedEvents > 0 ? ", --verbose lines dropped \(statistics.droppedEvents)" : "")
        )
        if let failure { throw CLIError("The recorder stopped: \(oneLine(String(describing: failure)))") }
    }

    /// The `--verbose` line of a recorder event (failures are logged, not printed).
    static func line(for event: RecorderEvent) -> String? {
        var line = JSONObject()
        switch event {
        case .stored(let objectId, let objectType, let receipt), .updated(let objectId, let objectType, let receipt):
            if case .stored = event { line["event"] = "Stored" } else { line["event"] = "Updated" }
            line["objectId"] = .string(String(objectId))
            line["objectType"] = .string(objectType)
            line["eventType"] = .string(receipt.eventType)
            line["topic"] = .string(receipt.topic)
            if let sourceId = receipt.sourceId { line["sourceId"] = .string(String(sourceId)) }
        case .removed(let objectIds):
            line["event"] = "Removed"
            line["objectIds"] = .array(objectIds.map { .string($0) })
        case .retrieved(let correlationId, let count):
            line["event"] = "Retrieved"
            if let correlationId { line["correlationId"] = .string(String(correlationId)) }
            line["count"] = .int(Int64(count))
        case .resolved(let correlationId, let objectId):
            line["event"] = "Resolved"
            if let correlationId { line["correlationId"] = .string(String(correlationId)) }
            line["objectId"] = .string(String(objectId))
        case .failed:
            return nil
        }
        return JSONValue.object(line).serializedString()
    }
}
