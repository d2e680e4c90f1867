import CoatyCore
import CommunicationTestSupport
import CoatySync
import CoatyTesting
import Logging
import ServiceLifecycle
import Testing

/// A type claiming to be a Coaty object that encodes itself as an array: not publishable.
struct ArrayShapedObject: CoatyObject {
    static let objectType = "com.example.ArrayShaped"
    var objectId = CoatyUUID()
    var name = "array"

    init() {}
    init(from decoder: any Decoder) throws { self.init() }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(name)
    }
}

/// An object whose (instance) object type cannot be a topic level.
struct BadTypeObject: CoatyObject {
    static let objectType = "com.example.BadType"
    var objectId = CoatyUUID()
    var name = "bad"
    var objectType: String { "com.example/bad" }
}

/// A custom object type based on the Task core type: advertised and updated on `…:Task` too.
struct SpecialTask: CoatyObject {
    static let objectType = "com.example.SpecialTask"
    static let coreType = CoreType.task
    var objectId = CoatyUUID()
    var name: String
    var status: TaskStatus
    var creatorId: CoatyUUID
    var creationTimestamp: Double
}

private func task(creator: CoatyUUID, name: String = "task") -> CoatyTask {
    CoatyTask(name: name, status: .pending, creatorId: creator, creationTimestamp: 1)
}

@Suite("CommunicationManager on the in-process broker", .timeLimit(.minutes(1)))
struct CommunicationManagerTests {
    @Test("start advertises the identity; stop deadvertises it; the identity is discoverable")
    func lifecycle() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker, name: "A")
        let b = try TestAgent(broker, name: "B")
        try await b.manager.start()
        let deadvertise = try b.manager.observeDeadvertise()
        await deadvertise.subscribed()
        var deadIterator = deadvertise.makeAsyncIterator()
        try await a.manager.start()
        #expect(a.manager.communicationState == .online)
        #expect(a.publishedTopics(broker).first == "coaty/3/-/ADV:Identity/\(a.id)")

        let resolve = try #require(try await b.manager.publishDiscover(.objectId(a.id)).first())
        #expect(resolve.sourceId == a.id)
        #expect(resolve.data.object?.as(Identity.self)?.name == "A")

        await a.manager.stop()
        #expect(a.manager.communicationState == .offline)
        let dead = try #require(await deadIterator.next())
        #expect(dead.objectIds == [a.id])
        #expect(dead.sourceId == a.id)
        #expect(!broker.connectedClientIds.contains(a.clientId))
        #expect(broker.publications.filter { $0.isWill }.isEmpty)
        await b.manager.stop()
    }

    @Test("Advertise of a custom type goes out twice and reaches typed, core-type and object-type observers")
    func advertiseTwice() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        try await a.manager.start()
        let typed = try a.manager.observeAdvertise(Light.self)
        let core = try a.manager.observeAdvertise(coreType: .coatyObject)
        let byName = try a.manager.observeAdvertise(objectType: "com.example.Light")
        await typed.subscribed()
        await core.subscribed()
        await byName.subscribed()
        var typedIterator = typed.makeAsyncIterator()
        var coreIterator = core.makeAsyncIterator()
        var byNameIterator = byName.makeAsyncIterator()

        let light = Light(name: "lamp", isOn: true)
        try await a.manager.publishAdvertise(light, privateData: ["room": "kitchen"])
        #expect(
            a.publishedTopics(broker).suffix(2) == [
                "coaty/3/-/ADV:CoatyObject/\(a.id)", "coaty/3/-/ADV::com.example.Light/\(a.id)",
            ]
        )
        // Both copies carry the payload of the wrapped object, encoded straight from the struct.
        let expected = AdvertiseEventData(object: try AnyCoatyObject(light), privateData: ["room": "kitchen"])
        let payloads = broker.publications.filter { $0.clientId == a.clientId && !$0.isWill }.suffix(2)
        #expect(payloads.map(\.message.payload) == [expected.payloadBytes, expected.payloadBytes])
        let typedEvent = try #require(await typedIterator.next())
        #expect(typedEvent.object == light)
        #expect(typedEvent.privateData == ["room": "kitchen"])
        #expect(typedEvent.sourceId == a.id)
        #expect(typedEvent.topic.name == "coaty/3/-/ADV::com.example.Light/\(a.id)")
        let coreEvent = try #require(await coreIterator.next())
        #expect(coreEvent.object.objectType == "com.example.Light")
        #expect(coreEvent.object.as(Light.self) == light)
        #expect(try #require(await byNameIterator.next()).object.objectId == light.objectId)
        await a.manager.stop()
    }

    @Test("Observing a core type's own object type subscribes the core topic and filters locally")
    func coreObjectTypeObservation() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        try await a.manager.start()
        let tasks = try a.manager.observeAdvertise(CoatyTask.self)
        #expect(tasks.topicFilter == "coaty/3/-/ADV:Task/+")
        await tasks.subscribed()
        var iterator = tasks.makeAsyncIterator()
        var custom = task(creator: a.id, name: "custom")
        custom.objectType = "com.example.Job"
        try await a.manager.publishAdvertise(custom)
        let plain = task(creator: a.id, name: "plain")
        try await a.manager.publishAdvertise(plain)
        #expect(try #require(await iterator.next()).object.name == "plain")
        await a.manager.stop()
    }

    @Test("Unknown fields of a core-type object survive observation")
    func unknownFieldsKept() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        try await a.manager.start()
        let observation = try a.manager.observeAdvertise(coreType: .task)
        await observation.subscribed()
        var iterator = observation.makeAsyncIterator()
        let source = CoatyUUID()
        let payload = #"""
            {"object":{"objectType":"com.other.Job","coreType":"Task","objectId":"\#(CoatyUUID())","name":"j",
            "status":1,"creatorId":"\#(source)","creationTimestamp":5,"extra":{"deep":[1,2]}}}
            """#
        broker.publish(TransportMessage(topic: "coaty/3/-/ADV:Task/\(source)", payload: Array(payload.utf8)))
        let event = try #require(await iterator.next())
        #expect(event.object.json["extra"] == ["deep": [1, 2]])
        #expect(event.object.as(CoatyTask.self)?.custom["extra"] == ["deep": [1, 2]])
        #expect(event.sourceId == source)
        await a.manager.stop()
    }

    @Test("An object that is no JSON object or has an invalid object type publishes nothing")
    func unpublishableObjects() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        try await a.manager.start()
        let before = a.publishedTopics(broker).count
        await #expect {
            try await a.manager.publishAdvertise(ArrayShapedObject())
        } throws: { error in
            guard case CommunicationError.encodingFailed(let objectType, let reason) = error else { return false }
            return objectType == ArrayShapedObject.objectType && reason.contains("must encode to a JSON object")
        }
        await #expect(throws: CommunicationError.self) {
            try await a.manager.publishChannel("lights", object: ArrayShapedObject())
        }
        await #expect {
            try await a.manager.publishAdvertise(BadTypeObject())
        } throws: { error in
            guard case CommunicationError.invalidTopic = error else { return false }
            return true
        }
        // Neither the core-type copy nor anything else went out.
        #expect(a.publishedTopics(broker).count == before)
        await a.manager.stop()
    }

    @Test("Deadvertise and Channel round trips")
    func deadvertiseAndChannel() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        let b = try TestAgent(broker)
        try await a.manager.start()
        try await b.manager.start()
        let dead = try b.manager.observeDeadvertise()
        let channel = try b.manager.observeChannel("lights")
        let otherChannel = try b.manager.observeChannel("other")
        await dead.subscribed()
        await channel.subscribed()
        await otherChannel.subscribed()
        var deadIterator = dead.makeAsyncIterator()
        var channelIterator = channel.makeAsyncIterator()
        var otherIterator = otherChannel.makeAsyncIterator()

        let ids = [CoatyUUID(), CoatyUUID()]
        try await a.manager.publishDeadvertise(ids)
        #expect(try #require(await deadIterator.next()).objectIds == ids)

        let light = Light(name: "l", isOn: false)
        try await a.manager.publishChannel("lights", object: light)
        let single = try #require(broker.publications.last { $0.clientId == a.clientId && !$0.isWill })
        #expect(
            single.message.payload == ChannelEventData(object: try AnyCoatyObject(light), privateData: nil).payloadBytes
        )
        try await a.manager.publishChannel("lights", objects: [light, light], privateData: ["n": 2])
        try await a.manager.publishChannel("other", objects: [])
        let one = try #require(await channelIterator.next())
        #expect(one.data.isSingleObject)
        #expect(one.channelId == "lights")
        #expect(one.data.objects.first?.as(Light.self) == light)
        let two = try #require(await channelIterator.next())
        #expect(two.data.objects.count == 2)
        #expect(two.data.privateData == ["n": 2])
        #expect(try #require(await otherIterator.next()).data.objects.isEmpty)
        await #expect(throws: CommunicationError.self) { try await a.manager.publishChannel("a/b", objects: []) }
        await a.manager.stop()
        await b.manager.stop()
    }

    @Test("Discover/Resolve: mismatching resolves are dropped and counted; built-in identity answer")
    func discoverResolve() async throws {
        let broker = InProcessBroker()
        let requester = try TestAgent(broker, name: "requester")
        let responder = try TestAgent(broker, name: "responder")
        try await requester.manager.start()
        try await responder.manager.start()
        let wanted = Light(name: "wanted", isOn: true)
        let discovers = try responder.manager.observeDiscover()
        await discovers.subscribed()
        let answering = Task {
            for await discover in discovers {
                guard discover.data.objectTypes == ["com.example.Light"] else { continue }
                // First a wrong answer (another type), then the right one.
                try await discover.resolve(object: task(creator: responder.id))
                try await discover.resolve(object: wanted, relatedObjects: [wanted], privateData: ["p": 1])
            }
        }
        let resolve = try #require(
            try await requester.manager.publishDiscover(.objectTypes(["com.example.Light"])).first()
        )
        #expect(resolve.data.object?.as(Light.self) == wanted)
        #expect(resolve.data.relatedObjects?.count == 1)
        #expect(resolve.data.privateData == ["p": 1])
        #expect(resolve.sourceId == responder.id)
        #expect(requester.manager.statistics.invalidResponses == 1)

        // The built-in responders of both agents answer a Discover of identities.
        let identities = try await requester.manager.publishDiscover(.coreTypes([.identity]))
            .responses(limit: 2).collect()
        #expect(Set(identities.compactMap { $0.data.object?.objectId }) == [requester.id, responder.id])
        answering.cancel()
        await requester.manager.stop()
        await responder.manager.stop()
    }

    @Test("Query/Retrieve: objects of types not queried invalidate the response")
    func queryRetrieve() async throws {
        let broker = InProcessBroker()
        let requester = try TestAgent(broker)
        let responder = try TestAgent(broker)
        try await requester.manager.start()
        try await responder.manager.start()
        let stored: [any CoatyObject] = [
            task(creator: responder.id, name: "a"), task(creator: responder.id, name: "b"),
            Light(name: "x", isOn: true),
        ]
        let queries = try responder.manager.observeQuery()
        await queries.subscribed()
        let answering = Task {
            for await query in queries {
                try await query.retrieve(objects: stored)  // contains a Light: invalid for a Task query
                let matching = try stored.map { try AnyCoatyObject($0) }.filter { query.data.matches($0) }
                try await query.retrieve(objects: matching)
            }
        }
        let query = QueryEventData(coreTypes: [.task], objectFilter: .where("name", .equals("b")))
        let retrieve = try #require(try await requester.manager.publishQuery(query).first())
        #expect(retrieve.data.objects.map(\.name) == ["b"])
        #expect(requester.manager.statistics.invalidResponses == 1)
        answering.cancel()
        await requester.manager.stop()
        await responder.manager.stop()
    }

    @Test("Update/Complete: a custom type is published twice and the responses merged; wrong ids dropped")
    func updateComplete() async throws {
        let broker = InProcessBroker()
        let requester = try TestAgent(broker)
        let responder = try TestAgent(broker)
        try await requester.manager.start()
        try await responder.manager.start()
        let typed = try responder.manager.observeUpdate(Light.self)
        let core = try responder.manager.observeUpdate(coreType: .coatyObject)
        await typed.subscribed()
        await core.subscribed()
        let typedAnswers = Task {
            for await update in typed {
                try await update.complete(object: Light(name: "wrong id", isOn: false))
                var light = update.object
                light.name = "typed"
                try await update.complete(object: light)
            }
        }
        let coreAnswers = Task {
            for await update in core {
                try await update.complete(object: update.object, privateData: ["via": "core"])
            }
        }
        let light = Light(name: "l", isOn: true)
        let completes = try await requester.manager.publishUpdate(light).responses(limit: 2).collect()
        #expect(completes.count == 2)
        #expect(Set(completes.map { $0.data.object.objectId }) == [light.objectId])
        #expect(Set(completes.map { $0.topic.correlationUUID }).count == 2)
        #expect(completes.contains { $0.data.privateData == ["via": "core"] })
        #expect(completes.contains { $0.data.object.name == "typed" })
        #expect(requester.manager.statistics.invalidResponses == 1)
        let updateTopics = requester.publishedTopics(broker).filter { $0.contains("/UPD:") }
        #expect(updateTopics.count == 2)
        typedAnswers.cancel()
        coreAnswers.cancel()
        await requester.manager.stop()
        await responder.manager.stop()
    }

    @Test(
        "Update observed by object type name: a custom type on its own topic, a core type's own type filtered locally"
    )
    func updateByObjectTypeName() async throws {
        let broker = InProcessBroker()
        let requester = try TestAgent(broker)
        let responder = try TestAgent(broker)
        try await requester.manager.start()
        try await responder.manager.start()
        let lights = try responder.manager.observeUpdate(objectType: Light.objectType)
        let tasks = try responder.manager.observeUpdate(objectType: CoatyTask.objectType)
        #expect(lights.topicFilter == "coaty/3/-/UPD::com.example.Light/+/+")
        #expect(tasks.topicFilter == "coaty/3/-/UPD:Task/+/+")
        #expect(throws: CommunicationError.self) { try responder.manager.observeUpdate(objectType: "a/b") }
        await lights.subscribed()
        await tasks.subscribed()
        final class Seen: Sendable { let ids = CoatyMutex<[CoatyUUID]>([]) }
        let seenTasks = Seen()
        let answers = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await update in lights {
                        try? await update.complete(object: update.object, privateData: ["seen": "light"])
                    }
                }
                group.addTask {
                    for await update in tasks {
                        seenTasks.ids.withLock { $0.append(update.object.objectId) }
                        try? await update.complete(object: update.object, privateData: ["seen": "task"])
                    }
                }
            }
        }
        let light = Light(name: "l", isOn: true)
        let lightCompletes = try await requester.manager.publishUpdate(light).responses(limit: 1).collect()
        #expect(lightCompletes.map(\.data.privateData) == [["seen": "light"]])
        #expect(lightCompletes.first?.data.object.objectId == light.objectId)
        // A Task-based object of another object type goes to UPD:Task too, but is not a `coaty.Task`.
        let other = SpecialTask(name: "special", status: .pending, creatorId: requester.id, creationTimestamp: 1)
        let ignored = try await requester.manager.publishUpdate(other).responses(timeout: .milliseconds(100)).collect()
        #expect(ignored.isEmpty)
        let plain = task(creator: requester.id)
        let taskCompletes = try await requester.manager.publishUpdate(plain).responses(limit: 1).collect()
        #expect(taskCompletes.map(\.data.privateData) == [["seen": "task"]])
        #expect(taskCompletes.first?.data.object.objectId == plain.objectId)
        // The SpecialTask Update came first on the same topic and was not handed to the observer.
        #expect(seenTasks.ids.withLock { $0 } == [plain.objectId])
        answers.cancel()
        await requester.manager.stop()
        await responder.manager.stop()
    }

    @Test("Call/Return: context filter rules, result, null result and error")
    func callReturn() async throws {
        let broker = InProcessBroker()
        let requester = try TestAgent(broker)
        let contextResponder = try TestAgent(broker)
        let plainResponder = try TestAgent(broker)
        for agent in [requester, contextResponder, plainResponder] { try await agent.manager.start() }
        let withContext = try contextResponder.manager.observeCall(operation: "switch", context: ["floor": 3])
        let withoutContext = try plainResponder.manager.observeCall(operation: "switch")
        await withContext.subscribed()
        await withoutContext.subscribed()
        let handledWithContext = CoatyMutex<[String]>([])
        let contextAnswers = Task {
            for await call in withContext {
                handledWithContext.withLock { $0.append(call.data.parameter("tag")?.stringValue ?? "") }
                if call.data.parameter("on") == nil {
                    try await call.returnError(.invalidParameters)
                } else if call.data.parameter("on") == .null {
                    try await call.returnResult(.null)
                } else {
                    try await call.returnResult(["by": "context"], executionInfo: ["t": 1])
                }
            }
        }
        let plainAnswers = Task {
            for await call in withoutContext {
                try await call.returnResult(["by": "plain"])
            }
        }
        let matching = ContextFilter.where("floor", .equals(3))
        let notMatching = ContextFilter.where("floor", .equals(4))
        func call(_ parameters: JSONObject, _ filter: ContextFilter?, expecting count: Int) async throws
            -> [ReturnEvent]
        {
            try await requester.manager.publishCall(
                "switch",
                data: CallEventData(parameters: parameters, filter: filter)
            )
            .responses(limit: count).collect()
        }

        // Filter matching the context: the responder with context handles it; so does the one
        // without context (no context → handled).
        let matched = try await call(["on": true, "tag": "matched"], matching, expecting: 2)
        #expect(Set(matched.compactMap { $0.data.result?["by"]?.stringValue }) == ["context", "plain"])
        #expect(matched.first { $0.sourceId == contextResponder.id }?.data.executionInfo == ["t": 1])
        // No filter, and a filter not matching the context: only the responder without context.
        let unfiltered = try await call(["on": true, "tag": "unfiltered"], nil, expecting: 1)
        #expect(unfiltered.map(\.sourceId) == [plainResponder.id])
        let unmatched = try await call(["on": true, "tag": "unmatched"], notMatching, expecting: 1)
        #expect(unmatched.map(\.sourceId) == [plainResponder.id])
        // The predefined error and the null result (handled after the calls above, in order).
        let error = try await call(["tag": "error"], matching, expecting: 2)
        #expect(error.first { $0.sourceId == contextResponder.id }?.data.error == .invalidParameters)
        let null = try await call(["on": nil, "tag": "null"], matching, expecting: 2)
        #expect(null.first { $0.sourceId == contextResponder.id }?.data.outcome == .success(.null))
        #expect(handledWithContext.withLock { $0 } == ["matched", "error", "null"])
        contextAnswers.cancel()
        plainAnswers.cancel()
        for agent in [requester, contextResponder, plainResponder] { await agent.manager.stop() }
    }

    @Test("Raw: wildcards match, coaty/ topics are never delivered, coaty/ publications refused")
    func raw() async throws {
        let broker = InProcessBroker(configuration: .init(deliversCopyPerMatchingSubscription: false))
        let a = try TestAgent(broker)
        try await a.manager.start()
        let all = try a.manager.observeRaw("#")
        let sensors = try a.manager.observeRaw("sensors/+/temp")
        await all.subscribed()
        await sensors.subscribed()
        var allIterator = all.makeAsyncIterator()
        var sensorIterator = sensors.makeAsyncIterator()
        try await a.manager.publishAdvertise(Light(name: "l", isOn: true))
        try await a.manager.publishRaw(topic: "other/x", payload: [1])
        try await a.manager.publishRaw(topic: "sensors/1/temp", payload: [2, 3])
        let first = try #require(await allIterator.next())
        #expect(first.topic == "other/x")
        #expect(try #require(await allIterator.next()).payload == [2, 3])
        let sensor = try #require(await sensorIterator.next())
        #expect(sensor.topic == "sensors/1/temp")
        await #expect(throws: CommunicationError.self) { try await a.manager.publishRaw(topic: "coaty/x", payload: []) }
        #expect(throws: CommunicationError.self) { try a.manager.observeRaw("a/#/b") }
        await a.manager.stop()
    }

    @Test("Overlapping subscriptions (Raw # and a Coaty observer) deliver each message once per observer")
    func overlappingSubscriptions() async throws {
        let broker = InProcessBroker()  // one copy per matching subscription, like mosquitto 2
        let a = try TestAgent(broker)
        try await a.manager.start()
        let all = try a.manager.observeRaw("#")
        let sensors = try a.manager.observeRaw("sensors/#")
        let channel = try a.manager.observeChannel("c")
        for observation in [all, sensors] { await observation.subscribed() }
        await channel.subscribed()
        var allIterator = all.makeAsyncIterator()
        var sensorIterator = sensors.makeAsyncIterator()
        var channelIterator = channel.makeAsyncIterator()
        try await a.manager.publishRaw(topic: "sensors/1", payload: [1])
        try await a.manager.publishChannel("c", objects: [])
        try await a.manager.publishChannel("c", objects: [])  // identical, still delivered
        try await a.manager.publishRaw(topic: "sensors/1", payload: [1])
        try await a.manager.publishRaw(topic: "end", payload: [])
        #expect(try #require(await allIterator.next()).topic == "sensors/1")
        #expect(try #require(await allIterator.next()).topic == "sensors/1")
        #expect(try #require(await allIterator.next()).topic == "end")
        #expect(try #require(await sensorIterator.next()).topic == "sensors/1")
        #expect(try #require(await sensorIterator.next()).topic == "sensors/1")
        #expect(try #require(await channelIterator.next()).channelId == "c")
        #expect(try #require(await channelIterator.next()).channelId == "c")
        try await a.manager.publishChannel("lights", objects: [])
        try await a.manager.publishChannel("c", data: ChannelEventData(objects: [], privateData: ["last": true]))
        #expect(try #require(await channelIterator.next()).data.privateData == ["last": true])
        await a.manager.stop()
    }

    @Test("Associate and IoValue: JSON and raw values on the IoSource's route")
    func associateAndIoValue() async throws {
        let broker = InProcessBroker()
        let router = try TestAgent(broker)
        let device = try TestAgent(broker)
        try await router.manager.start()
        try await device.manager.start()
        let source = CoatyUUID()
        let otherSource = CoatyUUID()
        let actor = CoatyUUID()
        let associations = try device.manager.observeAssociate(ioContextName: "Temperature")
        let values = try device.manager.observeIoValue(ioSourceId: source)
        #expect(values.topicFilter == "coaty/3/-/IOV/\(source)")
        await associations.subscribed()
        await values.subscribed()
        var associationIterator = associations.makeAsyncIterator()
        var valueIterator = values.makeAsyncIterator()

        let route = try router.manager.ioValueTopic(ioSourceId: source)
        try await router.manager.publishAssociate(
            ioContextName: "Temperature",
            data: AssociateEventData(ioSourceId: source, ioActorId: actor, associatingRoute: route, updateRate: 100)
        )
        let association = try #require(await associationIterator.next())
        #expect(association.data.associatingRoute == route)
        #expect(association.data.updateRate == 100)
        #expect(!association.data.isDisassociation)

        try await router.manager.publishIoValue(["celsius": 21.5], ioSourceId: otherSource)
        try await router.manager.publishIoValue(["celsius": 22.5], ioSourceId: source)
        try await router.manager.publishIoValue(rawBytes: [0xFF, 0x00], ioSourceId: source)
        let value = try #require(await valueIterator.next())
        #expect(try value.value() == ["celsius": 22.5])
        #expect(value.ioSourceId == source)
        let raw = try #require(await valueIterator.next())
        #expect(raw.payload == [0xFF, 0x00])
        #expect(throws: JSONParseError.self) { try raw.value() }
        await router.manager.stop()
        await device.manager.stop()
    }

    @Test("IoNodes: advertised, discoverable by core type, in the join events and the last will")
    func ioNodes() async throws {
        // The will is updated in place here, so adding the node causes no reconnection.
        let broker = InProcessBroker(configuration: .init(reconnectsToUpdateWill: false))
        let a = try TestAgent(broker)
        let b = try TestAgent(broker)
        try await a.manager.start()
        try await b.manager.start()
        let nodes = try b.manager.observeAdvertise(coreType: .ioNode)
        let dead = try b.manager.observeDeadvertise()
        await nodes.subscribed()
        await dead.subscribed()
        var nodeIterator = nodes.makeAsyncIterator()
        var deadIterator = dead.makeAsyncIterator()

        let node = IoNode(name: "Thermometer", ioSources: [], ioActors: [])
        try await a.manager.addIoNode(node)
        #expect(try #require(await nodeIterator.next()).object.objectId == node.objectId)
        let resolve = try #require(try await b.manager.publishDiscover(.coreTypes([.ioNode])).first())
        #expect(resolve.data.object?.objectId == node.objectId)
        #expect(resolve.sourceId == a.id)

        // Reconnection: the identity, then the IoNode, are advertised again.
        broker.clearPublications()
        a.transport.simulateConnectionLoss()
        #expect(try #require(await nodeIterator.next()).object.objectId == node.objectId)
        #expect(
            Array(a.publishedTopics(broker).prefix(2)) == [
                "coaty/3/-/ADV:Identity/\(a.id)", "coaty/3/-/ADV:IoNode/\(a.id)",
            ]
        )
        // The will sent by the broker on that loss named the node too.
        #expect(try #require(await deadIterator.next()).objectIds == [a.id, node.objectId])

        try await a.manager.removeIoNode(objectId: node.objectId)
        #expect(try #require(await deadIterator.next()).objectIds == [node.objectId])
        a.transport.kill()
        #expect(try #require(await deadIterator.next()).objectIds == [a.id])
        await a.manager.stop()
        await b.manager.stop()
    }

    @Test("Observations and requests made before start are subscribed and published on start")
    func beforeStart() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        let b = try TestAgent(broker)
        try await b.manager.start()
        let lights = try a.manager.observeAdvertise(Light.self)
        await lights.subscribed()  // returns at once: not connected yet
        var iterator = lights.makeAsyncIterator()
        let request = Task { try await a.manager.publishDiscover(.objectId(b.id)).first() }
        try await a.manager.publishAdvertise(Light(name: "early", isOn: true))  // deferred
        #expect(a.manager.statistics.deferredPending >= 1)
        try await a.manager.start()
        #expect(try #require(await iterator.next()).object.name == "early")
        let resolve = try #require(try await request.value)
        #expect(resolve.sourceId == b.id)
        #expect(broker.subscriptions(ofClient: a.clientId).contains("coaty/3/-/ADV::com.example.Light/+"))
        await a.manager.stop()
        await b.manager.stop()
    }

    @Test("Two observers of one filter share one subscription; it ends with the last of them")
    func referenceCountedSubscriptions() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        try await a.manager.start()
        let filter = "coaty/3/-/CHN:c/+"
        let first = Task {
            let observation = try a.manager.observeChannel("c")
            await observation.subscribed()
            for await _ in observation { return 1 }
            return 0
        }
        let second = Task {
            let observation = try a.manager.observeChannel("c")
            await observation.subscribed()
            for await _ in observation { return 1 }
            return 0
        }
        while a.manager.subscribedFilters[filter] != 2 { await Task.yield() }
        #expect(broker.subscriptions(ofClient: a.clientId).filter { $0 == filter }.count == 1)
        try await a.manager.publishChannel("c", objects: [])
        #expect(try await first.value == 1)
        #expect(try await second.value == 1)
        await a.manager.subscriptionsSettled()
        #expect(!broker.subscriptions(ofClient: a.clientId).contains(filter))
        #expect(a.manager.subscribedFilters[filter] == nil)

        // Cancelling an iterating task ends its observation too.
        let cancelled = Task {
            let observation = try a.manager.observeChannel("c")
            await observation.subscribed()
            for await _ in observation {}
        }
        while a.manager.subscribedFilters[filter] != 1 { await Task.yield() }
        cancelled.cancel()
        _ = await cancelled.result
        await a.manager.subscriptionsSettled()
        #expect(!broker.subscriptions(ofClient: a.clientId).contains(filter))
        await a.manager.stop()
    }

    @Test("Leaving the for-await loop ends the observation, also while the sequence is kept")
    func breakingOutUnsubscribes() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        try await a.manager.start()
        let filter = "coaty/3/-/CHN:kept/+"
        let observation = try a.manager.observeChannel("kept")
        await observation.subscribed()
        #expect(broker.subscriptions(ofClient: a.clientId).contains(filter))
        try await a.manager.publishChannel("kept", objects: [])
        var received = 0
        for await _ in observation {
            received += 1
            break
        }
        #expect(received == 1)
        await a.manager.subscriptionsSettled()
        #expect(!broker.subscriptions(ofClient: a.clientId).contains(filter))
        #expect(a.manager.subscribedFilters[filter] == nil)
        // The ended observation yields nothing more, however often it is iterated again.
        try await a.manager.publishChannel("kept", objects: [])
        var again = observation.makeAsyncIterator()
        #expect(await again.next() == nil)
        withExtendedLifetime(observation) {}
        await a.manager.stop()
    }

    @Test("Requests publish lazily when iteration starts and unsubscribe the response topic at the end")
    func lazyRequests() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        try await a.manager.start()
        let request = a.manager.publishDiscover(.coreTypes([.identity]))
        #expect(broker.publications(matching: "coaty/3/-/DSC/+/+").isEmpty)
        let resolve = try #require(try await request.first())
        #expect(resolve.data.object?.objectId == a.id)
        #expect(broker.publications(matching: "coaty/3/-/DSC/+/+").count == 1)
        await a.manager.subscriptionsSettled()
        #expect(!broker.subscriptions(ofClient: a.clientId).contains { $0.contains("/RSV/") })
        // Iterating again publishes again, with a fresh correlation id.
        _ = try await request.first()
        let discovers = broker.publications(matching: "coaty/3/-/DSC/+/+").map(\.message.topic)
        #expect(discovers.count == 2)
        #expect(Set(discovers).count == 2)
        await a.manager.stop()
    }

    @Test("Timeout ends an unanswered request; the limit ends it after that many responses")
    func timeoutAndLimit() async throws {
        let broker = InProcessBroker()
        let agents = try (0..<3).map { _ in try TestAgent(broker) }
        for agent in agents { try await agent.manager.start() }
        let nobody = try await agents[0].manager.publishQuery(QueryEventData(objectTypes: ["x.Y"]))
            .responses(timeout: .milliseconds(50)).collect()
        #expect(nobody.isEmpty)
        #expect(
            try await agents[0].manager.publishQuery(QueryEventData(objectTypes: ["x.Y"])).first(
                timeout: .milliseconds(20)
            ) == nil
        )
        let two = try await agents[0].manager.publishDiscover(.coreTypes([.identity])).responses(limit: 2).collect()
        #expect(two.count == 2)
        for agent in agents { await agent.manager.stop() }
    }

    @Test("Malformed payloads and topics are dropped and counted; the observation goes on")
    func malformedDropped() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        try await a.manager.start()
        let observation = try a.manager.observeAdvertise(coreType: .task)
        await observation.subscribed()
        var iterator = observation.makeAsyncIterator()
        let source = CoatyUUID()
        let topic = "coaty/3/-/ADV:Task/\(source)"
        for garbage in ["", "{", "[]", #"{"object":1}"#, #"{"object":{"objectType":"coaty.Task"}}"#, "null"] {
            broker.publish(TransportMessage(topic: topic, payload: Array(garbage.utf8)))
        }
        // The same invalid topic twice in a row (the manager remembers the last topic) counts twice.
        broker.publish(TransportMessage(topic: "coaty/3/-/ADV:Task/not-a-uuid", payload: Array("{}".utf8)))
        broker.publish(TransportMessage(topic: "coaty/3/-/ADV:Task/not-a-uuid", payload: Array("{}".utf8)))
        broker.publish(TransportMessage(topic: "coaty/3/-/ADV:Task/\(source.uuidString.uppercased())", payload: []))
        let valid = task(creator: source)
        // An object type that cannot be a topic level: the object could never be advertised again.
        let text = String(decoding: AdvertiseEventData(object: try AnyCoatyObject(valid)).payloadBytes, as: UTF8.self)
        #expect(text.contains(#""objectType":"coaty.Task""#))
        for badType in ["coaty/Task", "coaty.+", "coaty.#", #"coaty.\u0000Task"#] {
            let bad = text.replacing(#""objectType":"coaty.Task""#, with: #""objectType":"\#(badType)""#)
            broker.publish(TransportMessage(topic: topic, payload: Array(bad.utf8)))
        }
        try await a.manager.publishAdvertise(valid)
        #expect(try #require(await iterator.next()).object.objectId == valid.objectId)
        // Events from two sources in turn keep their own source ids.
        let payload = AdvertiseEventData(object: try AnyCoatyObject(valid)).payloadBytes
        let sources = [CoatyUUID(), CoatyUUID(), CoatyUUID()]
        for sender in [sources[0], sources[1], sources[1], sources[2], sources[0]] {
            broker.publish(TransportMessage(topic: "coaty/3/-/ADV:Task/\(sender)", payload: payload))
        }
        var seen: [CoatyUUID] = []
        for _ in 0..<5 { seen.append(try #require(await iterator.next()).sourceId) }
        #expect(seen == [sources[0], sources[1], sources[1], sources[2], sources[0]])
        #expect(a.manager.statistics.invalidPayloads == 10)
        #expect(a.manager.statistics.invalidTopics == 3)
        await a.manager.stop()
    }

    @Test("Every publication and subscription of the manager is QoS 0 and not retained")
    func qosZeroWithoutRetain() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        let b = try TestAgent(broker)
        try await a.manager.start()
        try await b.manager.start()
        let discovers = try b.manager.observeDiscover()
        let lights = try a.manager.observeAdvertise(Light.self)
        let calls = try b.manager.observeCall(operation: "op")
        await discovers.subscribed()
        await lights.subscribed()
        await calls.subscribed()
        let answering = Task {
            for await discover in discovers where discover.sourceId == a.id {
                try? await discover.resolve(object: Light(name: "answer", isOn: false))
            }
        }
        let returning = Task {
            for await call in calls { try? await call.returnResult(true) }
        }
        try await a.manager.publishAdvertise(Light(name: "l", isOn: true))
        try await a.manager.publishChannel("c", objects: [])
        try await a.manager.publishDeadvertise([CoatyUUID()])
        _ = try await a.manager.publishDiscover(.objectTypes([Light.objectType])).first(timeout: .seconds(5))
        let returns = try await a.manager.publishCall("op").first(timeout: .seconds(5))
        #expect(returns != nil)
        answering.cancel()
        returning.cancel()
        let published = broker.publications.filter { !$0.isWill }
        #expect(
            Set(published.map { $0.message.topic.split(separator: "/")[3].prefix(3) }).isSuperset(of: [
                "ADV", "CHN", "DAD", "DSC", "RSV", "CLL", "RTN",
            ])
        )
        for publication in published {
            #expect(publication.message.qos == .atMostOnce, "\(publication.message.topic)")
            #expect(!publication.message.retain, "\(publication.message.topic)")
        }
        for agent in [a, b] {
            // One snapshot of every request, those since ended included (a response topic).
            let requests = broker.subscribeRequests(ofClient: agent.clientId)
            #expect(!requests.isEmpty)
            for request in requests {
                #expect(request.qos == .atMostOnce, "\(request.filter)")
            }
        }
        await a.manager.stop()
        await b.manager.stop()
    }

    @Test("On reconnection the subscriptions come before the join events: an agent sees its own")
    func resubscriptionBeforeJoinEvents() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        try await a.manager.start()
        broker.goOffline()
        await awaitState(a.manager, .offline)
        // Observed while offline: subscribed when the connection is back, before the join events.
        let identities = try a.manager.observeAdvertise(coreType: .identity)
        broker.goOnline()
        await awaitState(a.manager, .online)
        var iterator = identities.makeAsyncIterator()
        let own = try #require(await iterator.next())
        #expect(own.sourceId == a.id)
        #expect(own.object.objectId == a.id)
        await a.manager.stop()
    }

    @Test("An invalid namespace is refused when the manager is created", arguments: ["", "a/b", "+", "#", "a\u{0}b"])
    func invalidNamespace(_ namespace: String) throws {
        let broker = InProcessBroker()
        #expect(throws: CommunicationError.self) { try TestAgent(broker, namespace: namespace) }
    }

    @Test("Only Advertise and Update require an object type that can be a topic level; Channel carries any")
    func objectTypeTopicLevelRule() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        try await a.manager.start()
        let channel = try a.manager.observeChannel("c")
        let advertises = try a.manager.observeAdvertise(coreType: .coatyObject)
        let updates = try a.manager.observeUpdate(coreType: .coatyObject)
        await channel.subscribed()
        await advertises.subscribed()
        await updates.subscribed()
        let text = #"{"objectType":"com.example/odd","coreType":"CoatyObject","objectId":"\#(CoatyUUID())","name":"o"}"#
        let source = CoatyUUID()
        for (topic, payload) in [
            ("coaty/3/-/ADV:CoatyObject/\(source)", #"{"object":\#(text)}"#),
            ("coaty/3/-/UPD:CoatyObject/\(source)/\(CoatyUUID())", #"{"object":\#(text)}"#),
            ("coaty/3/-/CHN:c/\(source)", #"{"object":\#(text)}"#),
        ] {
            #expect(broker.publish(TransportMessage(topic: topic, payload: Array(payload.utf8))))
        }
        var iterator = channel.makeAsyncIterator()
        let event = try #require(await iterator.next())
        #expect(event.data.objects.first?.objectType == "com.example/odd")
        #expect(a.manager.statistics.invalidPayloads == 2)
        withExtendedLifetime((advertises, updates)) {}
        await a.manager.stop()
    }

    @Test("On reconnection: join event first, then deferred publications in FIFO order")
    func reconnectOrder() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        try await a.manager.start()
        broker.goOffline()
        await awaitState(a.manager, .offline)
        let lights = (0..<5).map { Light(name: "l\($0)", isOn: true) }
        for light in lights { try await a.manager.publishChannel("c", object: light) }
        #expect(a.manager.statistics.deferredPending == 5)
        broker.clearPublications()
        broker.goOnline()
        await awaitState(a.manager, .online)
        let topics = a.publishedTopics(broker)
        #expect(topics.first == "coaty/3/-/ADV:Identity/\(a.id)")
        #expect(topics.count == 6)
        let names = broker.publications.filter { $0.message.topic.contains("CHN:c") }.compactMap {
            try? ChannelEventData(bytes: $0.message.payload, registry: a.manager.registry).objects.first?.name
        }
        #expect(names == lights.map(\.name))
        #expect(a.manager.statistics.deferredPending == 0)
        await a.manager.stop()
    }

    @Test("The deferral queue is bounded: the oldest publications are dropped and counted")
    func deferredOverflow() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker, deferredLimit: 2)
        for index in 0..<4 { try await a.manager.publishRaw(topic: "t/\(index)", payload: []) }
        #expect(a.manager.statistics.deferredOverflow == 2)
        try await a.manager.start()
        #expect(a.publishedTopics(broker) == ["coaty/3/-/ADV:Identity/\(a.id)", "t/2", "t/3"])
        await a.manager.stop()
    }

    @Test("Killing an agent makes the broker publish its last will, a Deadvertise of its identity")
    func willOnKill() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        let b = try TestAgent(broker)
        try await a.manager.start()
        try await b.manager.start()
        let dead = try b.manager.observeDeadvertise()
        await dead.subscribed()
        var iterator = dead.makeAsyncIterator()
        a.transport.kill()
        let event = try #require(await iterator.next())
        #expect(event.objectIds == [a.id])
        #expect(event.topic.name == "coaty/3/-/DAD/\(a.id)")
        await a.manager.stop()
        await b.manager.stop()
    }

    @Test("Other namespaces are not received by default, and are with cross-namespacing")
    func crossNamespacing() async throws {
        let broker = InProcessBroker()
        let publisher = try TestAgent(broker, namespace: "one")
        let local = try TestAgent(broker, namespace: "two")
        let cross = try TestAgent(broker, namespace: "two", crossNamespacing: true)
        for agent in [publisher, local, cross] { try await agent.manager.start() }
        let localObservation = try local.manager.observeChannel("c")
        let crossObservation = try cross.manager.observeChannel("c")
        #expect(crossObservation.topicFilter == "coaty/3/+/CHN:c/+")
        await localObservation.subscribed()
        await crossObservation.subscribed()
        var localIterator = localObservation.makeAsyncIterator()
        var crossIterator = crossObservation.makeAsyncIterator()
        try await publisher.manager.publishChannel("c", object: Light(name: "foreign", isOn: true))
        try await local.manager.publishChannel("c", object: Light(name: "own", isOn: true))
        #expect(try #require(await localIterator.next()).data.objects.first?.name == "own")
        #expect(try #require(await crossIterator.next()).data.objects.first?.name == "foreign")
        #expect(try #require(await crossIterator.next()).data.objects.first?.name == "own")

        // A cross-namespacing responder answers in its own namespace; a cross-namespacing
        // requester receives it.
        let crossOne = try TestAgent(broker, namespace: "one", crossNamespacing: true)
        try await crossOne.manager.start()
        let answer = try #require(try await cross.manager.publishDiscover(.objectId(crossOne.id)).first())
        #expect(answer.topic.namespace == "one")
        #expect(answer.sourceId == crossOne.id)
        for agent in [publisher, local, cross, crossOne] { await agent.manager.stop() }
    }

    @Test("1000 concurrent requests each get their own response")
    func concurrentRequests() async throws {
        let broker = InProcessBroker()
        let requester = try TestAgent(broker)
        let responder = try TestAgent(broker)
        try await requester.manager.start()
        try await responder.manager.start()
        let calls = try responder.manager.observeCall(operation: "echo")
        await calls.subscribed()
        let answering = Task {
            for await call in calls {
                try await call.returnResult(call.data.parameter("n") ?? .null)
            }
        }
        let mismatches = try await withThrowingTaskGroup(of: Bool.self) { group in
            for n in 0..<1000 {
                group.addTask {
                    let response = try await requester.manager
                        .publishCall("echo", data: CallEventData(parameters: ["n": .int(Int64(n))])).first()
                    return response?.data.result == .int(Int64(n))
                }
            }
            var mismatches = 0
            for try await ok in group where !ok { mismatches += 1 }
            return mismatches
        }
        #expect(mismatches == 0)
        await requester.manager.subscriptionsSettled()
        #expect(!broker.subscriptions(ofClient: requester.clientId).contains { $0.contains("/RTN/") })
        answering.cancel()
        await requester.manager.stop()
        await responder.manager.stop()
    }
}

@Suite("CommunicationManager as a Service", .timeLimit(.minutes(1)))
struct CommunicationManagerServiceTests {
    @Test("run() starts the agent, and graceful shutdown stops it with a Deadvertise")
    func gracefulShutdown() async throws {
        let broker = InProcessBroker()
        let a = try TestAgent(broker)
        let group = ServiceGroup(services: [a.manager], gracefulShutdownSignals: [], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        await awaitState(a.manager, .online)
        #expect(broker.connectedClientIds.contains(a.clientId))
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(a.manager.communicationState == .offline)
        #expect(!broker.connectedClientIds.contains(a.clientId))
        #expect(a.publishedTopics(broker).last == "coaty/3/-/DAD/\(a.id)")
    }
}
