import CoatyKit
import CoatyStoreTestSupport
import CoatyTesting
import Foundation
import Synchronization
import Testing

/// The take-over of a killed group member's session, repeated: three `coaty record --group`
/// members on one PostgreSQL, a QoS 1 flood of Advertise events, one member SIGKILLed at a third
/// of it while Discovers and Queries are in flight; every request must get exactly one answer.
/// Long, so not in the normal run: `COATY_TAKEOVER_RUNS=50 Scripts/test --filter GroupTakeOverSoak`
/// (it is compiled in every build).
@Suite("Recorder group take-over, repeated", .serialized)
struct GroupTakeOverSoakTests {
    /// How long each request collects answers at most. A request the broker gave the killed member waits in
    /// its session behind that member's share of the flood, and the taker reaches it only after
    /// storing what came before (and a claim waits behind the flood in the claimer's own session):
    /// about 7 s after the kill here with PostgreSQL writing a batch per statement, 20–30 s before.
    static let answerWindow: Duration = .seconds(120)
    /// Once every request has an answer, how long the requests still listen for a second one
    /// (a second taker drains the same session as fast as the first; a second answer would come
    /// within seconds of the first).
    static let quietWindow: Duration = .seconds(20)

    static var runs: Int { Int(ProcessInfo.processInfo.environment["COATY_TAKEOVER_RUNS"] ?? "") ?? 0 }

    @Test(
        "A member killed during requests: each Discover and Query answered exactly once, nothing lost",
        .enabled(if: runs > 0, "set COATY_TAKEOVER_RUNS to run it"),
        .timeLimit(.minutes(120))
    )
    func killDuringRequests() async throws {
        let server = try await PostgresTestServer.start()
        defer { server.stop() }
        var tally: [String] = []
        for run in 1...Self.runs {
            let line = try await Self.oneRun(server: server, run: run)
            tally.append(line)
            // At once (standard output is buffered to the end of the run): a long soak shows its progress.
            FileHandle.standardError.write(Data("take-over run \(run): \(line)\n".utf8))
        }
        print("take-over runs:\n" + tally.joined(separator: "\n"))
    }

    /// The answers counted per request slot (10 Discovers, then 5 Queries).
    final class Answers: Sendable {
        let counts = Mutex<[Int]>(Array(repeating: 0, count: 15))
        /// The latest answer's delay after its request, per slot.
        let delays = Mutex<[Duration]>(Array(repeating: .zero, count: 15))

        /// When the latest answer of any request arrived.
        let latest = Mutex<ContinuousClock.Instant?>(nil)
        /// The requests with at least one answer.
        let answered = Mutex<Set<Int>>([])

        func answer(slot: Int, since start: ContinuousClock.Instant) {
            let now = ContinuousClock.now
            counts.withLock { $0[slot] += 1 }
            delays.withLock { $0[slot] = now - start }
            latest.withLock { $0 = now }
            answered.withLock { _ = $0.insert(slot) }
        }

        /// Whether every request has an answer and none came for `quiet`.
        func settled(quiet: Duration) -> Bool {
            guard answered.withLock({ $0.count }) == 15, let latest = latest.withLock({ $0 }) else { return false }
            return ContinuousClock.now - latest >= quiet
        }
    }

    /// Collects the answers to one request, noting when the last one arrived.
    static func collect<Event: Sendable>(
        _ responses: ResponseSequence<Event>,
        slot: Int,
        into answers: Answers
    ) -> Task<Void, Never> {
        let start = ContinuousClock.now
        return Task {
            do {
                for try await _ in responses.responses(timeout: Self.answerWindow) {
                    answers.answer(slot: slot, since: start)
                }
            } catch {}
        }
    }

    /// One run on a new database; returns its summary line.
    static func oneRun(server: PostgresTestServer, run: Int) async throws -> String {
        let url = try server.makeDatabase()
        return try await withBroker { broker in
            // The requester asks at QoS 1: a request the broker gives to the killed member's session is then
            // queued there for its taker (at QoS 0 mosquitto drops what it routes to a disconnected session).
            try await withAgent(on: broker, name: "soak requester \(run)", qos: .atLeastOnce) { agent in
                var members: [CoatyProcess] = []
                for index in 0..<3 {
                    members.append(
                        try await startReadyCoaty(
                            ["record", "--group", "soak", "--member", "m\(index)", "--db", url, "--broker", broker.url,
                             "--name", "soak member \(index)", "--log-level", "info"],
                            name: "soak member \(index)",
                            observer: agent
                        )
                    )
                }
                let publisher = MQTTClient(
                    configuration: try MQTTConfiguration(url: broker.url, clientId: "soak-publisher-\(run)")
                )
                try await publisher.connect()
                let source = CoatyUUID()
                let count = 30_000
                var ids: [CoatyUUID] = []
                // Requests sent around the kill: their answers are counted per correlation.
                let answers = Answers()
                var requests: [Task<Void, Never>] = []
                for i in 0..<count {
                    let id = CoatyUUID()
                    ids.append(id)
                    let payload =
                        #"{"object":{"objectType":"coaty.Task","coreType":"Task","objectId":"\#(id)","name":"T\#(i)","creatorId":"\#(source)","creationTimestamp":1,"status":0}}"#
                    try await publisher.publish("coaty/3/-/ADV:Task/\(source)", payload: Array(payload.utf8), qos: .atLeastOnce)
                    if i == count / 3 {
                        // In flight when the member dies: 10 Discovers of stored objects, 5 Queries.
                        for (slot, target) in ids.prefix(10).enumerated() {
                            requests.append(Self.collect(agent.publishDiscover(.objectId(target)), slot: slot, into: answers))
                        }
                        for slot in 10..<15 {
                            requests.append(
                                Self.collect(agent.publishQuery(QueryEventData(objectTypes: ["coaty.Task"])), slot: slot, into: answers)
                            )
                        }
                        members[1].signal(SIGKILL)
                    }
                }
                await publisher.disconnect()
                // Listening ends after the window, or once every request has an answer and no more came for a while.
                let listening = ContinuousClock.now
                while ContinuousClock.now - listening < Self.answerWindow, !answers.settled(quiet: Self.quietWindow) {
                    try await Task.sleep(for: .milliseconds(500))
                }
                for request in requests { request.cancel() }
                for request in requests { await request.value }
                var stored = 0
                for _ in 0..<600 {
                    stored = Int(try server.query("SELECT count(DISTINCT \"objectId\") FROM coaty_rows WHERE \"coreType\" = 'Task'", in: url).first ?? "") ?? 0
                    if stored >= count { break }
                    try await Task.sleep(for: .milliseconds(200))
                }
                var takers = 0
                var logs: [String] = []
                // Both at once: a named member that stops is a clean death, and one stopped after the other would
                // take the other's session over (a second, legitimate take-over this run does not count).
                let survivors = members.enumerated().filter { $0.offset != 1 }
                for (_, member) in survivors { member.signal(SIGTERM) }
                for (index, member) in survivors {
                    let result = await member.finish(timeout: 60)
                    #expect(result.status == 0, "run \(run), member \(index): \(result.stderr)")
                    if result.stderr.contains("took over the broker session") { takers += 1 }
                    logs.append("member \(index):\n\(result.stderr)")
                }
                _ = await members[1].finish(timeout: 5)
                let perRequest = answers.counts.withLock { $0 }
                #expect(
                    perRequest.allSatisfy { $0 == 1 },
                    "run \(run): answers per request \(perRequest); \(logs.joined(separator: "\n"))"
                )
                #expect(takers == 1, "run \(run): \(takers) members took the session over")
                #expect(stored == count, "run \(run): stored \(stored) of \(count)")
                let delays = answers.delays.withLock { $0 }.map { Int(($0 / .milliseconds(100)).rounded()) }
                return "answers per request \(perRequest), answer delays (0.1 s) \(delays), takers \(takers), stored \(stored)/\(count)"
            }
        }
    }
}
