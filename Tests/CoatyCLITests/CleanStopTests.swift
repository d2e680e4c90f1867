import CoatyKit
import CoatyStoreTestSupport
import CoatyTesting
import Foundation
import Synchronization
import Testing

/// Durable recorders and recorder groups stopped with SIGTERM, under a QoS 1 flood and idle:
/// each commits and acknowledges what it received, sends its own Deadvertise and a clean
/// DISCONNECT (the broker publishes no last will), and exits; what it had not acknowledged stays
/// with the broker, so a restart stores everything. The stop times are printed, not asserted
/// (`Benchmarks/run stop` reports them); what is asserted is what makes a stop slow or unclean.
@Suite("Clean stops of durable recorders", .serialized, .timeLimit(.minutes(10)))
struct CleanStopTests {
    /// What the broker logs when a client's connection ends without DISCONNECT (the will is then published).
    /// ("disconnected: <reason>": an error, e.g. a reset met while writing, before a DISCONNECT was read.)
    static let uncleanEnds = ["closed its connection", "Socket error on client", "exceeded timeout", "disconnected: "]

    /// Broker log lines that tell of a connection ended without DISCONNECT.
    static func uncleanLines(_ broker: MosquittoBroker) -> [Substring] {
        let log = (try? String(contentsOfFile: broker.logFile, encoding: .utf8)) ?? ""
        // "<unknown>": a connection that never sent CONNECT (a port probe), not a client.
        return log.split(separator: "\n").filter { line in
            !line.contains("<unknown>") && uncleanEnds.contains { line.contains($0) }
        }
    }

    /// Collects the ids an observation's events name (Deadvertised objects, advertised identities),
    /// from now on.
    final class SeenIds: Sendable {
        final class Seen: Sendable {
            let ids = Mutex<Set<CoatyUUID>>([])
        }
        let seen = Seen()
        let task: Task<Void, Never>

        init<Event: Sendable>(
            _ observation: EventObservation<Event>,
            _ ids: @escaping @Sendable (Event) -> [CoatyUUID]
        ) async {
            await observation.subscribed()
            let seen = self.seen
            task = Task {
                for await event in observation { seen.ids.withLock { $0.formUnion(ids(event)) } }
            }
        }

        deinit { task.cancel() }

        /// Whether an event naming `id` arrived within `seconds`.
        func arrived(_ id: CoatyUUID, within seconds: Int = 10) async -> Bool {
            let deadline = ContinuousClock.now + .seconds(seconds)
            while ContinuousClock.now < deadline {
                if seen.ids.withLock({ $0.contains(id) }) { return true }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return false
        }
    }

    /// Starts `coaty` with `arguments` (its identity named `name`) and returns it with its identity id.
    static func start(
        _ arguments: [String],
        name: String,
        observer: CommunicationManager
    ) async throws -> (process: CoatyProcess, id: CoatyUUID) {
        let identities = try observer.observeAdvertise(coreType: .identity)
        await identities.subscribed()
        let process = try await startReadyCoaty(arguments + ["--name", name], name: name, observer: observer)
        guard let identity = try await first(identities, timeout: 30, where: { $0.object.name == name }) else {
            throw CLITestError("no identity advertised by \(name)")
        }
        return (process, identity.object.objectId)
    }

    /// Sends SIGTERM to every process at once; returns each one's result and the seconds it took to exit.
    static func terminate(_ processes: [CoatyProcess]) async -> [(result: CLIResult, seconds: Double)] {
        let start = ContinuousClock.now
        for process in processes { process.signal(SIGTERM) }
        var results: [(CLIResult, Double)] = []
        for process in processes {
            let result = await process.finish(timeout: 60)
            let elapsed = ContinuousClock.now - start
            results.append((result, Double(elapsed.components.attoseconds) / 1e18 + Double(elapsed.components.seconds)))
        }
        return results
    }

    /// The object type of the flood (Advertise events of core type CoatyObject, at QoS 1).
    static let objectType = "com.example.Stop"

    /// Publishes `count` Advertise events of ``objectType`` at QoS 1 as fast as the broker takes them.
    static func flood(broker: MosquittoBroker, count: Int) async throws -> [CoatyUUID] {
        try await LosslessTests.publishBurst(
            broker: broker,
            count: count,
            objectType: objectType,
            level: "ADV:CoatyObject",
            qos: .atLeastOnce
        )
    }

    /// Stops `agents` together with SIGTERM and checks each stop: exit 0, nothing said of a
    /// timed-out flush or of unsent publications, its own Deadvertise seen, and a clean DISCONNECT
    /// (the broker logged no connection ended without one, so it published no will).
    static func expectCleanStops(
        _ agents: [(process: CoatyProcess, id: CoatyUUID)],
        _ what: String,
        deadvertised: SeenIds,
        broker: MosquittoBroker
    ) async {
        let stopped = await terminate(agents.map(\.process))
        print("\(what) stopped in \(stopped.map(\.seconds)) s")
        if stopped.contains(where: { $0.seconds > 1 }) || !uncleanLines(broker).isEmpty {
            print("\(what): identities \(agents.map(\.id)); broker log:\n\((try? String(contentsOfFile: broker.logFile, encoding: .utf8)) ?? "")")
            print(stopped.map(\.result.stderr).joined(separator: "\n----\n"))
        }
        for ((result, _), agent) in zip(stopped, agents) {
            #expect(result.status == 0, "\(what): stderr: \(result.stderr)")
            #expect(!result.stderr.contains("timed out"), "\(what): \(result.stderr)")
            #expect(!result.stderr.contains("never sent"), "\(what): \(result.stderr)")
            #expect(!result.stderr.contains("did not stop in time"), "\(what): \(result.stderr)")
            #expect(await deadvertised.arrived(agent.id), "\(what): its Deadvertise arrived")
        }
        #expect(uncleanLines(broker).isEmpty, "\(what): a clean DISCONNECT, no will: \(uncleanLines(broker))")
    }

    @Test("coaty record --durable SIGTERMed under a QoS 1 flood and idle: its own Deadvertise, a clean DISCONNECT, nothing lost on restart")
    func durableRecorder() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/durable.sqlite"
            let arguments = ["record", "--durable", "--db", path]
            try await withBroker { broker in
                try await withAgent(on: broker, name: "stop watcher") { agent in
                    let deadvertised = await SeenIds(try agent.observeDeadvertise(), \.objectIds)
                    let recorder = try await Self.start(
                        arguments + ["--broker", broker.url],
                        name: "durable recorder",
                        observer: agent
                    )
                    let count = 20_000
                    let flooding = Task { try await Self.flood(broker: broker, count: count) }
                    while (try? LosslessTests.rows(path, objectType: Self.objectType).count) ?? 0 < 1_000 {
                        try await Task.sleep(for: .milliseconds(5))
                    }
                    await Self.expectCleanStops(
                        [recorder],
                        "the durable recorder under a QoS 1 flood",
                        deadvertised: deadvertised,
                        broker: broker
                    )
                    _ = try await flooding.value

                    // Restarted: the rest of the flood (kept by the broker) is stored, each object once. With a
                    // connect timeout shorter than storing that backlog takes: the subscriptions are acknowledged
                    // behind it, and the start waits for them as long as the connection is up.
                    let again = try await Self.start(
                        arguments + ["--broker", broker.url, "--connect-timeout", "1"],
                        name: "durable recorder",
                        observer: agent
                    )
                    var rows = try LosslessTests.rows(path, objectType: Self.objectType)
                    let deadline = ContinuousClock.now + .seconds(120)
                    while rows.distinct < count, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(50))
                        rows = try LosslessTests.rows(path, objectType: Self.objectType)
                    }
                    #expect(rows.distinct == count, "nothing lost")
                    #expect(rows.count == count, "each stored once")

                    await Self.expectCleanStops([again], "the durable recorder idle", deadvertised: deadvertised, broker: broker)
                }
            }
        }
    }

    @Test("Three group members SIGTERMed together under a QoS 1 flood and idle: each its own Deadvertise, clean DISCONNECTs, nothing lost on restart")
    func groupMembers() async throws {
        let server = try await PostgresTestServer.start()
        defer { server.stop() }
        let url = try server.makeDatabase()
        func storedCount() throws -> Int {
            let sql = "SELECT count(DISTINCT \"objectId\") FROM coaty_rows WHERE \"objectType\" = '\(Self.objectType)'"
            return Int(try server.query(sql, in: url).first ?? "") ?? 0
        }
        try await withBroker { broker in
            try await withAgent(on: broker, name: "group stop watcher") { agent in
                let deadvertised = await SeenIds(try agent.observeDeadvertise(), \.objectIds)
                func arguments(_ index: Int) -> [String] {
                    [
                        "record", "--group", "stoppers", "--member", "m\(index)", "--db", url, "--broker", broker.url,
                        "--log-level", "info",
                    ]
                }
                var members: [(process: CoatyProcess, id: CoatyUUID)] = []
                for index in 0..<3 {
                    members.append(try await Self.start(arguments(index), name: "member \(index)", observer: agent))
                }
                let count = 10_000
                let flooding = Task { try await Self.flood(broker: broker, count: count) }
                while try storedCount() < 500 { try await Task.sleep(for: .milliseconds(5)) }
                await Self.expectCleanStops(
                    members,
                    "three group members under a QoS 1 flood",
                    deadvertised: deadvertised,
                    broker: broker
                )
                _ = try await flooding.value

                // Restarted under the same names: each resumes its session (its identity is the same) and first
                // stores what the broker kept for it. Its subscriptions are acknowledged behind that backlog, and
                // its connection counts as accepted only then: under load later than the default 5 s connect
                // timeout and a start's 30 s readiness wait (as for the durable restart in LosslessTests).
                // Everything is stored once.
                let identities = await SeenIds(try agent.observeAdvertise(coreType: .identity)) { [$0.object.objectId] }
                var again: [(process: CoatyProcess, id: CoatyUUID)] = []
                for (index, member) in members.enumerated() {
                    again.append(
                        (try CoatyProcess(arguments(index) + ["--name", "member \(index)", "--connect-timeout", "120"]), member.id)
                    )
                }
                let deadline = ContinuousClock.now + .seconds(180)
                while try storedCount() < count, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(100))
                }
                #expect(try storedCount() == count, "nothing lost")
                for member in again {
                    #expect(await identities.arrived(member.id, within: 120), "restarted and ready")
                }

                await Self.expectCleanStops(again, "three group members idle", deadvertised: deadvertised, broker: broker)
            }
        }
    }
}
