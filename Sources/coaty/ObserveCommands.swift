import ArgumentParser
import CoatyKit
import CoatyOperator
import Foundation

/// `coaty observe …`: print received events as JSON lines.
struct Observe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print received events, one JSON object per line on stdout.",
        discussion: """
            Each line is {"event":…,"topic":…,"sourceId":…,"correlationId":… (two-way only),"data":{…payload…}}. \
            The observer subscribes before it advertises its identity, so the Advertise of its \
            identity (see --name) means it is ready. It runs until --count events, --timeout \
            seconds, or SIGINT/SIGTERM (then it prints the events it already received, deadvertises \
            its identity and exits 0; while it \
            is still connecting, a signal ends it at once, also with 0). A reader of stdout that \
            is behind slows the observer down (back-pressure: nothing is dropped; --buffer sets how \
            many events wait in between); --drop-oldest N or --drop-newest N drop instead, counted \
            in the summary line.

            Examples:
              coaty observe advertise --core-type Task
              coaty observe advertise --object-type com.example.Light --count 1
              coaty observe raw 'sensors/#' --timeout 10
            """,
        subcommands: [
            ObserveAdvertise.self, ObserveDeadvertise.self, ObserveChannel.self, ObserveUpdate.self,
            ObserveDiscover.self, ObserveQuery.self, ObserveCall.self, ObserveRaw.self,
        ]
    )
}

/// `--core-type T | --object-type T`.
struct TypeSelection: ParsableArguments {
    @Option(help: ArgumentHelp("A core type, e.g. Task, Identity, CoatyObject.", valueName: "type"))
    var coreType: String?

    @Option(help: ArgumentHelp("An object type, e.g. com.example.Light or coaty.Task.", valueName: "type"))
    var objectType: String?

    func validate() throws {
        guard (coreType == nil) != (objectType == nil) else {
            throw ValidationError("Give exactly one of --core-type and --object-type.")
        }
        if let objectType {
            try validateTopicLevel(.advertise(.objectType(objectType)), option: "--object-type", value: objectType)
        }
    }
}

/// `--buffer N | --drop-oldest N | --drop-newest N`: what an observer does while stdout's reader
/// is behind. Back-pressure (nothing lost) unless a drop policy is asked for.
struct BufferingOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Events held for a reader of stdout that is behind, before reading from the broker pauses (back-pressure: nothing is dropped, the broker's own limits apply). Default: 4096.",
            valueName: "events"
        )
    )
    var buffer: Int?

    @Option(
        name: .customLong("drop-oldest"),
        help: ArgumentHelp(
            "Opt-in drop policy, for fresh values over complete ones: hold at most this many events for a slow reader, dropping the oldest beyond them; reading never pauses. Drops are logged at warning and counted in the summary line.",
            valueName: "events"
        )
    )
    var dropOldest: Int?

    @Option(
        name: .customLong("drop-newest"),
        help: ArgumentHelp(
            "Opt-in drop policy: hold at most this many events for a slow reader, dropping new ones while they are held; reading never pauses. Drops are logged at warning and counted in the summary line.",
            valueName: "events"
        )
    )
    var dropNewest: Int?

    func validate() throws {
        let given = [("--buffer", buffer), ("--drop-oldest", dropOldest), ("--drop-newest", dropNewest)]
            .compactMap { name, value in value.map { (name, $0) } }
        if given.count > 1 {
            throw ValidationError("Give at most one of --buffer, --drop-oldest and --drop-newest.")
        }
        if let (name, value) = given.first, value < 1 { throw ValidationError("\(name) must be at least 1.") }
    }

    /// The observation's buffering: a drop policy when one was asked for, else back-pressure.
    var policy: ObservationBuffering {
        if let dropOldest { return .dropOldest(dropOldest) }
        if let dropNewest { return .dropNewest(dropNewest) }
        return .backPressure
    }
}

/// ``runObserver(_:_:_:defaultName:observerBufferLimit:observe:render:received:)`` for one
/// observation, buffered as `buffering` says.
func runObserver<Event: Sendable>(
    _ connection: ConnectionOptions,
    _ limits: EventLimitOptions,
    _ operatorEndpoint: OperatorOptions,
    _ buffering: BufferingOptions,
    defaultName: String,
    observe: (CommunicationManager) throws -> EventObservation<Event>,
    render: @escaping @Sendable (Event) -> String?
) async throws {
    try await runObserver(
        connection,
        limits,
        operatorEndpoint,
        defaultName: defaultName,
        observerBufferLimit: buffering.buffer,
        observe: { manager in try observe(manager).buffering(buffering.policy) },
        render: render
    )
}

/// Connects an observer agent whose observation is registered before it starts, prints its
/// events, and stops it; its summary line starts with `received(count)` (default: "received N events").
func runObserver<S: AsyncSequence & Sendable>(
    _ connection: ConnectionOptions,
    _ limits: EventLimitOptions,
    _ operatorEndpoint: OperatorOptions,
    defaultName: String,
    observerBufferLimit: Int? = nil,
    observe: (CommunicationManager) throws -> S,
    render: @escaping @Sendable (S.Element) -> String?,
    received describeReceived: (Int) -> String = { "received \($0) events" }
) async throws where S.Element: Sendable {
    let operatorSetup = CLIOperator(operatorEndpoint)
    let agent = try await CLIAgent(
        connection,
        defaultName: defaultName,
        observerBufferLimit: observerBufferLimit,
        metricsFactory: operatorSetup?.metricsFactory
    )
    let signals = ShutdownSignals()
    let sequence: S
    do {
        sequence = try observe(agent.manager)
    } catch let error as CLIError {
        throw error
    } catch {
        throw CLIError("\(error)")
    }
    let manager = agent.manager
    let received = EventCounter()
    try await CLIOperator.serving(operatorSetup, logger: agent.logger, readiness: { .of(manager) }) {
        try await agent.start(interruptedBy: signals)
        do {
            try await printEvents(
                sequence,
                count: limits.count,
                timeout: limits.timeout,
                signals: signals,
                received: received,
                logger: agent.logger,
                render: render
            )
        } catch {
            await agent.stop()
            throw CLIError("\(error)")
        }
        await agent.stop()
    }
    let statistics = agent.manager.statistics
    Summary.print(
        "\(defaultName): \(describeReceived(received.count)), dropped \(statistics.observerOverflow)"
            + (statistics.readHolds > 0 ? " (reading held \(statistics.readHolds)× for a slow reader)" : "")
    )
}

/// The one summary line a long-running command prints on stderr when it ends.
enum Summary {
    static func print(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}

/// `coaty observe advertise`.
struct ObserveAdvertise: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advertise",
        abstract: "Print Advertise events of a core type or an object type.",
        discussion: """
            Examples:
              coaty observe advertise --core-type Identity          # agents coming online
              coaty observe advertise --object-type com.example.Light --count 1
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var type: TypeSelection
    @OptionGroup var limits: EventLimitOptions
    @OptionGroup var buffering: BufferingOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        let coreType = try type.coreType.map(JSONInput.coreType)
        let objectType = type.objectType
        try await runObserver(connection, limits, operatorEndpoint, buffering, defaultName: "coaty observe advertise") {
            manager in
            if let coreType { return try manager.observeAdvertise(coreType: coreType) }
            return try manager.observeAdvertise(objectType: objectType ?? "")
        } render: { event in
            EventLine.advertise(topic: event.topic, object: event.object, privateData: event.privateData)
        }
    }
}

/// `coaty observe deadvertise`.
struct ObserveDeadvertise: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deadvertise",
        abstract: "Print Deadvertise events (including agents' last wills).",
        discussion: """
            Examples:
              coaty observe deadvertise
              coaty observe deadvertise --count 1 --timeout 30
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var limits: EventLimitOptions
    @OptionGroup var buffering: BufferingOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        try await runObserver(connection, limits, operatorEndpoint, buffering, defaultName: "coaty observe deadvertise")
        {
            manager in
            try manager.observeDeadvertise()
        } render: { event in
            EventLine.make(
                "Deadvertise",
                topic: event.topic,
                data: DeadvertiseEventData(objectIds: event.objectIds).json
            )
        }
    }
}

/// `coaty observe channel ID`.
struct ObserveChannel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channel",
        abstract: "Print Channel events on a channel.",
        discussion: """
            Examples:
              coaty observe channel alerts
              coaty observe channel alerts --count 10
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The channel id.", valueName: "id"))
    var channelId: String

    @OptionGroup var limits: EventLimitOptions
    @OptionGroup var buffering: BufferingOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    func validate() throws {
        try validateTopicLevel(.channel(id: channelId), option: "channel id", value: channelId)
    }

    func run() async throws {
        let channelId = self.channelId
        try await runObserver(connection, limits, operatorEndpoint, buffering, defaultName: "coaty observe channel") {
            manager in
            try manager.observeChannel(channelId)
        } render: { event in
            EventLine.make("Channel", topic: event.topic, data: event.data.json)
        }
    }
}

/// `coaty observe update`.
struct ObserveUpdate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Print Update requests of a core type or an object type (without answering them).",
        discussion: """
            Examples:
              coaty observe update --core-type Task
              coaty observe update --object-type com.example.Light
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var type: TypeSelection
    @OptionGroup var limits: EventLimitOptions
    @OptionGroup var buffering: BufferingOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        let coreType = try type.coreType.map(JSONInput.coreType)
        let objectType = type.objectType
        try await runObserver(connection, limits, operatorEndpoint, buffering, defaultName: "coaty observe update") {
            manager in
            if let coreType { return try manager.observeUpdate(coreType: coreType) }
            return try manager.observeUpdate(objectType: objectType ?? "")
        } render: { event in
            EventLine.make("Update", topic: event.topic, data: UpdateEventData(object: event.object).json)
        }
    }
}

/// `coaty observe discover`.
struct ObserveDiscover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "Print Discover requests (this observer answers only Discovers of its own identity).",
        discussion: """
            Examples:
              coaty observe discover
              coaty observe discover --count 1
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var limits: EventLimitOptions
    @OptionGroup var buffering: BufferingOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        try await runObserver(connection, limits, operatorEndpoint, buffering, defaultName: "coaty observe discover") {
            manager in
            try manager.observeDiscover()
        } render: { event in
            EventLine.make("Discover", topic: event.topic, data: event.data.json)
        }
    }
}

/// `coaty observe query`.
struct ObserveQuery: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Print Query requests (without answering them).",
        discussion: """
            Examples:
              coaty observe query
              coaty observe query --count 1 --timeout 60
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var limits: EventLimitOptions
    @OptionGroup var buffering: BufferingOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        try await runObserver(connection, limits, operatorEndpoint, buffering, defaultName: "coaty observe query") {
            manager in
            try manager.observeQuery()
        } render: { event in
            EventLine.make("Query", topic: event.topic, data: event.data.json)
        }
    }
}

/// `coaty observe call OP`.
struct ObserveCall: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call",
        abstract: "Print Call requests of an operation (without answering them).",
        discussion: """
            Coaty's rule decides which calls are shown: a call without context filter always; a \
            call with a context filter only when --context is given and matches it.

            Examples:
              coaty observe call switchLight
              coaty observe call switchLight --context '{"floor":3}'
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The operation name.", valueName: "operation"))
    var operation: String

    @Option(
        help: ArgumentHelp("This observer's context object (JSON), matched against call filters.", valueName: "json")
    )
    var context: String?

    @OptionGroup var limits: EventLimitOptions
    @OptionGroup var buffering: BufferingOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    func validate() throws {
        try validateTopicLevel(.call(operation: operation), option: "operation", value: operation)
    }

    func run() async throws {
        let context = try context.map { try JSONInput.parse($0, what: "--context") }
        let operation = self.operation
        try await runObserver(connection, limits, operatorEndpoint, buffering, defaultName: "coaty observe call") {
            manager in
            try manager.observeCall(operation: operation, context: context)
        } render: { event in
            EventLine.make("Call", topic: event.topic, data: event.data.json)
        }
    }
}

/// `coaty observe raw TOPICFILTER`.
struct ObserveRaw: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "raw",
        abstract: "Print Raw messages on an MQTT topic filter (coaty/ topics are never shown).",
        discussion: """
            The data is the payload as JSON when it is JSON, else as a string, else dataBase64.

            Examples:
              coaty observe raw 'sensors/+/temperature'
              coaty observe raw '#' --count 5
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The MQTT topic filter (+ and # wildcards).", valueName: "topic-filter"))
    var topicFilter: String

    @OptionGroup var limits: EventLimitOptions
    @OptionGroup var buffering: BufferingOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    func validate() throws {
        do {
            try CoatyTopic.validateRawSubscriptionFilter(topicFilter)
        } catch {
            throw ValidationError("Invalid topic filter '\(topicFilter)': \(error)")
        }
    }

    func run() async throws {
        let filter = topicFilter
        try await runObserver(connection, limits, operatorEndpoint, buffering, defaultName: "coaty observe raw") {
            manager in
            try manager.observeRaw(filter)
        } render: { event in
            EventLine.raw(event)
        }
    }
}
