import CoatyFilter
import CoatyModel
import CoatyStore
import GRDB

/// The SQL for a ``StoreQuery``: a WHERE clause that is either exactly the query's conditions
/// or a necessary condition (every matching row satisfies it), and LIMIT/OFFSET when exact.
///
/// Exact translations (top-level properties named like identifiers; the promoted columns hold
/// a member's value only when it is a JSON string, so they compare as Coaty compares strings):
/// - Exists, NotExists: `json_type(object, path) IS [NOT] NULL` (a JSON `null` has type `'null'`);
/// - Equals, NotEquals, In, NotIn with string operands (NotEquals and NotIn also hold for a
///   value of another type, as Coaty's "exists and differs" says).
///
/// Necessary translations (the rows are then filtered again by ``CoatyFilter/ObjectMatcher``),
/// evaluated by `coaty_numeric_test` (``SQLiteFunctions``: one pass over the object's top level
/// instead of three JSON parses per row):
/// - Less/Greater/Between/NotBetween with a number operand: a number value must compare in SQL;
///   values of other types (strings, `null`, booleans, which JavaScript compares as numbers)
///   and numbers beyond 2^53 stay candidates;
/// - Equals with a number operand: the value must be a number.
///
/// Ordering is never pushed down (Coaty orders strings by its own collation and mixed types as
/// V8 does); skip and take are pushed down only when the filter is exact and orders nothing.
struct SQLPlan {
    /// The WHERE clause (never empty).
    var whereClause: String
    /// Its arguments.
    var arguments: [(any DatabaseValueConvertible)?]
    /// ` LIMIT ? OFFSET ?` (with literal numbers) or empty.
    var limitClause = ""
    /// Whether the SQL selects exactly the query's rows (no re-filtering needed).
    var isExact: Bool
    /// Whether the WHERE clause selects exactly the rows matching the conditions (ordering and
    /// paging aside).
    var conditionsAreExact: Bool

    /// The plan of a query.
    /// - Parameters:
    ///   - query: the query.
    ///   - numericProperties: top-level properties known to hold only numbers below 2^53 (or
    ///     nothing) in every row of the query's collection: comparisons of them with numbers are
    ///     exact in SQL, written so that an index on the property serves them.
    init(_ query: StoreQuery, numericProperties: Set<String> = []) {
        var clauses: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        switch query.scope {
        case .collection(let name):
            // A literal: SQLite uses a partial index (`WHERE collection = '…'`) only when the
            // query's own WHERE says the same literal.
            clauses.append("collection = \(SQLText.literal(name))")
        case .collections(let names) where names.count == 1:
            clauses.append("collection = \(SQLText.literal(names[0]))")
        case .collections(let names):
            clauses.append(names.isEmpty ? "0" : "collection IN (\(Self.placeholders(names.count)))")
            arguments += names.map { $0 }
        case .coreTypes(let types):
            clauses.append(types.isEmpty ? "0" : "coreType IN (\(Self.placeholders(types.count)))")
            arguments += types.map { $0 }
        case .coatyObjects:
            clauses.append("coreType IS NOT NULL AND objectType IS NOT NULL")
        case .all:
            break
        }
        if let keys = query.keys {
            clauses.append(keys.isEmpty ? "0" : "key IN (\(Self.placeholders(keys.count)))")
            arguments += keys.map { $0 }
        }
        var isExact = true
        if let conditions = query.filter?.conditions {
            let translated = Self.translate(conditions, numeric: numericProperties)
            if let sql = translated.sql, sql.arguments.count <= SQLText.maximumArguments {
                clauses.append(sql.text)
                arguments += sql.arguments
                isExact = translated.isExact
            } else {
                // Beyond SQLite's limits: every row in scope is a candidate for the matcher.
                isExact = translated.sql == nil && translated.isExact
            }
        }
        self.whereClause = clauses.isEmpty ? "1" : clauses.map { "(\($0))" }.joined(separator: " AND ")

        self.arguments = arguments
        self.isExact = isExact
        self.conditionsAreExact = isExact
        if isExact, let filter = query.filter {
            if let paging = filter.exactSQLPaging {
                if paging.take != nil || paging.skip > 0 {
                    limitClause = " LIMIT \(paging.take ?? -1) OFFSET \(paging.skip)"
                }
            } else {
                self.isExact = false
            }
        }
    }

    struct SQL {
        var text: String
        var arguments: [(any DatabaseValueConvertible)?]
    }

    /// A translation: `sql == nil` means "no restriction" (every row is a candidate).
    struct Translation {
        var sql: SQL?
        var isExact: Bool

        static var unrestricted: Translation { Translation(sql: nil, isExact: false) }
    }

    /// Translates conditions, at most ``CoatyStore/SQLText/maximumPushedConditions`` of them: of a
    /// longer and-ed list the first that translate (a necessary condition; the matcher checks the
    /// rest), of a longer or-ed list none (a part of a disjunction restricts nothing).
    static func translate(_ conditions: ObjectFilterConditions, numeric: Set<String> = []) -> Translation {
        switch conditions {
        case .condition(let condition):
            return translate(condition, numeric: numeric)
        case .and(let list):
            var sqls: [SQL] = []
            var isExact = true
            for condition in list {
                guard sqls.count < SQLText.maximumPushedConditions else {
                    isExact = false
                    break
                }
                let part = translate(condition, numeric: numeric)
                if let sql = part.sql { sqls.append(sql) }
                isExact = isExact && part.isExact
            }
            let sql =
                sqls.isEmpty
                ? nil
                : SQL(
                    text: SQLText.balanced(sqls.map { "(\($0.text))" }, " AND "),
                    arguments: sqls.flatMap(\.arguments)
                )
            return Translation(sql: sql, isExact: isExact)
        case .or(let list):
            if list.isEmpty { return Translation(sql: SQL(text: "0", arguments: []), isExact: true) }
            guard list.count <= SQLText.maximumPushedConditions else { return .unrestricted }
            let parts = list.map { translate($0, numeric: numeric) }
            guard parts.allSatisfy({ $0.sql != nil }) else { return .unrestricted }
            let sqls = parts.compactMap(\.sql)
            return Translation(
                sql: SQL(
                    text: SQLText.balanced(sqls.map { "(\($0.text))" }, " OR "),
                    arguments: sqls.flatMap(\.arguments)
                ),
                isExact: parts.allSatisfy(\.isExact)
            )
        }
    }

    /// 2^53: numbers at or beyond it are left to the matcher (JavaScript compares them as doubles).
    static let exactLimit = JSONValue.exactSQLNumberLimit

    /// The number to compare in SQL (an integer stays one), or `nil` when the matcher must decide
    /// (`JSONValue.isExactSQLNumber`).
    static func smallNumber(_ value: JSONValue?) -> (any DatabaseValueConvertible)? {
        guard let value, value.isExactSQLNumber else { return nil }
        switch value {
        case .int(let i): return i
        case .double(let d): return d
        default: return nil
        }
    }

    static func translate(_ condition: ObjectFilterCondition, numeric: Set<String> = []) -> Translation {
        let path = condition.property.path
        guard path.count == 1, JSONIndexDeclarations.isIndexable(path[0]) else { return .unrestricted }
        let key = path[0]
        if numeric.contains(key), let exact = numericComparison(condition.expression, valueExpression(key)) {
            return exact
        }
        let type = typeExpression(key)
        let value = valueExpression(key)
        let isPromoted = PromotedColumns.names.contains(key)
        let expression = condition.expression
        func exact(_ text: String, _ arguments: [(any DatabaseValueConvertible)?]) -> Translation {
            Translation(sql: SQL(text: text, arguments: arguments), isExact: true)
        }
        func necessary(_ text: String, _ arguments: [(any DatabaseValueConvertible)?]) -> Translation {
            Translation(sql: SQL(text: text, arguments: arguments), isExact: false)
        }
        /// SQL that is true exactly when the member is a string equal to one of `strings`.
        func stringIn(_ strings: [String]) -> SQL {
            let list = strings.count == 1 ? "= ?" : "IN (\(placeholders(strings.count)))"
            if isPromoted { return SQL(text: "\(key) IS NOT NULL AND \(key) \(list)", arguments: strings.map { $0 }) }
            return SQL(text: "\(type) = 'text' AND \(value) \(list)", arguments: strings.map { $0 })
        }
        func strings(_ operand: JSONValue?) -> [String]? {
            guard case .array(let values)? = operand else { return nil }
            var result: [String] = []
            for case .string(let s) in values { result.append(s) }
            return result.count == values.count ? result : nil
        }
        switch expression.operator {
        case .exists:
            return exact("\(type) IS NOT NULL", [])
        case .notExists:
            return exact("\(type) IS NULL", [])
        case .equals:
            if case .string(let s)? = expression.operand1 {
                let sql = stringIn([s])
                return exact(sql.text, sql.arguments)
            }
            if let number = smallNumber(expression.operand1) {
                return necessary(SQLiteFunctions.numericTest(key, .equals), [number, nil])
            }
            return .unrestricted
        case .notEquals:
            guard case .string(let s)? = expression.operand1 else { return .unrestricted }
            let equal = stringIn([s])
            return exact("\(type) IS NOT NULL AND NOT (\(equal.text))", equal.arguments)
        case .in:
            guard let list = strings(expression.operand1) else { return .unrestricted }
            if list.isEmpty { return exact("0", []) }
            let sql = stringIn(list)
            return exact(sql.text, sql.arguments)
        case .notIn:
            guard let list = strings(expression.operand1) else { return .unrestricted }
            if list.isEmpty { return exact("\(type) IS NOT NULL", []) }
            let included = stringIn(list)
            return exact("\(type) IS NOT NULL AND NOT (\(included.text))", included.arguments)
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            guard let number = smallNumber(expression.operand1) else { return .unrestricted }
            let test: SQLiteFunctions.NumericTest =
                switch expression.operator {
                case .lessThan: .lessThan
                case .lessThanOrEqual: .lessThanOrEqual
                case .greaterThan: .greaterThan
                default: .greaterThanOrEqual
                }
            return necessary(SQLiteFunctions.numericTest(key, test), [number, nil])
        case .between, .notBetween:
            guard let a = smallNumber(expression.operand1), let b = smallNumber(expression.operand2),
                let x = expression.operand1?.doubleValue, let y = expression.operand2?.doubleValue
            else { return .unrestricted }
            let (low, high) = x <= y ? (a, b) : (b, a)
            return necessary(
                SQLiteFunctions.numericTest(key, expression.operator == .notBetween ? .notBetween : .between),
                [low, high]
            )
        case .like, .contains, .notContains:
            return .unrestricted
        }
    }

    /// A comparison with numbers of a property that holds only numbers below 2^53 or nothing,
    /// exact and sargable (`json_extract(…) < ?`: an expression index on the property serves it):
    /// SQL compares such numbers as JavaScript does, and a missing value (`NULL`) satisfies none,
    /// as Coaty's operators are false on undefined. `nil` for other operators or operands.
    static func numericComparison(_ expression: ObjectFilterExpression, _ value: String) -> Translation? {
        switch expression.operator {
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            guard let number = smallNumber(expression.operand1), let op = expression.operator.sqlComparison else {
                return nil
            }
            return Translation(sql: SQL(text: "\(value) \(op) ?", arguments: [number]), isExact: true)
        case .between, .notBetween:
            guard let a = smallNumber(expression.operand1), let b = smallNumber(expression.operand2),
                let x = expression.operand1?.doubleValue, let y = expression.operand2?.doubleValue
            else { return nil }
            let (low, high) = x <= y ? (a, b) : (b, a)
            let negation = expression.operator == .notBetween ? "NOT " : ""
            return Translation(
                sql: SQL(text: "\(value) \(negation)BETWEEN ? AND ?", arguments: [low, high]),
                isExact: true
            )
        case .equals, .notEquals:
            guard let number = smallNumber(expression.operand1) else { return nil }
            let op = expression.operator == .equals ? "=" : "<>"
            return Translation(sql: SQL(text: "\(value) \(op) ?", arguments: [number]), isExact: true)
        default:
            return nil
        }
    }

    /// The top-level properties a filter compares with numbers (candidates for ``numericComparison``).
    static func numericallyCompared(_ conditions: ObjectFilterConditions?) -> Set<String> {
        SQLText.properties(of: conditions) { numericComparison($0, "x") != nil }
    }

    /// `json_extract(object, '$.key')` for a simple key (literal, as an expression index says it).
    static func valueExpression(_ key: String) -> String { "json_extract(object, '$.\(key)')" }

    /// `json_type(object, '$.key')` for a simple key.
    static func typeExpression(_ key: String) -> String { "json_type(object, '$.\(key)')" }

    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}
