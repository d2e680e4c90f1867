import CoatyCore
import CommunicationTestSupport
import CoatyTesting
import Logging
import ServiceLifecycle
import Testing

/// A custom object type with a parent, tracked by the lifecycle tests (not registered, so it
/// arrives as a ``BaseObject`` with its own fields in `custom`).
struct Lamp: CoatyObject, Hashable {
    static let objectType = "com.example.Lamp"
    var objectId = CoatyUUID()
    var name: String
    var isOn: Bool
    var parentObjectId: CoatyUUID?
    var externalId: String?
}

private func part(_ name: String, parent: CoatyUUID?) -> BaseObject {
    BaseObject(objectType: "com.example.Part", name: name, parentObjectId: parent)
}

@Suite("ObjectLifecycleController on the in-process broker", .timeLimit(.minutes(1)))
struct ObjectLifecycleTests {
    @Test("a slow consumer of change sets loses none: its buffer holds the reads instead of dropping")
    func aSlowConsumerLosesNoChangeSet() async throws {
        let broker = InProcessBroker()
        let identity = Identity(name: "slow observer")
        let manager = try CommunicationManager(
            transport: broker.makeTransport(clientId: CoatyConnection.clientId(identityId: identity.objectId)),
            identity: identity,
            options: .init(observerBufferLimit: 2)
        )
        let owner = try TestAgent(broker, name: "owner")
        try await manager.start()
        try await owner.manager.start()
        let ownerLifecycle = ObjectLifecycleController(communicationManager: owner.manager)
        let sequence = try ObjectLifecycleController(communicationManager: manager)
            .observeObjectLifecycle(objectType: Lamp.objectType)
        let lamps = (0..<20).map { Lamp(name: "lamp \($0)", isOn: true, parentObjectId: owner.id) }
        let consumer = Task { () -> Set<CoatyUUID> in
            var seen: Set<CoatyUUID> = []
            for await info in sequence {
                seen.formUnion(info.addedIds)
                if seen.count == lamps.count { break }
                try? await Task.sleep(for: .milliseconds(30))  // slower than the owner advertises
            }
            return seen
        }
        for lamp in lamps { _ = try await ownerLifecycle.advertiseDiscoverableObject(lamp) }
        let seen = await consumer.value
        #expect(seen == Set(lamps.map(\.objectId)))
        #expect(manager.statistics.observerOverflow == 0)
        // The lifecycle's standing Resolve route is no open request: the full buffer held the reads.
        #expect(manager.statistics.readHolds > 0)
        await manager.stop()
        await owner.manager.stop()
    }

    @Test("added, changed and removed with a filter; unchanged re-advertisements are not reported")
    func addedChangedRemoved() async throws {
        let broker = InProcessBroker()
        let observer = try TestAgent(broker, name: "observer")
        let owner = try TestAgent(broker, name: "owner")
        try await observer.manager.start()
        try await owner.manager.start()
        let ownerLifecycle = ObjectLifecycleController(communicationManager: owner.manager)

        // Already there before the observation starts: found by the initial Discover.
        var desk = Lamp(name: "desk", isOn: true, parentObjectId: owner.id)
        let deskHandle = try await ownerLifecycle.advertiseDiscoverableObject(desk)

        let lifecycle = ObjectLifecycleController(communicationManager: observer.manager)
        let sequence = try lifecycle.observeObjectLifecycle(
            objectType: Lamp.objectType,
            filter: .where("isOn", .equals(true))
        )
        var changes = sequence.makeAsyncIterator()
        let discovered = try #require(await changes.next())
        #expect(discovered.addedIds == [desk.objectId])
        #expect(discovered.changed.isEmpty && discovered.removed.isEmpty)
        #expect(discovered.objects.map(\.objectId) == [desk.objectId])
        #expect(discovered.added.first?.json["isOn"] == true)

        // Filtered out: no change set. Unchanged: no change set. The next one is the change.
        var hall = Lamp(name: "hall", isOn: false, parentObjectId: owner.id)
        let hallHandle = try await ownerLifecycle.advertiseDiscoverableObject(hall)
        try await deskHandle.update(desk)
        desk.name = "desk lamp"
        try await deskHandle.update(desk)
        let changed = try #require(await changes.next())
        #expect(changed.changedIds == [desk.objectId])
        #expect(changed.changed.first?.name == "desk lamp")
        #expect(changed.added.isEmpty && changed.removed.isEmpty)

        // Passing the filter now: added.
        hall.isOn = true
        try await hallHandle.update(hall)
        let added = try #require(await changes.next())
        #expect(added.addedIds == [hall.objectId])
        #expect(Set(added.objects.map(\.objectId)) == [desk.objectId, hall.objectId])

        // No longer passing the filter: removed.
        desk.isOn = false
        try await deskHandle.update(desk)
        let filteredOut = try #require(await changes.next())
        #expect(filteredOut.removedIds == [desk.objectId])
        #expect(filteredOut.objects.map(\.objectId) == [hall.objectId])

        // Deadvertised: removed.
        try await hallHandle.cancel()
        let deadvertised = try #require(await changes.next())
        #expect(deadvertised.removedIds == [hall.objectId])
        #expect(deadvertised.objects.isEmpty)

        await observer.manager.stop()
        await owner.manager.stop()
    }

    @Test("children are removed with their parent, and objects whose parent is an agent leave with the agent")
    func childrenRemovedWithParent() async throws {
        let broker = InProcessBroker()
        let observer = try TestAgent(broker, name: "observer")
        let owner = try TestAgent(broker, name: "owner")
        try await observer.manager.start()
        try await owner.manager.start()

        let machine = part("machine", parent: nil)
        let ownerLifecycle = ObjectLifecycleController(communicationManager: owner.manager)
        let machineHandle = try await ownerLifecycle.advertiseDiscoverableObject(machine)
        let lifecycle = ObjectLifecycleController(communicationManager: observer.manager)
        var changes = try lifecycle.observeObjectLifecycle(coreType: .coatyObject).makeAsyncIterator()
        #expect(try #require(await changes.next()).addedIds == [machine.objectId])

        let motor = part("motor", parent: machine.objectId)
        let bearing = part("bearing", parent: motor.objectId)
        let unrelated = part("unrelated", parent: owner.id)
        for object in [motor, bearing, unrelated] {
            try await owner.manager.publishAdvertise(object)
            #expect(try #require(await changes.next()).addedIds == [object.objectId])
        }

        try await machineHandle.cancel()
        let removed = try #require(await changes.next())
        #expect(removed.removedIds == [machine.objectId, motor.objectId, bearing.objectId])
        #expect(removed.objects.map(\.objectId) == [unrelated.objectId])

        // The owner stops: its identity is deadvertised, and with it its child.
        await owner.manager.stop()
        let gone = try #require(await changes.next())
        #expect(gone.removedIds == [unrelated.objectId])
        #expect(gone.objects.isEmpty)
        await observer.manager.stop()
    }

    @Test("a discoverable object answers Discovers by id, external id and type until it is cancelled")
    func discoverableObjectAnswers() async throws {
        let broker = InProcessBroker()
        let requester = try TestAgent(broker, name: "requester")
        let owner = try TestAgent(broker, name: "owner")
        try await requester.manager.start()
        try await owner.manager.start()
        let lamp = Lamp(name: "porch", isOn: true, parentObjectId: owner.id, externalId: "porch-1")
        let handle = try await ObjectLifecycleController(communicationManager: owner.manager)
            .advertiseDiscoverableObject(lamp, privateData: ["zone": "outside"])
        let deadvertise = try requester.manager.observeDeadvertise()
        await deadvertise.subscribed()
        var deadvertised = deadvertise.makeAsyncIterator()

        let byId = try #require(try await requester.manager.publishDiscover(.objectId(lamp.objectId)).first())
        #expect(byId.data.object?.objectId == lamp.objectId)
        #expect(byId.data.privateData == ["zone": "outside"])
        #expect(byId.sourceId == owner.id)
        let byExternalId = try #require(
            try await requester.manager.publishDiscover(.externalId("porch-1", objectTypes: [Lamp.objectType])).first()
        )
        #expect(byExternalId.data.object?.json["name"] == "porch")
        let byType = try #require(try await requester.manager.publishDiscover(.objectTypes([Lamp.objectType])).first())
        #expect(byType.data.object?.objectId == lamp.objectId)

        try await handle.cancel()
        #expect(handle.isCancelled)
        #expect(try #require(await deadvertised.next()).objectIds == [lamp.objectId])
        let afterCancel = try await requester.manager.publishDiscover(.objectId(lamp.objectId))
            .first(timeout: .milliseconds(300))
        #expect(afterCancel == nil)
        await requester.manager.stop()
        await owner.manager.stop()
    }

    @Test("an update must keep the objectId")
    func updateKeepsObjectId() async throws {
        let broker = InProcessBroker()
        let owner = try TestAgent(broker)
        try await owner.manager.start()
        let handle = try await ObjectLifecycleController(communicationManager: owner.manager)
            .advertiseDiscoverableObject(Lamp(name: "a", isOn: true))
        await #expect(throws: CommunicationError.self) {
            try await handle.update(Lamp(name: "b", isOn: true))
        }
        await owner.manager.stop()
    }

    @Test("in a container, discoverable objects are deadvertised when the agent stops")
    func deadvertisedOnStop() async throws {
        let broker = InProcessBroker()
        let observer = try TestAgent(broker, name: "observer")
        let owner = try TestAgent(broker, name: "owner")
        try await observer.manager.start()
        let deadvertise = try observer.manager.observeDeadvertise()
        await deadvertise.subscribed()
        var deadvertised = deadvertise.makeAsyncIterator()

        let lifecycle = ObjectLifecycleController(communicationManager: owner.manager)
        let container = try AgentContainer(communicationManager: owner.manager, controllers: [lifecycle])
        let group = ServiceGroup(services: [container], gracefulShutdownSignals: [], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        await awaitState(owner.manager, .online)
        let lamp = Lamp(name: "porch", isOn: true, parentObjectId: owner.id)
        _ = try await lifecycle.advertiseDiscoverableObject(lamp)
        #expect(lifecycle.discoverableObjects.count == 1)

        await group.triggerGracefulShutdown()
        try await running.value
        #expect(try #require(await deadvertised.next()).objectIds == [lamp.objectId])
        #expect(try #require(await deadvertised.next()).objectIds == [owner.id])
        #expect(lifecycle.discoverableObjects.isEmpty)
        await observer.manager.stop()
    }
}
