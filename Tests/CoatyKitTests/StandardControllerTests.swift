import AgentProcessTestSupport
import CoatyKit
import CoatyTesting
import Foundation
import Synchronization
import Testing

/// Polls until `condition` holds, for up to `seconds`.
private func eventually(_ seconds: Double, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
}

/// Runs `body` with two started agents named `first` and `second` on a fresh mosquitto.
private func withTwoAgents(
    _ first: String,
    _ second: String,
    _ body: (CommunicationManager, CommunicationManager) async throws -> Void
) async throws {
    try await withBroker { broker in
        try await withAgent(on: broker, name: first) { one in
            try await withAgent(on: broker, name: second) { two in try await body(one, two) }
        }
    }
}

/// Counts events seen by a child task.
private final class EventCounter: Sendable {
    private let count = Atomic(0)

    func increment() { count.add(1, ordering: .relaxed) }

    var value: Int { count.load(ordering: .relaxed) }
}

@Suite(
    "Connection state and object cache controllers over a real mosquitto",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: BrokerAvailability.shouldRun)
)
struct StandardControllerTests {
    @Test("Agents online before the controller, joining and stopping are each reported once")
    func connectionState() async throws {
        try await withBroker { broker in
            let early = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "early"))
            let late = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "late"))
            try await early.start()
            try await withAgent(on: broker, name: "watcher") { watcher in
                try await track(watcher: watcher, early: early, late: late)
            }
        }
    }

    private func track(watcher: CommunicationManager, early: CommunicationManager, late: CommunicationManager)
        async throws
    {
        let controller = ConnectionStateController(communicationManager: watcher)
        var changes = controller.changes().makeAsyncIterator()
        let earlyId = early.identity.objectId
        let lateId = late.identity.objectId

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await controller.run() }
            await controller.started()

            // Online before the controller: found by its Discover.
            let found = try #require(await changes.next())
            #expect(found.joined.map(\.objectId) == [earlyId])
            #expect(found.joined.map(\.name) == ["early"])
            #expect(found.left.isEmpty)
            #expect(found.online.map(\.objectId) == [earlyId])
            #expect(controller.onlineAgents.map(\.objectId) == [earlyId])

            // Joining: its Advertise.
            try await late.start()
            let joined = try #require(await changes.next())
            #expect(joined.joined.map(\.objectId) == [lateId])
            #expect(joined.left.isEmpty)
            #expect(joined.online.map(\.objectId) == [earlyId, lateId])
            #expect(controller.onlineAgents.map(\.objectId) == [earlyId, lateId])
            #expect(controller.isOnline(lateId))
            #expect(!controller.isOnline(watcher.identity.objectId), "the own agent is not tracked")

            // Stopping: its Deadvertise.
            await late.stop()
            let left = try #require(await changes.next())
            #expect(left.joined.isEmpty)
            #expect(left.left.map(\.objectId) == [lateId])
            #expect(left.online.map(\.objectId) == [earlyId])
            #expect(!controller.isOnline(lateId))

            await early.stop()
            let last = try #require(await changes.next())
            #expect(last.left.map(\.objectId) == [earlyId])
            #expect(last.online.isEmpty)
            #expect(controller.onlineAgents.isEmpty)

            await #expect(throws: AgentRuntimeError.controllerAlreadyRan(controller.name)) {
                try await controller.run()
            }
            group.cancelAll()
        }
        // Nothing else was reported; stopping the controller ends the changes.
        let end = await changes.next()
        #expect(end == nil)
        #expect(controller.onlineAgents.isEmpty)
    }

    @Test("Stopping the controller reports the agents still online as left")
    func connectionStateStop() async throws {
        try await withTwoAgents("other", "watcher") { other, watcher in
            let controller = ConnectionStateController(communicationManager: watcher)
            var changes = controller.changes().makeAsyncIterator()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await controller.run() }
                let found = try #require(await changes.next())
                #expect(found.joined.map(\.objectId) == [other.identity.objectId])
                group.cancelAll()
            }
            let stopped = try #require(await changes.next())
            #expect(stopped.left.map(\.objectId) == [other.identity.objectId])
            #expect(stopped.online.isEmpty)
            let end = await changes.next()
            #expect(end == nil)
        }
    }

    @Test("The object cache discovers once, serves from the cache, updates on Advertise, forgets on Deadvertise")
    func objectCache() async throws {
        try await withTwoAgents("responder", "requester") { responder, requester in
            try await cacheObjects(responder: responder, requester: requester)
        }
    }

    private func cacheObjects(responder: CommunicationManager, requester: CommunicationManager) async throws {
        let lifecycle = ObjectLifecycleController(communicationManager: responder)
        let discovers = try responder.observeDiscover()
        await discovers.subscribed()
        let discoverCount = EventCounter()
        let cache = ObjectCacheController(
            communicationManager: requester,
            capacity: 2,
            // Generous: while the whole suite keeps both cores busy a Discover's round trip (four
            // hops through the cooperative pool) took over 5 s once. Only the one resolve that
            // nobody answers waits it out.
            resolveTimeout: .seconds(15)
        )
        var lamp = BaseObject(name: "lamp v1")

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in discovers { discoverCount.increment() }
            }
            group.addTask { try await cache.run() }
            await cache.started()
            let handle = try await lifecycle.advertiseDiscoverableObject(lamp)

            // The first resolve discovers; the second is served from the cache.
            let first = try await cache.resolve(BaseObject.self, objectId: lamp.objectId)
            #expect(first?.name == "lamp v1")
            try await eventually(5) { discoverCount.value == 1 }
            #expect(discoverCount.value == 1)
            let second = try await cache.resolve(objectId: lamp.objectId)
            #expect(second?.name == "lamp v1")
            try await Task.sleep(for: .milliseconds(300))
            #expect(discoverCount.value == 1, "the second resolve publishes no Discover")
            #expect(cache.count == 1)

            // An Advertise of the cached object updates it.
            lamp.name = "lamp v2"
            try await handle.update(lamp)
            try await eventually(5) { cache.cachedObject(objectId: lamp.objectId)?.name == "lamp v2" }
            #expect(cache.cachedObject(objectId: lamp.objectId)?.name == "lamp v2")
            #expect(try await cache.resolve(BaseObject.self, objectId: lamp.objectId) == lamp)
            #expect(discoverCount.value == 1)

            // A Deadvertise removes it; resolving it again discovers, and nobody answers now.
            try await handle.cancel()
            try await eventually(5) { cache.cachedObject(objectId: lamp.objectId) == nil }
            #expect(cache.cachedObject(objectId: lamp.objectId) == nil)
            #expect(cache.count == 0)
            #expect(try await cache.resolve(objectId: lamp.objectId) == nil)
            try await eventually(5) { discoverCount.value == 2 }
            #expect(discoverCount.value == 2)

            // Full: the object used least recently makes room.
            let a = BaseObject(name: "a")
            let b = BaseObject(name: "b")
            let c = BaseObject(name: "c")
            var handles: [DiscoverableObject] = []
            for object in [a, b, c] { handles.append(try await lifecycle.advertiseDiscoverableObject(object)) }
            try await Task.sleep(for: .seconds(1))  // the responder's registrations settle (a loaded machine is slow)
            #expect(try await cache.resolve(objectId: a.objectId)?.name == "a")
            #expect(try await cache.resolve(objectId: b.objectId)?.name == "b")
            #expect(cache.cachedObject(objectId: a.objectId) != nil)  // a is now used more recently than b
            #expect(try await cache.resolve(objectId: c.objectId)?.name == "c")
            #expect(cache.count == 2)
            #expect(cache.cachedObject(objectId: b.objectId) == nil)
            #expect(cache.cachedObject(objectId: a.objectId)?.name == "a")
            #expect(cache.cachedObject(objectId: c.objectId)?.name == "c")

            // Concurrent resolves of an id not cached share one Discover.
            let d = BaseObject(name: "d")
            handles.append(try await lifecycle.advertiseDiscoverableObject(d))
            try await Task.sleep(for: .seconds(1))  // the responder's registration settles (a loaded machine is slow)
            let before = discoverCount.value
            async let one = cache.resolve(objectId: d.objectId)
            async let two = cache.resolve(objectId: d.objectId)
            async let three = cache.resolve(objectId: d.objectId)
            let names = try await [one, two, three].map { $0?.name }
            #expect(names == ["d", "d", "d"])
            try await Task.sleep(for: .milliseconds(300))
            #expect(discoverCount.value == before + 1, "one Discover for three concurrent resolves")

            // Objects of other core types are not accepted.
            let tasksOnly = ObjectCacheController(
                communicationManager: requester,
                coreTypes: [.task],
                resolveTimeout: .milliseconds(500)
            )
            #expect(try await tasksOnly.resolve(objectId: a.objectId) == nil)
            #expect(tasksOnly.count == 0)

            await #expect(throws: AgentRuntimeError.controllerAlreadyRan(cache.name)) { try await cache.run() }
            for handle in handles { try await handle.cancel() }
            group.cancelAll()
        }
        #expect(cache.count == 0, "a stopped cache is emptied: it can no longer be kept up to date")
    }
}
