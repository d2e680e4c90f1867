import CoatyCore
import CoatyStoreTestSupport
import CoatySync
import Synchronization
import Testing

@testable import CoatyRecording
@testable import CoatyStore

@Suite("In-memory property indexes")
struct InMemoryIndexTests {
    /// Random rows of mixed member types in two collections, every top-level key of both indexed
    /// (some before the rows are written, some after), writes, removals and a rolled-back
    /// transaction: every random query selects exactly what the unindexed database selects, and
    /// the indexes narrow most queries of one collection.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func indexedQueriesAnswerAsTheScan(seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        let plain = InMemoryDatabase().makeConnection()
        let database = InMemoryDatabase()
        let indexed = database.makeConnection()
        for key in RandomValues.keys.prefix(5) { try await indexed.createIndex(collection: "c1", property: key) }
        var rows: [StoreRow] = []
        for i in 0..<400 {
            let collection = ["c1", "c2"].randomElement(using: &random)!
            rows.append(StoreRow(index: StoreIndex(collection, "k\(i % 300)"), object: RandomValues.object(&random)))
        }
        let removals = (0..<30).map { _ in StoreIndex("c1", "k\(Int.random(in: 0..<300, using: &random))") }
        try await StoreContract.load(rows, removing: removals, into: plain)
        try await StoreContract.load(rows, removing: removals, into: indexed)
        for key in RandomValues.keys.dropFirst(5) {
            try await indexed.createIndex(collection: "c1", property: key)
            try await indexed.createIndex(collection: "c2", property: key)
        }
        // A transaction that throws leaves rows and indexes as they were.
        struct Abort: Error {}
        let changes = (0..<50).map { i in StoreRow(index: StoreIndex("c1", "k\(i)"), object: ["n": .int(Int64(i))]) }
        await #expect(throws: Abort.self) {
            try await indexed.write { tx in
                for row in changes { tx.write(row, mode: .upsert) }
                tx.removeRow(at: StoreIndex("c1", "k77"))
                throw Abort()
            }
        }
        var narrowed = 0
        for _ in 0..<400 {
            let query = StoreQuery(
                scope: [StoreScope.collection("c1"), .collection("c2"), .collections(["c1"])].randomElement(
                    using: &random
                )!,
                filter: RandomValues.filter(&random)
            )
            if database.state.peek({ $0.indexedCandidates(query) }) ?? nil != nil { narrowed += 1 }
            let expected = try await plain.read { tx in tx.rows(matching: query) }
            let actual = try await indexed.read { tx in tx.rows(matching: query) }
            #expect(actual == expected, "\(query)")
            #expect(actual.map(\.index) == expected.map(\.index), "\(query)")
        }
        #expect(narrowed > 25, "the indexes narrowed \(narrowed) of 400 queries")
        #expect(database.hasIndex(collection: "c2", property: "tags"))
        #expect(!database.hasIndex(collection: "c2", property: "name"))
        await #expect(throws: InMemoryIndexError.self) {
            try await indexed.createIndex(collection: "c1", property: "a.b")
        }
    }

    /// A range over 10 000 numbers examines only the rows in range (plus the values that are not
    /// numbers, which JavaScript converts), not the collection.
    @Test func aRangeExaminesOnlyItsCandidates() async throws {
        let database = InMemoryDatabase()
        let connection = database.makeConnection()
        try await connection.createIndex(collection: "c", property: "value")
        try await connection.write { tx in
            for i in 0..<10_000 {
                tx.write(StoreRow(index: StoreIndex("c", "k\(i)"), object: ["value": .int(Int64(i))]), mode: .upsert)
            }
            tx.write(StoreRow(index: StoreIndex("c", "text"), object: ["value": "600"]), mode: .upsert)
            tx.write(StoreRow(index: StoreIndex("c", "none"), object: ["other": 1]), mode: .upsert)
        }
        let query = StoreQuery(scope: .collection("c"), filter: .where("value", .between(500, 510)))
        let candidates = try #require(database.state.peek { $0.indexedCandidates(query) } ?? nil)
        #expect(candidates.count == 12, "11 numbers in range and the string")
        let rows = try await connection.read { tx in tx.rows(matching: query) }
        #expect(rows.map(\.index.key) == (500...510).map { "k\($0)" })
        let strings = StoreQuery(scope: .collection("c"), filter: .where("value", .in(["600", "7"])))
        #expect(try await connection.read { tx in tx.rows(matching: strings) }.map(\.index.key) == ["text"])
    }
}
