import CoatyKit
import Foundation
import Testing

@testable import CoatyView

/// The viewer's state, fed with messages as a broker delivers them (no broker: the state is a pure function of
/// the messages and their times).
@Suite("The viewer's network state")
struct NetworkStateTests {
    let start = Date(timeIntervalSince1970: 1_796_190_000)

    func at(_ milliseconds: Double) -> Date { start.addingTimeInterval(milliseconds / 1_000) }

    func payload(_ json: JSONValue) -> [UInt8] { json.serializedBytes() }

    func identity(_ id: CoatyUUID, _ name: String) -> JSONValue {
        ["objectType": "coaty.Identity", "coreType": "Identity", "objectId": .string(id.description), "name": .string(name)]
    }

    func light(_ name: String) -> JSONValue {
        [
            "objectType": "com.example.Light", "coreType": "CoatyObject",
            "objectId": .string(CoatyUUID().description), "name": .string(name), "on": true,
        ]
    }

    func state(_ network: NetworkState, at date: Date) -> JSONObject {
        network.state(at: date, events: .newest(200)).json.objectValue!
    }

    @Test("agents join by their identity Advertise, leave by its Deadvertise, and are listed online first")
    func agentsJoinAndLeave() throws {
        let network = NetworkState()
        let (lamp, switcher) = (CoatyUUID(), CoatyUUID())
        network.receive(
            topic: "coaty/3/-/ADV:Identity/\(lamp)",
            payload: payload(["object": identity(lamp, "Lamp")]),
            at: at(0)
        )
        network.receive(
            topic: "coaty/3/-/ADV:Identity/\(switcher)",
            payload: payload(["object": identity(switcher, "Switch")]),
            at: at(10)
        )
        network.receive(
            topic: "coaty/3/-/DAD/\(lamp)",
            payload: payload(["objectIds": [.string(lamp.description)]]),
            at: at(500)
        )
        let agents = try #require(state(network, at: at(600))["agents"]?.arrayValue)
        #expect(agents.map { $0["name"]?.stringValue } == ["Switch", "Lamp"])
        #expect(agents.map { $0["online"]?.boolValue } == [true, false])
        #expect(agents[1]["left"]?.int64Value == 1_796_190_000_500)
        #expect(agents[1]["leftBy"]?.stringValue == "deadvertise")
        #expect(agents[0]["since"]?.int64Value == 1_796_190_000_010)
        #expect(agents[0]["identity"]?["name"]?.stringValue == "Switch")
        // It comes back: online again, since then.
        network.receive(
            topic: "coaty/3/-/ADV:Identity/\(lamp)",
            payload: payload(["object": identity(lamp, "Lamp")]),
            at: at(900)
        )
        let back = try #require(state(network, at: at(950))["agents"]?.arrayValue)
        #expect(back.allSatisfy { $0["online"]?.boolValue == true })
        #expect(back.first { $0["name"]?.stringValue == "Lamp" }?["since"]?.int64Value == 1_796_190_000_900)
    }

    @Test("an identity resolved to a Discover is listed, and a Log's agentInfo is attached to its agent")
    func resolvedIdentitiesAndAgentInfo() throws {
        let network = NetworkState()
        let (agent, viewer) = (CoatyUUID(), CoatyUUID())
        let correlation = CoatyUUID()
        network.receive(
            topic: "coaty/3/-/DSC/\(viewer)/\(correlation)",
            payload: payload(["coreTypes": ["Identity"]]),
            at: at(0)
        )
        network.receive(
            topic: "coaty/3/-/RSV/\(agent)/\(correlation)",
            payload: payload(["object": identity(agent, "Recorder")]),
            at: at(2)
        )
        let log: JSONValue = [
            "objectType": "coaty.Log", "coreType": "Log", "objectId": .string(CoatyUUID().description), "name": "log",
            "logLevel": 20, "logMessage": "hello", "logDate": "2026-12-02T00:00:00.000Z",
            "logHost": ["agentInfo": ["packageInfo": ["name": "recorder", "version": "1.0.0"]]],
        ]
        network.receive(topic: "coaty/3/-/ADV:Log/\(agent)", payload: payload(["object": log]), at: at(3))
        let agents = try #require(state(network, at: at(5))["agents"]?.arrayValue)
        let recorder = try #require(agents.first { $0["name"]?.stringValue == "Recorder" })
        #expect(recorder["online"]?.boolValue == true)
        #expect(recorder["agentInfo"]?["packageInfo"]?["name"]?.stringValue == "recorder")
        // The requester is known by its events only: listed without identity.
        let requester = try #require(agents.first { $0["objectId"]?.stringValue == viewer.description })
        #expect(requester["identity"] == nil)
        #expect(requester["events"]?.intValue == 1)
    }

    @Test("object types are counted with their latest object; the recent ones are kept up to the limit")
    func objectTypesCounted() throws {
        var limits = NetworkState.Limits()
        limits.recentObjectsPerType = 3
        let network = NetworkState(limits: limits)
        let source = CoatyUUID()
        for index in 0..<10 {
            network.receive(
                topic: "coaty/3/-/ADV::com.example.Light/\(source)",
                payload: payload(["object": light("Lamp \(index)")]),
                at: at(Double(index))
            )
        }
        network.receive(
            topic: "coaty/3/-/CHN:lights/\(source)",
            payload: payload(["objects": [light("Chan 1"), light("Chan 2")]]),
            at: at(20)
        )
        let types = try #require(state(network, at: at(30))["types"]?.arrayValue)
        #expect(types.count == 1)
        #expect(types[0]["objectType"]?.stringValue == "com.example.Light")
        #expect(types[0]["count"]?.intValue == 12)
        #expect(types[0]["latest"]?["name"]?.stringValue == "Chan 2")
        let detail = try #require(network.objectTypeJSON("com.example.Light"))
        #expect(detail["objects"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["Chan 2", "Chan 1", "Lamp 9"])
        #expect(network.objectTypeJSON("com.example.Unknown") == nil)
        // An object seen again: its latest version, moved to the front, not listed twice.
        var again = light("Lamp 9 again").objectValue!
        let firstObjects = try #require(network.objectTypeJSON("com.example.Light")?["objects"]?.arrayValue)
        again["objectId"] = firstObjects[2]["objectId"]
        network.receive(
            topic: "coaty/3/-/ADV::com.example.Light/\(source)",
            payload: payload(["object": .object(again)]),
            at: at(40)
        )
        let after = try #require(network.objectTypeJSON("com.example.Light"))
        #expect(after["objects"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["Lamp 9 again", "Chan 2", "Chan 1"])
        #expect(after["count"]?.intValue == 13)
    }

    @Test("an Advertise published on its core type's topic and its object type's is one event and one object")
    func twinsCountedOnce() throws {
        let network = NetworkState()
        let source = CoatyUUID()
        let object = payload(["object": light("Lamp")])
        network.receive(topic: "coaty/3/-/ADV:CoatyObject/\(source)", payload: object, at: at(0))
        network.receive(topic: "coaty/3/-/ADV::com.example.Light/\(source)", payload: object, at: at(0))
        // A core type's own object type goes out once.
        let task: JSONValue = [
            "objectType": "coaty.Task", "coreType": "Task", "objectId": .string(CoatyUUID().description), "name": "t",
            "status": 0, "creatorId": .string(source.description), "creationTimestamp": 1,
        ]
        network.receive(topic: "coaty/3/-/ADV:Task/\(source)", payload: payload(["object": task]), at: at(1))
        let document = state(network, at: at(2))
        #expect(document["totals"]?["events"]?.intValue == 2)
        #expect(document["totals"]?["twins"]?.intValue == 1)
        let counts = document["types"]?.arrayValue?.map { ($0["objectType"]?.stringValue ?? "", $0["count"]?.intValue ?? 0) }
        #expect(counts?.map(\.0) == ["coaty.Task", "com.example.Light"])
        #expect(counts?.map(\.1) == [1, 1])
    }

    @Test("objects beyond the size limit are kept as a stub; types beyond the limit are counted, not kept")
    func boundedObjects() throws {
        var limits = NetworkState.Limits()
        limits.largestKeptObject = 200
        limits.objectTypes = 2
        let network = NetworkState(limits: limits)
        let source = CoatyUUID()
        var big = light("Big").objectValue!
        big["blob"] = .string(String(repeating: "x", count: 1_000))
        network.receive(
            topic: "coaty/3/-/ADV::com.example.Light/\(source)",
            payload: payload(["object": .object(big)]),
            at: at(0)
        )
        let kept = try #require(network.objectTypeJSON("com.example.Light")?["objects"]?[0])
        #expect(kept["truncated"]?.boolValue == true)
        #expect(kept["name"]?.stringValue == "Big")
        #expect(kept["blob"] == nil)
        for type in ["a.B", "c.D", "e.F"] {
            var object = light("x").objectValue!
            object["objectType"] = .string(type)
            network.receive(topic: "coaty/3/-/ADV::\(type)/\(source)", payload: payload(["object": .object(object)]), at: at(1))
        }
        #expect(try #require(state(network, at: at(2))["types"]?.arrayValue).count == 2)
        #expect(network.overflowTypes == 2)
    }

    @Test("bad topics and payloads are counted and the last reason shown; nothing else changes")
    func invalidMessagesCounted() throws {
        let network = NetworkState()
        let source = CoatyUUID()
        network.receive(topic: "coaty/3/-/ADV:Task/not-a-uuid", payload: payload(["object": light("x")]), at: at(0))
        network.receive(topic: "coaty/3/-/ADV::com.example.Light/\(source)", payload: Array("{oops".utf8), at: at(1))
        network.receive(topic: "coaty/3/-/ADV::com.example.Light/\(source)", payload: payload(["objects": []]), at: at(2))
        network.receive(topic: "coaty/3/-/DSC/\(source)", payload: payload(["coreTypes": ["Identity"]]), at: at(3))
        #expect(network.invalidCount == 4)
        #expect(network.eventCount == 0)
        let totals = try #require(state(network, at: at(4))["totals"])
        #expect(totals["invalid"]?.intValue == 4)
        #expect(totals["lastInvalid"]?["reason"]?.stringValue?.contains("Coaty topic") == true)
        #expect(state(network, at: at(4))["agents"]?.arrayValue?.isEmpty == true)
        #expect(state(network, at: at(4))["types"]?.arrayValue?.isEmpty == true)
    }

    @Test("rates count every event per second by event type, over the last 5 minutes")
    func ratesPerSecond() throws {
        let network = NetworkState()
        let source = CoatyUUID()
        for index in 0..<250 {
            // 100 in the first second, 150 in the third.
            let time = index < 100 ? Double(index) : 2_000 + Double(index)
            network.receive(
                topic: "coaty/3/-/ADV::com.example.Light/\(source)",
                payload: payload(["object": light("L")]),
                at: at(time)
            )
        }
        network.receive(topic: "coaty/3/-/CHN:x/\(source)", payload: payload(["object": light("C")]), at: at(2_500))
        let rates = try #require(state(network, at: at(2_600))["rates"])
        let advertiseSeries = try #require(rates["series"]?["Advertise"]?.arrayValue)
        let advertise = advertiseSeries.compactMap { $0.intValue }
        #expect(advertise.count == 300)
        #expect(Array(advertise.suffix(3)) == [100, 0, 150])
        #expect(advertise.reduce(0, +) == 250)
        #expect(rates["series"]?["Channel"]?.arrayValue?.last?.intValue == 1)
        // Five minutes later the old buckets are gone.
        let later = try #require(state(network, at: at(400_000))["rates"]?["series"]?["Advertise"]?.arrayValue)
        let laterCounts = later.compactMap { $0.intValue }
        #expect(laterCounts.reduce(0, +) == 0)
    }

    @Test("a request is paired with its first response by correlation id; its latency is in the percentiles")
    func latenciesPaired() throws {
        let network = NetworkState()
        let (requester, responder) = (CoatyUUID(), CoatyUUID())
        for index in 0..<10 {
            let correlation = CoatyUUID()
            let sent = Double(index * 100)
            network.receive(
                topic: "coaty/3/-/QRY/\(requester)/\(correlation)",
                payload: payload(["objectTypes": ["com.example.Light"], "objectFilter": [:]]),
                at: at(sent)
            )
            // Latency index + 1 ms; a second response does not count again.
            for extra in [0.0, 5.0] {
                network.receive(
                    topic: "coaty/3/-/RTV/\(responder)/\(correlation)",
                    payload: payload(["objects": []]),
                    at: at(sent + Double(index + 1) + extra)
                )
            }
        }
        // A response nobody asked for here is not paired.
        network.receive(topic: "coaty/3/-/RSV/\(responder)/\(CoatyUUID())", payload: payload(["object": light("x")]), at: at(1_500))
        let latencies = try #require(state(network, at: at(2_000))["latencies"])
        let overall = try #require(latencies["overall"]?["Query"])
        #expect(overall["count"]?.intValue == 10)
        #expect(overall["p50"]?.doubleValue == 5)
        #expect(overall["p90"]?.doubleValue == 9)
        #expect(overall["p99"]?.doubleValue == 10)
        #expect(latencies["overall"]?["Discover"] == nil)
        let series = try #require(latencies["series"]?["Query"]?.arrayValue)
        #expect(series.count == 30)
        #expect(series.last?["count"]?.intValue == 10)
        let gaps = series.dropLast().filter { !$0.isNull }
        #expect(gaps.isEmpty)
    }

    @Test("the live stream is sampled to the limit with the skipped count, and never repeats an event")
    func liveStreamSampled() throws {
        let network = NetworkState()
        let source = CoatyUUID()
        func advertise(_ count: Int, from: Int) {
            for index in from..<(from + count) {
                network.receive(
                    topic: "coaty/3/-/ADV::com.example.Light/\(source)",
                    payload: payload(["object": light("L\(index)")]),
                    at: at(Double(index))
                )
            }
        }
        advertise(30, from: 0)
        let first = network.state(at: at(100), events: .after(sequence: 0, limit: 100))
        #expect(first.json["events"]?.arrayValue?.count == 30)
        #expect(first.json["eventsSkipped"]?.intValue == 0)
        #expect(first.sequence == 30)
        advertise(5_000, from: 30)
        let second = network.state(at: at(6_000), events: .after(sequence: first.sequence, limit: 100))
        let sequences = try #require(second.json["events"]?.arrayValue?.compactMap { $0["seq"]?.intValue })
        #expect(sequences.count == 100)
        #expect(sequences.last == 5_030)
        #expect(sequences.first! > 30)
        #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 })
        #expect(second.json["eventsSkipped"]?.intValue == 4_900)
        // Counts are never sampled.
        #expect(second.json["totals"]?["byEvent"]?["Advertise"]?.intValue == 5_030)
        #expect(network.eventCount == 5_030)
    }

    @Test("events are kept up to the limit and filtered by event type, object type and agent")
    func eventsFiltered() throws {
        var limits = NetworkState.Limits()
        limits.events = 50
        let network = NetworkState(limits: limits)
        let (lamp, other) = (CoatyUUID(), CoatyUUID())
        network.receive(topic: "coaty/3/-/ADV:Identity/\(lamp)", payload: payload(["object": identity(lamp, "Lamp")]), at: at(0))
        for index in 0..<100 {
            let source = index.isMultiple(of: 2) ? lamp : other
            network.receive(
                topic: "coaty/3/-/ADV::com.example.Light/\(source)",
                payload: payload(["object": light("L")]),
                at: at(Double(index + 1))
            )
        }
        network.receive(topic: "coaty/3/-/DSC/\(other)/\(CoatyUUID())", payload: payload(["coreTypes": ["Task"]]), at: at(200))
        let all = try #require(network.eventsJSON(matching: .init(), limit: 2_000)["events"]?.arrayValue)
        #expect(all.count == 50)
        #expect(all.last?["event"]?.stringValue == "Discover")
        let discovers = network.eventsJSON(matching: .init(event: "discover"), limit: 10)["events"]?.arrayValue
        #expect(discovers?.count == 1)
        let byName = try #require(network.eventsJSON(matching: .init(agent: "lam"), limit: 2_000)["events"]?.arrayValue)
        #expect(!byName.isEmpty)
        #expect(byName.allSatisfy { $0["sourceName"]?.stringValue == "Lamp" })
        let byType = network.eventsJSON(matching: .init(objectType: "com.example.Light"), limit: 5)["events"]?.arrayValue
        #expect(byType?.count == 5)
        #expect(byType?.allSatisfy { $0["objectType"]?.stringValue == "com.example.Light" } == true)
    }

    @Test("connection changes are shown; a reconnect after going offline is counted")
    func connectionStates() throws {
        let network = NetworkState(broker: "mqtt://127.0.0.1:1883")
        #expect(state(network, at: at(0))["connection"]?["state"]?.stringValue == "connecting")
        network.setConnection(.online, at: at(1))
        network.setConnection(.offline, at: at(2))
        #expect(state(network, at: at(3))["connection"]?["state"]?.stringValue == "offline")
        network.setConnection(.online, at: at(4))
        let connection = try #require(state(network, at: at(5))["connection"])
        #expect(connection["state"]?.stringValue == "online")
        #expect(connection["reconnects"]?.intValue == 1)
        #expect(connection["since"]?.int64Value == 1_796_190_000_004)
        #expect(connection["broker"]?.stringValue == "mqtt://127.0.0.1:1883")
    }
}

@Suite("Questions asked from the viewer's page")
struct NetworkQuestionTests {
    func question(_ json: String) throws(NetworkQuestion.Invalid) -> NetworkQuestion {
        try NetworkQuestion(body: Array(json.utf8))
    }

    @Test("valid Discovers and Queries are read with their timeout")
    func valid() throws {
        let discover = try question(#"{"kind":"discover","coreTypes":["Identity"],"timeout":500}"#)
        guard case .discover(let data) = discover.request else { Issue.record("not a Discover"); return }
        #expect(data.coreTypes == [.identity])
        #expect(discover.timeout == .milliseconds(500))
        let query = try question(
            #"{"kind":"query","objectTypes":["com.example.Light"],"objectFilter":{"conditions":["name",[6,"L%"]]}}"#
        )
        guard case .query(let queryData) = query.request else { Issue.record("not a Query"); return }
        #expect(queryData.objectTypes == ["com.example.Light"])
        #expect(queryData.objectFilter != nil)
        #expect(query.timeout == NetworkQuestion.defaultTimeout)
        let byId = try question(#"{"kind":"discover","objectId":"\#(CoatyUUID())"}"#)
        guard case .discover(let idData) = byId.request else { Issue.record("not a Discover"); return }
        #expect(idData.objectId != nil)
    }

    @Test(
        "invalid requests are refused with one line saying what is wrong",
        arguments: [
            (#"not json"#, "not JSON"),
            (#"[1]"#, "JSON object"),
            (#"{"coreTypes":["Identity"]}"#, "'kind' is missing"),
            (#"{"kind":"update"}"#, "unknown kind 'update'"),
            (#"{"kind":"discover"}"#, "not a valid Discover"),
            (#"{"kind":"discover","coreTypes":["Identity"],"objectTypes":["a.b"]}"#, "not a valid Discover"),
            (#"{"kind":"query"}"#, "not a valid Query"),
            (#"{"kind":"query","objectTypes":["a.b"],"objectFilter":[1]}"#, "must be a JSON object"),
            (#"{"kind":"query","objectTypes":["a.b"],"objectFilter":{"conditions":["name",[99,1]]}}"#, "'objectFilter' is invalid"),
            (#"{"kind":"discover","coreTypes":["Identity"],"timeout":5}"#, "'timeout'"),
            (#"{"kind":"discover","coreTypes":"Identity"}"#, "array of non-empty strings"),
        ]
    )
    func invalid(body: String, expected: String) {
        do {
            _ = try question(body)
            Issue.record("accepted: \(body)")
        } catch {
            #expect(error.description.contains(expected), "\(error.description)")
            #expect(!error.description.contains("\n"))
        }
    }
}
