import CoatyKit
import CoatySensorThings
import CoatyTesting
import Foundation
import Logging
import ServiceLifecycle
import Testing

/// The next element of `iterator`, which must come (the suite's time limit fails a test that
/// waits forever).
func next<I: AsyncIteratorProtocol>(_ iterator: inout I) async throws -> I.Element {
    try #require(try await iterator.next())
}

/// Two agents over a real mosquitto: one with a thing and its sensors, one observing them.
struct SensorThingsNetwork {
    let broker: MosquittoBroker
    let source: CommunicationManager
    let observer: CommunicationManager
    let thing: Thing

    static func start(startingSource: Bool = true) async throws -> SensorThingsNetwork {
        let broker = try await MosquittoBroker.start()
        let source = try CommunicationManager.mqtt(
            url: broker.url,
            identity: Identity(name: "source"),
            registry: CoatyObjectRegistry(SensorThingsTypes.all)
        )
        let observer = try CommunicationManager.mqtt(
            url: broker.url,
            identity: Identity(name: "observer"),
            registry: CoatyObjectRegistry(SensorThingsTypes.all)
        )
        if startingSource { try await source.start() }
        try await observer.start()
        let thing = Thing(name: "Boiler room", description: "Boiler", parentObjectId: source.identity.objectId)
        return SensorThingsNetwork(broker: broker, source: source, observer: observer, thing: thing)
    }

    func sensor(_ name: String, thing: Thing? = nil) -> Sensor {
        Sensor(
            name: name,
            description: "\(name) sensor",
            encodingType: .pdf,
            metadata: .string("https://example.com/\(name).pdf"),
            unitOfMeasurement: .degreeCelsius,
            observationType: .measurement,
            observedProperty: ObservedProperty(name: "Temperature", definition: "urn:temperature", description: "T"),
            parentObjectId: (thing ?? self.thing).objectId
        )
    }

    func stop() async {
        await source.stop()
        await observer.stop()
        await broker.stop()
    }
}

@Suite(
    "Sensor Things between two agents over a real mosquitto",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: MosquittoBroker.findExecutable() != nil || ProcessInfo.processInfo.environment["CI"] == "true")
)
struct SensorThingsIntegrationTests {
    @Test("Sensors are advertised, discovered and queried; observations arrive on the sensor's channel and advertised")
    func sourceAndObserver() async throws {
        let network = try await SensorThingsNetwork.start()
        let source = SensorSourceController(communicationManager: network.source)
        let observer = SensorObserverController(communicationManager: network.observer)
        let boiler = network.sensor("boiler")
        let outlet = network.sensor("outlet")
        let elsewhere = network.sensor("elsewhere", thing: Thing(name: "Other", description: "Other"))

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await source.run() }
            try await source.subscribed()

            // Registering advertises.
            let advertised = try observer.observeAdvertisedSensors()
            await advertised.subscribed()
            var advertisedSensors = advertised.makeAsyncIterator()
            try await source.register(boiler, io: MockSensorIo(values: [20.5, 21, 21.5]))
            try await source.register(outlet, io: MockSensorIo(value: "closed"))
            try await source.register(elsewhere, io: MockSensorIo())
            try await source.register(boiler, io: MockSensorIo())  // already registered: ignored
            #expect(try await next(&advertisedSensors) == boiler)
            #expect(try await next(&advertisedSensors) == outlet)
            #expect(try await next(&advertisedSensors) == elsewhere)
            #expect(source.registeredSensors == [boiler, outlet, elsewhere])

            // Discover by type: one Resolve per sensor; by objectId: that sensor.
            let discovered = try await observer.discoverSensors().responses(limit: 3, timeout: .seconds(10)).collect()
            #expect(Set(discovered) == [boiler, outlet, elsewhere])
            await #expect(throws: SensorThingsError.alreadyRan) { try await source.run() }
            let byId = try await network.observer.publishDiscover(.objectId(outlet.objectId)).first(
                timeout: .seconds(10)
            )
            #expect(byId?.data.object?.as(Sensor.self) == outlet)

            // Query the sensors of a thing: those whose parentObjectId is the thing.
            let ofThing = try #require(
                try await observer.querySensorsOfThing(network.thing.objectId).first(timeout: .seconds(10))
            )
            #expect(ofThing == [boiler, outlet])
            let ordered = try #require(
                try await network.observer.publishQuery(
                    QueryEventData(
                        objectTypes: [Sensor.objectType],
                        objectFilter: ObjectFilter(
                            conditions: nil,
                            orderByProperties: [ObjectFilterOrdering("name", .descending)],
                            take: 2
                        )
                    )
                ).first(timeout: .seconds(10))
            )
            #expect(ordered.data.objects.compactMap { $0.as(Sensor.self)?.name } == ["outlet", "elsewhere"])
            // No sensor matches: no Retrieve, as in Coaty JS.
            #expect(try await observer.querySensorsOfThing(CoatyUUID()).first(timeout: .milliseconds(500)) == nil)

            // A channeled observation: on the channel named by the sensor's objectId.
            let wire = MQTTClient(
                configuration: try MQTTConfiguration(url: network.broker.url, clientId: "wire-watcher")
            )
            try await wire.connect()
            try await wire.subscribe("coaty/3/-/CHN:\(boiler.objectId)/+")
            let channeled = try observer.observeChanneledObservations(sensorId: boiler.objectId)
            await channeled.subscribed()
            var observations = channeled.makeAsyncIterator()
            var values = try source.sensorValues(boiler.objectId).makeAsyncIterator()
            let before = Date().timeIntervalSince1970 * 1000
            let published = try await source.publishChanneledObservation(
                sensorId: boiler.objectId,
                resultQuality: ["raw"]
            )
            let received = try await next(&observations)
            #expect(received == published)
            #expect(received.result == 20.5)
            #expect(received.name == "Observation of boiler")
            #expect(received.parentObjectId == boiler.objectId)
            #expect(received.resultQuality == ["raw"])
            #expect(received.phenomenonTime == received.resultTime)
            #expect(abs(received.phenomenonTime - before) < 5000)
            #expect(try await next(&values) == 20.5)
            var wireMessages = wire.messages.makeAsyncIterator()
            let message = try await next(&wireMessages)
            #expect(message.topic == "coaty/3/-/CHN:\(boiler.objectId)/\(network.source.identity.objectId)")
            let payload = try JSONValue(parsing: message.payload)
            #expect(payload["object"]?["objectType"] == "coaty.sensorThings.Observation")
            #expect(payload["object"]?["result"] == 20.5)
            await wire.disconnect()

            // An advertised observation.
            let advertisedObservations = try observer.observeAdvertisedObservations(sensorId: boiler.objectId)
            await advertisedObservations.subscribed()
            var advertisedIterator = advertisedObservations.makeAsyncIterator()
            try await source.publishAdvertisedObservation(sensorId: outlet.objectId)  // another sensor: filtered out
            let second = try await source.publishAdvertisedObservation(sensorId: boiler.objectId)
            #expect(try await next(&advertisedIterator) == second)
            #expect(second.result == 21)
            #expect(try await next(&values) == 21)

            // Unregistering deadvertises and ends the values.
            let deadvertises = try network.observer.observeDeadvertise()
            await deadvertises.subscribed()
            var deadvertised = deadvertises.makeAsyncIterator()
            try await source.unregister(boiler.objectId)
            #expect(try await next(&deadvertised).objectIds == [boiler.objectId])
            #expect(await values.next() == nil)
            #expect(!source.isRegistered(boiler.objectId))
            await #expect(throws: SensorThingsError.sensorNotRegistered(boiler.objectId)) {
                try await source.publishChanneledObservation(sensorId: boiler.objectId)
            }
            await #expect(throws: SensorThingsError.sensorNotRegistered(boiler.objectId)) {
                try await source.unregister(boiler.objectId)
            }
            group.cancelAll()
        }
        await network.stop()
    }

    @Test("A sensor registered with a sampling interval publishes its readings periodically until unregistered")
    func periodicPublication() async throws {
        let network = try await SensorThingsNetwork.start()
        let source = SensorSourceController(communicationManager: network.source)
        let observer = SensorObserverController(communicationManager: network.observer)
        let channeledSensor = network.sensor("channeled")
        let advertisedSensor = network.sensor("advertised")
        await #expect(throws: SensorThingsError.invalidSamplingInterval(.zero)) {
            try await source.register(channeledSensor, io: MockSensorIo(), publication: .channel(every: .zero))
        }
        #expect(source.registeredSensors.isEmpty)

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await source.run() }
            let channeled = try observer.observeChanneledObservations(sensorId: channeledSensor.objectId)
            let advertised = try observer.observeAdvertisedObservations(sensorId: advertisedSensor.objectId)
            await channeled.subscribed()
            await advertised.subscribed()
            var channeledIterator = channeled.makeAsyncIterator()
            var advertisedIterator = advertised.makeAsyncIterator()
            try await source.register(
                channeledSensor,
                io: MockSensorIo(values: [1, 2, 3]),
                publication: .channel(every: .milliseconds(100))
            )
            try await source.register(
                advertisedSensor,
                io: MockSensorIo(values: [true, false]),
                publication: .advertise(every: .milliseconds(100))
            )
            var results: [JSONValue] = []
            for _ in 0..<4 { results.append(try await next(&channeledIterator).result) }
            #expect(results == [1, 2, 3, 1])
            #expect(try await next(&advertisedIterator).result == true)
            #expect(try await next(&advertisedIterator).result == false)

            let io = try #require(source.sensorContainer(channeledSensor.objectId)?.io as? MockSensorIo)
            try await source.unregister(channeledSensor.objectId)
            let readsAfterUnregistering = io.readCount
            try await Task.sleep(for: .milliseconds(400))
            #expect(io.readCount == readsAfterUnregistering, "the sampling stopped")
            group.cancelAll()
        }
        await network.stop()
    }

    @Test(
        "The thing tracker registers discovered things' sensors, reports their observations, and removes them when deadvertised"
    )
    func thingSensorObservationObserver() async throws {
        let network = try await SensorThingsNetwork.start()
        let lifecycle = ObjectLifecycleController(communicationManager: network.source)
        let source = SensorSourceController(communicationManager: network.source)
        let ignoredThing = Thing(
            name: "ignored",
            description: "filtered out",
            parentObjectId: network.source.identity.objectId
        )
        let tracker = ThingSensorObservationObserverController(
            communicationManager: network.observer,
            thingFilter: { $0.name != "ignored" }
        )
        let boiler = network.sensor("boiler")
        let ignoredSensor = network.sensor("ignored", thing: ignoredThing)
        var changes = tracker.registeredSensorsChanges().makeAsyncIterator()
        #expect(try await next(&changes) == RegisteredSensorsChangeInfo(), "an empty change first")
        var observations = tracker.sensorObservations().makeAsyncIterator()

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await source.run() }
            try await source.subscribed()
            // The things answer Discovers; the sensor is registered before the tracker starts,
            // so the tracker finds it by its Query.
            _ = try await lifecycle.advertiseDiscoverableObject(network.thing)
            _ = try await lifecycle.advertiseDiscoverableObject(ignoredThing)
            try await source.register(
                boiler,
                io: MockSensorIo(values: [60, 61]),
                publication: .channel(every: .milliseconds(100))
            )
            try await source.register(
                ignoredSensor,
                io: MockSensorIo(),
                publication: .channel(every: .milliseconds(100))
            )
            group.addTask { try await tracker.run() }

            let added = try await next(&changes)
            let registered = RegisteredSensor(sensor: boiler, thing: network.thing)
            #expect(added == RegisteredSensorsChangeInfo(added: [registered], total: [registered]))
            let observation = try await next(&observations)
            #expect(observation.sensor == boiler)
            #expect(observation.thing == network.thing)
            #expect(observation.observation.parentObjectId == boiler.objectId)
            #expect([60, 61].contains(observation.observation.result))

            // Unregistering the sensor deadvertises it: removed.
            try await source.unregister(boiler.objectId)
            var change = try await next(&changes)
            while change.removed.isEmpty { change = try await next(&changes) }  // a late re-advertise may come first
            #expect(change.removed == [registered])
            #expect(change.total.isEmpty)
            #expect(tracker.registeredSensors.isEmpty)

            // Registered again (advertised): added again; the thing's parent is deadvertised: removed.
            let outlet = network.sensor("outlet")
            try await source.register(outlet, io: MockSensorIo())
            let again = try await next(&changes)
            #expect(again.added == [RegisteredSensor(sensor: outlet, thing: network.thing)])
            try await network.source.publishDeadvertise([network.source.identity.objectId])
            let gone = try await next(&changes)
            #expect(gone.removed.map(\.sensor) == [outlet])
            #expect(!tracker.registeredSensors.contains { $0.sensor.name == "ignored" })
            await #expect(throws: SensorThingsError.alreadyRan) { try await tracker.run() }
            group.cancelAll()
        }
        // Stopping reports what was still registered as removed.
        #expect(try await next(&changes) == RegisteredSensorsChangeInfo())
        await network.stop()
    }

    @Test(
        "In an AgentContainer the source answers Discovers once online; its sensor's Advertise was deferred until then"
    )
    func sourceInAContainer() async throws {
        let network = try await SensorThingsNetwork.start(startingSource: false)
        let source = SensorSourceController(communicationManager: network.source)
        let observer = SensorObserverController(communicationManager: network.observer)
        let sensor = network.sensor("boiler")
        let advertised = try observer.observeAdvertisedSensors()
        await advertised.subscribed()
        var advertisedSensors = advertised.makeAsyncIterator()
        try await source.register(sensor, io: MockSensorIo(value: 42))
        let container = try AgentContainer(communicationManager: network.source, controllers: [source])
        let group = ServiceGroup(services: [container], gracefulShutdownSignals: [], logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            #expect(try await next(&advertisedSensors) == sensor)
            let discovered = try await observer.discoverSensors().first(timeout: .seconds(10))
            #expect(discovered == sensor)
            let channeled = try observer.observeChanneledObservations(sensorId: sensor.objectId)
            await channeled.subscribed()
            var observations = channeled.makeAsyncIterator()
            try await source.publishChanneledObservation(sensorId: sensor.objectId)
            #expect(try await next(&observations).result == 42)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(network.source.communicationState == .offline)
        await network.stop()
    }

    @Test("ThingObserverController queries things at a location and observes advertised things, as Coaty JS sends them")
    func thingObserver() async throws {
        let network = try await SensorThingsNetwork.start()
        let things = ThingObserverController(communicationManager: network.observer)
        let locationId = CoatyUUID()
        let here = Thing(name: "here", description: "at the location", locationId: locationId)
        let there = Thing(name: "there", description: "elsewhere", locationId: CoatyUUID())
        let queries = try network.source.observeQuery()
        await queries.subscribed()
        let advertised = try things.observeAdvertisedThings()
        await advertised.subscribed()
        var advertisedThings = advertised.makeAsyncIterator()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await query in queries {
                    // The Query Coaty JS's queryThingsAtLocation sends.
                    #expect(query.data.objectTypes == [Thing.objectType])
                    #expect(query.data.objectFilter == .where("locationId", .equals(.string(locationId.uuidString))))
                    let matching = try [here, there].filter { query.data.matches(try AnyCoatyObject($0)) }
                    try await query.retrieve(objects: matching)
                }
            }
            let found = try await things.queryThingsAtLocation(locationId).first(timeout: .seconds(10))
            #expect(found == [here])
            try await network.source.publishAdvertise(there)
            #expect(try await next(&advertisedThings) == there)
            group.cancelAll()
        }
        await network.stop()
    }

    @Test(
        "A Coaty JS agent's raw messages interoperate: its channeled observation arrives typed; its Discover for sensors is resolved"
    )
    func coatyJSWire() async throws {
        let network = try await SensorThingsNetwork.start()
        let source = SensorSourceController(communicationManager: network.source)
        let observer = SensorObserverController(communicationManager: network.observer)
        let sensor = network.sensor("boiler")
        let foreignId = CoatyUUID()
        let foreign = MQTTClient(
            configuration: try MQTTConfiguration(url: network.broker.url, clientId: "coaty-js-agent")
        )
        try await foreign.connect()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await source.run() }
            try await source.subscribed()
            try await source.register(sensor, io: MockSensorIo())

            // What Coaty JS's SensorSourceController.publishChanneledObservation sends for its own sensor.
            let jsSensorId = CoatyUUID()
            let channeled = try observer.observeChanneledObservations(sensorId: jsSensorId)
            await channeled.subscribed()
            var observations = channeled.makeAsyncIterator()
            let observationId = CoatyUUID()
            let payload = """
                {"object":{"name":"Observation of JS sensor","objectId":"\(observationId)",\
                "parentObjectId":"\(jsSensorId)","coreType":"CoatyObject",\
                "objectType":"coaty.sensorThings.Observation","phenomenonTime":1700000000123,\
                "result":{"on":true},"resultTime":1700000000123}}
                """
            try await foreign.publish("coaty/3/-/CHN:\(jsSensorId)/\(foreignId)", payload: Array(payload.utf8))
            let observation = try await next(&observations)
            #expect(observation.objectId == observationId)
            #expect(observation.result == ["on": true])
            #expect(observation.phenomenonTime == 1_700_000_000_123)

            // What Coaty JS's SensorObserverController.discoverSensors sends.
            let correlationId = CoatyUUID()
            try await foreign.subscribe("coaty/3/-/RSV/+/\(correlationId)")
            let discover = #"{"objectTypes":["coaty.sensorThings.Sensor"]}"#
            try await foreign.publish(
                "coaty/3/-/DSC/\(foreignId)/\(correlationId)",
                payload: Array(discover.utf8)
            )
            var messages = foreign.messages.makeAsyncIterator()
            let resolve = try await next(&messages)
            #expect(resolve.topic == "coaty/3/-/RSV/\(network.source.identity.objectId)/\(correlationId)")
            let object = try #require(try JSONValue(parsing: resolve.payload)["object"])
            #expect(object["objectType"] == "coaty.sensorThings.Sensor")
            #expect(object["objectId"] == .string(sensor.objectId.uuidString))
            #expect(object["parentObjectId"] == .string(network.thing.objectId.uuidString))
            #expect(
                object["unitOfMeasurement"] == [
                    "name": "Degree Celsius", "symbol": "degC",
                    "definition": .string(UnitOfMeasurement.degreeCelsius.definition!),
                ]
            )
            group.cancelAll()
        }
        await foreign.disconnect()
        await network.stop()
    }
}
