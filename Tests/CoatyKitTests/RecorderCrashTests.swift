import CoatyKit
import CoatySQLite
import CoatyStore
import CoatyRecording
import CoatySync
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

private let mosquittoAvailable = MosquittoBroker.findExecutable() != nil
private let childDatabase = ProcessInfo.processInfo.environment["COATY_RECORDER_CHILD_DB"]
private let childBroker = ProcessInfo.processInfo.environment["COATY_RECORDER_CHILD_BROKER"]

/// The child process's half: a recorder that reports each committed object on stdout until it is
/// killed. It runs only inside the child the crash test starts (this same test executable).
@Suite("Recorder crash child", .enabled(if: childDatabase != nil && childBroker != nil))
struct RecorderCrashChild {
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data("COATY-CHILD \(line)\n".utf8))
    }

    @Test("Record until killed")
    func recorderChildProcess() async throws {
        let agent = try CommunicationManager.mqtt(url: try #require(childBroker), identity: Identity(name: "child"))
        let database = try SQLiteDatabase(path: try #require(childDatabase))
        let recorder = CoatyRecorder(
            manager: agent,
            connection: database.makeConnection(),
            configuration: .init(coreTypes: [.task], maxBatchSize: 64)
        )
        let events = recorder.events()
        let run = Task { try await recorder.run() }
        try await agent.start()
        await recorder.ready()
        Self.say("READY")
        var committed = 0
        for await event in events {
            if case .stored = event {
                committed += 1
                Self.say("COMMITTED \(committed)")
            }
        }
        try await run.value
    }
}

@Suite(
    "Recorder killed during ingest",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: mosquittoAvailable && childDatabase == nil, "mosquitto is not installed")
)
struct RecorderCrashTests {
    /// What the parent has read from the child's stdout.
    struct ChildOutput {
        var ready = false
        var committed = 0
        var ended = false
    }

    /// The output shared between the reading thread and the test.
    final class ChildOutputBox: Sendable {
        let state = CoatyMutex(ChildOutput())

        func withLock<T: Sendable>(_ body: (inout ChildOutput) -> T) -> T { state.withLock { body(&$0) } }
    }

    @Test("A recorder killed with SIGKILL during ingest leaves a database that opens with every committed object")
    func killedDuringIngest() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-recorder-crash-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/recorder.sqlite"

        // The child is this test executable, running only the child suite.
        let child = Process()
        child.executableURL = URL(
            fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        )
        child.arguments = ["--testing-library", "swift-testing", "--filter", "recorderChildProcess"]
        var environment = ProcessInfo.processInfo.environment
        environment["COATY_RECORDER_CHILD_DB"] = path
        environment["COATY_RECORDER_CHILD_BROKER"] = broker.url
        child.environment = environment
        let pipe = Pipe()
        child.standardOutput = pipe
        child.standardError = FileHandle.nullDevice
        try child.run()

        let output = ChildOutputBox()
        let reader = pipe.fileHandleForReading
        let readerThread = Thread {
            var pending = ""
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                pending += String(decoding: data, as: UTF8.self)
                while let newline = pending.firstIndex(of: "\n") {
                    let line = String(pending[..<newline])
                    pending = String(pending[pending.index(after: newline)...])
                    guard line.hasPrefix("COATY-CHILD ") else { continue }
                    let message = line.dropFirst("COATY-CHILD ".count)
                    output.withLock { output in
                        if message == "READY" { output.ready = true }
                        if message.hasPrefix("COMMITTED "), let n = Int(message.dropFirst("COMMITTED ".count)) {
                            output.committed = max(output.committed, n)
                        }
                    }
                }
            }
            output.withLock { $0.ended = true }
        }
        readerThread.start()

        while !output.withLock({ $0.ready || $0.ended }) { try await Task.sleep(for: .milliseconds(20)) }
        try #require(output.withLock { $0.ready }, "the child recorder did not start")

        // A foreign client advertises Tasks while the child records them.
        let foreign = MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientId: "crash-feeder"))
        try await foreign.connect()
        let creator = CoatyUUID()
        let feeder = Task {
            for i in 0..<50_000 {
                if Task.isCancelled { break }
                let payload = #"""
                    {"object":{"name":"Task \#(i)","objectType":"coaty.Task","coreType":"Task",\#
                    "objectId":"\#(CoatyUUID())","status":0,"creatorId":"\#(creator)","creationTimestamp":\#(i)}}
                    """#
                try await foreign.publish("coaty/3/-/ADV:Task/\(creator)", payload: Array(payload.utf8))
                if i % 50 == 0 { try await Task.sleep(for: .milliseconds(1)) }
            }
        }
        while output.withLock({ $0.committed < 500 && !$0.ended }) { try await Task.sleep(for: .milliseconds(5)) }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        feeder.cancel()
        _ = try? await feeder.value
        await foreign.disconnect()
        while !output.withLock({ $0.ended }) { try await Task.sleep(for: .milliseconds(10)) }

        #expect(child.terminationReason == .uncaughtSignal)
        let committed = output.withLock { $0.committed }
        #expect(committed >= 500)

        // The file opens, and every object the child reported as committed is there, whole.
        let connection = try SQLiteDatabase(path: path).makeConnection()
        let tasks = try await connection.read { tx in try await CoatyTask.read(tx).withMetadata.all() }
        #expect(tasks.count >= committed)
        #expect(tasks.allSatisfy { $0.item.creatorId == creator && $0.metadata?.eventType == "Advertise" })
    }
}
