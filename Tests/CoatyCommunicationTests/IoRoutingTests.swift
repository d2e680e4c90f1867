import CoatyCore
import CommunicationTestSupport
import CoatySync
import CoatyTesting
import Testing

/// A clock that moves only when a test advances it, so sample and throttle are deterministic.
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private enum Sleeper {
        case waiting(Instant, CheckedContinuation<Void, any Error>)
        case cancelled
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextToken = 0
        var sleepers: [Int: Sleeper] = [:]
    }

    private let state = CoatyMutex(State())

    var now: Instant { state.withLock { $0.now } }
    var minimumResolution: Duration { .zero }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let token = state.withLock { state in
            defer { state.nextToken += 1 }
            return state.nextToken
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if case .cancelled = state.sleepers.removeValue(forKey: token) {
                        return .failure(CancellationError())
                    }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[token] = .waiting(deadline, continuation)
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard case .waiting(_, let continuation) = state.sleepers[token] else {
                    state.sleepers[token] = .cancelled
                    return nil
                }
                state.sleepers[token] = nil
                return continuation
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward and wakes every sleeper whose deadline has come.
    func advance(by duration: Duration) {
        let due = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.now = state.now.advanced(by: duration)
            var due: [CheckedContinuation<Void, any Error>] = []
            for (token, sleeper) in state.sleepers {
                if case .waiting(let deadline, let continuation) = sleeper, deadline <= state.now {
                    state.sleepers[token] = nil
                    due.append(continuation)
                }
            }
            return due
        }
        for continuation in due { continuation.resume() }
    }
}

/// A source/actor pair as seen in Associate events.
struct Pair: Hashable, CustomStringConvertible {
    let source: CoatyUUID
    let actor: CoatyUUID
    var description: String { "\(source.uuidString.prefix(4))→\(actor.uuidString.prefix(4))" }
}

/// A router agent, two point agents and a spy on the Associate events of the context.
struct IoWorld {
    static let context = "ctx"
    let broker = InProcessBroker()
    let routerAgent: TestAgent
    let sourceAgent: TestAgent
    let actorAgent: TestAgent
    let spy: EventObservation<AssociateEvent>

    init() async throws {
        routerAgent = try TestAgent(broker, name: "router")
        sourceAgent = try TestAgent(broker, name: "sources")
        actorAgent = try TestAgent(broker, name: "actors")
        for agent in [routerAgent, sourceAgent, actorAgent] { try await agent.manager.start() }
        spy = try routerAgent.manager.observeAssociate(ioContextName: Self.context)
        await spy.subscribed()
    }

    /// The basic router of the context, on the router agent.
    func basicRouter() -> IoRouter {
        IoRouter.basic(communicationManager: routerAgent.manager, ioContext: IoContext(name: Self.context))
    }

    /// Runs the router until the body returns; waits until it advertised its context (it is
    /// subscribed to IoNode Advertise events then).
    func withRouter(
        _ router: IoRouter,
        _ body: () async throws -> Void
    ) async throws {
        let contexts = try sourceAgent.manager.observeAdvertise(coreType: .ioContext)
        await contexts.subscribed()
        let running = Task { try await router.run() }
        var iterator = contexts.makeAsyncIterator()
        let advertised = await iterator.next()
        #expect(advertised?.object.objectId == router.ioContext.objectId)
        #expect(advertised?.object.parentObjectId == routerAgent.id)
        do {
            try await body()
        } catch {
            router.stop()
            try await running.value
            throw error
        }
        router.stop()
        try await running.value
    }

    /// Adds a node holding one source and one actor of a value type no other point has, and
    /// returns its pair: once its Associate is seen, every earlier change has been published.
    func addSentinel(_ valueType: String = "test.Sentinel") async throws -> Pair {
        let source = IoSource(name: "sentinel source", valueType: valueType)
        let actor = IoActor(name: "sentinel actor", valueType: valueType)
        try await sourceAgent.manager.addIoNode(IoNode(name: Self.context, ioSources: [source], ioActors: [actor]))
        return Pair(source: source.objectId, actor: actor.objectId)
    }
}

/// Collects Associate events until `sentinel` is associated; returns the others in order.
func associates(
    until sentinel: Pair,
    from iterator: inout EventObservation<AssociateEvent>.Iterator
) async -> [AssociateEventData] {
    var seen: [AssociateEventData] = []
    while let event = await iterator.next() {
        if Pair(source: event.data.ioSourceId, actor: event.data.ioActorId) == sentinel { return seen }
        seen.append(event.data)
    }
    return seen
}

func pairs(_ events: [AssociateEventData], associating: Bool = true) -> Set<Pair> {
    Set(
        events.filter { $0.isDisassociation != associating }.map { Pair(source: $0.ioSourceId, actor: $0.ioActorId) }
    )
}

/// Waits until an association state stream reports `wanted`.
private func awaitAssociation(_ states: IoAssociationStates, _ wanted: Bool = true) async {
    for await state in states where state == wanted { return }
}

// The limit is for a hang: the strategy tests take well under a second alone, and up to ~40 s while
// the whole suite keeps the two cores' cooperative pool busy (one ran out of a one-minute limit).
@Suite("IO routing on the in-process broker", .timeLimit(.minutes(3)))
struct IoRoutingTests {
    @Test("the basic router associates compatible pairs of its context only, on the source's Coaty route")
    func basicRouting() async throws {
        let world = try await IoWorld()
        let router = world.basicRouter()
        let temperature = IoSource(name: "t", valueType: "test.Temperature", updateRate: 100)
        let humidity = IoSource(name: "h", valueType: "test.Humidity")
        let rawTemperature = IoSource(name: "raw t", valueType: "test.Temperature", useRawIoValues: true)
        let display = IoActor(name: "display", valueType: "test.Temperature", updateRate: 250)
        let lamp = IoActor(name: "lamp", valueType: "test.Light")
        let otherContextDisplay = IoActor(name: "elsewhere", valueType: "test.Temperature")

        var iterator = world.spy.makeAsyncIterator()
        try await world.withRouter(router) {
            try await world.sourceAgent.manager.addIoNode(
                IoNode(name: IoWorld.context, ioSources: [temperature, humidity, rawTemperature], ioActors: [])
            )
            try await world.actorAgent.manager.addIoNode(
                IoNode(name: IoWorld.context, ioSources: [], ioActors: [display, lamp])
            )
            try await world.actorAgent.manager.addIoNode(
                IoNode(name: "other", ioSources: [], ioActors: [otherContextDisplay])
            )
            let sentinel = try await world.addSentinel()
            let events = await associates(until: sentinel, from: &iterator)

            #expect(pairs(events) == [Pair(source: temperature.objectId, actor: display.objectId)])
            #expect(pairs(events, associating: false).isEmpty)
            let association = try #require(events.first)
            #expect(association.associatingRoute == "coaty/3/-/IOV/\(temperature.objectId)")
            #expect(association.updateRate == 250)
            #expect(router.managedIoNodes.count == 3)
            #expect(router.associations.count == 2)
        }
        // Stopping the router disassociates what it associated.
        var stopped: [AssociateEventData] = []
        for _ in 0..<2 { if let event = await iterator.next() { stopped.append(event.data) } }
        #expect(stopped.allSatisfy { $0.isDisassociation })
        #expect(
            pairs(stopped, associating: false).contains(Pair(source: temperature.objectId, actor: display.objectId))
        )
    }

    @Test("the rule-based router applies value-type rules before global rules, and re-evaluates new rules")
    func ruleBasedRouting() async throws {
        let world = try await IoWorld()
        let sameRoom = IoAssociationRule(name: "same room", valueType: "test.Temperature") { candidate in
            candidate.sourceNode.characteristics?["room"] == candidate.actorNode.characteristics?["room"]
                && candidate.context.name == IoWorld.context
        }
        // A global rule that would associate temperatures anywhere: the value-type rule wins.
        let sentinelsAndTemperatures = IoAssociationRule(name: "global") { candidate in
            ["test.Sentinel", "test.Temperature"].contains(candidate.source.valueType)
        }
        let router = IoRouter(
            communicationManager: world.routerAgent.manager,
            ioContext: IoContext(name: IoWorld.context),
            rules: [sameRoom, sentinelsAndTemperatures]
        )
        let thermometer = IoSource(name: "kitchen t", valueType: "test.Temperature")
        let switcher = IoSource(name: "switch", valueType: "test.Light")
        let kitchenDisplay = IoActor(name: "kitchen display", valueType: "test.Temperature")
        let bathDisplay = IoActor(name: "bath display", valueType: "test.Temperature")
        let lamp = IoActor(name: "lamp", valueType: "test.Light")

        var iterator = world.spy.makeAsyncIterator()
        try await world.withRouter(router) {
            try await world.sourceAgent.manager.addIoNode(
                IoNode(
                    name: IoWorld.context,
                    ioSources: [thermometer, switcher],
                    ioActors: [],
                    characteristics: ["room": "kitchen"]
                )
            )
            try await world.actorAgent.manager.addIoNode(
                IoNode(
                    name: IoWorld.context,
                    ioSources: [],
                    ioActors: [kitchenDisplay],
                    characteristics: ["room": "kitchen"]
                )
            )
            try await world.actorAgent.manager.addIoNode(
                IoNode(
                    name: IoWorld.context,
                    ioSources: [],
                    ioActors: [bathDisplay, lamp],
                    characteristics: ["room": "bath"]
                )
            )
            let first = await associates(until: try await world.addSentinel(), from: &iterator)
            #expect(pairs(first) == [Pair(source: thermometer.objectId, actor: kitchenDisplay.objectId)])

            router.defineRules([.anyCompatiblePair])
            let second = await associates(until: try await world.addSentinel("test.Sentinel2"), from: &iterator)
            #expect(
                pairs(second) == [
                    Pair(source: thermometer.objectId, actor: bathDisplay.objectId),
                    Pair(source: switcher.objectId, actor: lamp.objectId),
                ]
            )
            #expect(pairs(second, associating: false).isEmpty)
        }
    }

    @Test("a deadvertised node is disassociated; an external route is used as the associating route")
    func deadvertiseDisassociates() async throws {
        let world = try await IoWorld()
        let router = world.basicRouter()
        let source = IoSource(name: "s", valueType: "test.Temperature", externalRoute: "plant/line1/temperature")
        let actor = IoActor(name: "a", valueType: "test.Temperature")
        let sourceNode = IoNode(name: IoWorld.context, ioSources: [source], ioActors: [])
        let pair = Pair(source: source.objectId, actor: actor.objectId)

        var iterator = world.spy.makeAsyncIterator()
        try await world.withRouter(router) {
            try await world.actorAgent.manager.addIoNode(
                IoNode(name: IoWorld.context, ioSources: [], ioActors: [actor])
            )
            try await world.sourceAgent.manager.addIoNode(sourceNode)
            let associated = try #require(await iterator.next())
            #expect(Pair(source: associated.data.ioSourceId, actor: associated.data.ioActorId) == pair)
            #expect(associated.data.associatingRoute == "plant/line1/temperature")

            try await world.sourceAgent.manager.removeIoNode(objectId: sourceNode.objectId)
            let disassociated = try #require(await iterator.next())
            #expect(Pair(source: disassociated.data.ioSourceId, actor: disassociated.data.ioActorId) == pair)
            #expect(disassociated.data.isDisassociation)
            #expect(router.associations.isEmpty)
            #expect(router.managedIoNodes.count == 1)
            #expect(!router.managedIoNodes.contains { $0.objectId == sourceNode.objectId })
        }
    }

    @Test("an actor receives the values of its associated sources and none after disassociation")
    func actorFollowsAssociations() async throws {
        let world = try await IoWorld()
        let router = world.basicRouter()
        let first = IoSource(name: "first", valueType: "test.Temperature")
        let second = IoSource(name: "second", valueType: "test.Temperature", externalRoute: "plant/second")
        let actor = IoActor(name: "display", valueType: "test.Temperature")
        let firstNode = IoNode(name: IoWorld.context, ioSources: [first], ioActors: [])
        let secondNode = IoNode(name: IoWorld.context, ioSources: [second], ioActors: [])

        let observer = try IoActorObserver(
            communicationManager: world.actorAgent.manager,
            actor: actor,
            ioContextName: IoWorld.context
        )
        let firstPublisher = try IoSourcePublisher(
            communicationManager: world.sourceAgent.manager,
            source: first,
            ioContextName: IoWorld.context
        )
        let secondPublisher = try IoSourcePublisher(
            communicationManager: world.sourceAgent.manager,
            source: second,
            ioContextName: IoWorld.context
        )
        let runs = [
            Task { try await observer.run() },
            Task { try await firstPublisher.run() },
            Task { try await secondPublisher.run() },
        ]
        await observer.subscribed()
        await firstPublisher.subscribed()
        await secondPublisher.subscribed()
        let actorStates = observer.associationStates()
        let firstStates = firstPublisher.associationStates()

        try await world.withRouter(router) {
            // Not associated yet: the value is discarded.
            await firstPublisher.publish(.int(0))
            try await world.actorAgent.manager.addIoNode(
                IoNode(name: IoWorld.context, ioSources: [], ioActors: [actor])
            )
            try await world.sourceAgent.manager.addIoNode(firstNode)
            await awaitAssociation(actorStates)
            await awaitAssociation(firstStates)
            #expect(firstPublisher.route == "coaty/3/-/IOV/\(first.objectId)")

            var values = observer.values.makeAsyncIterator()
            await firstPublisher.publish(.int(1))
            await firstPublisher.publish(.int(2))
            let one = try #require(await values.next())
            #expect(try one.value() == .int(1))
            #expect(one.ioSourceIds == [first.objectId])
            #expect(try await values.next()?.value() == .int(2))

            try await world.sourceAgent.manager.addIoNode(secondNode)
            await waitUntil { observer.associatedSourceIds.count == 2 && secondPublisher.isAssociated }
            await secondPublisher.publish(.string("external"))
            let external = try #require(await values.next())
            #expect(external.route == "plant/second")
            #expect(external.ioSourceIds == [second.objectId])
            #expect(try external.value() == .string("external"))

            try await world.sourceAgent.manager.removeIoNode(objectId: firstNode.objectId)
            await awaitAssociation(firstStates, false)
            await waitUntil { observer.associatedSourceIds == [second.objectId] }
            #expect(observer.isAssociated)
            // The first source's route is no longer followed, and its publisher discards.
            try await world.sourceAgent.manager.publishIoValue(.int(99), ioSourceId: first.objectId)
            await firstPublisher.publish(.int(98))
            await secondPublisher.publish(.int(3))
            #expect(try await values.next()?.value() == .int(3))

            try await world.sourceAgent.manager.removeIoNode(objectId: secondNode.objectId)
            await awaitAssociation(actorStates, false)
            #expect(observer.associatedSourceIds.isEmpty)
        }
        observer.stop()
        firstPublisher.stop()
        secondPublisher.stop()
        for run in runs { try await run.value }
        var ended = observer.values.makeAsyncIterator()
        #expect(await ended.next() == nil)
    }

    /// Associates a source with the given strategy and rate (on a manual clock) with an actor.
    private func withStrategy(
        _ strategy: IoSourceUpdateStrategy,
        rate: Double,
        _ body: (IoWorld, IoSourcePublisher<ManualClock>, ManualClock, inout IoActorValues.Iterator, String)
            async throws ->
            Void
    ) async throws {
        let world = try await IoWorld()
        let router = world.basicRouter()
        let source = IoSource(name: "s", valueType: "test.Temperature", updateRate: rate, updateStrategy: strategy)
        let actor = IoActor(name: "a", valueType: "test.Temperature")
        let clock = ManualClock()
        let publisher = try IoSourcePublisher(
            communicationManager: world.sourceAgent.manager,
            source: source,
            ioContextName: IoWorld.context,
            clock: clock
        )
        let observer = try IoActorObserver(
            communicationManager: world.actorAgent.manager,
            actor: actor,
            ioContextName: IoWorld.context
        )
        let runs = [Task { try await observer.run() }, Task { try await publisher.run() }]
        await observer.subscribed()
        await publisher.subscribed()
        try await world.withRouter(router) {
            try await world.actorAgent.manager.addIoNode(
                IoNode(name: IoWorld.context, ioSources: [], ioActors: [actor])
            )
            try await world.sourceAgent.manager.addIoNode(
                IoNode(name: IoWorld.context, ioSources: [source], ioActors: [])
            )
            await awaitAssociation(observer.associationStates())
            await awaitAssociation(publisher.associationStates())
            #expect(publisher.updateRate == rate)
            var values = observer.values.makeAsyncIterator()
            try await body(world, publisher, clock, &values, "coaty/3/-/IOV/\(source.objectId)")
        }
        observer.stop()
        publisher.stop()
        for run in runs { try await run.value }
    }

    @Test("sample publishes the latest value of each update interval, nothing for an empty one")
    func sampleStrategy() async throws {
        try await withStrategy(.sample, rate: 100) { world, publisher, clock, values, route throws in
            for value in 1...10 { await publisher.publish(.int(Int64(value))) }
            clock.advance(by: .milliseconds(100))
            #expect(try await values.next()?.value() == .int(10))

            clock.advance(by: .milliseconds(100))  // an interval without values publishes nothing
            for value in 11...15 { await publisher.publish(.int(Int64(value))) }
            clock.advance(by: .milliseconds(99))  // not yet a tick
            await publisher.publish(.int(16))
            clock.advance(by: .milliseconds(1))
            #expect(try await values.next()?.value() == .int(16))
            let published = world.sourceAgent.publishedTopics(world.broker).filter { $0 == route }
            #expect(published.count == 2)
        }
    }

    @Test("the default strategy with an update rate samples")
    func defaultStrategySamples() async throws {
        try await withStrategy(.default, rate: 50) { world, publisher, clock, values, route throws in
            for value in 1...5 { await publisher.publish(.int(Int64(value))) }
            clock.advance(by: .milliseconds(50))
            #expect(try await values.next()?.value() == .int(5))
            #expect(world.sourceAgent.publishedTopics(world.broker).filter { $0 == route }.count == 1)
        }
    }

    @Test("throttle publishes the last value of a burst once the update interval passed without a newer one")
    func throttleStrategy() async throws {
        try await withStrategy(.throttle, rate: 100) { world, publisher, clock, values, route throws in
            for value in 1...10 { await publisher.publish(.int(Int64(value))) }
            clock.advance(by: .milliseconds(100))
            #expect(try await values.next()?.value() == .int(10))

            // Values 60 ms apart never leave a quiet interval: none is published (sample would
            // publish 21 at the tick in between), until the last one has been quiet for 100 ms.
            await publisher.publish(.int(20))
            clock.advance(by: .milliseconds(60))
            await publisher.publish(.int(21))
            clock.advance(by: .milliseconds(60))
            await publisher.publish(.int(22))
            clock.advance(by: .milliseconds(60))
            clock.advance(by: .milliseconds(40))
            #expect(try await values.next()?.value() == .int(22))
            #expect(world.sourceAgent.publishedTopics(world.broker).filter { $0 == route }.count == 2)
        }
    }

    @Test("none publishes every value at once despite an update rate")
    func noneStrategy() async throws {
        try await withStrategy(.none, rate: 1000) { world, publisher, _, values, route throws in
            for value in 1...3 { await publisher.publish(.int(Int64(value))) }
            for value in 1...3 { #expect(try await values.next()?.value() == .int(Int64(value))) }
            #expect(world.sourceAgent.publishedTopics(world.broker).filter { $0 == route }.count == 3)
        }
    }
}
