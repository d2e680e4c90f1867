import CoatyKit
import CoatyStoreTestSupport
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `coaty record` answering a Query of 10 000 conditions, sent by `coaty query --filter -`, on
/// SQLite and on PostgreSQL; a one-condition Query sent right after it is answered too.
@Suite(
    "coaty record answering a Query of many conditions",
    .serialized,
    .enabled(if: BrokerAvailability.shouldRun)
)
struct LargeQueryCommandTests {
    static let objectType = "com.example.Reading"

    /// 10 000 and-ed conditions in wire form: `value < 15 + k`, `name != "other k"` alternating,
    /// and last `name != "Object 3"` (past what a backend pushes into SQL): objects 0…14 but 3.
    static let largeFilter: String = {
        var conditions: [String] = []
        for k in 0..<9_999 {
            conditions.append(k % 2 == 0 ? #"["value",[0,\#(15 + k)]]"# : #"["name",[8,"other \#(k)"]]"#)
        }
        conditions.append(#"["name",[8,"Object 3"]]"#)
        return #"{"conditions":{"and":[\#(conditions.joined(separator: ","))]},"orderByProperties":[["value","Asc"]]}"#
    }()

    /// Advertises 20 objects (`value` i, `name` "Object i") to a running recorder and waits until
    /// it answers with all of them.
    func advertiseObjects(broker: MosquittoBroker) async throws {
        let objects = (0..<20).map { i in
            #"{"objectType":"\#(Self.objectType)","coreType":"CoatyObject","name":"Object \#(i)","value":\#(i)}"#
        }
        let sent = try await runCoaty(["advertise", "--broker", broker.url, "[\(objects.joined(separator: ","))]"])
        #expect(sent.status == 0, "stderr: \(sent.stderr)")
        let all = try await RecordCommandTests().queryUntil(
            ["--object-types", Self.objectType],
            broker: broker,
            count: 20
        )
        #expect(all.count == 20)
    }

    /// Sends the large Query and, once it is on its way, a one-condition Query; checks both answers.
    func expectBothAnswered(broker: MosquittoBroker) async throws {
        let query = ["query", "--object-types", Self.objectType, "--count", "1", "--broker", broker.url]
        let large = try CoatyProcess(query + ["--filter", "-", "--timeout", "120"], stdin: Self.largeFilter)
        let normal = try await runCoaty(query + ["--filter", #"{"conditions":["value",[0,2]]}"#, "--timeout", "60"])
        #expect(normal.status == 0, "stderr: \(normal.stderr)")
        let normalNames = try normal.jsonLines().first?.at("data.objects")?.arrayValue?.compactMap {
            $0["name"]?.stringValue
        }
        #expect(Set(normalNames ?? []) == ["Object 0", "Object 1"])

        let result = await large.finish(timeout: 150)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let lines = try result.jsonLines()
        #expect(lines.count == 1, "exactly one Retrieve: \(result.stdout.prefix(500))")
        let names = lines.first?.at("data.objects")?.arrayValue?.compactMap { $0["name"]?.stringValue }
        #expect(names == (0..<15).filter { $0 != 3 }.map { "Object \($0)" })
    }

    /// Starts `coaty record --db db`, gives it the objects, checks both answers, and stops it: it
    /// exits 0 and logged no failure.
    func expectRecorderAnswers(db: String) async throws {
        try await withBroker { broker in
            try await withAgent(on: broker, name: "observer") { agent in
                let recorder = try await startReadyCoaty(
                    ["record", "--db", db, "--broker", broker.url],
                    name: "recorder",
                    observer: agent
                )
                try await advertiseObjects(broker: broker)
                try await expectBothAnswered(broker: broker)
                recorder.signal(SIGTERM)
                let result = await recorder.finish(timeout: 30)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                #expect(!result.stderr.contains("Could not"), "stderr: \(result.stderr.prefix(2000))")
            }
        }
    }

    @Test("record on SQLite answers a Query of 10 000 conditions with exactly its objects, and a Query sent beside it")
    func sqlite() async throws {
        try await withTemporaryDirectory { directory in
            try await expectRecorderAnswers(db: directory + "/objects.sqlite")
        }
    }

    @Test(
        "record on PostgreSQL answers a Query of 10 000 conditions with exactly its objects, and a Query sent beside it",
        .enabled(if: PostgresTestServer.shouldRun, Comment(rawValue: PostgresTestServer.skipReason))
    )
    func postgres() async throws {
        let server = try await PostgresTestServer.start()
        defer { server.stop() }
        try await expectRecorderAnswers(db: try server.makeDatabase())
    }
}
