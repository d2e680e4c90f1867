import ArgumentParser
import CoatyKit
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `coaty respond …`: answer requests from the command line.
struct Respond: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Answer Call, Discover or Query requests, printing one JSON line per request answered.",
        discussion: """
            Each line is the request as `coaty observe` prints it, plus what was answered: \
            {"event":…,"topic":…,"sourceId":…,"correlationId":…,"data":{…request…},\
            "answered":[{"event":"Return"|"Resolve"|"Retrieve","data":{…response…}}]}. \
            The responder subscribes before it advertises its identity (see --name), so that \
            Advertise means it is ready. It runs until --count requests were answered, --timeout \
            seconds, or SIGINT/SIGTERM (exit 0), and then prints one summary line on stderr.

            Examples:
              coaty respond call switchLight --result '{"on":true}'
              coaty respond call add --exec 'jq "add"'
              coaty respond discover --objects lights.json
              coaty respond query --objects '[{"objectType":"com.example.Light","name":"Lamp"}]'
            """,
        subcommands: [RespondCall.self, RespondDiscover.self, RespondQuery.self]
    )
}

/// Connects a responder agent whose observation is registered before it starts, answers each
/// request with `answer` and prints the line it returns (`nil`: the request was not answered),
/// then stops (``runObserver(_:_:_:defaultName:observe:render:received:)`` with answering).
func runResponder<Request: Sendable>(
    _ connection: ConnectionOptions,
    _ limits: EventLimitOptions,
    _ operatorEndpoint: OperatorOptions,
    defaultName: String,
    observe: (CommunicationManager) throws -> EventObservation<Request>,
    answer: @escaping @Sendable (Request) async throws -> String?
) async throws {
    let answered = EventCounter()
    let failed = EventCounter()
    let logger = connection.makeLogger()
    try await runObserver(connection, limits, operatorEndpoint, defaultName: defaultName) { manager in
        // A request is answered before its line is printed; one that cannot be answered (the
        // publication failed) is logged and counted, and the responder goes on.
        try observe(manager).map { request -> String? in
            do {
                guard let line = try await answer(request) else { return nil }
                answered.add(1)
                return line
            } catch {
                failed.add(1)
                logger.error("Could not answer a request", metadata: ["error": "\(oneLine("\(error)"))"])
                return nil
            }
        }
    } render: { line in
        line
    } received: { count in
        "received \(count) requests, answered \(answered.count), failed \(failed.count)"
    }
}

/// One answer in a printed line: `{"event":…,"data":{…}}`.
func answerLine(_ event: String, _ data: JSONObject) -> JSONValue {
    ["event": .string(event), "data": .object(data)]
}

// MARK: - coaty respond call

/// `coaty respond call OP`.
struct RespondCall: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call",
        abstract: "Answer Call requests of an operation with a fixed result, a fixed error, or a command's output.",
        discussion: """
            Give exactly one of --result, --error-code (with --error-message) or --exec.

            --exec runs the command with /bin/sh -c once per call, one call at a time, with the \
            call's parameters (a JSON object or array, or null when there are none) on its stdin. \
            Exit status 0: its stdout is the result — parsed as JSON, else the text as a JSON \
            string (one trailing newline removed); empty stdout is null. Any other exit status N: \
            an error Return with code N (a command killed by a signal S: 128+S, as shells report \
            it) and as message the first non-empty line of its stderr, else "exit status N". \
            While traces are exported (--otlp-endpoint), the command gets the Call's trace context in \
            TRACEPARENT and TRACESTATE: a coaty request it makes continues the Call's trace.

            Coaty's rule decides which calls are answered: a call without context filter always; \
            a call with a context filter only when --context is given and matches it.

            Examples:
              coaty respond call switchLight --result '{"on":true}'
              coaty respond call switchLight --result - < result.json
              coaty respond call reboot --error-code 403 --error-message 'Not allowed'
              coaty respond call add --exec 'jq "add"' --count 1       # [1,2] -> 3
              coaty respond call switchLight --context '{"floor":3}' --result true
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The operation name.", valueName: "operation"))
    var operation: String

    @Option(help: ArgumentHelp("The result of every call: any JSON value, or - for stdin.", valueName: "json"))
    var result: String?

    @Option(help: ArgumentHelp("Answer every call with an error of this code (with --error-message).", valueName: "n"))
    var errorCode: Int?

    @Option(help: ArgumentHelp("The message of --error-code.", valueName: "text"))
    var errorMessage: String?

    @Option(
        help: ArgumentHelp(
            "A shell command run per call: parameters JSON on stdin, stdout the result, exit status N > 0 an error N.",
            valueName: "command"
        )
    )
    var exec: String?

    @Option(
        help: ArgumentHelp("This responder's context object (JSON), matched against call filters.", valueName: "json")
    )
    var context: String?

    @OptionGroup var limits: EventLimitOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    func validate() throws {
        try validateTopicLevel(.call(operation: operation), option: "operation", value: operation)
        let modes = [result != nil, errorCode != nil, exec != nil].filter { $0 }.count
        guard modes == 1 else {
            throw ValidationError("Give exactly one of --result, --error-code (with --error-message) and --exec.")
        }
        if (errorCode == nil) != (errorMessage == nil) {
            throw ValidationError("--error-code and --error-message go together.")
        }
        if let exec, exec.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("--exec needs a command.")
        }
    }

    func run() async throws {
        let context = try context.map { try JSONInput.parse($0, what: "--context") }
        let outcome: CallAnswer
        if let result {
            outcome = .fixed(.success(try JSONInput.parse(JSONInput.text(result), what: "--result")))
        } else if let errorCode, let errorMessage {
            outcome = .fixed(.failure(ReturnError(code: errorCode, message: errorMessage)))
        } else {
            outcome = .exec(exec ?? "")
        }
        let operation = self.operation
        try await runResponder(connection, limits, operatorEndpoint, defaultName: "coaty respond call") { manager in
            try manager.observeCall(operation: operation, context: context)
        } answer: { call in
            let returned: Result<JSONValue, ReturnError>
            switch outcome {
            case .fixed(let fixed): returned = fixed
            case .exec(let command):
                // In the Call's trace context: a traced command (another `coaty` request) continues its trace.
                returned = try await call.withTraceContext {
                    try await ShellCommand.run(
                        command,
                        input: call.data.parameters ?? .null,
                        environment: Telemetry.traceEnvironment()
                    )
                }
            }
            let data: ReturnEventData
            switch returned {
            case .success(let value):
                data = ReturnEventData(result: value)
                try await call.returnResult(value)
            case .failure(let error):
                data = ReturnEventData(error: error)
                try await call.returnError(error)
            }
            return EventLine.make(
                "Call",
                topic: call.topic,
                data: call.data.json,
                answered: [answerLine("Return", data.json)]
            )
        }
    }
}

/// How `coaty respond call` answers.
enum CallAnswer: Sendable {
    /// The same result or error for every call.
    case fixed(Result<JSONValue, ReturnError>)
    /// The outcome of a shell command per call.
    case exec(String)
}

/// Runs `--exec` commands of `coaty respond call`.
enum ShellCommand {
    /// Runs `command` with `/bin/sh -c`, `input` on its stdin; its stdin, stdout and stderr are
    /// temporary files (no pipe to fill, no SIGPIPE). Cancellation kills the command.
    ///
    /// - Parameters:
    ///   - command: the shell command.
    ///   - input: its standard input.
    ///   - environment: variables added to this process's (the trace context, `TRACEPARENT`).
    /// - Returns: the result (exit status 0) or the error (any other status), as `--help` says.
    /// - Throws: ``CLIError`` when the command cannot be started.
    static func run(
        _ command: String,
        input: JSONValue,
        environment: [String: String] = [:]
    ) async throws -> Result<JSONValue, ReturnError> {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-respond-\(CoatyUUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let files = (
            stdin: directory.appendingPathComponent("stdin"), stdout: directory.appendingPathComponent("stdout"),
            stderr: directory.appendingPathComponent("stderr")
        )
        do {
            try Data(input.serializedBytes()).write(to: files.stdin)
            try Data().write(to: files.stdout)
            try Data().write(to: files.stderr)
        } catch {
            throw CLIError("--exec: cannot write temporary files in \(directory.path): \(error)")
        }
        let pid = Atomic<Int32>(0)
        let status: Int32 = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (done: CheckedContinuation<Int32, any Error>) in
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", command]
                if !environment.isEmpty {
                    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
                }
                do {
                    process.standardInput = try FileHandle(forReadingFrom: files.stdin)
                    process.standardOutput = try FileHandle(forWritingTo: files.stdout)
                    process.standardError = try FileHandle(forWritingTo: files.stderr)
                } catch {
                    done.resume(throwing: CLIError("--exec: cannot open temporary files: \(error)"))
                    return
                }
                process.terminationHandler = { process in
                    let code = process.terminationStatus
                    done.resume(returning: process.terminationReason == .uncaughtSignal ? 128 + code : code)
                }
                do {
                    try process.run()
                } catch {
                    done.resume(throwing: CLIError("--exec: cannot run /bin/sh: \(error)"))
                    return
                }
                pid.store(process.processIdentifier, ordering: .relaxed)
                if Task.isCancelled { kill(process.processIdentifier, SIGKILL) }
            }
        } onCancel: {
            let running = pid.load(ordering: .relaxed)
            if running > 0 { kill(running, SIGKILL) }
        }
        let stdout = (try? Data(contentsOf: files.stdout)) ?? Data()
        let stderr = (try? Data(contentsOf: files.stderr)) ?? Data()
        guard status == 0 else {
            let text = String(decoding: stderr, as: UTF8.self)
            let line = text.split(whereSeparator: \.isNewline)
                .map { $0.trimmingCharacters(in: .whitespaces) }
                .first { !$0.isEmpty }
            return .failure(ReturnError(code: Int(status), message: line ?? "exit status \(status)"))
        }
        return .success(result(of: String(decoding: stdout, as: UTF8.self)))
    }

    /// A command's stdout as a result: JSON when it parses, else a string without its trailing
    /// newline; empty output is `null`.
    static func result(of stdout: String) -> JSONValue {
        let trimmed = stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty { return .null }
        if let json = try? JSONValue(parsing: trimmed) { return json }
        var text = stdout
        if text.hasSuffix("\r\n") {
            text.removeLast(2)
        } else if text.hasSuffix("\n") {
            text.removeLast()
        }
        return .string(text)
    }
}

// MARK: - coaty respond discover / query

/// `--objects FILE|JSON|-`: the objects a responder answers with.
struct ObjectsOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The objects: a JSON array (or one object), a file holding it (@FILE or a path), or - for stdin.",
            valueName: "file|json"
        )
    )
    var objects: String

    /// The objects; a missing `objectId` gets a fresh UUID (as `coaty advertise` does).
    ///
    /// - Throws: ``CLIError`` naming the file or the element when it cannot be read.
    func load() throws -> [AnyCoatyObject] {
        let trimmed = objects.trimmingCharacters(in: .whitespacesAndNewlines)
        let text: String
        if trimmed == "-" {
            text = JSONInput.text("-")
        } else if trimmed.hasPrefix("[") || trimmed.hasPrefix("{") {
            text = trimmed
        } else {
            let path = trimmed.hasPrefix("@") ? String(trimmed.dropFirst()) : trimmed
            do {
                text = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw CLIError("--objects: cannot read the file '\(path)' (give a path, @FILE, JSON or -).")
            }
        }
        let registry = CoatyObjectRegistry()
        switch try JSONInput.parse(text, what: "--objects") {
        case .array(let elements):
            return try elements.enumerated().map { index, element in
                try JSONInput.object(element, what: "--objects [\(index)]", registry: registry)
            }
        case let value:
            return [try JSONInput.object(value, what: "--objects", registry: registry)]
        }
    }
}

/// `coaty respond discover`.
struct RespondDiscover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "Answer Discover requests with the matching objects of --objects.",
        discussion: """
            As Coaty JS matches: by objectId (and externalId when both are given); by externalId, \
            and when object types or core types are given also by type; or by types only. Each \
            matching object is one Resolve; a Discover that matches none is not answered (no \
            line). The agent's own identity is answered as always.

            Examples:
              coaty respond discover --objects lights.json
              coaty respond discover --objects @lights.json --count 1
              coaty respond discover --objects '[{"objectType":"com.example.Light",
                "name":"Lamp","externalId":"lamp-7"}]'
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var source: ObjectsOption
    @OptionGroup var limits: EventLimitOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        let objects = try source.load()
        try await runResponder(connection, limits, operatorEndpoint, defaultName: "coaty respond discover") { manager in
            try manager.observeDiscover()
        } answer: { discover in
            let matching = objects.filter(discover.data.matches)
            guard !matching.isEmpty else { return nil }
            var answered: [JSONValue] = []
            for object in matching {
                try await discover.resolve(object: object)
                answered.append(answerLine("Resolve", ["object": .object(object.json)]))
            }
            return EventLine.make("Discover", topic: discover.topic, data: discover.data.json, answered: answered)
        }
    }
}

/// `coaty respond query`.
struct RespondQuery: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Answer Query requests from the objects of --objects.",
        discussion: """
            Every Query is answered with one Retrieve, also an empty one (as Coaty JS does): the \
            objects of the queried object types or core types that match the objectFilter's \
            conditions, sorted by its orderByProperties, then its skip and take applied (Coaty's \
            semantics); join conditions are resolved against all of --objects by objectId.

            Examples:
              coaty respond query --objects tasks.json
              coaty respond query --objects - --count 1 < tasks.json
              coaty respond query --objects '[{"objectType":"coaty.Task","name":"Clean up"}]'
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var source: ObjectsOption
    @OptionGroup var limits: EventLimitOptions
    @OptionGroup var operatorEndpoint: OperatorOptions

    func run() async throws {
        let objects = try source.load()
        let everything = objects.map(\.jsonValue)
        let registry = CoatyObjectRegistry()
        try await runResponder(connection, limits, operatorEndpoint, defaultName: "coaty respond query") { manager in
            try manager.observeQuery()
        } answer: { query in
            let data = query.data
            var found = ObjectMatcher.apply(data.objectFilter, to: objects.filter(data.matchesType)) { $0.jsonValue }
            if let joins = data.objectJoinConditions?.conditions, !joins.isEmpty {
                let joined = ObjectMatcher.resolveJoins(joins, in: found.map(\.jsonValue), candidates: everything)
                found = try joined.map { json in
                    guard case .object(let object) = json else { throw CLIError("A joined object is not an object.") }
                    return try registry.decode(object)
                }
            }
            try await query.retrieve(objects: found)
            return EventLine.make(
                "Query",
                topic: query.topic,
                data: data.json,
                answered: [answerLine("Retrieve", RetrieveEventData(objects: found).json)]
            )
        }
    }
}
