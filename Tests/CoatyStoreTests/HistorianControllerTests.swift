import CoatyCore
import CoatyStore
import CoatyRecording
import CoatyTesting
import Testing

/// Polls until `condition` holds, for up to `seconds`.
private func eventually(_ seconds: Double = 10, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while try await !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
}

/// A historian over the in-memory store on an agent, and a client agent, on an in-process broker.
private func withHistorian(
    _ options: HistorianController.Options,
    _ body: (HistorianController, CommunicationManager) async throws -> Void
) async throws {
    let broker = InProcessBroker()
    let agent = try CommunicationManager(
        transport: broker.makeTransport(clientId: "historian"),
        identity: .init(name: "historian")
    )
    let client = try CommunicationManager(
        transport: broker.makeTransport(clientId: "client"),
        identity: .init(name: "client")
    )
    try await agent.start()
    try await client.start()
    let historian = HistorianController(
        communicationManager: agent,
        connection: InMemoryDatabase().makeConnection(),
        options: options
    )
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await historian.run() }
        await historian.started()
        try await body(historian, client)
        group.cancelAll()
    }
    await client.stop()
    await agent.stop()
}

private func light(_ name: String) -> BaseObject {
    BaseObject(objectType: "com.example.Light", name: name)
}

@Suite("HistorianController on the in-process broker with the in-memory store", .timeLimit(.minutes(1)))
struct HistorianControllerUnitTests {
    @Test("generateSnapshot stores a copy; snapshots(of:) returns them oldest first, by range too")
    func generateAndRead() async throws {
        try await withHistorian(.init()) { historian, _ in
            let desk = light("desk")
            let other = light("other")
            let first = try await historian.generateSnapshot(of: desk, tags: ["on"])
            let second = try await historian.generateSnapshot(of: desk)
            try await historian.generateSnapshot(of: other)
            let third = try await historian.generateSnapshot(of: desk, tags: ["off", "late"])

            #expect(first.parentObjectId == desk.objectId)
            #expect(first.object.objectId == desk.objectId)
            #expect(first.object.name == "desk")
            #expect(first.name == "com.example.Light desk")
            #expect(first.creatorId == historian.communicationManager.identity.objectId)
            #expect(first.tags == ["on"])
            #expect(first.objectType == "coaty.Snapshot")
            #expect(first.creationTimestamp < second.creationTimestamp, "timestamps strictly increase")
            #expect(second.creationTimestamp < third.creationTimestamp)

            let all = try await historian.snapshots(of: desk.objectId)
            #expect(all.map(\.objectId) == [first.objectId, second.objectId, third.objectId])
            #expect(all.last?.tags == ["off", "late"])
            let later = try await historian.snapshots(
                of: desk.objectId,
                takenIn: second.creationTimestamp...third.creationTimestamp
            )
            #expect(later.map(\.objectId) == [second.objectId, third.objectId])
            let explicit = try await historian.generateSnapshot(of: desk, timestamp: 1000)
            #expect(try await historian.snapshots(of: desk.objectId).first?.objectId == explicit.objectId)
        }
    }

    @Test("Advertise of a chosen object type and Channel on a chosen channel are snapshotted; others not")
    func snapshotsOnEvents() async throws {
        let options = HistorianController.Options(
            objectTypes: ["com.example.Light"],
            channelIds: ["lights"],
            tags: ["seen"]
        )
        try await withHistorian(options) { historian, client in
            let ignored = BaseObject(objectType: "com.example.Other", name: "ignored")
            let desk = light("desk")
            let lamp = light("lamp")
            try await client.publishAdvertise(ignored)
            try await client.publishAdvertise(desk)
            try await client.publishChannel("lights", object: lamp)
            try await client.publishChannel("elsewhere", object: ignored)
            try await eventually { try await historian.snapshots(of: desk.objectId).count == 1 }
            try await eventually { try await historian.snapshots(of: lamp.objectId).count == 1 }
            let snapshot = try #require(try await historian.snapshots(of: desk.objectId).first)
            #expect(snapshot.tags == ["seen"])
            #expect(snapshot.object.name == "desk")
            #expect(try await historian.snapshots(of: ignored.objectId).isEmpty)
        }
    }

    @Test("A Query of snapshots is answered with Coaty's filter semantics; a Query of other types is not")
    func answersQueries() async throws {
        try await withHistorian(.init()) { historian, client in
            let desk = light("desk")
            var taken: [Snapshot] = []
            for _ in 0..<4 { taken.append(try await historian.generateSnapshot(of: desk)) }
            try await historian.generateSnapshot(of: light("other"))

            let filter = ObjectFilter.where("object.objectId", .equals(.string(desk.objectId.uuidString)))
                .orderBy("creationTimestamp", .descending)
                .take(3)
            let retrieve = try #require(
                try await client.publishQuery(QueryEventData(coreTypes: [.snapshot], objectFilter: filter))
                    .first(timeout: .seconds(10))
            )
            #expect(retrieve.data.objects.map(\.objectId) == taken.reversed().prefix(3).map(\.objectId))

            let byObjectType = try #require(
                try await client.publishQuery(
                    QueryEventData(
                        objectTypes: ["coaty.Snapshot"],
                        objectFilter: .where("creationTimestamp", .lessThanOrEqual(.double(taken[1].creationTimestamp)))
                    )
                ).first(timeout: .seconds(10))
            )
            #expect(Set(byObjectType.data.objects.map(\.objectId)) == Set(taken.prefix(2).map(\.objectId)))

            let other = try await client.publishQuery(QueryEventData(coreTypes: [.task])).first(
                timeout: .milliseconds(300)
            )
            #expect(other == nil)
        }
    }

    @Test("Advertised snapshots are stored by a historian that persists observed snapshots")
    func advertisesAndPersistsObserved() async throws {
        let broker = InProcessBroker()
        let one = try CommunicationManager(
            transport: broker.makeTransport(clientId: "one"),
            identity: .init(name: "one")
        )
        let two = try CommunicationManager(
            transport: broker.makeTransport(clientId: "two"),
            identity: .init(name: "two")
        )
        try await one.start()
        try await two.start()
        let taker = HistorianController(
            communicationManager: one,
            connection: InMemoryDatabase().makeConnection(),
            options: .init(
                shouldAdvertiseSnapshots: true,
                shouldPersistLocalSnapshots: false,
                shouldReplyToQueries: false
            )
        )
        let keeper = HistorianController(
            communicationManager: two,
            connection: InMemoryDatabase().makeConnection(),
            options: .init(shouldPersistObservedSnapshots: true)
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await keeper.run() }
            await keeper.started()
            let desk = light("desk")
            let snapshot = try await taker.generateSnapshot(of: desk)
            try await eventually { try await keeper.snapshots(of: desk.objectId).count == 1 }
            #expect(try await keeper.snapshots(of: desk.objectId).map(\.objectId) == [snapshot.objectId])
            #expect(try await taker.snapshots(of: desk.objectId).isEmpty, "not persisted locally")
            await #expect(throws: AgentRuntimeError.controllerAlreadyRan(keeper.name)) { try await keeper.run() }
            group.cancelAll()
        }
        await two.stop()
        await one.stop()
    }
}
