public import CoatyModel
public import CoatyFilter

/// A transaction that also reads rows with SQL written by the caller (the SQLite and PostgreSQL
/// backends): the escape hatch for what an `ObjectFilter` cannot say — a computed expression, a
/// function of the database, a comparison between two members.
///
/// The condition is SQL over the row table: `object` is the item's JSON (`TEXT` read with
/// `json_extract(object, '$.a')` in SQLite, `jsonb` read with `object->>'a'` in PostgreSQL),
/// `metadata` the metadata's, and `objectId`, `objectType`, `coreType`, `name`, `externalId`,
/// `parentObjectId`, `locationId` are the promoted columns (quote them in PostgreSQL). Arguments
/// are bound to the placeholders in order — `?` in SQLite, `$1`, `$2`, … in PostgreSQL — and are
/// never spliced into the text. Rows outside the scope are never returned.
///
/// ```swift
/// let dim = try await connection.read { tx in
///     try Light.read(tx).matchingSQL(
///         "json_extract(object, '$.luminance') < json_extract(object, '$.minimum') * ?",
///         arguments: [1.5],
///         orderBySQL: "name"
///     )
/// }
/// ```
public protocol SQLReadTransaction: ReadTransactionType {
    /// The rows in `scope` satisfying `condition`.
    /// - Parameters:
    ///   - scope: the rows looked at.
    ///   - condition: an SQL boolean expression; placeholders for `arguments`.
    ///   - arguments: the values bound to the placeholders (strings, numbers, booleans, `null`;
    ///     arrays and objects as their JSON text).
    ///   - orderBy: an SQL ORDER BY list; insertion order when `nil`.
    ///   - limit: the most rows, when set.
    /// - Returns: the rows.
    /// - Throws: a backend error, naming what the database refused.
    func rows(
        in scope: StoreScope,
        whereSQL condition: String,
        arguments: [JSONValue],
        orderBySQL orderBy: String?,
        limit: Int?
    ) async throws -> [StoreRow]
}

/// SQL text that stays within a database's limits, for backends that push filters into SQL.
public enum SQLText {
    /// The most bound arguments a pushed-down filter may use: below SQLite's 32 766 and
    /// PostgreSQL's 65 535 with room for the scope's own. A filter that needs more is evaluated by
    /// ``CoatyFilter/ObjectMatcher`` instead (every row in scope is a candidate).
    public static let maximumArguments = 30_000

    /// The most conditions of one filter a backend pushes into SQL. SQLite's planner and code
    /// generator compare each term of a WHERE clause with the others (their cost grows with the
    /// square of the terms: seconds for a few thousand), so of a longer and-ed list only the first
    /// that translate go into SQL, as a necessary condition, and ``CoatyFilter/ObjectMatcher``
    /// checks the rest on the rows they select; a longer or-ed list restricts nothing in SQL.
    /// ("Indexes and fast queries" in the CoatyStore docs has the measurements.)
    public static let maximumPushedConditions = 64

    /// The indexable top-level properties (``JSONIndexDeclarations/isIndexable(_:)``) whose
    /// conditions satisfy `test` (a backend: "I can compare this exactly when the property holds
    /// only numbers").
    /// - Parameters:
    ///   - conditions: a filter's conditions.
    ///   - test: whether a condition's expression qualifies.
    /// - Returns: the properties.
    public static func properties(
        of conditions: ObjectFilterConditions?,
        where test: (ObjectFilterExpression) -> Bool
    ) -> Set<String> {
        let list: [ObjectFilterCondition]
        switch conditions {
        case .condition(let condition)?: list = [condition]
        case .and(let conditions)?, .or(let conditions)?: list = conditions
        case nil: list = []
        }
        var keys: Set<String> = []
        for condition in list {
            let path = condition.property.path
            if path.count == 1, JSONIndexDeclarations.isIndexable(path[0]), test(condition.expression) {
                keys.insert(path[0])
            }
        }
        return keys
    }

    /// A string as an SQL string literal: in single quotes, each `'` doubled (standard SQL, as
    /// SQLite and PostgreSQL with `standard_conforming_strings` read it). For names the SQL must
    /// hold literally, such as the collection a partial index is defined on.
    /// - Parameter text: the string.
    /// - Returns: the literal.
    public static func literal(_ text: String) -> String {
        "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "''") + "'"
    }

    /// `parts` joined by `separator` (` AND `, ` OR `) as a balanced tree of parentheses: a Query
    /// with thousands of conditions then has an expression depth of about log₂ of their number
    /// (SQLite refuses depths beyond 1000; a flat chain of n terms has depth n).
    /// - Parameters:
    ///   - parts: the operands, each already parenthesized or atomic.
    ///   - separator: the operator with its spaces.
    /// - Returns: the joined text.
    public static func balanced(_ parts: [String], _ separator: String) -> String {
        if parts.count <= 8 { return parts.joined(separator: separator) }
        let middle = parts.count / 2
        return "(" + balanced(Array(parts[..<middle]), separator) + ")" + separator + "("
            + balanced(Array(parts[middle...]), separator) + ")"
    }
}

extension ObjectFilterOperator {
    /// The SQL operator of a numeric comparison (`<`, `<=`, `>`, `>=`), or `nil` for any other
    /// operator; for backends that push conditions into SQL.
    public var sqlComparison: String? {
        switch self {
        case .lessThan: "<"
        case .lessThanOrEqual: "<="
        case .greaterThan: ">"
        case .greaterThanOrEqual: ">="
        default: nil
        }
    }
}

extension JSONValue {
    /// 2^53: SQL compares numbers below this magnitude as JavaScript does; conditions on larger
    /// ones are left to ``CoatyFilter/ObjectMatcher`` (JavaScript compares them as doubles).
    public static let exactSQLNumberLimit = JSONMemberProbe.exactLimit

    /// Whether this is a finite number below ``exactSQLNumberLimit`` in magnitude, so a backend
    /// may compare it in SQL.
    public var isExactSQLNumber: Bool {
        switch self {
        case .int(let i): Swift.abs(Double(i)) < Self.exactSQLNumberLimit
        case .double(let d): d.isFinite && Swift.abs(d) < Self.exactSQLNumberLimit
        default: false
        }
    }
}
