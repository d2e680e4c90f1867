import CoatyFilter
public import CoatyModel
public import CoatyStore
import CoatySync
import GRDB
import GRDBSQLite
import Synchronization

/// A transaction of a ``SQLiteDatabase``; valid only inside its connection's closure.
public final class SQLiteTransaction: WriteTransactionType, SQLReadTransaction {
    let db: Database
    let indexes: JSONIndexDeclarations
    /// The statements of ``write(_:mode:)`` used in this transaction, by mode (a batch of writes
    /// looks its statement up once, not once per row by hashing its text). Kept as GRDB's
    /// `Statement`s: a statement cache emptied meanwhile does not finalize them.
    private var writeStatements: [StoreWriteMode: Statement] = [:]

    let numericKnowledge: NumericKnowledge

    init(_ db: Database, indexes: JSONIndexDeclarations, numericKnowledge: NumericKnowledge) {
        self.db = db
        self.indexes = indexes
        self.numericKnowledge = numericKnowledge
    }

    static let columns = "collection, key, object, metadata"
    static let columnsWithoutMetadata = "collection, key, object, NULL"

    /// The prepared statement for some SQL, from the connection's statement cache: preparing
    /// costs more than running a small query (SQLite parses and plans, GRDB's authorizer is
    /// called for every column the statement reads). The cache is bounded: see
    /// ``StatementCacheBudget``.
    func statement(_ sql: String) throws -> Statement {
        guard sql.utf8.count <= StatementCacheBudget.longestText else { return try db.makeStatement(sql: sql) }
        if StatementCacheBudget.admit(sql, in: db) { db.releaseMemory() }
        return try db.cachedStatement(sql: sql)
    }

    /// A row selected with ``columns`` (read by position: a lookup by name costs a case-insensitive
    /// comparison per column).
    func decode(_ row: Row) throws -> StoreRow {
        let index = StoreIndex(row[0], row[1])
        let objectText: String = row[2]
        let metadataText: String? = row[3]
        do {
            return StoreRow(
                index: index,
                object: try JSONValue(parsing: objectText),
                metadata: try metadataText.map { try JSONValue(parsing: $0) }
            )
        } catch {
            throw CoatySQLiteError("The stored JSON at \(index) is not valid (\(error)); remove or rewrite that row")
        }
    }

    /// The row at an index.
    /// - Parameter index: the index.
    /// - Returns: the row, or `nil`.
    /// - Throws: a database error.
    public func row(at index: StoreIndex) throws -> StoreRow? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(Self.columns) FROM coaty_rows WHERE collection = ? AND key = ?"),
            arguments: [index.collection, index.key]
        ).map(decode)
    }

    /// The keys of a collection, in insertion order.
    /// - Parameter collection: the collection.
    /// - Returns: the keys.
    /// - Throws: a database error.
    public func keys(in collection: String) throws -> [String] {
        try String.fetchAll(
            db,
            sql: "SELECT key FROM coaty_rows WHERE collection = ? ORDER BY id",
            arguments: [collection]
        )
    }

    /// The rows a query selects: SQL selects the candidates (exactly, when every condition
    /// translates), and ``CoatyFilter/ObjectMatcher`` evaluates the rest.
    /// - Parameter query: the query.
    /// - Returns: the rows.
    /// - Throws: a database error.
    public func rows(matching query: StoreQuery) throws -> [StoreRow] {
        if let lookup = PromotedLookup(query) { return try rows(lookup) }
        let (plan, hint) = try plan(for: query)
        if let rows = try orderedRows(query, plan) { return rows }
        let columns = query.includesMetadata ? Self.columns : Self.columnsWithoutMetadata
        let rows = try Row.fetchAll(
            statement(
                "SELECT \(columns) FROM coaty_rows\(hint) WHERE \(plan.whereClause) ORDER BY id\(plan.limitClause)"
            ),
            arguments: StatementArguments(plan.arguments)
        ).map(decode)
        guard !plan.isExact else { return rows }
        return ObjectMatcher.apply(query.filter, to: rows) { $0.object }
    }

    /// The rows of a ``PromotedLookup``: one cached statement, the value bound and the columns
    /// read with SQLite's C API (a Discover's lookup by objectId: planning the filter, building
    /// its SQL text and GRDB's arguments and rows cost more than SQLite's indexed search). Each
    /// row keeps its stored text (``CoatyStore/StoreRow/objectText``) beside the parsed JSON;
    /// with `parsing` false it is made from its texts alone
    /// (``CoatyStore/StoreRow/init(index:objectText:metadataText:)``).
    func rows(_ lookup: PromotedLookup, parsing: Bool = true) throws -> [StoreRow] {
        let sql = lookup.sql
        let prepared = try db.cachedStatement(sql: sql)
        let statement = prepared.sqliteStatement
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        var value = lookup.value
        value.withUTF8 { utf8 in
            _ = sqlite3_bind_text(statement, 1, utf8.baseAddress, Int32(utf8.count), sqliteTransient)
        }
        func text(_ column: Int32) -> UnsafeRawBufferPointer? {
            guard let bytes = sqlite3_column_text(statement, column) else { return nil }
            return UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(statement, column)))
        }
        var rows: [StoreRow] = []
        while try step(statement, sql: sql) {
            let index = StoreIndex(
                text(0).map { String(decoding: $0, as: UTF8.self) } ?? "",
                text(1).map { String(decoding: $0, as: UTF8.self) } ?? ""
            )
            let objectText = text(2) ?? UnsafeRawBufferPointer(start: nil, count: 0)
            guard parsing else {
                rows.append(StoreRow(index: index, objectText: Array(objectText), metadataText: text(3).map { Array($0) }))
                continue
            }
            do {
                let object = try JSONValue(parsing: objectText)
                let metadata = try text(3).map { try JSONValue(parsing: $0) }
                var row = StoreRow(index: index, object: object, metadata: metadata)
                // The text too: a Discover answered from the store sends it as it is.
                row.objectText = Array(objectText)
                rows.append(row)
            } catch {
                throw CoatySQLiteError(
                    "The stored JSON at \(index) is not valid (\(error)); remove or rewrite that row"
                )
            }
        }
        return rows
    }

    /// See ``CoatyStore/SQLReadTransaction/rows(in:whereSQL:arguments:orderBySQL:limit:)``.
    public func rows(
        in scope: StoreScope,
        whereSQL condition: String,
        arguments: [JSONValue],
        orderBySQL orderBy: String?,
        limit: Int?
    ) throws -> [StoreRow] {
        let scopePlan = SQLPlan(StoreQuery(scope: scope))
        let values: [DatabaseValue] =
            arguments.map { value in
                switch value {
                case .null: .null
                case .bool(let flag): (flag ? 1 : 0).databaseValue
                case .int(let number): number.databaseValue
                case .double(let number): number.databaseValue
                case .string(let text): text.databaseValue
                default: value.serializedString().databaseValue
                }
            }
        let scopeValues = scopePlan.arguments.map { $0?.databaseValue ?? .null }
        let sql =
            "SELECT \(Self.columns) FROM coaty_rows WHERE (\(scopePlan.whereClause)) AND (\(condition))"
            + " ORDER BY \(orderBy.map { "\($0), id" } ?? "id")" + (limit.map { " LIMIT \($0)" } ?? "")
        do {
            // Prepared afresh: the text is the caller's, not one of a bounded set.
            return try Row.fetchAll(db.makeStatement(sql: sql), arguments: StatementArguments(scopeValues + values))
                .map(decode)
        } catch let error as DatabaseError {
            throw CoatySQLiteError("SQLite refused the SQL read (\(error.message ?? "\(error.resultCode)")): \(sql)")
        }
    }

    /// How many rows a query selects; one `COUNT(*)` when the whole filter translates.
    /// - Parameter query: the query.
    /// - Returns: the count.
    /// - Throws: a database error.
    public func count(matching query: StoreQuery) throws -> Int {
        let plan = try plan(for: query).plan
        guard plan.isExact, plan.limitClause.isEmpty else { return try rows(matching: query).count }
        return try Int.fetchOne(
            db,
            sql: "SELECT COUNT(*) FROM coaty_rows WHERE \(plan.whereClause)",
            arguments: StatementArguments(plan.arguments)
        ) ?? 0
    }

    /// A local value.
    /// - Parameters:
    ///   - key: the key.
    ///   - store: the store's name.
    /// - Returns: the value, or `nil`.
    /// - Throws: a database error, or ``CoatySQLiteError`` for invalid stored JSON.
    public func localValue(forKey key: String, in store: String) throws -> JSONValue? {
        guard
            let text = try String.fetchOne(
                db,
                sql: "SELECT value FROM coaty_local WHERE store = ? AND key = ?",
                arguments: [store, key]
            )
        else { return nil }
        do {
            return try JSONValue(parsing: text)
        } catch {
            throw CoatySQLiteError("The local value of \(key) is not valid JSON (\(error)); set it again")
        }
    }

    /// The keys of a local store, sorted.
    /// - Parameter store: the store's name.
    /// - Returns: the keys.
    /// - Throws: a database error.
    public func localKeys(in store: String) throws -> [String] {
        try String.fetchAll(db, sql: "SELECT key FROM coaty_local WHERE store = ? ORDER BY key", arguments: [store])
    }

    /// The names of the local stores that hold a value, sorted.
    /// - Returns: the names.
    /// - Throws: a database error.
    public func localStores() throws -> [String] {
        try String.fetchAll(db, sql: "SELECT DISTINCT store FROM coaty_local ORDER BY store")
    }

    /// The indexes of the stored Coaty objects whose key and `objectId` are among `objectIds`, by
    /// objectId, in insertion order: one cached statement that binds the objectIds as one JSON
    /// array and reads only the index columns (the recorder's lookup of each batch, which as a
    /// ``rows(matching:)`` query built, prepared and bound two `IN` lists of the batch's size).
    /// - Parameter objectIds: the objectIds.
    /// - Returns: the indexes by objectId.
    /// - Throws: a database error.
    public func coatyObjectIndexes(withObjectIds objectIds: [String]) throws -> [String: [StoreIndex]] {
        guard !objectIds.isEmpty else { return [:] }
        let ids = JSONValue.array(objectIds.map(JSONValue.string)).serializedString()
        var indexes: [String: [StoreIndex]] = [:]
        let rows = try Row.fetchCursor(db.cachedStatement(sql: Self.objectIndexesSQL), arguments: [ids])
        while let row = try rows.next() {
            let id: String = row[0]
            indexes[id, default: []].append(StoreIndex(row[1], row[2]))
        }
        return indexes
    }

    /// The rows of ``coatyObjectIndexes(withObjectIds:)``: scope ``StoreScope/coatyObjects``, the
    /// key and the promoted `objectId` (the JSON's string member) among the bound array's strings.
    private static let objectIndexesSQL = """
        SELECT objectId, collection, key FROM coaty_rows
        WHERE objectId IN (SELECT value FROM json_each(?1)) AND key IN (SELECT value FROM json_each(?1))
        AND coreType IS NOT NULL AND objectType IS NOT NULL ORDER BY id
        """

    /// Writes rows in turn, in this call (the recorder's batch: one call instead of an `async`
    /// call per row).
    /// - Parameters:
    ///   - rows: the rows.
    ///   - mode: how an existing row at the same index is treated.
    /// - Returns: how many rows were written.
    /// - Throws: a database error.
    @discardableResult
    public func writeRows(_ rows: [StoreRow], mode: StoreWriteMode) throws -> Int {
        var written = 0
        var columns = ColumnTexts()
        for index in rows.indices where try write(rows[index], mode: mode, columns: &columns) { written += 1 }
        return written
    }

    /// Writes a row (an upsert keeps the row's place in insertion order).
    /// - Parameters:
    ///   - row: the row.
    ///   - mode: how an existing row is treated.
    /// - Returns: whether it was written.
    /// - Throws: a database error.
    @discardableResult
    public func write(_ row: StoreRow, mode: StoreWriteMode) throws -> Bool {
        var columns = ColumnTexts()
        return try write(row, mode: mode, columns: &columns)
    }

    /// ``write(_:mode:)`` with the columns' texts gathered in `columns` (reused across a batch).
    ///
    /// The recorder's hot path (every received object): the values are bound straight into the
    /// cached statement with SQLite's C API, without building `StatementArguments` (an array of
    /// existentials, then a copy per value: as much as SQLite's own insert took). The texts are
    /// copied once, into one buffer, and bound without SQLite copying each of them again (an
    /// allocation and a copy per column, eleven per row); the statement is reset and its
    /// bindings cleared while that buffer is still in reach, before it returns to GRDB's cache.
    private func write(_ row: StoreRow, mode: StoreWriteMode, columns: inout ColumnTexts) throws -> Bool {
        let sql =
            switch mode {
            case .upsert: Self.upsertSQL
            case .insert: Self.insertSQL
            case .update: Self.updateSQL
            }
        let prepared: Statement
        if let cached = writeStatements[mode] {
            prepared = cached
        } else {
            prepared = try db.cachedStatement(sql: sql)
            writeStatements[mode] = prepared
        }
        let statement = prepared.sqliteStatement
        columns.removeAll()
        if mode != .update {
            columns.append(row.index.collection)
            columns.append(row.index.key)
        }
        // A JSON column: the text the row has (a received object's, a receipt's), else its JSON serialized.
        if let text = row.objectText { columns.append(text) } else { columns.append(json: row.object) }
        // The metadata's tree is not asked for when it has its text (it would be parsed from it).
        if let text = row.metadataText { columns.append(text) } else { columns.append(json: row.metadata) }
        let promoted = row.promotedColumns
        columns.append(promoted.objectId)
        columns.append(promoted.objectType)
        columns.append(promoted.coreType)
        columns.append(promoted.name)
        columns.append(promoted.externalId)
        columns.append(promoted.parentObjectId)
        columns.append(promoted.locationId)
        if mode == .update {
            columns.append(row.index.collection)
            columns.append(row.index.key)
        }
        let (code, message) = columns.bound(to: statement) { () -> (Int32, String?) in
            let code = sqlite3_step(statement)
            return (code, code == SQLITE_DONE ? nil : String(cString: sqlite3_errmsg(db.sqliteConnection)))
        }
        guard code == SQLITE_DONE else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: sql)
        }
        return sqlite3_changes(db.sqliteConnection) > 0
    }

    /// The columns a row writes, in the order ``write(_:mode:)`` passes their values.
    private static let writtenColumns = ["collection", "key", "object", "metadata"] + PromotedColumns.names

    private static let insertPrefix =
        "INSERT INTO coaty_rows (\(writtenColumns.joined(separator: ", ")))"
        + " VALUES (\(Array(repeating: "?", count: writtenColumns.count).joined(separator: ", ")))"
        + " ON CONFLICT (collection, key)"

    /// An insert that replaces an existing row in place (keeping its place in insertion order).
    private static let upsertSQL =
        insertPrefix + " DO UPDATE SET "
        + writtenColumns.dropFirst(2).map { "\($0) = excluded.\($0)" }.joined(separator: ", ")

    /// An insert that leaves an existing row alone.
    private static let insertSQL = insertPrefix + " DO NOTHING"

    /// An update of an existing row (its columns after `collection` and `key`, then the index).
    private static let updateSQL =
        "UPDATE coaty_rows SET \(writtenColumns.dropFirst(2).map { "\($0) = ?" }.joined(separator: ", "))"
        + " WHERE collection = ? AND key = ?"

    /// Removes a row.
    /// - Parameter index: the index.
    /// - Returns: whether it existed.
    /// - Throws: a database error.
    @discardableResult
    public func removeRow(at index: StoreIndex) throws -> Bool {
        try db.cachedStatement(sql: "DELETE FROM coaty_rows WHERE collection = ? AND key = ?").execute(arguments: [
            index.collection, index.key,
        ])
        return db.changesCount > 0
    }

    /// Removes the rows a query selects: one `DELETE … RETURNING` when the whole filter translates.
    /// - Parameter query: the query.
    /// - Returns: the indexes removed.
    /// - Throws: a database error.
    @discardableResult
    public func removeRows(matching query: StoreQuery) throws -> [StoreIndex] {
        let plan = try plan(for: query).plan
        guard plan.isExact, plan.limitClause.isEmpty else {
            var removed: [StoreIndex] = []
            for row in try rows(matching: query) where try removeRow(at: row.index) { removed.append(row.index) }
            return removed
        }
        return try Row.fetchAll(
            db,
            sql: "DELETE FROM coaty_rows WHERE \(plan.whereClause) RETURNING collection, key",
            arguments: StatementArguments(plan.arguments)
        ).map { StoreIndex($0["collection"], $0["key"]) }
    }

    /// Sets or removes a local value.
    /// - Parameters:
    ///   - value: the value; `nil` removes it.
    ///   - key: the key.
    ///   - store: the store's name.
    /// - Throws: a database error.
    public func setLocalValue(_ value: JSONValue?, forKey key: String, in store: String) throws {
        if let value {
            try db.execute(
                sql: """
                    INSERT INTO coaty_local (store, key, value) VALUES (?, ?, ?)
                    ON CONFLICT (store, key) DO UPDATE SET value = excluded.value
                    """,
                arguments: [store, key, value.serializedString()]
            )
        } else {
            try db.execute(sql: "DELETE FROM coaty_local WHERE store = ? AND key = ?", arguments: [store, key])
        }
    }
}

/// SQLite's `SQLITE_TRANSIENT`: SQLite copies a bound value before the bind call returns (the C
/// macro, `(sqlite3_destructor_type)-1`, is not imported into Swift).
private let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// The texts of one row's columns in one buffer, bound to a statement without SQLite copying them
/// (`SQLITE_STATIC`), for the statement's step only: ``bound(to:_:)`` clears the bindings before
/// the buffer is out of reach.
struct ColumnTexts {
    /// The texts, one after another, after a first byte that keeps the buffer's address non-nil
    /// (an empty text must bind as text, not as `NULL`).
    private var bytes: [UInt8] = [0]
    /// Each column's text in `bytes`, or `nil` for `NULL`, in the statement's parameter order.
    private var spans: [Range<Int>?] = []

    init() {
        bytes.reserveCapacity(1024)
        spans.reserveCapacity(16)
    }

    mutating func removeAll() {
        bytes.removeSubrange(1...)
        spans.removeAll(keepingCapacity: true)
    }

    mutating func append(_ text: String?) {
        guard var text else { return spans.append(nil) }
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    mutating func append(_ text: [UInt8]) {
        text.withUnsafeBytes { append($0) }
    }

    private mutating func append(_ text: UnsafeRawBufferPointer) {
        let start = bytes.count
        bytes.append(contentsOf: text)
        spans.append(start..<bytes.count)
    }

    /// A JSON value's serialized text, or `NULL` for `nil`.
    mutating func append(json: JSONValue?) {
        guard let json else { return spans.append(nil) }
        let start = bytes.count
        json.serialize(into: &bytes)
        spans.append(start..<bytes.count)
    }

    /// Binds the texts to parameters 1, 2, … of `statement`, runs `body`, then resets the
    /// statement and clears its bindings.
    func bound<Result>(to statement: OpaquePointer?, _ body: () -> Result) -> Result {
        bytes.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            for (index, span) in spans.enumerated() {
                let position = Int32(index + 1)
                if let span {
                    _ = sqlite3_bind_text(statement, position, base + span.lowerBound, Int32(span.count), nil)
                } else {
                    sqlite3_bind_null(statement, position)
                }
            }
            defer {
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
            }
            return body()
        }
    }
}
