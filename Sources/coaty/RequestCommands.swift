import ArgumentParser
import CoatyKit
import Foundation
import Tracing

/// The default time requests wait for responses, in seconds.
let defaultRequestTimeout = 2.0

/// Connects, publishes a request when iteration starts, prints its responses until `--count`
/// responses or `--timeout` (default 2 s), then stops.
func runRequest<Response: Sendable>(
    _ connection: ConnectionOptions,
    _ limits: EventLimitOptions,
    defaultName: String,
    request: (CommunicationManager) throws -> ResponseSequence<Response>,
    render: @escaping @Sendable (Response) -> String?
) async throws {
    let agent = try await CLIAgent(connection, defaultName: defaultName)
    let signals = ShutdownSignals()
    try await agent.start(interruptedBy: signals)
    do {
        let timeout = limits.timeout ?? defaultRequestTimeout
        let responses = try request(agent.manager)
            .responses(limit: limits.count, timeout: .milliseconds(Int64(timeout * 1000)))
        // The request span starts with the iteration: in the trace a parent process handed down, if any.
        _ = try await ServiceContext.withValue(Telemetry.inheritedContext()) {
            try await printEvents(responses, count: limits.count, timeout: nil, signals: signals, render: render)
        }
    } catch let error as CLIError {
        await agent.stop()
        throw error
    } catch {
        await agent.stop()
        throw CLIError("\(error)")
    }
    await agent.stop()
}

/// `coaty discover`.
struct Discover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish a Discover and print the Resolve events.",
        discussion: """
            Valid forms (as the protocol requires): --object-id alone; --external-id alone or with \
            --object-types or --core-types; --object-id with --external-id; or only one of \
            --object-types / --core-types. Every agent answers a Discover of core type Identity \
            (or of its identity's objectId) with its identity.

            Examples:
              coaty discover --core-types Identity                 # who is online?
              coaty discover --object-id 3d4f6a0c-9a7e-4c43-a1b3-2f0b8f3c1e55 --count 1
              coaty discover --external-id lamp-7 --object-types com.example.Light
              coaty discover --object-types com.example.Light --timeout 5
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp("The objectId to find.", valueName: "id"))
    var objectId: String?

    @Option(help: ArgumentHelp("The externalId to find.", valueName: "id"))
    var externalId: String?

    @Option(help: ArgumentHelp("Object types to find, comma-separated.", valueName: "A,B"))
    var objectTypes: String?

    @Option(help: ArgumentHelp("Core types to find, comma-separated (e.g. Identity,Task).", valueName: "A,B"))
    var coreTypes: String?

    @OptionGroup var limits: EventLimitOptions

    func validate() throws {
        if let objectId, CoatyUUID(objectId) == nil {
            throw ValidationError("--object-id '\(objectId)' is not a UUID.")
        }
        if let objectTypes, JSONInput.list(objectTypes).isEmpty {
            throw ValidationError("--object-types needs at least one object type.")
        }
        if let coreTypes, JSONInput.list(coreTypes).isEmpty {
            throw ValidationError("--core-types needs at least one core type.")
        }
        do {
            // The form only: core type names are checked in run() (an unknown one fails with 1).
            _ = try DiscoverEventData(
                externalId: externalId,
                objectId: objectId.flatMap(CoatyUUID.init),
                objectTypes: objectTypes.map(JSONInput.list),
                coreTypes: coreTypes.map { _ in [CoreType.coatyObject] }
            )
        } catch {
            throw ValidationError(
                "These options do not form a valid Discover: use --object-id; or --external-id [--object-types | --core-types]; or --object-id with --external-id; or one of --object-types / --core-types."
            )
        }
    }

    func run() async throws {
        let data: DiscoverEventData
        do {
            data = try DiscoverEventData(
                externalId: externalId,
                objectId: objectId.flatMap(CoatyUUID.init),
                objectTypes: objectTypes.map(JSONInput.list),
                coreTypes: try coreTypes.map(JSONInput.coreTypes)
            )
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("\(error)")
        }
        try await runRequest(connection, limits, defaultName: "coaty discover") { manager in
            manager.publishDiscover(data)
        } render: { event in
            EventLine.make("Resolve", topic: event.topic, data: event.data.json)
        }
    }
}

/// `coaty query`.
struct Query: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish a Query and print the Retrieve events.",
        discussion: """
            --filter is a Coaty ObjectFilter and --join one join condition or an array of them, as \
            JSON; operators are numbers (0 LessThan … 7 Equals … 14 NotIn). --filter - reads the \
            filter from stdin (one argument holds at most 128 KiB on Linux: a few thousand conditions).

            Examples:
              coaty query --core-types Task
              coaty query --object-types com.example.Reading \\
                --filter '{"conditions":["celsius",[2,21]],"take":5}'
              coaty query --core-types Task \\
                --filter '{"orderByProperties":[["creationTimestamp","Desc"]]}'
              coaty query --object-types com.example.Room \\
                --join '{"localProperty":"lightId","asProperty":"light"}'
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp("Object types to query, comma-separated.", valueName: "A,B"))
    var objectTypes: String?

    @Option(help: ArgumentHelp("Core types to query, comma-separated.", valueName: "A,B"))
    var coreTypes: String?

    @Option(help: ArgumentHelp("An ObjectFilter as JSON, or - to read it from stdin.", valueName: "json"))
    var filter: String?

    @Option(help: ArgumentHelp("A join condition, or an array of them, as JSON.", valueName: "json"))
    var join: String?

    @OptionGroup var limits: EventLimitOptions

    func validate() throws {
        guard (objectTypes == nil) != (coreTypes == nil) else {
            throw ValidationError("Give exactly one of --object-types and --core-types.")
        }
        if let list = objectTypes ?? coreTypes, JSONInput.list(list).isEmpty {
            throw ValidationError("Give at least one type.")
        }
    }

    func run() async throws {
        // Without --filter an empty filter (`{}`: every object of the types) is sent, not none:
        // Coaty JS 2.4.1 responders read `objectFilter` unconditionally and drop a Query without it.
        let filter =
            try self.filter.map { try JSONInput.decode(ObjectFilter.self, JSONInput.text($0), what: "--filter") }
            ?? ObjectFilter()
        let join = try self.join.map { try JSONInput.decode(ObjectJoinConditionList.self, $0, what: "--join") }
        let data: QueryEventData
        if let coreTypes {
            data = QueryEventData(
                coreTypes: try JSONInput.coreTypes(coreTypes),
                objectFilter: filter,
                objectJoinConditions: join
            )
        } else {
            data = QueryEventData(
                objectTypes: JSONInput.list(objectTypes ?? ""),
                objectFilter: filter,
                objectJoinConditions: join
            )
        }
        try await runRequest(connection, limits, defaultName: "coaty query") { manager in
            manager.publishQuery(data)
        } render: { event in
            EventLine.make("Retrieve", topic: event.topic, data: event.data.json)
        }
    }
}

/// `coaty update [JSON | -]`.
struct Update: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish an Update of a full object and print the Complete events.",
        discussion: """
            The object comes from the argument, or from stdin when it is - or left out.

            Examples:
              coaty update - --count 1 <<< '{"objectType":"com.example.Light",
                "objectId":"3d4f6a0c-9a7e-4c43-a1b3-2f0b8f3c1e55","name":"Lamp"}'
              coaty update - --count 1 < lamp.json
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The full updated object as JSON, or - for stdin.", valueName: "json"))
    var json: String?

    @OptionGroup var limits: EventLimitOptions

    func run() async throws {
        let (objects, isArray) = try JSONInput.objects(json)
        guard !isArray, let object = objects.first else { throw CLIError("update takes one object, not an array.") }
        try await runRequest(connection, limits, defaultName: "coaty update") { manager in
            try manager.publishUpdate(object)
        } render: { event in
            EventLine.make("Complete", topic: event.topic, data: event.data.json)
        }
    }
}

/// `coaty call OP`.
struct Call: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish a Call of a remote operation and print the Return events.",
        discussion: """
            --params is a JSON object (named parameters) or array (positional parameters); \
            --context-filter is a Coaty ContextFilter ({"conditions":…}) that responders match \
            against their context.

            Examples:
              coaty call switchLight --params '{"on":true}' --count 1
              coaty call add --params '[1,2]'
              coaty call switchLight --params '{"on":false}' \\
                --context-filter '{"conditions":["floor",[7,3]]}'
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The operation name.", valueName: "operation"))
    var operation: String

    @Option(help: ArgumentHelp("The parameters: a JSON object or array.", valueName: "json"))
    var params: String?

    @Option(help: ArgumentHelp("A ContextFilter as JSON.", valueName: "json"))
    var contextFilter: String?

    @OptionGroup var limits: EventLimitOptions

    func validate() throws {
        try validateTopicLevel(.call(operation: operation), option: "operation", value: operation)
    }

    func run() async throws {
        let filter = try contextFilter.map { try JSONInput.decode(ContextFilter.self, $0, what: "--context-filter") }
        let data: CallEventData
        switch try params.map({ try JSONInput.parse($0, what: "--params") }) {
        case nil: data = CallEventData(filter: filter)
        case .object(let named)?: data = CallEventData(parameters: named, filter: filter)
        case .array(let positional)?: data = CallEventData(positionalParameters: positional, filter: filter)
        case _?: throw CLIError("--params must be a JSON object or array.")
        }
        let operation = self.operation
        try await runRequest(connection, limits, defaultName: "coaty call") { manager in
            try manager.publishCall(operation, data: data)
        } render: { event in
            EventLine.make("Return", topic: event.topic, data: event.data.json)
        }
    }
}
