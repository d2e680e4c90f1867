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
            seconds, or SIGINT/SIGTERM (then it deadvertises its identity and exits 0; while it \
            is still connecting, a signal ends it at once, also with 0).

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

/// Connects an observer agent whose observation is registered before it starts, prints its
/// events, and stops it; its summary line starts with `received(count)` (default: "received N events").
func runObserver<S: AsyncSequence & Sendable>(
    _ connection: ConnectionOptions,
    _ limits: EventLimitOptions,
    _ operatorEndpoint: OperatorOptions,
    defaultName: String,
    observe: (CommunicationManager) throws -> S,
    render: @escaping @Sendable (S.Element) -> String?,
    received describeReceived: (Int) -> String = { "received \($0) events" }
) async throws where S.Element: Sendable {
    let operatorSetup = CLIOperator(operatorEndpoint)
    let agent = try await CLIAgent(connection, defaultName: defaultName, metricsFactory: operatorSetup?.metricsFactory)
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
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        let coreType = try type.coreType.map(JSONInput.coreType)
        let objectType = type.objectType
        try await runObserver(connection, limits, operatorEndpoint, defaultName: "coaty observe advertise") { manager in
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
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        try await runObserver(connection, limits, operatorEndpoint, defaultName: "coaty observe deadvertise") {
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
    @OptionGroup var operatorEndpoint: OperatorOptions

    func validate() throws {
        try validateTopicLevel(.channel(id: channelId), option: "channel id", value: channelId)
    }

    func run() async throws {
        let channelId = self.channelId
        try await runObserver(connection, limits, operatorEndpoint, defaultName: "coaty observe channel") { manager in
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
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        let coreType = try type.coreType.map(JSONInput.coreType)
        let objectType = type.objectType
        try await runObserver(connection, limits, operatorEndpoint, defaultName: "coaty observe update") { manager in
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
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        try await runObserver(connection, limits, operatorEndpoint, defaultName: "coaty observe discover") { manager in
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
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        try await runObserver(connection, limits, operatorEndpoint, defaultName: "coaty observe query") { manager in
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
    @OptionGroup var operatorEndpoint: OperatorOptions

    func validate() throws {
        try validateTopicLevel(.call(operation: operation), option: "operation", value: operation)
    }

    func run() async throws {
        let context = try context.map { try JSONInput.parse($0, what: "--context") }
        let operation = self.operation
        try await runObserver(connection, limits, operatorEndpoint, defaultName: "coaty observe call") { manager in
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
        try await runObserver(connection, limits, operatorEndpoint, defaultName: "coaty observe raw") { manager in
            try manager.observeRaw(filter)
        } render: { event in
            EventLine.raw(event)
        }
    }
}
