import CoatyKit
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs `coaty respond …` (ready, named "responder") while `body` sends requests from `agent`,
/// then stops it with SIGTERM and returns what it printed.
func withCLIResponder(
    _ arguments: [String],
    broker: MosquittoBroker,
    agent: CommunicationManager,
    _ body: () async throws -> Void
) async throws -> CLIResult {
    try await withReadyProcess(
        executable: try coatyExecutable(),
        ["respond"] + arguments + ["--timeout", "120", "--broker", broker.url, "--name", "responder"],
        name: "responder",
        observer: agent,
        body
    )
}

/// The `answered` responses of a printed line.
func answered(_ line: JSONValue) -> [JSONValue] {
    line["answered"]?.arrayValue ?? []
}

@Suite("coaty respond commands", .serialized, .enabled(if: BrokerAvailability.shouldRun))
struct RespondCommandTests {
    static func contextFilter(floor: Int) throws -> ContextFilter {
        try JSONValueDecoder().decode(ContextFilter.self, from: ["conditions": ["floor", [7, .int(Int64(floor))]]])
    }

    @Test("call --result answers a matching call with the result; a call whose filter does not match is ignored")
    func callWithResult() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let result = try await withCLIResponder(
                    ["call", "switchLight", "--result", #"{"on":true,"level":[1,2.5]}"#, "--context", #"{"floor":3}"#],
                    broker: broker,
                    agent: agent
                ) {
                    let response = try await agent.publishCall(
                        "switchLight",
                        data: CallEventData(parameters: ["x": 1], filter: try Self.contextFilter(floor: 3))
                    ).first(timeout: .seconds(20))
                    #expect(response?.data.result == ["on": true, "level": [1, 2.5]])
                    #expect(response?.data.error == nil)
                    let ignored = try await agent.publishCall(
                        "switchLight",
                        data: CallEventData(parameters: ["x": 2], filter: try Self.contextFilter(floor: 4))
                    ).first(timeout: .seconds(1))
                    #expect(ignored == nil)
                }
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = try result.jsonLines()
                try #require(lines.count == 1, "stdout: \(result.stdout)")
                let data = checkEventLine(lines[0], event: "Call", twoWay: true)
                #expect(data?["parameters"] == ["x": 1])
                #expect(
                    answered(lines[0]) == [["event": "Return", "data": ["result": ["on": true, "level": [1, 2.5]]]]]
                )
                #expect(result.stderr.contains("coaty respond call: received 1 requests, answered 1, failed 0"))
            }
        }
    }

    @Test("call --error-code --error-message returns that error; --count 1 ends the responder with exit 0")
    func callWithError() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let responder = try await startReadyCoaty(
                    [
                        "respond", "call", "reboot", "--error-code", "403", "--error-message", "Not allowed", "--count",
                        "1", "--timeout", "60", "--broker", broker.url,
                    ],
                    name: "responder",
                    observer: agent
                )
                let response = try await agent.publishCall("reboot").first(timeout: .seconds(20))
                let result = await responder.finish(timeout: 30)
                #expect(response?.data.error == ReturnError(code: 403, message: "Not allowed"))
                #expect(response?.data.result == nil)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = try result.jsonLines()
                try #require(lines.count == 1, "stdout: \(result.stdout)")
                #expect(answered(lines[0]).first?.at("data.error") == ["code": 403, "message": "Not allowed"])
            }
        }
    }

    static let execCases: [(command: String, parameters: JSONValue, outcome: Result<JSONValue, ReturnError>)] = [
        ("cat", ["a": [1, 2], "s": "x\ny", "n": .null], .success(["a": [1, 2], "s": "x\ny", "n": .null])),
        ("cat", [1, "two", [3]], .success([1, "two", [3]])),
        ("cat >/dev/null; echo hello world", ["a": 1], .success("hello world")),
        ("cat >/dev/null", [], .success(.null)),
        (
            "echo; echo 'bad thing' >&2; echo more >&2; exit 3", ["a": 1],
            .failure(ReturnError(code: 3, message: "bad thing"))
        ),
        ("exit 7", ["a": 1], .failure(ReturnError(code: 7, message: "exit status 7"))),
    ]

    @Test("call --exec: parameters on stdin, stdout the result, a failing command an error", arguments: execCases)
    func callWithExec(_ execCase: (command: String, parameters: JSONValue, outcome: Result<JSONValue, ReturnError>))
        async throws
    {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let data: CallEventData =
                    switch execCase.parameters {
                    case .array(let positional): CallEventData(positionalParameters: positional)
                    default: CallEventData(parameters: execCase.parameters.objectValue)
                    }
                let result = try await withCLIResponder(
                    ["call", "run", "--exec", execCase.command],
                    broker: broker,
                    agent: agent
                ) {
                    let response = try await agent.publishCall("run", data: data).first(timeout: .seconds(20))
                    let returned = try #require(response?.data.outcome)
                    #expect(returned == execCase.outcome)
                }
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = try result.jsonLines()
                try #require(lines.count == 1, "stdout: \(result.stdout)")
                #expect(answered(lines[0]).first?["event"] == "Return")
            }
        }
    }

    /// Objects for Discover and Query: two lights (one with externalId lamp-7), three tasks
    /// (one with externalId lamp-7).
    static func objects() -> [JSONValue] {
        var lamp = Samples.light("Lamp")
        lamp["externalId"] = "lamp-7"
        let desk = Samples.light("Desk", isOn: false)
        var tasks = [Samples.task("Clean up"), Samples.task("Buy milk"), Samples.task("Fix lamp")]
        for (index, priority) in [2, 1, 5].enumerated() { tasks[index]["priority"] = .int(Int64(priority)) }
        tasks[2]["externalId"] = "lamp-7"
        return [lamp, desk] + tasks
    }

    @Test("discover --objects FILE resolves by objectId, externalId, externalId with types, and types")
    func discover() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let directory = try TemporaryPath()
                let file = directory.path + "/objects.json"
                let objects = Self.objects()
                try JSONValue.array(objects).serializedString().write(toFile: file, atomically: true, encoding: .utf8)
                let (lamp, desk, fixLamp) = (objects[0], objects[1], objects[4])
                let lampId = try #require(lamp["objectId"]?.stringValue.flatMap(CoatyUUID.init))
                let requests: [(DiscoverEventData, Set<JSONValue>)] = [
                    (.objectId(lampId), [lamp]),
                    (.externalId("lamp-7"), [lamp, fixLamp]),
                    (.externalId("lamp-7", objectTypes: ["com.example.Light"]), [lamp]),
                    (.externalId("lamp-7", coreTypes: [.task]), [fixLamp]),
                    (.objectTypes(["com.example.Light"]), [lamp, desk]),
                    (.coreTypes([.task]), Set(objects[2...])),
                    (.objectId(CoatyUUID()), []),
                ]
                let result = try await withCLIResponder(
                    ["discover", "--objects", file],
                    broker: broker,
                    agent: agent
                ) {
                    for (request, expected) in requests {
                        let resolves = try await agent.publishDiscover(request)
                            .responses(timeout: .seconds(1.5)).collect()
                        let found = resolves.compactMap { $0.data.object?.jsonValue }
                        #expect(found.count == expected.count, "\(request.json)")
                        #expect(Set(found) == expected, "\(request.json)")
                    }
                }
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = try result.jsonLines()
                // The Discover that matched nothing was not answered and has no line.
                try #require(lines.count == requests.count - 1, "stdout: \(result.stdout)")
                #expect(checkEventLine(lines[1], event: "Discover", twoWay: true)?["externalId"] == "lamp-7")
                #expect(Set(answered(lines[1]).compactMap { $0.at("data.object") }) == [lamp, fixLamp])
                #expect(answered(lines[1]).allSatisfy { $0["event"] == "Resolve" })
                #expect(result.stderr.contains("received 7 requests, answered 6, failed 0"), "\(result.stderr)")
            }
        }
    }

    @Test("query --objects answers with filter, orderBy and take applied, and an empty Retrieve for no match")
    func query() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let objects = Self.objects()
                var filter = ObjectFilter.where("priority", .lessThan(5))
                filter.orderByProperties = [ObjectFilterOrdering("priority", .descending)]
                var takeOne = ObjectFilter()
                takeOne.orderByProperties = [ObjectFilterOrdering("name", .ascending)]
                takeOne.take = 1
                let requests: [(QueryEventData, [JSONValue])] = [
                    (QueryEventData(coreTypes: [.task], objectFilter: filter), [objects[2], objects[3]]),
                    (QueryEventData(coreTypes: [.task], objectFilter: takeOne), [objects[3]]),
                    (
                        QueryEventData(objectTypes: ["com.example.Light"], objectFilter: ObjectFilter()),
                        [objects[0], objects[1]]
                    ),
                    (QueryEventData(objectTypes: ["com.example.None"], objectFilter: ObjectFilter()), []),
                ]
                let result = try await withCLIResponder(
                    ["query", "--objects", JSONValue.array(objects).serializedString()],
                    broker: broker,
                    agent: agent
                ) {
                    for (request, expected) in requests {
                        let retrieves = try await agent.publishQuery(request).responses(timeout: .seconds(1.5))
                            .collect()
                        try #require(retrieves.count == 1, "\(request.json)")
                        #expect(retrieves[0].data.objects.map(\.jsonValue) == expected, "\(request.json)")
                    }
                }
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = try result.jsonLines()
                try #require(lines.count == requests.count, "stdout: \(result.stdout)")
                #expect(checkEventLine(lines[0], event: "Query", twoWay: true)?["coreTypes"] == ["Task"])
                #expect(answered(lines[0]) == [["event": "Retrieve", "data": ["objects": [objects[2], objects[3]]]]])
                #expect(answered(lines[3]) == [["event": "Retrieve", "data": ["objects": []]]])
            }
        }
    }

    static let badObjects: [(arguments: [String], mentioning: String)] = [
        (["respond", "query", "--objects", "/no/such/objects.json"], "'/no/such/objects.json'"),
        (["respond", "discover", "--objects", "@/no/such/objects.json"], "'/no/such/objects.json'"),
        (["respond", "discover", "--objects", #"[{"objectType":"a.B","name":"x"},{"name":3}]"#], "--objects [1]"),
        (["respond", "query", "--objects", "[1,"], "Invalid JSON in --objects"),
        (["respond", "call", "op", "--result", "{"], "Invalid JSON in --result"),
    ]

    @Test(
        "bad --objects or --result fails with exit 1 and one line on stderr, before connecting",
        arguments: badObjects
    )
    func badInputFails(_ badCase: (arguments: [String], mentioning: String)) async throws {
        // Port 1 has no broker: the input is checked before any connection attempt.
        let result = try await runCoaty(badCase.arguments + ["--broker", "mqtt://127.0.0.1:1"], timeout: 30)
        expectRuntimeFailure(result, mentioning: badCase.mentioning)
        #expect(result.stderr.hasPrefix("coaty: error: "))
    }

    static let helpTexts: [(command: [String], mentions: [String])] = [
        (["respond"], ["call", "discover", "query", "answered", "coaty respond call", "coaty respond discover"]),
        (["respond", "call"], ["<operation>", "--result", "--error-code", "--error-message", "--exec", "--context"]),
        (["respond", "discover"], ["--objects", "externalId", "coaty respond discover --objects"]),
        (["respond", "query"], ["--objects", "orderBy", "coaty respond query --objects"]),
    ]

    @Test("the help of every respond command names its arguments and has examples", arguments: helpTexts)
    func helpNamesArguments(_ help: (command: [String], mentions: [String])) async throws {
        let result = try await runCoaty(help.command + ["--help"], timeout: 30)
        #expect(result.status == 0)
        #expect(result.stdout.contains("Examples:"))
        let shared = help.command.count > 1 ? ["--count", "--timeout", "--broker"] : []
        for mention in help.mentions + shared {
            #expect(result.stdout.contains(mention), "\(help.command) --help lacks \(mention)")
        }
    }
}
