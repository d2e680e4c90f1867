import CoatyKit
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Sample objects as wire JSON.
enum Samples {
    static func light(_ name: String = "Lamp", isOn: Bool = true) -> JSONValue {
        [
            "objectType": "com.example.Light", "coreType": "CoatyObject",
            "objectId": .string(CoatyUUID().uuidString), "name": .string(name),
            "isOn": .bool(isOn), "luminance": 0.75, "tags": ["desk", 3],
        ]
    }

    static func task(_ name: String = "Clean up") -> JSONValue {
        [
            "objectType": "coaty.Task", "coreType": "Task", "objectId": .string(CoatyUUID().uuidString),
            "name": .string(name), "status": 0, "creatorId": .string(CoatyUUID().uuidString),
            "creationTimestamp": 1_700_000_000_000,
        ]
    }
}

/// Checks the fields every event line has, and returns its data.
@discardableResult
func checkEventLine(_ line: JSONValue, event: String, twoWay: Bool = false, namespace: String = "-") -> JSONValue? {
    #expect(line["event"] == .string(event))
    let topic = line["topic"]?.stringValue ?? ""
    #expect(topic.hasPrefix("coaty/3/\(namespace)/"), "topic \(topic)")
    let sourceId = line["sourceId"]?.stringValue ?? ""
    #expect(CoatyUUID(sourceId) != nil)
    let levels = topic.split(separator: "/")
    if twoWay {
        let correlationId = line["correlationId"]?.stringValue ?? ""
        #expect(CoatyUUID(correlationId) != nil)
        #expect(levels.suffix(2).map(String.init) == [sourceId, correlationId])
    } else {
        #expect(line["correlationId"] == nil)
        #expect(levels.last.map(String.init) == sourceId)
    }
    return line["data"]
}

@Suite("coaty publishing and observing commands", .serialized, .enabled(if: BrokerAvailability.shouldRun))
struct PublishObserveCommandTests {
    @Test("advertise of an array is observed by core type, each object exactly as sent")
    func advertiseArrayObservedByCoreType() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let observer = try await startReadyCoaty(
                    [
                        "observe", "advertise", "--core-type", "CoatyObject", "--count", "2", "--timeout", "30",
                        "--broker", broker.url,
                    ],
                    name: "observer-core",
                    observer: agent
                )
                let lamp = Samples.light("Lamp")
                let fan = Samples.light("Fan", isOn: false)
                let sent = try await runCoaty(["advertise", "--broker", broker.url, "[\(lamp),\(fan)]"])
                #expect(sent.status == 0, "stderr: \(sent.stderr)")
                #expect(sent.stdout.isEmpty)
                let observed = await observer.finish()
                #expect(observed.status == 0, "stderr: \(observed.stderr)")
                let lines = try observed.jsonLines()
                try #require(lines.count == 2, "stdout: \(observed.stdout)")
                let data = lines.map { checkEventLine($0, event: "Advertise") }
                #expect(data.map { $0?["object"] } == [lamp, fan])
                #expect(lines.allSatisfy { $0["topic"]?.stringValue?.contains("/ADV:CoatyObject/") == true })
            }
        }
    }

    @Test("a received object is printed as it arrived, and on one line whatever its formatting")
    func advertisedTextIsPrintedAsReceived() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let observer = try await startReadyCoaty(
                    [
                        "observe", "advertise", "--object-type", "com.example.Text", "--count", "2", "--timeout", "30",
                        "--broker", broker.url,
                    ],
                    name: "observer-text",
                    observer: agent
                )
                let raw = MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientId: "text-publisher"))
                try await raw.connect()
                let (first, second) = (CoatyUUID(), CoatyUUID())
                let compact =
                    #"{ "objectType" : "com.example.Text","coreType":"CoatyObject","objectId":"\#(first)","#
                    + #""name":"as sent","n":1.50,"s":"a\"b\u00e9"}"#
                let pretty =
                    "{\n  \"objectType\": \"com.example.Text\",\r\n  \"coreType\": \"CoatyObject\",\n"
                    + "  \"objectId\": \"\(second)\",\n  \"name\": \"pretty\"\n}"
                let topic = "coaty/3/-/ADV::com.example.Text/\(CoatyUUID())"
                try await raw.publish(topic, payload: Array(#"{"object":\#(compact),"privateData":{"k":[1,2]}}"#.utf8))
                try await raw.publish(topic, payload: Array("{\"object\":\(pretty)}".utf8))
                let observed = await observer.finish()
                await raw.disconnect()
                #expect(observed.status == 0, "stderr: \(observed.stderr)")
                let text = observed.stdoutLines
                try #require(text.count == 2, "stdout: \(observed.stdout)")
                // The first object's bytes as sent (its spacing, 1.50, its escapes), then privateData.
                #expect(text[0].hasSuffix(#","data":{"object":\#(compact),"privateData":{"k":[1,2]}}}"#))
                let lines = try observed.jsonLines()
                let data = lines.map { checkEventLine($0, event: "Advertise") }
                #expect(data[0]?.at("object.objectId") == .string(first.uuidString))
                #expect(data[0]?.at("object.s") == "a\"b\u{e9}")
                #expect(data[0]?.at("object.n") == 1.5)
                #expect(data[0]?.at("privateData.k") == [1, 2])
                // The second spans lines as sent: printed compact, on one line.
                #expect(
                    data[1]?["object"] == [
                        "objectType": "com.example.Text", "coreType": "CoatyObject",
                        "objectId": .string(second.uuidString), "name": "pretty",
                    ]
                )
                #expect(data[1]?["privateData"] == nil)
            }
        }
    }

    @Test("advertise from stdin is observed by object type; a missing objectId is filled in")
    func advertiseFromStdinObservedByObjectType() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let observer = try await startReadyCoaty(
                    [
                        "observe", "advertise", "--object-type", "com.example.Light", "--count", "1", "--timeout", "30",
                        "--broker", broker.url,
                    ],
                    name: "observer-type",
                    observer: agent
                )
                let sent = try await runCoaty(
                    ["advertise", "-", "--broker", broker.url, "--private-data", #"{"source":"test"}"#],
                    stdin: #"{"objectType":"com.example.Light","coreType":"CoatyObject","name":"Hall","isOn":false}"#
                )
                #expect(sent.status == 0, "stderr: \(sent.stderr)")
                let observed = await observer.finish()
                #expect(observed.status == 0, "stderr: \(observed.stderr)")
                let lines = try observed.jsonLines()
                try #require(lines.count == 1, "stdout: \(observed.stdout)")
                let data = checkEventLine(lines[0], event: "Advertise")
                #expect(lines[0]["topic"]?.stringValue?.contains("/ADV::com.example.Light/") == true)
                #expect(data?.at("object.name") == "Hall")
                #expect(data?.at("object.isOn") == false)
                #expect(CoatyUUID(data?.at("object.objectId")?.stringValue ?? "") != nil)
                #expect(data?["privateData"] == ["source": "test"])
            }
        }
    }

    @Test("an observer of a core type receives only objects of that core type; Raw observers never see coaty/ topics")
    func advertiseTopicsByType() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let tasks = try await startReadyCoaty(
                    [
                        "observe", "advertise", "--core-type", "Task", "--count", "1", "--timeout", "30",
                        "--broker", broker.url,
                    ],
                    name: "observer-tasks",
                    observer: agent
                )
                let raw = try await startReadyCoaty(
                    ["observe", "raw", "#", "--timeout", "3", "--broker", broker.url],
                    name: "observer-all",
                    observer: agent
                )
                let lamp = Samples.light("Lamp")
                let task = Samples.task("Water plants")
                let sent = try await runCoaty(["advertise", "--broker", broker.url, "[\(lamp),\(task)]"])
                #expect(sent.status == 0, "stderr: \(sent.stderr)")
                let taskResult = await tasks.finish()
                let taskLines = try taskResult.jsonLines()
                try #require(taskLines.count == 1, "stdout: \(taskResult.stdout)")
                #expect(checkEventLine(taskLines[0], event: "Advertise")?["object"] == task)
                #expect(taskLines[0]["topic"]?.stringValue?.contains("/ADV:Task/") == true)
                // Raw observers never see coaty/ topics, whatever their filter.
                let rawResult = await raw.finish()
                #expect(rawResult.status == 0, "stderr: \(rawResult.stderr)")
                #expect(rawResult.stdout.isEmpty, "stdout: \(rawResult.stdout)")
            }
        }
    }

    @Test("deadvertise is observed with the object ids")
    func deadvertiseObserved() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                // The deadvertising agent also deadvertises its own identity when it stops: 2 events.
                let observer = try await startReadyCoaty(
                    ["observe", "deadvertise", "--count", "2", "--timeout", "30", "--broker", broker.url],
                    name: "observer-dad",
                    observer: agent
                )
                let ids = [CoatyUUID().uuidString, CoatyUUID().uuidString]
                let sent = try await runCoaty(["deadvertise", "--broker", broker.url] + ids)
                #expect(sent.status == 0, "stderr: \(sent.stderr)")
                let observed = await observer.finish()
                #expect(observed.status == 0, "stderr: \(observed.stderr)")
                let lines = try observed.jsonLines()
                try #require(lines.count == 2, "stdout: \(observed.stdout)")
                let data = checkEventLine(lines[0], event: "Deadvertise")
                #expect(data?["objectIds"] == .array(ids.map { .string($0) }))
                // The second is the identity of the deadvertising agent: the topic's source id.
                let identityData = checkEventLine(lines[1], event: "Deadvertise")
                #expect(identityData?["objectIds"] == [lines[1]["sourceId"] ?? .null])
            }
        }
    }

    @Test("channel with one object and with an array", arguments: [false, true])
    func channelObserved(asArray: Bool) async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let observer = try await startReadyCoaty(
                    [
                        "observe", "channel", "alerts.kitchen", "--count", "1", "--timeout", "30", "--broker",
                        broker.url,
                    ],
                    name: "observer-channel",
                    observer: agent
                )
                let objects = [Samples.light("A"), Samples.task("B")]
                let argument = asArray ? JSONValue.array(objects).serializedString() : objects[0].serializedString()
                let sent = try await runCoaty(["channel", "alerts.kitchen", argument, "--broker", broker.url])
                #expect(sent.status == 0, "stderr: \(sent.stderr)")
                let observed = await observer.finish()
                #expect(observed.status == 0, "stderr: \(observed.stderr)")
                let lines = try observed.jsonLines()
                try #require(lines.count == 1, "stdout: \(observed.stdout)")
                let data = checkEventLine(lines[0], event: "Channel")
                #expect(lines[0]["topic"]?.stringValue?.contains("/CHN:alerts.kitchen/") == true)
                if asArray {
                    #expect(data?["objects"] == .array(objects))
                    #expect(data?["object"] == nil)
                } else {
                    #expect(data?["object"] == objects[0])
                    #expect(data?["objects"] == nil)
                }
            }
        }
    }

    @Test("raw messages: JSON payloads as JSON, text as a string, retained flag kept")
    func rawObserved() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let observer = try await startReadyCoaty(
                    [
                        "observe", "raw", "cli-test/+/reading", "--count", "2", "--timeout", "30", "--broker",
                        broker.url,
                    ],
                    name: "observer-raw",
                    observer: agent
                )
                let json = try await runCoaty([
                    "raw", "cli-test/a/reading", #"{"celsius":21.5}"#, "--broker", broker.url,
                ])
                #expect(json.status == 0, "stderr: \(json.stderr)")
                let text = try await runCoaty(
                    ["raw", "cli-test/b/reading", "-", "--broker", broker.url],
                    stdin: "hello world"
                )
                #expect(text.status == 0, "stderr: \(text.stderr)")
                let observed = await observer.finish()
                #expect(observed.status == 0, "stderr: \(observed.stderr)")
                let lines = try observed.jsonLines()
                try #require(lines.count == 2, "stdout: \(observed.stdout)")
                #expect(lines[0] == ["event": "Raw", "topic": "cli-test/a/reading", "data": ["celsius": 21.5]])
                #expect(lines[1] == ["event": "Raw", "topic": "cli-test/b/reading", "data": "hello world"])

                // A retained message reaches a later observer, marked as retained.
                let retained = try await runCoaty([
                    "raw", "--retain", "cli-test/status", "online", "--broker", broker.url,
                ])
                #expect(retained.status == 0, "stderr: \(retained.stderr)")
                let late = try await runCoaty(
                    ["observe", "raw", "cli-test/status", "--count", "1", "--timeout", "30", "--broker", broker.url]
                )
                #expect(late.status == 0, "stderr: \(late.stderr)")
                #expect(
                    try late.jsonLines()
                        == [["event": "Raw", "topic": "cli-test/status", "retain": true, "data": "online"]]
                )
            }
        }
    }

    @Test("namespaces: an observer sees its own namespace only, or all with --cross-namespace")
    func namespaces() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker, namespace: "home") { home in
                let own = try await startReadyCoaty(
                    ["observe", "advertise", "--object-type", "com.example.Light", "--count", "1", "--timeout", "30"],
                    name: "observer-home",
                    observer: home,
                    environment: ["COATY_BROKER": broker.url, "COATY_NAMESPACE": "home"]
                )
                let cross = try await startReadyCoaty(
                    [
                        "observe", "advertise", "--object-type", "com.example.Light", "--count", "1", "--timeout", "30",
                        "--cross-namespace", "--namespace", "home",
                    ],
                    name: "observer-cross",
                    observer: home,
                    environment: ["COATY_BROKER": broker.url]
                )
                let office = Samples.light("Office lamp")
                let kitchen = Samples.light("Kitchen lamp")
                let first = try await runCoaty(
                    ["advertise", "--namespace", "office", office.serializedString()],
                    environment: ["COATY_BROKER": broker.url]
                )
                #expect(first.status == 0, "stderr: \(first.stderr)")
                let second = try await runCoaty(
                    ["advertise", kitchen.serializedString()],
                    environment: ["COATY_BROKER": broker.url, "COATY_NAMESPACE": "home"]
                )
                #expect(second.status == 0, "stderr: \(second.stderr)")

                let ownResult = await own.finish()
                let ownLines = try ownResult.jsonLines()
                try #require(ownLines.count == 1, "stdout: \(ownResult.stdout) stderr: \(ownResult.stderr)")
                #expect(checkEventLine(ownLines[0], event: "Advertise", namespace: "home")?["object"] == kitchen)

                let crossResult = await cross.finish()
                let crossLines = try crossResult.jsonLines()
                try #require(crossLines.count == 1, "stdout: \(crossResult.stdout) stderr: \(crossResult.stderr)")
                #expect(checkEventLine(crossLines[0], event: "Advertise", namespace: "office")?["object"] == office)
            }
        }
    }

    @Test("an observer stops cleanly on SIGTERM: exit 0 and its identity is deadvertised")
    func observerStopsOnSignal() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker) { agent in
                let identities = try agent.observeAdvertise(coreType: .identity)
                await identities.subscribed()
                let deadvertises = try agent.observeDeadvertise()
                await deadvertises.subscribed()
                let observer = try CoatyProcess(
                    [
                        "observe", "advertise", "--core-type", "Task", "--broker", broker.url, "--name",
                        "observer-signal",
                    ]
                )
                let identity = try #require(await first(identities) { $0.object.name == "observer-signal" })
                observer.signal(SIGTERM)
                let result = await observer.finish(timeout: 30)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                #expect(result.stdout.isEmpty)
                let gone = await (try? first(deadvertises) { $0.objectIds.contains(identity.object.objectId) }) ?? nil
                #expect(gone != nil)
            }
        }
    }

    @Test("--timeout ends an observer without events with exit 0, no output, and only the summary line on stderr")
    func observerTimeout() async throws {
        try await withBroker { broker in
            let result = try await runCoaty(
                ["observe", "channel", "quiet", "--timeout", "0.5", "--broker", broker.url],
                timeout: 30
            )
            #expect(result.status == 0, "stderr: \(result.stderr)")
            #expect(result.stdout.isEmpty)
            #expect(result.stderr == "coaty observe channel: received 0 events, dropped 0\n")
        }
    }
}
