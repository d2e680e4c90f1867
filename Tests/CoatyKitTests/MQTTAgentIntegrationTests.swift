import CoatyKit
import CoatyTesting
import Testing

/// A custom object type as a Coaty JS agent would publish it.
struct Lamp: CoatyObject, Hashable {
    static let objectType = "com.example.Lamp"
    var objectId = CoatyUUID()
    var name: String
    var isOn: Bool
}

private let hasMosquitto = MosquittoBroker.findExecutable() != nil

@Suite(
    "Agents over a real mosquitto",
    .serialized,
    .timeLimit(.minutes(1)),
    .enabled(if: hasMosquitto, "mosquitto is not installed (apt-get install mosquitto)")
)
struct MQTTAgentIntegrationTests {
    @Test("A foreign client's Coaty JS-shaped double Advertise arrives typed; Discover→Resolve between two agents")
    func interoperation() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }

        let registry = CoatyObjectRegistry([Lamp.self])
        let agentA = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "A"), registry: registry)
        let agentB = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "B"), registry: registry)
        try await agentA.start()
        try await agentB.start()

        let typed = try agentA.observeAdvertise(Lamp.self)
        let core = try agentA.observeAdvertise(coreType: .coatyObject)
        await typed.subscribed()
        await core.subscribed()
        var typedIterator = typed.makeAsyncIterator()
        var coreIterator = core.makeAsyncIterator()

        // A plain MQTT client publishes what Coaty JS publishes for advertise(lamp): the same
        // payload on the core type topic and on the object type topic.
        let foreignId = CoatyUUID()
        let lampId = CoatyUUID()
        let foreign = MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientId: "foreign-js-agent"))
        try await foreign.connect()
        let payload = #"""
            {"object":{"name":"Lamp 1","objectType":"com.example.Lamp","coreType":"CoatyObject",\#
            "objectId":"\#(lampId)","isOn":true,"parentObjectId":"\#(foreignId)","vendor":{"id":7}}}
            """#
        for level in ["ADV:CoatyObject", "ADV::com.example.Lamp"] {
            try await foreign.publish("coaty/3/-/\(level)/\(foreignId)", payload: Array(payload.utf8))
        }
        let lamp = try #require(await typedIterator.next())
        #expect(lamp.object == Lamp(objectId: lampId, name: "Lamp 1", isOn: true))
        #expect(lamp.sourceId == foreignId)
        let any = try #require(await coreIterator.next())
        #expect(any.object.json["vendor"] == ["id": 7])
        #expect(any.object.parentObjectId == foreignId)

        // Discover → Resolve between the two agents, with a custom responder on B.
        let discovers = try agentB.observeDiscover()
        await discovers.subscribed()
        let responder = Task {
            for await discover in discovers where discover.data.externalId == "lamp-1" {
                var resolved = Lamp(name: "Resolved", isOn: false)
                resolved.objectId = lampId
                try await discover.resolve(object: AnyCoatyObject(json: ["externalId": "lamp-1"], merging: resolved))
            }
        }
        let resolve = try #require(try await agentA.publishDiscover(.externalId("lamp-1")).first(timeout: .seconds(20)))
        #expect(resolve.sourceId == agentB.identity.objectId)
        #expect(resolve.data.object?.as(Lamp.self)?.name == "Resolved")
        let identity = try #require(
            try await agentA.publishDiscover(.objectId(agentB.identity.objectId)).first(timeout: .seconds(20))
        )
        #expect(identity.data.object?.name == "B")
        responder.cancel()

        await foreign.disconnect()
        await agentA.stop()
        await agentB.stop()
    }

    @Test(
        "A foreign client's requests with its own correlation ids get our responses; it receives our double Advertise"
    )
    func foreignClientRequestsAndReceives() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let agent = try CommunicationManager.mqtt(
            url: broker.url,
            identity: Identity(name: "ours"),
            registry: CoatyObjectRegistry([Lamp.self])
        )
        try await agent.start()
        let agentId = agent.identity.objectId
        let calls = try agent.observeCall(operation: "switch")
        let updates = try agent.observeUpdate(Lamp.self)
        await calls.subscribed()
        await updates.subscribed()
        let answering = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await call in calls {
                        try? await call.returnResult(["switched": call.data.parameter("on") ?? .null])
                    }
                }
                group.addTask {
                    for await update in updates {
                        var lamp = update.object
                        lamp.name = "completed"
                        try? await update.complete(object: lamp)
                    }
                }
            }
        }

        // A plain MQTT client does what a Coaty JS agent does: fresh lowercase correlation ids,
        // the response topics subscribed before each request.
        let foreignId = CoatyUUID()
        let foreign = MQTTClient(
            configuration: try MQTTConfiguration(url: broker.url, clientId: "foreign-js-requester")
        )
        try await foreign.connect()
        let (discoverId, callId, updateId) = (CoatyUUID(), CoatyUUID(), CoatyUUID())
        try await foreign.subscribe([
            ("coaty/3/-/RSV/+/\(discoverId)", .atMostOnce), ("coaty/3/-/RTN/+/\(callId)", .atMostOnce),
            ("coaty/3/-/CPL/+/\(updateId)", .atMostOnce), ("coaty/3/-/ADV:CoatyObject/+", .atMostOnce),
            ("coaty/3/-/ADV::com.example.Lamp/+", .atMostOnce),
        ])
        let lampId = CoatyUUID()
        let lampJSON = #"""
            {"name":"Lamp 2","objectType":"com.example.Lamp","coreType":"CoatyObject",\#
            "objectId":"\#(lampId)","isOn":false}
            """#
        let requests = [
            ("coaty/3/-/DSC/\(foreignId)/\(discoverId)", #"{"objectId":"\#(agentId)"}"#),
            ("coaty/3/-/CLL:switch/\(foreignId)/\(callId)", #"{"parameters":{"on":true}}"#),
            ("coaty/3/-/UPD::com.example.Lamp/\(foreignId)/\(updateId)", #"{"object":\#(lampJSON)}"#),
        ]
        for (topic, payload) in requests { try await foreign.publish(topic, payload: Array(payload.utf8)) }
        let ours = Lamp(name: "advertised", isOn: true)
        try await agent.publishAdvertise(ours)

        var received: [String: JSONValue] = [:]
        for await message in foreign.messages {
            received[message.topic] = try JSONValue(parsing: message.payload)
            if received.count == 5 { break }
        }
        let resolve = try #require(received["coaty/3/-/RSV/\(agentId)/\(discoverId)"]?.objectValue)
        #expect(resolve["object"]?.objectValue?["objectId"] == .string(agentId.uuidString))
        #expect(resolve["object"]?.objectValue?["coreType"] == "Identity")
        let returned = try #require(received["coaty/3/-/RTN/\(agentId)/\(callId)"]?.objectValue)
        #expect(returned["result"] == ["switched": true])
        #expect(returned["error"] == nil)
        let complete = try #require(received["coaty/3/-/CPL/\(agentId)/\(updateId)"]?.objectValue)
        #expect(complete["object"]?.objectValue?["objectId"] == .string(lampId.uuidString))
        #expect(complete["object"]?.objectValue?["name"] == "completed")
        let advertised = try #require(received["coaty/3/-/ADV::com.example.Lamp/\(agentId)"])
        #expect(received["coaty/3/-/ADV:CoatyObject/\(agentId)"] == advertised, "the same payload on both topics")
        let object = try #require(advertised.objectValue?["object"]?.objectValue)
        #expect(object["objectType"] == "com.example.Lamp")
        #expect(object["coreType"] == "CoatyObject")
        #expect(object["objectId"] == .string(ours.objectId.uuidString))
        #expect(object["name"] == "advertised")
        #expect(object["isOn"] == true)
        #expect(advertised.objectValue?["privateData"] == nil, "absent optional fields are left out")

        answering.cancel()
        await foreign.disconnect()
        await agent.stop()
    }

    @Test("Stopping an agent publishes its Deadvertise; updating the will keeps messages flowing")
    func stopAndWill() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let observer = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "observer"))
        let identity = Identity(name: "leaving")
        let transport = try MQTTTransport(url: broker.url, identityId: identity.objectId)
        let leaving = try CommunicationManager(transport: transport, identity: identity)
        try await observer.start()
        try await leaving.start()
        let dead = try observer.observeDeadvertise()
        let channel = try leaving.observeChannel("c")
        await dead.subscribed()
        await channel.subscribed()
        var deadIterator = dead.makeAsyncIterator()
        var channelIterator = channel.makeAsyncIterator()

        // Replacing the will reconnects the client; subscriptions and the message stream survive.
        try await transport.updateWill(
            try CoatyConnection.lastWill(namespace: "-", identityId: identity.objectId, ownedObjectIds: [CoatyUUID()])
        )
        await awaitOnline(leaving)
        try await observer.publishChannel("c", objects: [])
        #expect(try #require(await channelIterator.next()).sourceId == observer.identity.objectId)

        await leaving.stop()
        let event = try #require(await deadIterator.next())
        #expect(event.objectIds == [identity.objectId])
        await observer.stop()
    }

    @Test("Responder and requester on the delivery executor, across a client replacement")
    func deliveryExecutor() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let identity = Identity(name: "responder")
        let transport = try MQTTTransport(url: broker.url, identityId: identity.objectId)
        let responder = try CommunicationManager(transport: transport, identity: identity)
        let requester = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "requester"))
        try await responder.start()
        try await requester.start()
        #expect(responder.deliveryExecutor != nil)
        let discovers = try responder.observeDiscover()
        await discovers.subscribed()
        let answering = Task {
            await withTaskExecutorPreference(responder.deliveryExecutor) {
                for await discover in discovers {
                    guard let id = discover.data.objectId else { continue }
                    try? await discover.resolve(object: Lamp(objectId: id, name: "lamp", isOn: true))
                }
            }
        }
        func roundTrips(_ count: Int) async throws -> Int {
            try await withTaskExecutorPreference(requester.deliveryExecutor) {
                var answered = 0
                for _ in 0..<count {
                    let id = CoatyUUID()
                    let resolve = try await requester.publishDiscover(.objectId(id)).first(timeout: .seconds(5))
                    if resolve?.data.object?.objectId == id { answered += 1 }
                }
                return answered
            }
        }
        #expect(try await roundTrips(50) == 50)
        // A new will replaces the responder's MQTT client; the executor moves to the new client.
        try await transport.updateWill(
            try CoatyConnection.lastWill(namespace: "-", identityId: identity.objectId, ownedObjectIds: [CoatyUUID()])
        )
        await awaitOnline(responder)
        #expect(try await roundTrips(50) == 50)
        answering.cancel()
        await responder.stop()
        await requester.stop()
    }
}

func awaitOnline(_ manager: CommunicationManager) async {
    for await state in manager.communicationStates() where state == .online { return }
}

extension AnyCoatyObject {
    /// An object's JSON with extra members merged in (test helper).
    init(json extra: JSONObject, merging object: some CoatyObject) throws {
        var json = try AnyCoatyObject(object).json
        for (key, value) in extra { json[key] = value }
        self = try CoatyObjectRegistry([Lamp.self]).decode(json)
    }
}
