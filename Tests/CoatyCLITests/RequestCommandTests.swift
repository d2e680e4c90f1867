import CoatyKit
import CoatyTesting
import Foundation
import Testing

/// Answers requests in the test process while `body` runs.
func withResponder<T>(
    _ serve: @escaping @Sendable () async -> Void,
    _ body: () async throws -> T
) async throws -> T {
    let task = Task { await serve() }
    do {
        let result = try await body()
        task.cancel()
        return result
    } catch {
        task.cancel()
        throw error
    }
}

@Suite("coaty request commands", .serialized, .enabled(if: BrokerAvailability.shouldRun))
struct RequestCommandTests {
    @Test("discover --core-types Identity is answered by a running CLI observer and the test agent")
    func discoverIdentities() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker, name: "test agent") { agent in
                let observer = try await startReadyCoaty(
                    ["observe", "channel", "idle", "--timeout", "60", "--broker", broker.url],
                    name: "watcher",
                    observer: agent
                )
                let result = try await runCoaty(
                    [
                        // 5 s: on a loaded machine the in-process agent answered after 2 s.
                        "discover", "--core-types", "Identity", "--timeout", "5", "--broker", broker.url, "--name",
                        "asker",
                    ]
                )
                observer.signal(SIGTERM)
                let observerResult = await observer.finish(timeout: 30)
                #expect(observerResult.status == 0, "stderr: \(observerResult.stderr)")
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = try result.jsonLines()
                let data = lines.map { checkEventLine($0, event: "Resolve", twoWay: true) }
                let names = Set(data.compactMap { $0?.at("object.name")?.stringValue })
                // No echo suppression in Coaty: the asking agent answers too.
                #expect(names == ["watcher", "test agent", "asker"], "stdout: \(result.stdout)")
                #expect(data.allSatisfy { $0?.at("object.coreType") == "Identity" })
                #expect(Set(lines.compactMap { $0["correlationId"] }).count == 1)
                let agentLine = lines.first { $0.at("data.object.name") == "test agent" }
                #expect(agentLine?["sourceId"] == .string(agent.identity.objectId.uuidString))
            }
        }
    }

    @Test(
        "discover --object-id --count 1 resolves exactly that object and exits (over MQTT 3.1.1, and 5 beside a 3.1.1 agent)",
        arguments: [[], ["--mqtt-version", "5"]]
    )
    func discoverByObjectId(_ version: [String]) async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let result = try await runCoaty(
                    [
                        "discover", "--object-id", agent.identity.objectId.uuidString, "--count", "1", "--timeout",
                        "30",
                        "--broker", broker.url,
                    ] + version
                )
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = try result.jsonLines()
                try #require(lines.count == 1, "stdout: \(result.stdout)")
                let data = checkEventLine(lines[0], event: "Resolve", twoWay: true)
                #expect(data?.at("object.objectId") == .string(agent.identity.objectId.uuidString))
            }
        }
    }

    @Test("discover --external-id with --object-types is answered by a responder with Resolve")
    func discoverByExternalId() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                var lampJSON = try #require(Samples.light("Lamp").objectValue)
                lampJSON["externalId"] = "lamp-7"
                let lamp = try CoatyObjectRegistry().decode(lampJSON)
                let discovers = try agent.observeDiscover()
                await discovers.subscribed()
                let result = try await withResponder({
                    for await discover in discovers where discover.data.externalId == "lamp-7" {
                        try? await discover.resolve(object: lamp)
                    }
                }) {
                    try await runCoaty(
                        [
                            "discover", "--external-id", "lamp-7", "--object-types", "com.example.Light", "--count",
                            "1",
                            "--timeout", "30", "--broker", broker.url,
                        ]
                    )
                }
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = try result.jsonLines()
                try #require(lines.count == 1, "stdout: \(result.stdout)")
                #expect(checkEventLine(lines[0], event: "Resolve", twoWay: true)?["object"] == .object(lampJSON))
            }
        }
    }

    @Test("query with --filter and --join reaches the responder intact; its Retrieve is printed")
    func queryAnswered() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let task = Samples.task("Clean up")
                let taskObject = try CoatyObjectRegistry().decode(task)
                let queries = try agent.observeQuery()
                await queries.subscribed()
                let filter: JSONValue = [
                    "conditions": ["name", [7, "Clean up"]], "orderByProperties": [["name", "Desc"]], "skip": 0,
                    "take": 5,
                ]
                let join: JSONValue = [
                    "localProperty": "creatorId", "asProperty": "creator", "isOneToOneRelation": true,
                ]
                let result = try await withResponder({
                    for await query in queries {
                        try? await query.retrieve(
                            objects: [taskObject],
                            privateData: ["query": .object(query.data.json)]
                        )
                    }
                }) {
                    try await runCoaty(
                        [
                            "query", "--core-types", "Task", "--filter", filter.serializedString(), "--join",
                            join.serializedString(), "--count", "1", "--timeout", "30", "--broker", broker.url,
                        ]
                    )
                }
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = try result.jsonLines()
                try #require(lines.count == 1, "stdout: \(result.stdout)")
                let data = checkEventLine(lines[0], event: "Retrieve", twoWay: true)
                #expect(data?["objects"] == [task])
                #expect(data?.at("privateData.query.coreTypes") == ["Task"])
                #expect(data?.at("privateData.query.objectFilter") == filter)
                #expect(data?.at("privateData.query.objectJoinConditions") == join)
            }
        }
    }

    @Test("query without --filter sends an empty objectFilter, as Coaty JS 2.4.1 responders require")
    func queryWithoutFilterSendsEmptyFilter() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let queries = try agent.observeQuery()
                await queries.subscribed()
                let result = try await withResponder({
                    for await query in queries {
                        try? await query.retrieve(objects: [], privateData: ["query": .object(query.data.json)])
                    }
                }) {
                    try await runCoaty(
                        [
                            "query", "--object-types", "com.example.Lamp", "--count", "1", "--timeout", "30",
                            "--broker", broker.url,
                        ]
                    )
                }
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = try result.jsonLines()
                try #require(lines.count == 1, "stdout: \(result.stdout)")
                let data = checkEventLine(lines[0], event: "Retrieve", twoWay: true)
                #expect(data?.at("privateData.query.objectFilter") == [:])
                #expect(data?.at("privateData.query.objectTypes") == ["com.example.Lamp"])
            }
        }
    }

    @Test("update is answered with Complete by a responder")
    func updateAnswered() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let lamp = Samples.light("Lamp", isOn: true)
                var switched = try #require(lamp.objectValue)
                switched["isOn"] = false
                let completed = try CoatyObjectRegistry().decode(switched)
                let updates = try agent.observeUpdate(coreType: .coatyObject)
                await updates.subscribed()
                let result = try await withResponder({
                    for await update in updates { try? await update.complete(object: completed) }
                }) {
                    try await runCoaty(
                        ["update", lamp.serializedString(), "--count", "1", "--timeout", "30", "--broker", broker.url]
                    )
                }
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let lines = try result.jsonLines()
                try #require(lines.count == 1, "stdout: \(result.stdout)")
                #expect(checkEventLine(lines[0], event: "Complete", twoWay: true)?["object"] == .object(switched))
            }
        }
    }

    @Test("call is answered with Return: results, errors, and context filters")
    func callAnswered() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let adds = try agent.observeCall(operation: "add")
                let switches = try agent.observeCall(operation: "switch", context: ["floor": 3])
                await adds.subscribed()
                await switches.subscribed()
                let serve: @Sendable () async -> Void = {
                    await withTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await call in adds {
                                if let a = call.data.parameter("a")?.doubleValue,
                                    let b = call.data.parameter("b")?.doubleValue
                                {
                                    try? await call.returnResult(.double(a + b))
                                } else if let a = call.data.parameter(at: 0)?.doubleValue,
                                    let b = call.data.parameter(at: 1)?.doubleValue
                                {
                                    try? await call.returnResult(.double(a + b), executionInfo: "positional")
                                } else {
                                    try? await call.returnError(.invalidParameters)
                                }
                            }
                        }
                        group.addTask {
                            for await call in switches { try? await call.returnResult(true) }
                        }
                    }
                }
                try await withResponder(serve) {
                    let named = try await runCoaty(
                        [
                            "call", "add", "--params", #"{"a":1,"b":2}"#, "--count", "1", "--timeout", "30",
                            "--broker", broker.url,
                        ]
                    )
                    #expect(named.status == 0, "stderr: \(named.stderr)")
                    let namedLines = try named.jsonLines()
                    try #require(namedLines.count == 1, "stdout: \(named.stdout)")
                    #expect(checkEventLine(namedLines[0], event: "Return", twoWay: true) == ["result": 3])

                    let positional = try await runCoaty(
                        [
                            "call", "add", "--params", "[40,2]", "--count", "1", "--timeout", "30", "--broker",
                            broker.url,
                        ]
                    )
                    #expect(try positional.jsonLines().first?["data"] == ["result": 42, "executionInfo": "positional"])

                    let invalid = try await runCoaty([
                        "call", "add", "--count", "1", "--timeout", "30", "--broker", broker.url,
                    ])
                    #expect(
                        try invalid.jsonLines().first?["data"] == [
                            "error": ["code": -32602, "message": "Invalid params"]
                        ]
                    )

                    // A context filter the responder's context matches is answered…
                    let matching = try await runCoaty(
                        [
                            "call", "switch", "--context-filter", #"{"conditions":["floor",[7,3]]}"#, "--count", "1",
                            "--timeout", "30", "--broker", broker.url,
                        ]
                    )
                    #expect(try matching.jsonLines().first?["data"] == ["result": true], "stderr: \(matching.stderr)")
                    // …one it does not match is not: no Return until the timeout, still exit 0.
                    let other = try await runCoaty(
                        [
                            "call", "switch", "--context-filter", #"{"conditions":["floor",[7,4]]}"#, "--timeout", "1",
                            "--broker", broker.url,
                        ]
                    )
                    #expect(other.status == 0, "stderr: \(other.stderr)")
                    #expect(other.stdout.isEmpty)
                }
            }
        }
    }

    @Test("a request nobody answers ends after the default 2 s timeout with exit 0 and no output")
    func unansweredRequest() async throws {
        try await withBroker { broker in
            let result = try await runCoaty(["call", "nobody.listens", "--broker", broker.url], timeout: 30)
            #expect(result.status == 0, "stderr: \(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
    }

    /// An observe command, the request that it must print, and the data it must show.
    struct ObservedRequest: Sendable, CustomTestStringConvertible {
        let observe: [String]
        let request: [String]
        let event: String
        let check: @Sendable (JSONValue?) -> Bool
        var testDescription: String { observe.joined(separator: " ") }
    }

    static let lamp = Samples.light("Observed lamp")
    static let task = Samples.task("Observed task")

    static let observedRequests: [ObservedRequest] = [
        ObservedRequest(
            observe: ["observe", "discover"],
            request: ["discover", "--object-types", "com.example.Light"],
            event: "Discover",
            check: { $0 == ["objectTypes": ["com.example.Light"]] }
        ),
        ObservedRequest(
            observe: ["observe", "query"],
            request: ["query", "--object-types", "com.example.Light,com.example.Fan"],
            event: "Query",
            check: { $0 == ["objectTypes": ["com.example.Light", "com.example.Fan"], "objectFilter": [:]] }
        ),
        ObservedRequest(
            observe: ["observe", "call", "dim"],
            request: ["call", "dim", "--params", #"{"level":0.5}"#],
            event: "Call",
            check: { $0 == ["parameters": ["level": 0.5]] }
        ),
        ObservedRequest(
            observe: ["observe", "update", "--core-type", "CoatyObject"],
            request: ["update", lamp.serializedString()],
            event: "Update",
            check: { $0 == ["object": lamp] }
        ),
        ObservedRequest(
            observe: ["observe", "update", "--object-type", "com.example.Light"],
            request: ["update", lamp.serializedString()],
            event: "Update",
            check: { $0 == ["object": lamp] }
        ),
        ObservedRequest(
            observe: ["observe", "update", "--object-type", "coaty.Task"],
            request: ["update", task.serializedString()],
            event: "Update",
            check: { $0 == ["object": task] }
        ),
    ]

    @Test("observe prints requests of other agents", arguments: observedRequests)
    func observeRequests(_ scenario: ObservedRequest) async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let observer = try await startReadyCoaty(
                    scenario.observe + ["--count", "1", "--timeout", "30", "--broker", broker.url],
                    name: "observer-requests",
                    observer: agent
                )
                let request = try await runCoaty(scenario.request + ["--timeout", "0.5", "--broker", broker.url])
                #expect(request.status == 0, "stderr: \(request.stderr)")
                let observed = await observer.finish()
                #expect(observed.status == 0, "stderr: \(observed.stderr)")
                let lines = try observed.jsonLines()
                try #require(lines.count == 1, "stdout: \(observed.stdout)")
                let data = checkEventLine(lines[0], event: scenario.event, twoWay: true)
                #expect(scenario.check(data), "data: \(String(describing: data))")
            }
        }
    }
}
