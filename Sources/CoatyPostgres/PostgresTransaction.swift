public import CoatyCore
public import CoatyStore
import Logging
import PostgresNIO
import Synchronization

/// A transaction of a ``PostgresDatabase``; valid only inside its connection's closure.
///
/// Its methods are synchronous: each statement is sent on the transaction's connection and the
/// calling thread (one of NIO's blocking pool, never a Swift concurrency thread) waits for the
/// result.
public final class PostgresTransaction: WriteTransactionType, SQLReadTransaction, Sendable {
    let connection: PostgresConnection
    let logger: Logger
    let failures = Mutex<String?>(nil)

    init(connection: PostgresConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    /// The first statement failure, if any (PostgreSQL then refuses every further statement and
    /// turns a COMMIT into a ROLLBACK).
    var failure: String? { failures.withLock { $0 } }

    /// Runs a statement and waits for its rows.
    func fetch(_ query: PostgresQuery) throws -> [PostgresRow] {
        let connection = connection
        let logger = logger
        let promise = connection.eventLoop.makePromise(of: [PostgresRow].self)
        promise.completeWithTask { try await connection.query(query, logger: logger).collect() }
        do {
            return try promise.futureResult.wait()
        } catch {
            let message = String(reflecting: error)
            failures.withLock { if $0 == nil { $0 = message } }
            throw CoatyPostgresError("PostgreSQL refused a statement: \(message)")
        }
    }

    func fetch(_ text: String, _ sql: PostgresSQL = PostgresSQL()) throws -> [PostgresRow] {
        try fetch(PostgresQuery(unsafeSQL: text, binds: sql.binds))
    }

    private static let columns = "collection, key, object::text, metadata::text"

    private func decode(_ row: PostgresRow) throws -> StoreRow {
        let (collection, key, objectText, metadataText) = try row.decode((String, String, String, String?).self)
        let index = StoreIndex(collection, key)
        do {
            return StoreRow(
                index: index,
                object: try JSONValue(parsing: objectText),
                metadata: try metadataText.map { try JSONValue(parsing: $0) }
            )
        } catch {
            throw CoatyPostgresError("The stored JSON at \(index) is not valid (\(error)); remove or rewrite that row")
        }
    }

    /// The row at an index.
    /// - Parameter index: the index.
    /// - Returns: the row, or `nil`.
    /// - Throws: ``CoatyPostgresError``.
    public func row(at index: StoreIndex) throws -> StoreRow? {
        var sql = PostgresSQL()
        let text =
            "SELECT \(Self.columns) FROM coaty_rows WHERE collection = \(sql.bind(index.collection)) AND key = \(sql.bind(index.key))"
        return try fetch(text, sql).first.map(decode)
    }

    /// The keys of a collection, in insertion order.
    /// - Parameter collection: the collection.
    /// - Returns: the keys.
    /// - Throws: ``CoatyPostgresError``.
    public func keys(in collection: String) throws -> [String] {
        var sql = PostgresSQL()
        let text = "SELECT key FROM coaty_rows WHERE collection = \(sql.bind(collection)) ORDER BY id"
        return try fetch(text, sql).map { try $0.decode(String.self) }
    }

    /// The rows a query selects: SQL selects the candidates (exactly, when every condition
    /// translates), and ``CoatyCore/ObjectMatcher`` evaluates the rest.
    /// - Parameter query: the query.
    /// - Returns: the rows.
    /// - Throws: ``CoatyPostgresError``.
    public func rows(matching query: StoreQuery) throws -> [StoreRow] {
        let plan = PostgresPlan(query)
        let rows = try fetch(
            "SELECT \(Self.columns) FROM coaty_rows WHERE \(plan.whereClause) ORDER BY id\(plan.limitClause)",
            plan.sql
        ).map(decode)
        guard !plan.isExact else { return rows }
        return ObjectMatcher.apply(query.filter, to: rows) { $0.object }
    }

    /// See ``CoatyStore/SQLReadTransaction/rows(in:whereSQL:arguments:orderBySQL:limit:)``: the
    /// caller's placeholders are `$1`, `$2`, … in the order of `arguments`.
    public func rows(
        in scope: StoreScope,
        whereSQL condition: String,
        arguments: [JSONValue],
        orderBySQL orderBy: String?,
        limit: Int?
    ) throws -> [StoreRow] {
        var sql = PostgresSQL()
        for argument in arguments {
            switch argument {
            case .null: sql.binds.appendNull()
            case .bool(let flag): _ = sql.bind(flag)
            case .int(let number): _ = sql.bind(number)
            case .double(let number): _ = sql.bind(number)
            case .string(let text): _ = sql.bind(text)
            default: _ = sql.bind(argument.serializedString())
            }
        }
        // The scope's own values come after the caller's, so the caller's placeholders are $1….
        let scopePlan = PostgresPlan(StoreQuery(scope: scope), continuing: sql)
        let text =
            "SELECT \(Self.columns) FROM coaty_rows WHERE (\(scopePlan.whereClause)) AND (\(condition))"
            + " ORDER BY \(orderBy.map { "\($0), id" } ?? "id")" + (limit.map { " LIMIT \($0)" } ?? "")
        return try fetch(text, scopePlan.sql).map(decode)
    }

    /// How many rows a query selects; one `count(*)` when the whole filter translates.
    /// - Parameter query: the query.
    /// - Returns: the count.
    /// - Throws: ``CoatyPostgresError``.
    public func count(matching query: StoreQuery) throws -> Int {
        let plan = PostgresPlan(query)
        guard plan.isExact, plan.limitClause.isEmpty else { return try rows(matching: query).count }
        return try fetch("SELECT count(*) FROM coaty_rows WHERE \(plan.whereClause)", plan.sql).first?.decode(
            Int.self
        ) ?? 0
    }

    /// A local value.
    /// - Parameters:
    ///   - key: the key.
    ///   - store: the store's name.
    /// - Returns: the value, or `nil`.
    /// - Throws: ``CoatyPostgresError``.
    public func localValue(forKey key: String, in store: String) throws -> JSONValue? {
        var sql = PostgresSQL()
        let text = "SELECT value::text FROM coaty_local WHERE store = \(sql.bind(store)) AND key = \(sql.bind(key))"
        guard let value = try fetch(text, sql).first?.decode(String.self) else { return nil }
        do {
            return try JSONValue(parsing: value)
        } catch {
            throw CoatyPostgresError("The local value of \(key) is not valid JSON (\(error)); set it again")
        }
    }

    /// The keys of a local store, sorted by their bytes.
    /// - Parameter store: the store's name.
    /// - Returns: the keys.
    /// - Throws: ``CoatyPostgresError``.
    public func localKeys(in store: String) throws -> [String] {
        var sql = PostgresSQL()
        let text = "SELECT key FROM coaty_local WHERE store = \(sql.bind(store)) ORDER BY key COLLATE \"C\""
        return try fetch(text, sql).map { try $0.decode(String.self) }
    }

    /// The names of the local stores that hold a value, sorted by their bytes.
    /// - Returns: the names.
    /// - Throws: ``CoatyPostgresError``.
    public func localStores() throws -> [String] {
        try fetch("SELECT DISTINCT store COLLATE \"C\" FROM coaty_local ORDER BY 1").map { try $0.decode(String.self) }
    }

    /// Writes a row (an upsert keeps the row's place in insertion order).
    /// - Parameters:
    ///   - row: the row.
    ///   - mode: how an existing row is treated.
    /// - Returns: whether it was written.
    /// - Throws: ``CoatyPostgresError`` (e.g. for a string with `\u0000`, which `jsonb` rejects).
    @discardableResult
    public func write(_ row: StoreRow, mode: StoreWriteMode) throws -> Bool {
        let columns = PromotedColumns(row.object)
        var sql = PostgresSQL()
        let collection = sql.bind(row.index.collection)
        let key = sql.bind(row.index.key)
        let object = sql.bindJSON(row.object)
        let metadata = row.metadata.map { sql.bindJSON($0) } ?? "NULL::jsonb"
        let promoted = PromotedColumns.names.map { name -> String in
            if let value = columns[name] { return sql.bind(value) }
            return "NULL::text"
        }
        let names = (["object", "metadata"] + PromotedColumns.names.map { "\"\($0)\"" })
        let values = [object, metadata] + promoted
        let text: String
        switch mode {
        case .upsert, .insert:
            let conflict =
                mode == .insert
                ? "DO NOTHING"
                : "DO UPDATE SET " + names.map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
            text = """
                INSERT INTO coaty_rows (collection, key, \(names.joined(separator: ", "))) \
                VALUES (\(collection), \(key), \(values.joined(separator: ", "))) \
                ON CONFLICT (collection, key) \(conflict) RETURNING 1
                """
        case .update:
            let sets = zip(names, values).map { "\($0) = \($1)" }.joined(separator: ", ")
            text = "UPDATE coaty_rows SET \(sets) WHERE collection = \(collection) AND key = \(key) RETURNING 1"
        }
        return try !fetch(text, sql).isEmpty
    }

    /// Removes a row.
    /// - Parameter index: the index.
    /// - Returns: whether it existed.
    /// - Throws: ``CoatyPostgresError``.
    @discardableResult
    public func removeRow(at index: StoreIndex) throws -> Bool {
        var sql = PostgresSQL()
        let text =
            "DELETE FROM coaty_rows WHERE collection = \(sql.bind(index.collection)) AND key = \(sql.bind(index.key)) RETURNING 1"
        return try !fetch(text, sql).isEmpty
    }

    /// Removes the rows a query selects: one `DELETE … RETURNING` when the whole filter translates.
    /// - Parameter query: the query.
    /// - Returns: the indexes removed.
    /// - Throws: ``CoatyPostgresError``.
    @discardableResult
    public func removeRows(matching query: StoreQuery) throws -> [StoreIndex] {
        let plan = PostgresPlan(query)
        guard plan.isExact, plan.limitClause.isEmpty else {
            var removed: [StoreIndex] = []
            for row in try rows(matching: query) where try removeRow(at: row.index) { removed.append(row.index) }
            return removed
        }
        return try fetch("DELETE FROM coaty_rows WHERE \(plan.whereClause) RETURNING collection, key", plan.sql).map {
            let (collection, key) = try $0.decode((String, String).self)
            return StoreIndex(collection, key)
        }
    }

    /// Sets or removes a local value.
    /// - Parameters:
    ///   - value: the value; `nil` removes it.
    ///   - key: the key.
    ///   - store: the store's name.
    /// - Throws: ``CoatyPostgresError``.
    public func setLocalValue(_ value: JSONValue?, forKey key: String, in store: String) throws {
        var sql = PostgresSQL()
        let storeParameter = sql.bind(store)
        let keyParameter = sql.bind(key)
        if let value {
            let valueParameter = sql.bindJSON(value)
            _ = try fetch(
                "INSERT INTO coaty_local (store, key, value) VALUES (\(storeParameter), \(keyParameter), \(valueParameter))"
                    + " ON CONFLICT (store, key) DO UPDATE SET value = excluded.value",
                sql
            )
        } else {
            _ = try fetch("DELETE FROM coaty_local WHERE store = \(storeParameter) AND key = \(keyParameter)", sql)
        }
    }
}
