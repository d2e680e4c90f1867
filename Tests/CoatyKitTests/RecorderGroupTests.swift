import CoatyKit
import CoatySQLite
import CoatyStore
import CoatyRecording
import CoatyTesting
import Foundation
import Testing

/// Recorder groups: recorders whose managers share a `sharedSubscriptionGroup` split the work
/// through MQTT shared subscriptions on a real mosquitto.
@Suite(
    "Recorder groups over a real mosquitto",
    .serialized,
    .timeLimit(.minutes(3)),
    .enabled(
        if: MosquittoBroker.findExecutable() != nil || ProcessInfo.processInfo.environment["CI"] == "true",
        "mosquitto is not installed (apt-get install mosquitto)"
    )
)
struct RecorderGroupTests {
    @Test("Three members on one database: each Advertise is stored once, each Discover answered once")
    func threeMembersShareTheWork() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-recorder-group-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try SQLiteDatabase(path: directory + "/group.sqlite")

        let options = CommunicationManager.Options(qos: .atLeastOnce, sharedSubscriptionGroup: "recorders")
        var members: [(manager: CommunicationManager, recorder: CoatyRecorder, run: Task<Void, any Error>)] = []
        for index in 0..<3 {
            let manager = try CommunicationManager.mqtt(
                url: broker.url,
                identity: Identity(name: "member \(index)"),
                options: options
            )
            let recorder = CoatyRecorder(manager: manager, connection: database.makeConnection())
            let run = Task { try await recorder.run() }
            try await manager.start()
            await recorder.ready()
            members.append((manager, recorder, run))
        }
        #expect(members.allSatisfy { $0.manager.subscribedFilters.keys.contains { $0.contains("ADV") } })

        let publisher = try CommunicationManager.mqtt(
            url: broker.url,
            identity: Identity(name: "publisher"),
            options: CommunicationManager.Options(qos: .atLeastOnce)
        )
        try await publisher.start()
        let count = 3000
        var ids: [CoatyUUID] = []
        for i in 0..<count {
            let task = CoatyTask(
                name: "Task \(i)",
                status: .pending,
                creatorId: publisher.identity.objectId,
                creationTimestamp: 1
            )
            ids.append(task.objectId)
            try await publisher.publishAdvertise(task)
        }
        let reader = database.makeConnection()
        let deadline = ContinuousClock.now + .seconds(60)
        var rows = 0
        while ContinuousClock.now < deadline {
            rows = try await reader.read { tx in try await CoatyTask.read(tx).count() }
            if rows >= count { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(rows == count)
        // Every Advertise went to exactly one member (the members' and the publisher's identities too).
        let taskStored = members.map { $0.recorder.statistics.stored }
        #expect(taskStored.reduce(0, +) >= count && taskStored.reduce(0, +) <= count + 4, "\(taskStored)")
        #expect(taskStored.allSatisfy { $0 > count / 10 }, "each member takes a share: \(taskStored)")

        // Discover by objectId: one Resolve per request, from one member.
        let requests = 30
        for id in ids.prefix(requests) {
            let resolves = try await publisher.publishDiscover(.objectId(id))
                .responses(timeout: .milliseconds(500)).collect()
            #expect(resolves.count == 1)
            #expect(resolves.first?.data.object?.objectId == id)
        }
        let answered = members.map { $0.recorder.statistics.answeredDiscovers }
        #expect(answered.reduce(0, +) == requests, "\(answered)")
        #expect(answered.filter { $0 > 0 }.count >= 2, "the requests are shared: \(answered)")

        await publisher.stop()
        for member in members {
            member.recorder.stop()
            try await member.run.value
            await member.manager.stop()
        }
    }
}
