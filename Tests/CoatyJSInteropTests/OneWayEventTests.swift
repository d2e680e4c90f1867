import CoatyKit
import CoatyTesting
import Foundation
import Testing

extension CoatyJSInterop {
    /// Advertise, Deadvertise, Channel and Raw between CoatyKit and the real Coaty JS 2.4.1, both ways.
    @Suite("One-way events with Coaty JS")
    struct OneWayEventTests {
        @Test(
            "CoatyKit → Coaty JS: Advertise of a custom type, observed by core type and by object type, with privateData"
        )
        func advertiseToCoatyJS() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker, registry: interopRegistry()) { agent in
                    let observe = [
                        "--advertise-core-type", "CoatyObject", "--advertise-object-type", Lamp.objectType, "--count",
                        "2",
                    ]
                    try await withCoatyJS("observe", observe, on: broker) { peer in
                        try await peer.ready()
                        let lamp = Lamp(name: "Lamp from Swift", externalId: "ext-swift", isOn: true, brightness: 42)
                        let privateData: JSONObject = ["origin": "CoatyKit", "tags": ["a", "b"], "level": 3]
                        try await agent.publishAdvertise(lamp, privateData: privateData)

                        let lines = try await peer.wait(for: "Advertise", count: 2)
                        #expect(
                            Set(lines.compactMap { $0["via"]?.stringValue }) == [
                                "core-type CoatyObject", "object-type \(Lamp.objectType)",
                            ]
                        )
                        for line in lines {
                            #expect(line["sourceId"] == .string(agent.identity.objectId.uuidString))
                            let object = try #require(line.at("data.object"))
                            #expect(object == lamp.json)
                            #expect(object["objectType"] == .string(Lamp.objectType))
                            #expect(object["coreType"] == "CoatyObject")
                            #expect(object["name"] == "Lamp from Swift")
                            #expect(object["externalId"] == "ext-swift")
                            #expect(object["brightness"] == 42)
                            #expect(line.at("data.privateData") == .object(privateData))
                        }
                    }
                }
            }
        }

        @Test("Coaty JS → CoatyKit: Advertise of custom objects, typed by object type and untyped by core type")
        func advertiseFromCoatyJS() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker, registry: interopRegistry()) { agent in
                    let typed = try agent.observeAdvertise(Lamp.self)
                    let byCore = try agent.observeAdvertise(coreType: .coatyObject)
                    let byName = try agent.observeAdvertise(objectType: Lamp.objectType)
                    await typed.subscribed()
                    await byCore.subscribed()
                    await byName.subscribed()

                    let lamps = Array(sampleLamps.prefix(2))
                    // A field CoatyKit's Lamp does not declare: kept by the untyped observations.
                    var objects = lamps.map(\.json)
                    var extended = try #require(objects[0].objectValue)
                    extended["vendor"] = ["id": 7]
                    objects[0] = .object(extended)
                    let peer = try await runCoatyJS(
                        "advertise",
                        ["--objects", jsonText(.array(objects)), "--private-data", #"{"origin":"coaty-js","n":2}"#],
                        on: broker
                    )
                    let jsId = try await peer.identityId()

                    let typedEvents = try await collect(typed, count: 2, timeout: 5)
                    #expect(typedEvents.map(\.object) == lamps)
                    #expect(typedEvents.allSatisfy { $0.sourceId == jsId })
                    #expect(typedEvents.allSatisfy { $0.privateData == ["origin": "coaty-js", "n": 2] })

                    let coreEvents = try await collect(byCore, count: 2, timeout: 5)
                    #expect(coreEvents.map(\.object.objectId) == lamps.map(\.objectId))
                    #expect(coreEvents.map { $0.object.jsonValue } == objects)
                    #expect(coreEvents.first?.object.json["vendor"] == ["id": 7])
                    #expect(coreEvents.allSatisfy { $0.topic.name.hasPrefix("coaty/3/-/ADV:CoatyObject/\(jsId)") })

                    let namedEvents = try await collect(byName, count: 2, timeout: 5)
                    #expect(namedEvents.map { $0.object.jsonValue } == objects)
                    #expect(
                        namedEvents.allSatisfy { $0.topic.name == "coaty/3/-/ADV::\(Lamp.objectType)/\(jsId)" },
                        "Coaty JS publishes a custom object type on its object type topic too"
                    )
                }
            }
        }

        @Test("Deadvertise both ways: the objectIds arrive in order from the right source")
        func deadvertiseBothWays() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker) { agent in
                    // CoatyKit → Coaty JS
                    let ids = [CoatyUUID(), CoatyUUID(), CoatyUUID()]
                    try await withCoatyJS("observe-deadvertise", on: broker) { peer in
                        try await peer.ready()
                        try await agent.publishDeadvertise(ids)
                        let line = try await peer.first("Deadvertise") {
                            $0["sourceId"] == .string(agent.identity.objectId.uuidString)
                        }
                        #expect(line.at("data.objectIds") == .array(ids.map { .string($0.uuidString) }))
                    }

                    // Coaty JS → CoatyKit
                    let deadvertises = try agent.observeDeadvertise()
                    await deadvertises.subscribed()
                    let theirs = [CoatyUUID(), CoatyUUID()]
                    let peer = try await runCoatyJS(
                        "deadvertise",
                        ["--ids", theirs.map(\.uuidString).joined(separator: ",")],
                        on: broker
                    )
                    let jsId = try await peer.identityId()
                    let event = try #require(try await first(deadvertises, timeout: 5) { $0.sourceId == jsId })
                    #expect(event.objectIds == theirs)
                    #expect(event.topic.name == "coaty/3/-/DAD/\(jsId)")
                    #expect(
                        try peer.events("sent").first?.at("data.objectIds")
                            == .array(theirs.map { .string($0.uuidString) })
                    )
                }
            }
        }

        @Test("CoatyKit → Coaty JS: Channel with one object and with an array, with privateData")
        func channelToCoatyJS() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker, registry: interopRegistry()) { agent in
                    try await withCoatyJS("observe-channel", ["--channel", "interop.ch-1", "--count", "2"], on: broker)
                    {
                        peer in
                        try await peer.ready()
                        let lamps = sampleLamps
                        try await agent.publishChannel("interop.ch-1", object: lamps[0], privateData: ["seq": 1])
                        try await agent.publishChannel("interop.ch-1", objects: Array(lamps[1...3]))

                        let lines = try await peer.wait(for: "Channel", count: 2)
                        #expect(lines.allSatisfy { $0["channelId"] == "interop.ch-1" })
                        #expect(lines.allSatisfy { $0["sourceId"] == .string(agent.identity.objectId.uuidString) })
                        #expect(lines[0].at("data.object") == lamps[0].json)
                        #expect(lines[0].at("data.objects") == nil)
                        #expect(lines[0].at("data.privateData") == ["seq": 1])
                        #expect(lines[1].at("data.object") == nil)
                        #expect(lines[1].at("data.objects") == .array(lamps[1...3].map(\.json)))
                        #expect(lines[1].at("data.privateData") == nil)
                    }
                }
            }
        }

        @Test("Coaty JS → CoatyKit: Channel with one object and with an array")
        func channelFromCoatyJS() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker, registry: interopRegistry()) { agent in
                    let channel = try agent.observeChannel("interop.ch-2")
                    await channel.subscribed()
                    let lamps = sampleLamps
                    let single = try await runCoatyJS(
                        "channel",
                        [
                            "--channel", "interop.ch-2", "--objects", jsonText(lamps[4].json), "--private-data",
                            #"{"k":"v"}"#,
                        ],
                        on: broker
                    )
                    let array = try await runCoatyJS(
                        "channel",
                        ["--channel", "interop.ch-2", "--objects", try jsonArgument(Array(lamps[0...1]))],
                        on: broker
                    )
                    let events = try await collect(channel, count: 2, timeout: 5)
                    try #require(events.count == 2)
                    let (one, many) = (events[0], events[1])
                    #expect(one.sourceId == (try await single.identityId()))
                    #expect(one.channelId == "interop.ch-2")
                    #expect(one.data.isSingleObject)
                    #expect(one.data.objects.compactMap { $0.as(Lamp.self) } == [lamps[4]])
                    #expect(one.data.privateData == ["k": "v"])
                    #expect(many.sourceId == (try await array.identityId()))
                    #expect(!many.data.isSingleObject)
                    #expect(many.data.objects.compactMap { $0.as(Lamp.self) } == Array(lamps[0...1]))
                    #expect(many.data.privateData == nil)
                }
            }
        }

        @Test("Raw both ways: topic, UTF-8 payload and wildcard subscriptions")
        func rawBothWays() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker) { agent in
                    // CoatyKit → Coaty JS
                    try await withCoatyJS("observe-raw", ["--topic", "interop/raw/#", "--count", "1"], on: broker) {
                        peer in
                        try await peer.ready()
                        try await agent.publishRaw(topic: "interop/raw/kit/1", payload: Array("héllo from Swift".utf8))
                        let line = try await peer.first("Raw")
                        #expect(line["topic"] == "interop/raw/kit/1")
                        #expect(line.at("data.text") == "héllo from Swift")
                    }

                    // Coaty JS → CoatyKit
                    let raw = try agent.observeRaw("interop/raw/+")
                    await raw.subscribed()
                    _ = try await runCoatyJS(
                        "raw",
                        ["--topic", "interop/raw/js", "--payload", #"{"x":1,"s":"ü"}"#],
                        on: broker
                    )
                    let event = try #require(try await first(raw, timeout: 5))
                    #expect(event.topic == "interop/raw/js")
                    #expect(event.payload == Array(#"{"x":1,"s":"ü"}"#.utf8))
                    #expect(!event.retain)
                }
            }
        }

        @Test("A core type object both ways: a Task on ADV:Task only, its core fields and unknown members kept")
        func coreTypeTaskBothWays() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker) { agent in
                    // CoatyKit → Coaty JS: observed by core type and by the core type's own object type.
                    let task = CoatyTask(
                        name: "Inspect pump",
                        status: .inProgress,
                        creatorId: CoatyUUID(),
                        creationTimestamp: 1_700_000_000_123,
                        requirements: ["skill": "hydraulics"],
                        description: "weekly",
                        custom: ["priority": 2]
                    )
                    let observe = [
                        "--advertise-core-type", "Task", "--advertise-object-type", "coaty.Task", "--count", "2",
                    ]
                    try await withCoatyJS("observe", observe, on: broker) { peer in
                        try await peer.ready()
                        try await agent.publishAdvertise(task)
                        let lines = try await peer.wait(for: "Advertise", count: 2)
                        let expected = try AnyCoatyObject(task).jsonValue
                        #expect(lines.allSatisfy { $0.at("data.object") == expected })
                        let object = try #require(lines.first?.at("data.object"))
                        #expect(object["coreType"] == "Task")
                        #expect(object["objectType"] == "coaty.Task")
                        #expect(object["status"] == 1)
                        #expect(object["creationTimestamp"] == 1_700_000_000_123)
                        #expect(object["creatorId"] == .string(task.creatorId.uuidString))
                        #expect(object["requirements"] == ["skill": "hydraulics"])
                        #expect(object["priority"] == 2)
                    }

                    // Coaty JS → CoatyKit: typed as CoatyTask, the member it does not declare in `custom`.
                    let tasks = try agent.observeAdvertise(CoatyTask.self)
                    await tasks.subscribed()
                    let creatorId = CoatyUUID()
                    let taskId = CoatyUUID()
                    let json: JSONValue = [
                        "objectType": "coaty.Task", "coreType": "Task", "objectId": .string(taskId.uuidString),
                        "name": "Refill tank", "status": 5, "creatorId": .string(creatorId.uuidString),
                        "creationTimestamp": 1_700_000_000_456, "duration": 90000, "site": ["hall": 3],
                    ]
                    let peer = try await runCoatyJS("advertise", ["--objects", jsonText(json)], on: broker)
                    let jsId = try await peer.identityId()
                    let event = try #require(try await first(tasks, timeout: 5))
                    #expect(event.sourceId == jsId)
                    #expect(event.topic.name == "coaty/3/-/ADV:Task/\(jsId)")
                    #expect(event.object.objectId == taskId)
                    #expect(event.object.name == "Refill tank")
                    #expect(event.object.status == .request)
                    #expect(event.object.creatorId == creatorId)
                    #expect(event.object.creationTimestamp == 1_700_000_000_456)
                    #expect(event.object.duration == 90000)
                    #expect(event.object.custom == ["site": ["hall": 3]])
                }
            }
        }

        @Test("Namespaces both ways: only agents of the same namespace, or cross-namespacing ones, receive")
        func namespaces() async throws {
            try await withBroker { broker in
                let registry = interopRegistry()
                try await withAgent(on: broker, name: "plant-7", namespace: "plant-7", registry: registry) { inside in
                    try await withAgent(on: broker, name: "default", registry: registry) { outside in
                        let cross = try CommunicationManager.mqtt(
                            url: broker.url,
                            identity: Identity(name: "cross"),
                            registry: registry,
                            options: .init(crossNamespacing: true)
                        )
                        try await cross.start()
                        defer { Task { await cross.stop() } }
                        let observations = try [inside, outside, cross].map { try $0.observeChannel("ns") }
                        for observation in observations { await observation.subscribed() }

                        // Coaty JS → CoatyKit
                        let lamp = sampleLamps[2]
                        let peer = try await runCoatyJS(
                            "channel",
                            ["--namespace", "plant-7", "--channel", "ns", "--objects", jsonText(lamp.json)],
                            on: broker
                        )
                        let jsId = try await peer.identityId()
                        let topic = "coaty/3/plant-7/CHN:ns/\(jsId)"
                        let insideEvent = try #require(try await first(observations[0], timeout: 5))
                        #expect(insideEvent.topic.name == topic)
                        #expect(insideEvent.data.objects.first?.as(Lamp.self) == lamp)
                        #expect(try await first(observations[2], timeout: 5)?.topic.name == topic)
                        #expect(try await first(observations[1], timeout: 0.5) == nil, "another namespace")

                        // CoatyKit → Coaty JS
                        try await withCoatyJS(
                            "observe-channel",
                            ["--namespace", "plant-7", "--channel", "ns"],
                            on: broker
                        ) {
                            peer in
                            try await peer.ready()
                            try await outside.publishChannel("ns", object: sampleLamps[0])
                            try await inside.publishChannel("ns", object: lamp)
                            let line = try await peer.first("Channel")
                            #expect(line["sourceId"] == .string(inside.identity.objectId.uuidString))
                            #expect(line.at("data.object") == lamp.json)
                            try await Task.sleep(for: .milliseconds(300))
                            #expect(try peer.events("Channel").count == 1, "nothing from namespace -")
                        }
                    }
                }
            }
        }
    }
}
