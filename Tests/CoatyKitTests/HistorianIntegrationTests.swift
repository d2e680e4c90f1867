import AgentProcessTestSupport
import CoatyKit
import CoatySQLite
import CoatyStore
import CoatyRecording
import Foundation
import Testing

@Suite(
    "HistorianController with a SQLite store over a real mosquitto",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: BrokerAvailability.shouldRun)
)
struct HistorianIntegrationTests {
    @Test("Advertises become snapshots, queried by object.objectId newest first; other types none")
    func advertiseQueryAndRead() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coaty-historian-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let connection = try SQLiteDatabase(path: directory.appendingPathComponent("history.sqlite").path)
            .makeConnection()

        try await withBroker { broker in
            try await withAgent(on: broker, name: "historian") { agent in
                try await withAgent(on: broker, name: "client") { client in
                    let historian = HistorianController(
                        communicationManager: agent,
                        connection: connection,
                        options: .init(objectTypes: ["com.example.Light"])
                    )
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { try await historian.run() }
                        await historian.started()
                        try await exercise(historian, client: client)
                        group.cancelAll()
                    }
                }
            }
        }
    }

    private func exercise(_ historian: HistorianController, client: CommunicationManager) async throws {
        let desk = BaseObject(objectType: "com.example.Light", name: "desk")
        let lamp = BaseObject(objectType: "com.example.Light", name: "lamp")
        let door = BaseObject(objectType: "com.example.Door", name: "door")

        try await client.publishAdvertise(door)
        for state in ["off", "on", "dimmed"] {
            var changed = desk
            changed.custom["state"] = .string(state)
            try await client.publishAdvertise(changed)
        }
        try await client.publishAdvertise(lamp)

        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let desks = try await historian.snapshots(of: desk.objectId).count
            let lamps = try await historian.snapshots(of: lamp.objectId).count
            if desks >= 3, lamps >= 1 { break }
            try await Task.sleep(for: .milliseconds(10))
        }

        // snapshots(of:): oldest first, each a copy of the object as advertised.
        let history = try await historian.snapshots(of: desk.objectId)
        #expect(history.map { $0.object.jsonValue["state"]?.stringValue } == ["off", "on", "dimmed"])
        #expect(history.allSatisfy { $0.parentObjectId == desk.objectId })
        #expect(history.map(\.creationTimestamp) == history.map(\.creationTimestamp).sorted())
        #expect(try await historian.snapshots(of: lamp.objectId).count == 1)
        #expect(try await historian.snapshots(of: door.objectId).isEmpty, "com.example.Door is not chosen")

        // A Query of core type Snapshot, by object.objectId, newest first.
        let filter = ObjectFilter.where("object.objectId", .equals(.string(desk.objectId.uuidString)))
            .orderBy("creationTimestamp", .descending)
        let retrieve = try #require(
            try await client.publishQuery(QueryEventData(coreTypes: [.snapshot], objectFilter: filter))
                .first(timeout: .seconds(10))
        )
        #expect(retrieve.data.objects.map(\.objectId) == history.reversed().map(\.objectId))
        let retrieved = retrieve.data.objects.compactMap { $0.as(Snapshot.self) }
        #expect(retrieved.map { $0.object.jsonValue["state"]?.stringValue } == ["dimmed", "on", "off"])
        #expect(retrieved.allSatisfy { $0.creatorId == historian.communicationManager.identity.objectId })
    }
}
