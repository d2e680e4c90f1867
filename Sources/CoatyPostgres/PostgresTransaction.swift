import CoatyFilter
public import CoatyModel
public import CoatyStore
import CoatySync
import Logging
import PostgresNIO
import Synchronization

/// A transaction of a ``PostgresDatabase``; valid only inside its connection's closure.
///
/// Each statement is sent on the transaction's leased connection and awaited: the calling task
/// suspends until PostgreSQL answers, no thread waits.
public final class PostgresTransaction: WriteTransactionType, SQLReadTransaction, Sendable {
    let connection: PostgresConnection
    let logger: Logger
    let indexes: JSONIndexDeclarations
    let failures = CoatyMutex<String?>(nil)
    /// What ``holdsOnlyNumbers(_:in:)`` found in this transaction.
    private let numericProperties = CoatyMutex<[JSONIndexDeclarations.Key: Bool]>([:])

    init(connection: PostgresConnection, logger: Logger, indexes: JSONIndexDeclarations) {
        self.connection = connection
        self.logger = logger
        self.indexes = indexes
    }

    /// The first statement failure, if any (PostgreSQL then refuses every further statement and
    /// turns a COMMIT into a ROLLBACK).
    var failure: String? { failures.withLock { $0 } }

    /// Runs a statement and awaits its rows.
    func fetch(_ query: PostgresQuery) async throws -> [PostgresRow] {
        do {
            return try await connection.query(query, logger: logger).collect()
        } catch {
            let message = PostgresErrorText.describe(error)
            failures.withLock { if $0 == nil { $0 = message } }
            throw CoatyPostgresError("PostgreSQL refused a statement: \(message)")
        }
    }

    func fetch(_ text: String, _ sql: PostgresSQL = PostgresSQL()) async throws -> [PostgresRow] {
        try await fetch(PostgresQuery(unsafeSQL: text, binds: sql.binds))
    }

    /// The plan PostgreSQL chooses for a statement (`EXPLAIN`), one line per node.
    func explain(_ text: String, _ sql: PostgresSQL = PostgresSQL()) async throws -> String {
        try await fetch("EXPLAIN " + text, sql).map { try $0.decode(String.self) }.joined(separator: "\n")
    }

    static let columns = "collection, key, object::text, metadata::text"

    func decode(_ row: PostgresRow) throws -> StoreRow {
        let (collection, key, objectText, metadataText) = try row.decode((String, String, String, String?).self)
        return try Self.storeRow(collection, key, objectText, metadataText)
    }

    /// A row from its columns' text.
    static func storeRow(_ collection: String, _ key: String, _ objectText: String, _ metadataText: String?) throws
        -> StoreRow
    {
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
    public func row(at index: StoreIndex) async throws -> StoreRow? {
        var sql = PostgresSQL()
        let text =
            "SELECT \(Self.columns) FROM coaty_rows WHERE collection = \(sql.bind(index.collection)) AND key = \(sql.bind(index.key))"
        return try await fetch(text, sql).first.map(decode)
    }

    /// The keys of a collection, in insertion order.
    /// - Parameter collection: the collection.
    /// - Returns: the keys.
    /// - Throws: ``CoatyPostgresError``.
    public func keys(in collection: String) async throws -> [String] {
        var sql = PostgresSQL()
        let text = "SELECT key FROM coaty_rows WHERE collection = \(sql.bind(collection)) ORDER BY id"
        return try await fetch(text, sql).map { try $0.decode(String.self) }
    }

    /// The rows a query selects: SQL selects the candidates (exactly, when every condition
    /// translates), and ``CoatyFilter/ObjectMatcher`` evaluates the rest.
    /// - Parameter query: the query.
    /// - Returns: the rows.
    /// - Throws: ``CoatyPostgresError``.
    public func rows(matching query: StoreQuery) async throws -> [StoreRow] {
        let plan = try await plan(for: query)
        if let rows = try await orderedRows(query, plan) { return rows }
        let rows = try await fetch(
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
    ) async throws -> [StoreRow] {
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
        return try await fetch(text, scopePlan.sql).map(decode)
    }

    /// How many rows a query selects; one `count(*)` when the whole filter translates.
    /// - Parameter query: the query.
    /// - Returns: the count.
    /// - Throws: ``CoatyPostgresError``.
    public func count(matching query: StoreQuery) async throws -> Int {
        let plan = try await plan(for: query)
        guard plan.isExact, plan.limitClause.isEmpty else { return try await rows(matching: query).count }
        return try await fetch("SELECT count(*) FROM coaty_rows WHERE \(plan.whereClause)", plan.sql).first?.decode(
            Int.self
        ) ?? 0
    }

    /// A local value.
    /// - Parameters:
    ///   - key: the key.
    ///   - store: the store's name.
    /// - Returns: the value, or `nil`.
    /// - Throws: ``CoatyPostgresError``.
    public func localValue(forKey key: String, in store: String) async throws -> JSONValue? {
        var sql = PostgresSQL()
        let text = "SELECT value::text FROM coaty_local WHERE store = \(sql.bind(store)) AND key = \(sql.bind(key))"
        guard let value = try await fetch(text, sql).first?.decode(String.self) else { return nil }
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
    public func localKeys(in store: String) async throws -> [String] {
        var sql = PostgresSQL()
        let text = "SELECT key FROM coaty_local WHERE store = \(sql.bind(store)) ORDER BY key COLLATE \"C\""
        return try await fetch(text, sql).map { try $0.decode(String.self) }
    }

    /// The names of the local stores that hold a value, sorted by their bytes.
    /// - Returns: the names.
    /// - Throws: ``CoatyPostgresError``.
    public func localStores() async throws -> [String] {
        try await fetch("SELECT DISTINCT store COLLATE \"C\" FROM coaty_local ORDER BY 1").map {
            try $0.decode(String.self)
        }
    }

    /// Writes a row (an upsert keeps the row's place in insertion order).
    /// - Parameters:
    ///   - row: the row.
    ///   - mode: how an existing row is treated.
    /// - Returns: whether it was written.
    /// - Throws: ``CoatyPostgresError`` (e.g. for a string with `\u0000`, which `jsonb` rejects).
    @discardableResult
    public func write(_ row: StoreRow, mode: StoreWriteMode) async throws -> Bool {
        var sql = PostgresSQL()
        let text: String
        switch mode {
        case .upsert, .insert:
            text = Self.insert(tuples: [Self.bindTuple(of: row, into: &sql)], mode: mode)
        case .update:
            let collection = sql.bind(row.index.collection)
            let key = sql.bind(row.index.key)
            let values = Self.bindValues(of: row, into: &sql)
            let sets = zip(Self.valueColumns, values).map { "\($0) = \($1)" }.joined(separator: ", ")
            text = "UPDATE coaty_rows SET \(sets) WHERE collection = \(collection) AND key = \(key) RETURNING 1"
        }
        return try await !fetch(text, sql).isEmpty
    }

    /// The most rows one INSERT writes: 11 parameters each, well below PostgreSQL's 65 535.
    static let rowsPerStatement = 500

    /// Writes rows with one INSERT per ``rowsPerStatement`` rows when their indexes are distinct
    /// (one round trip instead of one per row); otherwise, and for ``StoreWriteMode/update``, each
    /// in turn.
    /// - Parameters:
    ///   - rows: the rows.
    ///   - mode: how an existing row is treated.
    /// - Returns: how many rows were written.
    /// - Throws: ``CoatyPostgresError``.
    @discardableResult
    public func writeRows(_ rows: [StoreRow], mode: StoreWriteMode) async throws -> Int {
        // A statement cannot update a row twice (ON CONFLICT DO UPDATE): repeated indexes go one by one.
        guard mode != .update, rows.count > 1, Set(rows.lazy.map(\.index)).count == rows.count else {
            var written = 0
            for row in rows where try await write(row, mode: mode) { written += 1 }
            return written
        }
        var written = 0
        var start = rows.startIndex
        while start < rows.endIndex {
            let end = min(start + Self.rowsPerStatement, rows.endIndex)
            var sql = PostgresSQL()
            var tuples: [String] = []
            tuples.reserveCapacity(end - start)
            for row in rows[start..<end] { tuples.append(Self.bindTuple(of: row, into: &sql)) }
            written += try await fetch(Self.insert(tuples: tuples, mode: mode), sql).count
            start = end
        }
        return written
    }

    /// The columns a row's values are written to, after collection and key.
    static let valueColumns = ["object", "metadata"] + PromotedColumns.names.map { "\"\($0)\"" }

    /// Binds a row's object and metadata (their texts when it has them) and promoted columns,
    /// in the order of ``valueColumns``; returns their placeholders.
    static func bindValues(of row: StoreRow, into sql: inout PostgresSQL) -> [String] {
        let columns = row.promotedColumns
        func bind(text: [UInt8]) -> String { "\(sql.bind(String(decoding: text, as: UTF8.self)))::jsonb" }
        let object = row.objectText.map(bind(text:)) ?? sql.bindJSON(row.object)
        // The metadata's tree is not asked for when it has its text (it would be parsed from it).
        let metadata = row.metadataText.map(bind(text:)) ?? row.metadata.map { sql.bindJSON($0) } ?? "NULL::jsonb"
        let promoted = PromotedColumns.names.map { name -> String in
            if let value = columns[name] { return sql.bind(value) }
            return "NULL::text"
        }
        return [object, metadata] + promoted
    }

    /// Binds a row as one INSERT tuple, `(collection, key, values…)`; returns its text.
    static func bindTuple(of row: StoreRow, into sql: inout PostgresSQL) -> String {
        let collection = sql.bind(row.index.collection)
        let key = sql.bind(row.index.key)
        return "(\(collection), \(key), \(bindValues(of: row, into: &sql).joined(separator: ", ")))"
    }

    /// An INSERT of `tuples` (each `(collection, key, values…)`) that upserts or skips existing rows.
    static func insert(tuples: [String], mode: StoreWriteMode) -> String {
        let conflict =
            mode == .insert
            ? "DO NOTHING"
            : "DO UPDATE SET " + valueColumns.map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        return """
            INSERT INTO coaty_rows (collection, key, \(valueColumns.joined(separator: ", "))) \
            VALUES \(tuples.joined(separator: ", ")) \
            ON CONFLICT (collection, key) \(conflict) RETURNING 1
            """
    }

    /// Removes a row.
    /// - Parameter index: the index.
    /// - Returns: whether it existed.
    /// - Throws: ``CoatyPostgresError``.
    @discardableResult
    public func removeRow(at index: StoreIndex) async throws -> Bool {
        var sql = PostgresSQL()
        let text =
            "DELETE FROM coaty_rows WHERE collection = \(sql.bind(index.collection)) AND key = \(sql.bind(index.key)) RETURNING 1"
        return try await !fetch(text, sql).isEmpty
    }

    /// Removes the rows a query selects: one `DELETE … RETURNING` when the whole filter translates.
    /// - Parameter query: the query.
    /// - Returns: the indexes removed.
    /// - Throws: ``CoatyPostgresError``.
    @discardableResult
    public func removeRows(matching query: StoreQuery) async throws -> [StoreIndex] {
        let plan = PostgresPlan(query)
        guard plan.isExact, plan.limitClause.isEmpty else {
            var removed: [StoreIndex] = []
            for row in try await rows(matching: query) where try await removeRow(at: row.index) {
                removed.append(row.index)
            }
            return removed
        }
        return try await fetch("DELETE FROM coaty_rows WHERE \(plan.whereClause) RETURNING collection, key", plan.sql)
            .map {
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
    public func setLocalValue(_ value: JSONValue?, forKey key: String, in store: String) async throws {
        var sql = PostgresSQL()
        let storeParameter = sql.bind(store)
        let keyParameter = sql.bind(key)
        if let value {
            let valueParameter = sql.bindJSON(value)
            _ = try await fetch(
                "INSERT INTO coaty_local (store, key, value) VALUES (\(storeParameter), \(keyParameter), \(valueParameter))"
                    + " ON CONFLICT (store, key) DO UPDATE SET value = excluded.value",
                sql
            )
        } else {
            _ = try await fetch(
                "DELETE FROM coaty_local WHERE store = \(storeParameter) AND key = \(keyParameter)",
                sql
            )
        }
    }
}

// MARK: - Indexed queries

extension PostgresTransaction {
    /// Whether every row of the scope's one collection holds a number below 2^53 in magnitude,
    /// or nothing, at `property`, proven by two range lookups in the property's declared index:
    /// in `jsonb`'s order `null` and strings sort below every number, booleans, arrays and objects
    /// above. `nil` without such an index. Found once per transaction.
    func holdsOnlyNumbers(_ property: String, in scope: StoreScope) async throws -> Bool? {
        guard let collection = scope.singleCollection, indexes.contains(collection: collection, property: property)
        else { return nil }
        let key = JSONIndexDeclarations.Key(collection: collection, property: property)
        if let known = numericProperties.withLock({ $0[key] }) { return known }
        let value = "(object -> \(SQLText.literal(property)))"
        let scope = "collection = \(SQLText.literal(collection))"
        let text =
            "SELECT EXISTS (SELECT 1 FROM coaty_rows WHERE \(scope) AND \(value) <= '-9007199254740992'::jsonb)"
            + " OR EXISTS (SELECT 1 FROM coaty_rows WHERE \(scope) AND \(value) >= '9007199254740992'::jsonb)"
        let numeric = try await fetch(text).first?.decode(Bool.self) == false
        numericProperties.withLock { $0[key] = numeric }
        return numeric
    }

    /// The plan of a query, with numeric comparisons of indexed properties that hold only numbers
    /// made exact and sargable.
    func plan(for query: StoreQuery) async throws -> PostgresPlan {
        guard query.scope.singleCollection != nil, let conditions = query.filter?.conditions else {
            return PostgresPlan(query)
        }
        var numeric: Set<String> = []
        for property in PostgresPlan.numericallyCompared(conditions)
        where try await holdsOnlyNumbers(property, in: query.scope) == true {
            numeric.insert(property)
        }
        return PostgresPlan(query, numericProperties: numeric)
    }

    /// The rows of a query ordered by top-level properties, the first of them indexed, ordered
    /// and paged by SQL, or `nil` without such an index or when SQL's order might not be Coaty's
    /// (see the SQLite backend's twin: the same rules, in `jsonb`).
    func orderedRows(_ query: StoreQuery, _ plan: PostgresPlan) async throws -> [StoreRow]? {
        guard let filter = query.filter, let ordering = filter.orderByProperties, !ordering.isEmpty,
            let first = ordering.first?.property.path, first.count == 1,
            try await holdsOnlyNumbers(first[0], in: query.scope) == true
        else { return nil }
        var keys: [(key: String, descending: Bool)] = []
        for level in ordering {
            let path = level.property.path
            guard path.count == 1, try await holdsOnlyNumbers(path[0], in: query.scope) == true else { return nil }
            keys.append((path[0], level.order == .descending))
        }
        let take = filter.take ?? 0
        if take < 0 { return [] }
        let skip = max(filter.skip ?? 0, 0)
        // Missing values first ascending, last descending, as Coaty orders undefined.
        let order =
            keys.map {
                "(object -> \(SQLText.literal($0.key))) \($0.descending ? "DESC NULLS LAST" : "ASC NULLS FIRST")"
            }
            .joined(separator: ", ") + ", id"
        if plan.conditionsAreExact {
            var limit = take > 0 ? " LIMIT \(take)" : ""
            if skip > 0 { limit += " OFFSET \(skip)" }
            let ids = try await fetch(
                "SELECT id FROM coaty_rows WHERE \(plan.whereClause) ORDER BY \(order)\(limit)",
                plan.sql
            ).map { try $0.decode(Int64.self) }
            if ids.isEmpty { return [] }
            var sql = PostgresSQL()
            let rows = try await fetch(
                "SELECT \(Self.columns), id FROM coaty_rows WHERE id = ANY(\(sql.bind(ids)))",
                sql
            )
            var byId: [Int64: StoreRow] = [:]
            for row in rows {
                let (collection, key, object, metadata, id) = try row.decode(
                    (String, String, String, String?, Int64).self
                )
                byId[id] = try Self.storeRow(collection, key, object, metadata)
            }
            return ids.compactMap { byId[$0] }
        }
        let candidates = try await fetch(
            "SELECT \(Self.columns) FROM coaty_rows WHERE \(plan.whereClause) ORDER BY \(order)",
            plan.sql
        ).map(decode)
        let matcher = CompiledObjectFilter(ObjectFilter(conditions: filter.conditions))
        let matching = candidates.filter { matcher.matches($0.object) }
        let start = min(skip, matching.count)
        let end = take > 0 ? min(matching.count, start + take) : matching.count
        return Array(matching[start..<end])
    }
}
