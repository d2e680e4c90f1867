import ArgumentParser
import CoatyKit
import Foundation

/// Connects, runs `body` with the manager, then deadvertises the identity, flushes and disconnects.
func withConnectedAgent(
    _ options: ConnectionOptions,
    defaultName: String,
    _ body: (CommunicationManager) async throws -> Void
) async throws {
    let agent = try await CLIAgent(options, defaultName: defaultName)
    try await agent.start()
    do {
        try await body(agent.manager)
    } catch let error as CLIError {
        await agent.stop()
        throw error
    } catch {
        await agent.stop()
        throw CLIError("\(error)")
    }
    await agent.stop()
}

/// Parses `privateData` JSON, if given.
func parsePrivateData(_ text: String?) throws -> JSONObject? {
    guard let text else { return nil }
    return try JSONInput.parseObject(text, what: "--private-data")
}

/// `coaty advertise [JSON | -]`.
struct Advertise: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Advertise one object, or each object of a JSON array; exits 0 once flushed.",
        discussion: """
            The JSON comes from the argument, or from stdin when the argument is - or left out. \
            An object without objectId gets a fresh one; without coreType it is based on \
            CoatyObject (or on the core type of a coaty.<CoreType> object type). An object whose \
            object type is not its core type's own is advertised on both topics (ADV:<CoreType> \
            and ADV::<objectType>), as the protocol requires.

            Examples:
              coaty advertise '{"objectType":"com.example.Light","name":"Lamp"}'
              coaty advertise - < lights.json        # one object or an array
              coaty advertise --namespace home < task.json
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The object or array of objects as JSON, or - for stdin.", valueName: "json"))
    var json: String?

    @Option(help: ArgumentHelp("A JSON object sent as the Advertise's privateData.", valueName: "json"))
    var privateData: String?

    func run() async throws {
        let (objects, _) = try JSONInput.objects(json)
        let privateData = try parsePrivateData(privateData)
        try await withConnectedAgent(connection, defaultName: "coaty advertise") { manager in
            for object in objects {
                try await manager.publishAdvertise(object, privateData: privateData)
            }
        }
    }
}

/// `coaty deadvertise ID…`.
struct Deadvertise: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deadvertise objects by objectId; exits 0 once flushed.",
        discussion: """
            Examples:
              coaty deadvertise 3d4f6a0c-9a7e-4c43-a1b3-2f0b8f3c1e55
              coaty deadvertise ID1 ID2 ID3
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The objectIds (UUIDs) of the objects that are gone.", valueName: "id"))
    var ids: [String]

    func validate() throws {
        guard !ids.isEmpty else { throw ValidationError("Give at least one objectId.") }
        for id in ids where CoatyUUID(id) == nil {
            throw ValidationError("'\(id)' is not a UUID (objectIds look like 3d4f6a0c-9a7e-4c43-a1b3-2f0b8f3c1e55).")
        }
    }

    func run() async throws {
        let objectIds = ids.compactMap { CoatyUUID($0) }
        try await withConnectedAgent(connection, defaultName: "coaty deadvertise") { manager in
            try await manager.publishDeadvertise(objectIds)
        }
    }
}

/// `coaty channel ID [JSON | -]`.
struct Channel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish a Channel event with one object or an array of objects; exits 0 once flushed.",
        discussion: """
            One object is sent as {"object":…}, an array as {"objects":[…]}.

            Examples:
              coaty channel alerts '{"objectType":"com.example.Alert","name":"Door"}'
              coaty channel alerts - < alerts.json
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The channel id (characters A-Z a-z 0-9 . - _).", valueName: "id"))
    var channelId: String

    @Argument(help: ArgumentHelp("The object or array of objects as JSON, or - for stdin.", valueName: "json"))
    var json: String?

    @Option(help: ArgumentHelp("A JSON object sent as the event's privateData.", valueName: "json"))
    var privateData: String?

    func validate() throws {
        try validateTopicLevel(.channel(id: channelId), option: "channel id", value: channelId)
    }

    func run() async throws {
        let (objects, isArray) = try JSONInput.objects(json)
        let privateData = try parsePrivateData(privateData)
        let data =
            isArray
            ? ChannelEventData(objects: objects, privateData: privateData)
            : ChannelEventData(object: objects[0], privateData: privateData)
        try await withConnectedAgent(connection, defaultName: "coaty channel") { manager in
            try await manager.publishChannel(channelId, data: data)
        }
    }
}

/// `coaty raw TOPIC [DATA | -]`.
struct Raw: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish a Raw message on a topic outside coaty/; exits 0 once flushed.",
        discussion: """
            The payload is the argument's UTF-8 bytes, or stdin's bytes when it is - or left out.

            Examples:
              coaty raw sensors/kitchen/temperature 21.5
              coaty raw --retain status/agent-1 online
              cat image.jpg | coaty raw cameras/door/snapshot -
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The MQTT topic (no wildcards, not starting with coaty/).", valueName: "topic"))
    var topic: String

    @Argument(help: ArgumentHelp("The payload, or - for stdin.", valueName: "data"))
    var data: String?

    @Flag(help: "Ask the broker to retain the message for future subscribers.")
    var retain = false

    func validate() throws {
        do {
            try CoatyTopic.validateRawTopic(topic)
        } catch {
            throw ValidationError("Invalid Raw topic '\(topic)': \(error)")
        }
    }

    func run() async throws {
        let payload = JSONInput.bytes(data)
        try await withConnectedAgent(connection, defaultName: "coaty raw") { manager in
            try await manager.publishRaw(topic: topic, payload: payload, retain: retain)
        }
    }
}

/// Validates a topic level given on the command line (a usage error when invalid).
func validateTopicLevel(_ event: CoatyTopic.Event, option: String, value: String) throws {
    do {
        _ = try CoatyTopic.subscriptionFilter(for: event, namespace: CoatyTopic.defaultNamespace)
    } catch {
        throw ValidationError("Invalid \(option) '\(value)': use characters A-Z a-z 0-9 . - _ only.")
    }
}
