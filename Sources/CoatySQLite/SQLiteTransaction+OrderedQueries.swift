import CoatyFilter
import CoatyModel
import CoatyStore
import CoatySync
import GRDB
import GRDBSQLite
import Synchronization

// MARK: - Ordered queries

extension SQLiteTransaction {
    /// The rows of a query that orders by top-level properties: with an index on the first
    /// (``SQLiteDatabase/createIndex(collection:property:)``) ordered and paged by SQL
    /// (`ORDER BY json_extract(…)`, then insertion order); without one, when the conditions are
    /// exact, by sorting the candidates' keys in Swift (``pageIds(orderedBy:plan:skip:take:)``);
    /// `nil` otherwise or when SQL's order might not be Coaty's.
    ///
    /// SQL orders numbers numerically, puts a missing value first (ascending) or last
    /// (descending), and keeps insertion order among equals — exactly Coaty's order as long as
    /// every candidate's value at each ordering property is a number below 2^53 or missing. That
    /// is proven first (with a declared index on the property, a few index range lookups;
    /// without, while the keys are read); any other value (a string, whose collation is Coaty's
    /// own, a boolean, `null`, an array or object, a huge number) leaves the query to
    /// ``CoatyFilter/ObjectMatcher``. Walking an index, rows come from a cursor: when the WHERE
    /// clause is not exact, each is checked by the matcher, and reading stops at `skip + take`
    /// matches.
    func orderedRows(_ query: StoreQuery, _ plan: SQLPlan) throws -> [StoreRow]? {
        guard let filter = query.filter, let ordering = filter.orderByProperties, !ordering.isEmpty else { return nil }
        var keys: [(key: String, descending: Bool)] = []
        for level in ordering {
            guard level.property.path.count == 1, JSONIndexDeclarations.isIndexable(level.property.path[0]) else {
                return nil
            }
            keys.append((level.property.path[0], level.order == .descending))
        }
        let walk = indexClause(query.scope, keys[0].key)
        guard !walk.isEmpty || plan.conditionsAreExact else { return nil }
        let take = filter.take ?? 0
        if take < 0 { return [] }
        let skip = max(filter.skip ?? 0, 0)
        let columns = query.includesMetadata ? Self.columns : Self.columnsWithoutMetadata
        // Without an index on the first property: one pass reads every candidate's sort keys
        // (``SQLiteFunctions``' probe, no JSON parse), Swift sorts them, and only the page is
        // read and decoded.
        if walk.isEmpty {
            guard let ids = try pageIds(orderedBy: keys, plan: plan, skip: skip, take: take) else { return nil }
            return try rows(withIds: ids, columns: columns)
        }
        guard try orderIsNumeric(keys.map(\.key), query: query, plan: plan) else { return nil }
        let order =
            keys.map { "\(SQLPlan.valueExpression($0.key)) \($0.descending ? "DESC" : "ASC")" }.joined(separator: ", ")
            + ", id"
        let exact = plan.conditionsAreExact
        let limit = exact && (take > 0 || skip > 0) ? " LIMIT \(take > 0 ? take : -1) OFFSET \(skip)" : ""
        // Walk the index of the first property (SQLite's planner, without statistics, would rather
        // read the whole collection and sort it).
        if exact {
            // The page's ids first, then their rows: SQLite sorts ties by id in a temporary tree
            // that would otherwise carry every skipped row's JSON (5 × faster for skip 1000).
            let ids = try Int64.fetchAll(
                statement("SELECT id FROM coaty_rows\(walk) WHERE \(plan.whereClause) ORDER BY \(order)\(limit)"),
                arguments: StatementArguments(plan.arguments)
            )
            return try rows(withIds: ids, columns: columns)
        }
        let cursor = try Row.fetchCursor(
            statement("SELECT \(columns) FROM coaty_rows\(walk) WHERE \(plan.whereClause) ORDER BY \(order)\(limit)"),
            arguments: StatementArguments(plan.arguments)
        )
        let matcher = CompiledObjectFilter(ObjectFilter(conditions: filter.conditions))
        var rows: [StoreRow] = []
        var skipped = 0
        while let raw = try cursor.next() {
            let row = try decode(raw)
            if !matcher.matches(row.object) { continue }
            if skipped < skip {
                skipped += 1
                continue
            }
            rows.append(row)
            if take > 0, rows.count == take { break }
        }
        return rows
    }

    /// The ids of the page `skip`, `take` (0: all) of the rows selected by `plan` (whose conditions
    /// are exact), ordered by `keys` as SQL orders numbers (a missing value first ascending and last
    /// descending; insertion order among equals), read in one pass with `coaty_number`; `nil` when
    /// a candidate holds anything but a number below 2^53 or nothing at a key (then the matcher
    /// orders, with Coaty's collation).
    private func pageIds(orderedBy keys: [(key: String, descending: Bool)], plan: SQLPlan, skip: Int, take: Int)
        throws -> [Int64]?
    {
        let sql =
            "SELECT id, " + keys.map { SQLiteFunctions.number($0.key) }.joined(separator: ", ")
            + " FROM coaty_rows WHERE \(plan.whereClause)"
        let prepared = try statement(sql)
        try prepared.setArguments(StatementArguments(plan.arguments))
        let sqlite = prepared.sqliteStatement
        defer {
            sqlite3_reset(sqlite)
            sqlite3_clear_bindings(sqlite)
        }
        // Read with SQLite's C API (GRDB's rows cost more than the probe, per candidate). A missing
        // value is -infinity: below every number, whichever the direction, as SQL's NULL.
        let width = keys.count
        var ids: [Int64] = []
        var values: [Double] = []
        while try step(sqlite, sql: sql) {
            ids.append(sqlite3_column_int64(sqlite, 0))
            for column in 1...Int32(width) {
                switch sqlite3_column_type(sqlite, column) {
                case SQLITE_NULL: values.append(-.infinity)
                case SQLITE_INTEGER, SQLITE_FLOAT: values.append(sqlite3_column_double(sqlite, column))
                default: return nil
                }
            }
        }
        let end = take > 0 ? min(skip + take, ids.count) : ids.count
        guard skip < end else { return [] }
        var order = Array(0..<ids.count)
        order.sort { a, b in
            for (k, key) in keys.enumerated() {
                let (x, y) = (values[a * width + k], values[b * width + k])
                if x != y { return key.descending ? x > y : x < y }
            }
            return ids[a] < ids[b]
        }
        return order[skip..<end].map { ids[$0] }
    }

    /// The rows with these ids (in chunks of at most 500 per statement), in the order of `ids`.
    private func rows(withIds ids: [Int64], columns: String) throws -> [StoreRow] {
        var byId: [Int64: StoreRow] = [:]
        byId.reserveCapacity(ids.count)
        for start in stride(from: 0, to: ids.count, by: 500) {
            let chunk = Array(ids[start..<min(start + 500, ids.count)])
            let sql = "SELECT \(columns), id FROM coaty_rows WHERE id IN (\(SQLPlan.placeholders(chunk.count)))"
            // A page of up to 64 rows (the usual `take`) from the statement cache.
            let raws = try Row.fetchAll(
                chunk.count <= 64 ? statement(sql) : db.makeStatement(sql: sql),
                arguments: StatementArguments(chunk)
            )
            for raw in raws { byId[raw[4]] = try decode(raw) }
        }
        return ids.compactMap { byId[$0] }
    }

    /// Whether every candidate's value at each of `keys` is a number below 2^53 in magnitude, or
    /// missing: for an indexed key, a few range lookups in its index (over the whole collection);
    /// for another, one scan of the candidates in SQLite (with `coaty_number`).
    private func orderIsNumeric(_ keys: [String], query: StoreQuery, plan: SQLPlan) throws -> Bool {
        var scans: [String] = []
        for key in keys {
            if let numeric = try holdsOnlyNumbers(key, in: query.scope) {
                if !numeric { return false }
                continue
            }
            scans.append("typeof(\(SQLiteFunctions.number(key))) = 'text'")
        }
        if scans.isEmpty { return true }
        let sql =
            "SELECT EXISTS (SELECT 1 FROM coaty_rows WHERE (\(plan.whereClause)) AND ("
            + scans.map { "(\($0))" }.joined(separator: " OR ") + "))"
        return try Bool.fetchOne(statement(sql), arguments: StatementArguments(plan.arguments)) == false
    }

    /// Whether every row of the scope's one collection holds a number below 2^53 in magnitude,
    /// or nothing, at `property`, proven by range lookups in the property's declared index: text
    /// (strings, arrays, objects) sorts after every number there, JSON `null` reads as `NULL`,
    /// `true` and `false` as 1 and 0. `nil` without such an index. Proven once for each state of
    /// the database this connection sees (``NumericKnowledge``).
    func holdsOnlyNumbers(_ property: String, in scope: StoreScope) throws -> Bool? {
        guard let collection = scope.singleCollection, indexes.contains(collection: collection, property: property)
        else { return nil }
        let key = JSONIndexDeclarations.Key(collection: collection, property: property)
        let stamp = try NumericKnowledge.Stamp(db)
        if let known = numericKnowledge.known(key, connection: db, stamp: stamp) { return known }
        let numeric = try Bool.fetchOne(statement(NumericKnowledge.probe(key))) == false
        numericKnowledge.record(numeric, for: key, connection: db, stamp: stamp)
        return numeric
    }

    /// The plan of a query, with numeric comparisons of indexed properties that hold only numbers
    /// made exact and sargable, and ` INDEXED BY` the index of the first such comparison of a
    /// single condition or a conjunction (SQLite's planner, without statistics, would rather read
    /// the whole collection by its `collection` index).
    func plan(for query: StoreQuery) throws -> (plan: SQLPlan, hint: String) {
        guard query.scope.singleCollection != nil, let conditions = query.filter?.conditions else {
            return (SQLPlan(query), "")
        }
        var numeric: Set<String> = []
        for property in SQLPlan.numericallyCompared(conditions)
        where try holdsOnlyNumbers(property, in: query.scope) == true {
            numeric.insert(property)
        }
        guard !numeric.isEmpty else { return (SQLPlan(query), "") }
        let conjuncts: [ObjectFilterCondition]
        switch conditions {
        case .condition(let condition): conjuncts = [condition]
        case .and(let list): conjuncts = list
        case .or: conjuncts = []
        }
        let indexed = conjuncts.first { $0.property.path.count == 1 && numeric.contains($0.property.path[0]) }
        let hint = indexed.map { indexClause(query.scope, $0.property.path[0]) } ?? ""
        return (SQLPlan(query, numericProperties: numeric), hint)
    }

    /// ` INDEXED BY <name>` when an index is declared on `property` of the scope's one
    /// collection, else empty.
    private func indexClause(_ scope: StoreScope, _ property: String) -> String {
        guard let collection = scope.singleCollection, indexes.contains(collection: collection, property: property)
        else { return "" }
        return " INDEXED BY " + JSONIndexDeclarations.Key(collection: collection, property: property).indexName
    }
}
