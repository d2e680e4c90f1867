import CoatyKit
import Foundation
import GRDB
import Testing

/// Bursts at full speed into `coaty observe` behind a stalled reader and into `coaty record`:
/// nothing valid is lost on the defaults (back-pressure), and each prints its summary line.
@Suite("Lossless under load", .serialized, .timeLimit(.minutes(5)))
struct LosslessTests {
    /// A raw MQTT client that publishes `count` Coaty Advertise messages of `objectType` as fast
    /// as it can, on `level` (e.g. `ADV::com.example.Burst`), each a distinct object.
    static func publishBurst(broker: MosquittoBroker, count: Int, objectType: String, level: String) async throws
        -> [CoatyUUID]
    {
        let publisher = MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientId: "burst-\(CoatyUUID())"))
        try await publisher.connect()
        let source = CoatyUUID()
        var ids: [CoatyUUID] = []
        ids.reserveCapacity(count)
        let padding = String(repeating: "x", count: 150)
        for index in 0..<count {
            let id = CoatyUUID()
            ids.append(id)
            let payload = """
                {"object":{"objectId":"\(id)","objectType":"\(objectType)","coreType":"CoatyObject",\
                "name":"burst \(index)","seq":\(index),"pad":"\(padding)"}}
                """
            try await publisher.publish("coaty/3/-/\(level)/\(source)", payload: Array(payload.utf8))
        }
        await publisher.disconnect()  // writes everything queued first
        return ids
    }

    @Test("coaty observe behind a reader that stalls and then reads prints every event of a burst, buffered, with a summary")
    func observeBehindAStalledReader() async throws {
        let count = 30_000
        try await withBroker { broker in
            try await withAgent(on: broker, name: "watcher") { agent in
                let coaty = try coatyExecutable()
                // The reader takes nothing for 4 s (the pipe fills at once), then counts the lines.
                let script = """
                    "$0" observe advertise --object-type com.example.Burst --count \(count) --timeout 120 \
                    --broker \(broker.url) --name stalled-observer | (sleep 4; wc -l)
                    """
                let ready = try await startReadyProcess(
                    executable: "/bin/sh", ["-c", script, coaty], name: "stalled-observer", observer: agent
                )
                _ = try await Self.publishBurst(
                    broker: broker, count: count, objectType: "com.example.Burst", level: "ADV::com.example.Burst"
                )
                let result = await ready.process.finish(timeout: 180)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "\(count)")
                #expect(
                    result.stderr.contains("received \(count) events, dropped 0"),
                    "one summary line on stderr: \(result.stderr)"
                )
                #expect(result.stderr.contains("reading held"), "the stalled reader held the reads: \(result.stderr)")
            }
        }
    }

    @Test("coaty record stores all of a 100 000-event burst published at full speed, on defaults")
    func recordKeepsAFullSpeedBurst() async throws {
        let count = 100_000
        try await withTemporaryDirectory { directory in
            let path = directory + "/burst.sqlite"
            try await withBroker { broker in
                try await withAgent(on: broker, name: "burst watcher") { agent in
                    let recorder = try await startReadyCoaty(
                        ["record", "--db", path, "--broker", broker.url], name: "burst recorder", observer: agent
                    )
                    let ids = try await Self.publishBurst(
                        broker: broker, count: count, objectType: "com.example.Burst", level: "ADV:CoatyObject"
                    )
                    // The broker forwards in order: the recorder answers this Discover only after it
                    // received (and, as it answers from the store, committed) the whole burst.
                    let last = try #require(ids.last)
                    let discover = try await runCoaty(
                        ["discover", "--object-id", last.uuidString, "--count", "1", "--timeout", "240", "--broker", broker.url],
                        timeout: 260
                    )
                    #expect(discover.status == 0, "stderr: \(discover.stderr)")
                    recorder.signal(SIGTERM)
                    let result = await recorder.finish(timeout: 60)
                    #expect(result.status == 0, "stderr: \(result.stderr)")
                    #expect(result.stderr.contains("coaty record: received"), "summary line: \(result.stderr)")
                    #expect(result.stderr.contains("dropped 0"), "summary line: \(result.stderr)")

                    let database = try DatabaseQueue(path: path)
                    let (stored, distinct) = try await database.read { db in
                        (
                            try Int.fetchOne(db, sql: "SELECT count(*) FROM coaty_rows WHERE objectType = 'com.example.Burst'") ?? 0,
                            try Int.fetchOne(
                                db, sql: "SELECT count(DISTINCT objectId) FROM coaty_rows WHERE objectType = 'com.example.Burst'"
                            ) ?? 0
                        )
                    }
                    #expect(stored == count)
                    #expect(distinct == count)
                }
            }
        }
    }
}
