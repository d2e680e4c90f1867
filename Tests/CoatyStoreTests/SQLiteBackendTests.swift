import CoatyCore
import CoatyStore
import CoatyStoreTestSupport
import Testing

@testable import CoatySQLite

@Suite("SQLite backend")
struct SQLiteBackendTests {
    @Test func reopeningTheFileKeepsTheData() async throws {
        let path = TemporaryDirectory().file("reopen.sqlite")
        try await StoreContract.writeDataToReopen(SQLiteDatabase(path: path).makeConnection())
        try await StoreContract.expectReopenedData(SQLiteDatabase(path: path).makeConnection())
    }

    @Test func migrationsAreRecordedInOrder() async throws {
        let path = TemporaryDirectory().file("migrations.sqlite")
        let database = try SQLiteDatabase(path: path)
        #expect(try await database.appliedMigrations() == SQLiteDatabase.migrationNames)
        // Opening again applies nothing twice.
        #expect(try await SQLiteDatabase(path: path).appliedMigrations() == SQLiteDatabase.migrationNames)
    }

    @Test func openingADirectoryFailsWithAClearError() {
        let directory = TemporaryDirectory().path
        #expect(throws: CoatySQLiteError.self) { try SQLiteDatabase(path: directory) }
    }

    static let planCases: [PlanCase] = [
        PlanCase(label: "promoted equals", filter: .where("name", .equals("x")), isExact: true),
        PlanCase(label: "json member equals string", filter: .where("color", .equals("red")), isExact: true),
        PlanCase(label: "notEquals string", filter: .where("externalId", .notEquals("1")), isExact: true),
        PlanCase(label: "in strings", filter: .where("objectType", .in(["a", "b"])), isExact: true),
        PlanCase(label: "notIn strings", filter: .where("objectType", .notIn(["a"])), isExact: true),
        PlanCase(label: "exists / notExists", filter: .where("a", .exists).and("b", .notExists), isExact: true),
        PlanCase(label: "or of exact", filter: .where("a", .exists).or("name", .equals("n")), isExact: true),
        PlanCase(
            label: "paging without order",
            filter: ObjectFilter.where("a", .exists).skip(2).take(3),
            isExact: true
        ),
        PlanCase(label: "number comparison", filter: .where("n", .greaterThan(3)), isExact: false),
        PlanCase(label: "in with a number", filter: .where("n", .in([1, "2"])), isExact: false),
        PlanCase(label: "nested property", filter: .where("a.b", .equals("x")), isExact: false),
        PlanCase(label: "key with a dash", filter: .where("a-b", .exists), isExact: false),
        PlanCase(label: "like", filter: .where("name", .like("a%")), isExact: false),
        PlanCase(label: "ordering", filter: ObjectFilter.where("name", .equals("x")).orderBy("name"), isExact: false),
        PlanCase(label: "negative take", filter: ObjectFilter().take(-1), isExact: false),
    ]

    @Test(arguments: planCases)
    func pushdownIsExactOnlyWhereSafe(_ c: PlanCase) {
        #expect(SQLPlan(StoreQuery(scope: .all, filter: c.filter)).isExact == c.isExact)
    }

    /// Random objects of mixed member types and random filters over them: the SQLite backend
    /// (SQL pushdown plus matcher) selects exactly the rows, in the order, that the in-memory
    /// backend (``ObjectMatcher`` only) selects.
    @Test(arguments: [UInt64(1), 2, 3])
    func pushdownAgreesWithTheMatcher(seed: UInt64) async throws {
        let sqlite = try SQLiteDatabase(path: TemporaryDirectory().file("random.sqlite")).makeConnection()
        try await StoreContract.pushdownAgreesWithTheMatcher(seed: seed, sqlite) { SQLPlan($0).isExact }
    }
}
