import CoatyFilter
import CoatyModel
import CoatyStore
import CoatySync
import GRDB
import GRDBSQLite
import Synchronization

/// What ``SQLiteTransaction/holdsOnlyNumbers(_:in:)`` proved, per connection, valid while the
/// database is as that connection saw it then: no commit by another connection (of this process
/// or another: SQLite's `data_version`) and no change by the connection itself
/// (`sqlite3_total_changes64`). A responder answering ordered Queries on a quiet store then
/// proves it once, not with five range lookups per Query.
final class NumericKnowledge: Sendable {
    /// The state of the database as one connection sees it.
    struct Stamp: Equatable {
        let dataVersion: Int64
        let ownChanges: Int64

        init(_ db: Database) throws {
            dataVersion = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA data_version")) ?? -1
            ownChanges = sqlite3_total_changes64(db.sqliteConnection)
        }
    }

    private struct Entry {
        var stamp: Stamp
        var known: [JSONIndexDeclarations.Key: Bool]
    }

    /// By connection: a connection of the pool lives as long as the database (a closed one's
    /// identifier could be reused, but its entry is only trusted for a matching stamp).
    private let entries = CoatyMutex<[ObjectIdentifier: Entry]>([:])
    func known(_ key: JSONIndexDeclarations.Key, connection db: Database, stamp: Stamp) -> Bool? {
        entries.withLock { entries in
            guard let entry = entries[ObjectIdentifier(db)], entry.stamp == stamp else { return nil }
            return entry.known[key]
        }
    }

    func record(_ numeric: Bool, for key: JSONIndexDeclarations.Key, connection db: Database, stamp: Stamp) {
        entries.withLock { entries in
            let id = ObjectIdentifier(db)
            if entries[id]?.stamp != stamp { entries[id] = Entry(stamp: stamp, known: [:]) }
            entries[id]?.known[key] = numeric
        }
    }

    /// The statement of the range lookups (built once per property).
    static func probe(_ key: JSONIndexDeclarations.Key) -> String {
        if let sql = probeTexts.withLock({ $0[key] }) { return sql }
        let (value, type, limit) = (
            SQLPlan.valueExpression(key.property), SQLPlan.typeExpression(key.property), SQLPlan.exactLimit
        )
        let probes = [
            "\(value) >= ''", "\(value) IS NULL AND \(type) = 'null'",
            "\(value) IN (0, 1) AND \(type) IN ('true', 'false')", "\(value) >= \(limit)", "\(value) <= -\(limit)",
        ]
        let sql =
            "SELECT "
            + probes.map {
                "EXISTS (SELECT 1 FROM coaty_rows INDEXED BY \(key.indexName) WHERE collection = "
                    + "\(SQLText.literal(key.collection)) AND \($0))"
            }
            .joined(separator: " OR ")
        probeTexts.withLock { texts in
            if texts.count >= 1024 { texts = [:] }
            texts[key] = sql
        }
        return sql
    }

    private static let probeTexts = CoatyMutex<[JSONIndexDeclarations.Key: String]>([:])
}

/// A query for the Coaty objects whose promoted, indexed `objectId` or `externalId` is one
/// string, nothing else: a Discover's lookup, answered by a fixed statement (the same rows, in the
/// same order, as ``SQLPlan`` selects for it).
struct PromotedLookup {
    /// The statement.
    let sql: String
    /// The string.
    let value: String

    /// The lookup `query` is, or `nil`.
    init?(_ query: StoreQuery) {
        guard query.keys == nil, case .coatyObjects = query.scope, let filter = query.filter,
            filter.orderByProperties?.isEmpty ?? true, (filter.skip ?? 0) <= 0, (filter.take ?? 0) == 0,
            case .condition(let condition)? = filter.conditions, condition.property.path.count == 1,
            condition.expression.operator == .equals, case .string(let value)? = condition.expression.operand1,
            let statements = Self.statements[condition.property.path[0]]
        else { return nil }
        self.sql = query.includesMetadata ? statements.withMetadata : statements.withoutMetadata
        self.value = value
    }

    private static let statements: [String: (withMetadata: String, withoutMetadata: String)] = Dictionary(
        uniqueKeysWithValues: ["objectId", "externalId"].map { column in
            func sql(_ columns: String) -> String {
                "SELECT \(columns) FROM coaty_rows WHERE coreType IS NOT NULL AND objectType IS NOT NULL"
                    + " AND \(column) = ? ORDER BY id"
            }
            return (column, (sql(SQLiteTransaction.columns), sql(SQLiteTransaction.columnsWithoutMetadata)))
        }
    )
}

/// Bounds GRDB's statement cache of each SQLite connection: GRDB keeps every statement it caches
/// until the connection closes, and the SQL of a Query holds the names from the Query (object
/// type, property paths), so anyone on the bus could grow it without end. After
/// ``limit`` distinct texts on a connection, its cache is emptied and starts again.
enum StatementCacheBudget {
    /// Distinct texts cached per connection before the cache is emptied.
    static let limit = 256
    /// Longer texts (large In lists, long and/or trees) are prepared afresh each time.
    static let longestText = 4096

    private static let texts = CoatyMutex<[ObjectIdentifier: Set<String>]>([:])

    /// Records that `sql` is about to be cached on `db`; `true` when the connection's cache must
    /// be emptied first.
    static func admit(_ sql: String, in db: Database) -> Bool {
        texts.withLock { texts in
            let id = ObjectIdentifier(db)
            if texts[id, default: []].contains(sql) { return false }
            let overflow = texts[id, default: []].count >= limit
            if overflow { texts[id] = [] }
            texts[id, default: []].insert(sql)
            return overflow
        }
    }
}

extension SQLiteTransaction {
    /// Steps a statement read with SQLite's C API: `true` at a row, `false` when done.
    /// - Throws: the statement's error, as GRDB reports it.
    func step(_ statement: SQLiteStatement, sql: String) throws -> Bool {
        let code = sqlite3_step(statement)
        if code == SQLITE_DONE { return false }
        guard code == SQLITE_ROW else {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code),
                message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
                sql: sql
            )
        }
        return true
    }
}
