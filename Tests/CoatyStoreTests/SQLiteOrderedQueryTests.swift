import CoatyCore
import CoatyRecording
import CoatyStore
import CoatyStoreTestSupport
import GRDB
import Testing

@testable import CoatySQLite

/// Ordering and paging pushed into SQLite, declared JSON indexes, and the bounded statement cache.
@Suite("SQLite ordered queries and JSON indexes")
struct SQLiteOrderedQueryTests {
    /// With and without an index on `rank`, SQLite's ordered, paged rows equal the in-memory
    /// backend's (``ObjectMatcher`` only), numbers and missing values mixed, ties kept in
    /// insertion order; on `c2` (strings) and on `all` it falls back and still agrees.
    @Test(arguments: [false, true])
    func orderedPushdownAgreesWithTheMatcher(indexed: Bool) async throws {
        var random = SplitMix64(seed: indexed ? 11 : 7)
        let database = try SQLiteDatabase(path: TemporaryDirectory().file("ordered.sqlite"))
        if indexed {
            try await database.createIndex(collection: "c1", property: "rank")
            try await database.createIndex(collection: "c2", property: "rank")
        }
        let sqlite = database.makeConnection()
        let memory = InMemoryDatabase().makeConnection()
        let rows = OrderedQueryFixtures.rows(&random)
        try await StoreContract.load(rows, removing: [StoreIndex("c1", "k3")], into: memory)
        try await StoreContract.load(rows, removing: [StoreIndex("c1", "k3")], into: sqlite)
        var notPushedInC1 = 0
        var pushedWithStrings = 0
        for round in 0..<300 {
            let scope = [StoreScope.collection("c1"), .collections(["c1"]), .collection("c2"), .all][round % 4]
            let query = StoreQuery(scope: scope, filter: OrderedQueryFixtures.randomOrderedFilter(&random))
            let expected = try await memory.read { tx in tx.rows(matching: query) }
            let actual = try await sqlite.read { tx in try tx.rows(matching: query) }
            #expect(actual.map(\.index) == expected.map(\.index), "\(query)")
            let pushed = try await sqlite.read { tx in try tx.orderedRows(query, SQLPlan(query)) } != nil
            // Without an index only queries whose conditions SQL decides exactly are pushed down
            // (only the page is decoded then); the others go to the matcher.
            if round % 4 < 2 && !pushed && (indexed || SQLPlan(query).conditionsAreExact) { notPushedInC1 += 1 }
            if round % 4 < 2 && pushed && !indexed && !SQLPlan(query).conditionsAreExact { notPushedInC1 += 1 }
            if round % 4 >= 2 && pushed && (query.filter?.take ?? 0) >= 0 { pushedWithStrings += 1 }
        }
        // With the index, every query of c1 (numbers and missing values) is pushed down; without,
        // exactly the exact ones (reading their sort keys with coaty_number and decoding only the
        // page beats decoding every candidate for the matcher); none over strings is.
        #expect(notPushedInC1 == 0)
        #expect(pushedWithStrings == 0)
    }

    /// A value that SQL would order otherwise than Coaty (a string, a boolean, null, a number
    /// beyond 2^53) anywhere among the candidates sends the query back to the matcher.
    @Test(arguments: [JSONValue.string("10"), .bool(true), .null, .int(9_007_199_254_740_993), .array([1])])
    func anyOtherValueFallsBack(_ odd: JSONValue) async throws {
        for indexed in [false, true] {
            let database = try SQLiteDatabase(path: TemporaryDirectory().file("odd.sqlite"))
            if indexed { try await database.createIndex(collection: "c", property: "rank") }
            let connection = database.makeConnection()
            var rows = (0..<20).map { i in
                StoreRow(index: StoreIndex("c", "k\(i)"), object: ["rank": .int(Int64(i % 4))])
            }
            rows.append(StoreRow(index: StoreIndex("c", "odd"), object: ["rank": odd]))
            try await StoreContract.load(rows, removing: [], into: connection)
            let query = StoreQuery(scope: .collection("c"), filter: ObjectFilter().orderBy("rank").take(5))
            #expect(try await connection.read { tx in try tx.orderedRows(query, SQLPlan(query)) } == nil)
            let expected = try await InMemoryDatabase.loaded(rows).read { tx in tx.rows(matching: query) }
            #expect(try await connection.read { tx in try tx.rows(matching: query) } == expected)
        }
    }

    /// `coaty_number` and `coaty_numeric_test` (what unindexed conditions and orderings use)
    /// answer as the `json_type`/`json_extract` SQL they replace, for every kind of value: the
    /// same number or `NULL`, and the same candidates — more only where the probe is undecided
    /// (a repeated member, an escaped key), never fewer.
    @Test func probeFunctionsAnswerAsTheJSONFunctions() async throws {
        let database = try SQLiteDatabase(path: TemporaryDirectory().file("functions.sqlite"))
        let objects = [
            #"{"v":3}"#, #"{"v":-2.5}"#, #"{"v":0}"#, #"{"v":-0}"#, #"{"v":10}"#, #"{"v":1e1}"#, "{}", #"{"w":5}"#,
            #"{"v":"7"}"#, #"{"v":true}"#, #"{"v":false}"#, #"{"v":null}"#, #"{"v":[5]}"#, #"{"v":{"v":5}}"#,
            #"{"v":9007199254740993}"#, #"{"v":-1e300}"#, #"{"a":{"v":5},"b":"\"v\":5"}"#,
        ]
        let undecided = [#"{"v":1,"v":5}"#, #"{"\u0076":5}"#]
        let limit = SQLPlan.exactLimit
        // The SQL the probe replaced (json_type and json_extract of the object ?1).
        let (t, x) = ("json_type(?1, '$.v')", "json_extract(?1, '$.v')")
        let candidate = "\(t) NOT IN ('integer', 'real') OR abs(\(x)) >= \(limit) OR \(x)"
        let tests: [(SQLiteFunctions.NumericTest, old: String, a: Double, b: Double?)] = [
            (.lessThan, "\(candidate) < ?2", 3, nil),
            (.lessThanOrEqual, "\(candidate) <= ?2", 3, nil),
            (.greaterThan, "\(candidate) > ?2", 0, nil),
            (.greaterThanOrEqual, "\(candidate) >= ?2", 0, nil),
            (.between, "\(candidate) BETWEEN ?2 AND ?3", -3, 5),
            (.notBetween, "\(candidate) NOT BETWEEN ?2 AND ?3", -3, 5),
            (.equals, "\(t) IN ('integer', 'real') AND (abs(\(x)) >= \(limit) OR \(x) = ?2)", 10, nil),
        ]
        try await database.makeConnection().read { tx in
            for object in objects + undecided {
                let isUndecided = undecided.contains(object)
                let pair = try Row.fetchOne(
                    tx.db,
                    sql: "SELECT coaty_number(?1, 'v'), json_type(?1, '$.v'), json_extract(?1, '$.v')",
                    arguments: [object]
                )!
                let number: DatabaseValue = pair[0]
                let type: String? = pair[1]
                switch type {
                case nil where !isUndecided: #expect(number.isNull, "\(object)")
                case "integer"?, "real"?:
                    let value: Double = pair[2]
                    if abs(value) < limit, !isUndecided {
                        #expect(Double.fromDatabaseValue(number) == value, "\(object)")
                    } else {
                        #expect(String.fromDatabaseValue(number) == "?", "\(object)")
                    }
                default: #expect(String.fromDatabaseValue(number) == "?", "\(object)")
                }
                for (test, old, a, b) in tests {
                    let answers = try Row.fetchOne(
                        tx.db,
                        sql: "SELECT coalesce(\(old), 0), coaty_numeric_test(?1, 'v', \(test.rawValue), ?2, ?3)",
                        arguments: [object, a, b]
                    )!
                    let (before, now): (Bool, Bool) = (answers[0], answers[1])
                    if isUndecided {
                        #expect(now, "\(test) \(object)")
                    } else {
                        #expect(before == now, "\(test) \(object): json functions \(before), probe \(now)")
                    }
                }
            }
        }
    }

    /// Numeric comparisons of an indexed property that holds only numbers are exact and search the
    /// index; one string among the values makes them necessary conditions again (the matcher decides).
    @Test func numericConditionsSearchTheIndex() async throws {
        let database = try SQLiteDatabase(path: TemporaryDirectory().file("numeric.sqlite"))
        try await database.createIndex(collection: "c", property: "rank")
        let connection = database.makeConnection()
        let rows = (0..<50).map { i in
            StoreRow(
                index: StoreIndex("c", "k\(i)"),
                object: ["rank": i % 3 == 0 ? .double(Double(i) / 2) : .int(Int64(i))]
            )
        }
        try await StoreContract.load(
            rows + [StoreRow(index: StoreIndex("c", "none"), object: ["other": 1])],
            removing: [],
            into: connection
        )
        let filter = ObjectFilter.where("rank", .between(10, 20)).and("rank", .notEquals(15)).take(4)
        let query = StoreQuery(scope: .collection("c"), filter: filter)
        let (isExact, hint) = try await connection.read { tx in
            let (plan, hint) = try tx.plan(for: query)
            return (plan.isExact, hint)
        }
        #expect(isExact)
        #expect(hint.contains(JSONIndexDeclarations.Key(collection: "c", property: "rank").indexName))
        let expected = ObjectMatcher.apply(filter, to: (rows.map(\.object) + [["other": 1]]))
        #expect(try await connection.read { tx in try tx.rows(matching: query) }.map(\.object) == expected)
        #expect(expected.count == 4)
        // A string at rank: the comparison may match it (JavaScript converts "12" to 12).
        try await StoreContract.load(
            [StoreRow(index: StoreIndex("c", "s"), object: ["rank": "12"])],
            removing: [],
            into: connection
        )
        let (exactAfter, noHint) = try await connection.read { tx in
            let (plan, hint) = try tx.plan(for: query)
            return (plan.isExact, hint)
        }
        #expect(!exactAfter)
        #expect(noHint.isEmpty)
        let all = rows.map(\.object) + [["other": 1], ["rank": "12"]]
        #expect(
            try await connection.read { tx in try tx.rows(matching: query) }.map(\.object)
                == ObjectMatcher.apply(filter, to: all)
        )
    }

    /// The declared index is used: SQLite's plan for an ordered page walks it.
    @Test func declaredIndexIsUsed() async throws {
        let path = TemporaryDirectory().file("explain.sqlite")
        let database = try SQLiteDatabase(path: path)
        try await database.createIndex(collection: "com.example.Light", property: "luminance")
        try await database.createIndex(collection: "com.example.Light", property: "luminance")  // once
        let name = JSONIndexDeclarations.Key(collection: "com.example.Light", property: "luminance").indexName
        #expect(database.declaredIndexes().map(\.property) == ["luminance"])
        let query = StoreQuery(
            scope: .collection("com.example.Light"),
            filter: ObjectFilter.where("luminance", .greaterThan(0.5)).orderBy("luminance", .descending).take(10)
        )
        let explained = try await database.pool.read { db in
            let plan = SQLPlan(query)
            return try Row.fetchAll(
                db,
                sql: "EXPLAIN QUERY PLAN SELECT object FROM coaty_rows INDEXED BY \(name) WHERE \(plan.whereClause)"
                    + " ORDER BY json_extract(object, '$.luminance') DESC, id LIMIT 10",
                arguments: StatementArguments(plan.arguments)
            ).map { $0[3] as String }
        }
        // Walks the index (no sort of the whole collection: at most the ties by id).
        #expect(explained.joined().contains(name), "\(explained)")
        #expect(!explained.contains { $0.contains("USE TEMP B-TREE FOR ORDER BY") }, "\(explained)")
        // Reopening the file knows the declaration.
        #expect(try SQLiteDatabase(path: path).declaredIndexes().map(\.collection) == ["com.example.Light"])
        await #expect(throws: CoatySQLiteError.self) {
            try await database.createIndex(collection: "c", property: "a.b")
        }
    }

    /// What the range lookups proved is reused only while the database is unchanged for the
    /// reading connection: a string written by this database's writer, by another connection to
    /// the file (as another process would), or earlier in the same write transaction sends the
    /// next ordered query back to the matcher, and every answer equals the matcher's.
    @Test func numericKnowledgeFollowsEveryChange() async throws {
        let path = TemporaryDirectory().file("knowledge.sqlite")
        let database = try SQLiteDatabase(path: path)
        try await database.createIndex(collection: "c", property: "rank")
        let connection = database.makeConnection()
        var rows = (0..<40).map { i in StoreRow(index: StoreIndex("c", "k\(i)"), object: ["rank": .int(Int64(i))]) }
        try await StoreContract.load(rows, removing: [], into: connection)
        let query = StoreQuery(scope: .collection("c"), filter: ObjectFilter().orderBy("rank", .descending).take(3))
        func check(pushed: Bool, _ note: Comment) async throws {
            let expected = try await InMemoryDatabase.loaded(rows).read { tx in tx.rows(matching: query) }
            for read in 0..<2 {  // the pool's readers and the brief reader, twice each
                let viaPool = try await connection.read { tx in try tx.orderedRows(query, SQLPlan(query)) }
                let brief = try await connection.readBriefly { tx in try tx.orderedRows(query, SQLPlan(query)) }
                #expect((viaPool != nil) == pushed && (brief != nil) == pushed, "\(note) \(read)")
                let answer = try await connection.readBrieflyIfPossible { tx in try tx.rows(matching: query) }
                #expect(answer.map(\.index) == expected.map(\.index), "\(note) \(read)")
            }
        }
        try await check(pushed: true, "numbers only")
        rows.append(StoreRow(index: StoreIndex("c", "s1"), object: ["rank": "99"]))
        let string1 = rows.last!
        try await connection.write { tx in _ = try tx.write(string1, mode: .upsert) }
        try await check(pushed: false, "a string by the writer")
        rows.removeLast()
        try await connection.write { tx in _ = try tx.removeRow(at: StoreIndex("c", "s1")) }
        try await check(pushed: true, "the string removed")
        let other = try SQLiteDatabase(path: path).makeConnection()
        rows.append(StoreRow(index: StoreIndex("c", "s2"), object: ["rank": "98"]))
        let string2 = rows.last!
        try await other.write { tx in _ = try tx.write(string2, mode: .upsert) }
        try await check(pushed: false, "a string by another connection")
        rows.removeLast()
        try await other.write { tx in _ = try tx.removeRow(at: StoreIndex("c", "s2")) }
        try await check(pushed: true, "removed by the other connection")
        let inTransaction = try await connection.write { tx in
            let before = try tx.orderedRows(query, SQLPlan(query)) != nil
            _ = try tx.write(StoreRow(index: StoreIndex("c", "s3"), object: ["rank": "97"]), mode: .upsert)
            let after = try tx.orderedRows(query, SQLPlan(query)) != nil
            return (before, after)
        }
        #expect(inTransaction.0 && !inTransaction.1)
    }

    /// A probably brief read runs on the brief reader and is stopped after the budget when it is
    /// not brief (nil: the caller reads again through the pool); the connection stays usable and
    /// both ways give the same rows.
    @Test func readIfBriefStopsALongRead() async throws {
        let database = try SQLiteDatabase(path: TemporaryDirectory().file("budget.sqlite"))
        let connection = database.makeConnection()
        let pad = String(repeating: "x", count: 2000)
        try await connection.write { tx in
            for i in 0..<5_000 {
                _ = try tx.write(
                    StoreRow(index: StoreIndex("c", "k\(i)"), object: ["n": .int(Int64(i)), "pad": .string(pad)]),
                    mode: .upsert
                )
            }
        }
        // Every row's JSON (10 MB) is read and searched: far beyond a millisecond.
        let scan = StoreQuery(scope: .collection("c"), filter: .where("pad", .like("%y%")))
        let stopped = try await connection.readIfBrief { tx in try tx.rows(matching: scan).count }
        #expect(stopped == nil)
        #expect(try await connection.readBrieflyIfPossible { tx in try tx.rows(matching: scan).count } == 0)
        let lookup = StoreQuery(scope: .collection("c"), keys: ["k7"])
        let brief = try await connection.readIfBrief { tx in try tx.rows(matching: lookup).map(\.index) }
        #expect(brief == [StoreIndex("c", "k7")])
        // Backends without a brief path answer nil, and the repository reads through read(_:).
        let memory = InMemoryDatabase().makeConnection()
        #expect(try await memory.readIfBrief { _ in 1 } == nil)
        #expect(try await memory.readBrieflyIfPossible { _ in 1 } == 1)
    }

    /// Reads that outlive the budget after their last SQLite step, thousands of them in a row (a
    /// loaded machine): SQLite counts the cached COMMIT's steps across runs, so the budget's handler
    /// fires inside a COMMIT sooner or later. Before the fix the interrupted COMMIT left the
    /// transaction open and GRDB stopped the process ("A transaction has been left opened"), as it
    /// stopped a recorder in the soak benchmark.
    @Test func readsPastTheBudgetEndTheirTransaction() async throws {
        let database = try SQLiteDatabase(path: TemporaryDirectory().file("late.sqlite"))
        let connection = database.makeConnection()
        try await connection.write { tx in
            _ = try tx.write(StoreRow(index: StoreIndex("c", "k"), object: ["n": 1]), mode: .upsert)
        }
        let lookup = StoreQuery(scope: .collection("c"), keys: ["k"])
        var (stopped, answered) = (0, 0)
        for _ in 0..<1500 {
            let result = try await connection.readIfBrief { tx in
                let rows = try tx.rows(matching: lookup)
                let end = ContinuousClock.now + briefReadBudget + .microseconds(100)
                while ContinuousClock.now < end {}  // the thread is "descheduled" past the deadline
                return rows.count
            }
            // The budget is checked every 1000 SQLite steps: a read is stopped (nil: read again
            // through the pool) only when a check fell past the deadline; otherwise its rows stand.
            switch result {
            case nil: stopped += 1
            case 1?: answered += 1
            default: break
            }
        }
        #expect(stopped + answered == 1500, "every read ended (before the fix the process stopped)")
        // The connection still answers. A brief read may itself be stopped by its budget when the
        // machine deschedules it (the whole suite runs at once): it is read again then.
        var again: Int?
        for _ in 0..<100 where again == nil {
            again = try await connection.readIfBrief { tx in try tx.rows(matching: lookup).count }
        }
        #expect(again == 1)
        #expect(try await connection.readBriefly { tx in try tx.rows(matching: lookup).count } == 1)
    }

    /// GRDB keeps every cached statement; the budget empties a connection's cache after 256
    /// distinct texts, so Queries naming ever new properties cannot grow it without end.
    @Test func statementCacheIsBounded() async throws {
        let connection = try SQLiteDatabase(path: TemporaryDirectory().file("cache.sqlite")).makeConnection()
        let releases = try await connection.read { tx in
            var releases = 0
            for i in 0..<600 {
                let sql = "SELECT json_extract(object, '$.p\(i)') FROM coaty_rows"
                if StatementCacheBudget.admit(sql, in: tx.db) { releases += 1 }
                _ = try tx.statement(sql)
            }
            // An admitted text is not counted twice.
            #expect(!StatementCacheBudget.admit("SELECT json_extract(object, '$.p599') FROM coaty_rows", in: tx.db))
            return releases
        }
        #expect((2...3).contains(releases))  // 3 when an earlier connection left texts under a reused identity
    }

    /// Brief reads suspend their caller and run on the brief reader's thread: an actor that looks
    /// something up keeps serving its other callers meanwhile, even the lookup's own body. Before,
    /// a brief read blocked the calling thread while the actor was held, so a body that needed the
    /// actor never ran (a deadlock that stalled whole test runs on two cores).
    /// (Half a second alone; 25–80 s while the whole suite keeps both cores busy: the limit is
    /// for a blocked caller, which never ends.)
    @Test(.timeLimit(.minutes(3))) func briefReadsSuspendTheirCallerNeverBlockIt() async throws {
        let database = try SQLiteDatabase(path: TemporaryDirectory().file("suspend.sqlite"))
        let connection = database.makeConnection()
        try await connection.write { tx in
            for i in 0..<100 {
                _ = try tx.write(
                    StoreRow(index: StoreIndex("c", "k\(i)"), object: ["n": .int(Int64(i))]),
                    mode: .upsert
                )
            }
        }
        let keeper = LookupKeeper(connection)
        // The lookup's body calls back into the actor that awaits it.
        #expect(try await keeper.lookUp("k7", number: -1, callingBack: true) == 1)
        // Many at once, brief and probably brief, each calling back into the one actor.
        let found = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<200 {
                group.addTask {
                    try await keeper.lookUp("k\(i % 100)", number: i, callingBack: i % 2 == 0, ifBrief: i % 3 == 0)
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(found == 200)
        #expect(await keeper.callbacks == 101)
    }

}

extension InMemoryDatabase {
    /// A connection to a new in-memory database holding `rows`.
    static func loaded(_ rows: [StoreRow]) async throws -> InMemoryConnection {
        let connection = InMemoryDatabase().makeConnection()
        try await StoreContract.load(rows, removing: [], into: connection)
        return connection
    }
}

/// An actor that looks rows up by key, its lookups optionally calling back into it.
private actor LookupKeeper {
    let connection: CoatySQLite.SQLiteConnection
    /// The lookups whose bodies called back (a body runs twice when its brief attempt was stopped
    /// by the budget and the lookup reads again).
    private var calledBack: Set<Int> = []
    var callbacks: Int { calledBack.count }

    init(_ connection: CoatySQLite.SQLiteConnection) { self.connection = connection }

    func count(_ lookup: Int) { calledBack.insert(lookup) }

    /// How many rows have the key (1 or 0), read briefly while the actor is isolated; lookup
    /// `number` calls back into the actor when `callingBack`.
    func lookUp(_ key: String, number: Int, callingBack: Bool, ifBrief: Bool = false) async throws -> Int {
        let query = StoreQuery(scope: .collection("c"), keys: [key])
        let body: @Sendable (SQLiteTransaction) async throws -> Int = { [self] tx in
            if callingBack { await count(number) }
            return try tx.rows(matching: query).count
        }
        if ifBrief, let found = try await connection.readIfBrief(body) { return found }
        return try await connection.readBriefly(body)
    }
}
