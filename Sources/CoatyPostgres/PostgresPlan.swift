import CoatyFilter
import CoatyModel
import CoatyStore
import PostgresNIO

/// SQL text with its numbered parameters (`$1`, `$2`, …).
struct PostgresSQL {
    /// The parameters bound so far.
    var binds = PostgresBindings()

    /// Binds a value and returns its placeholder.
    mutating func bind<Value: PostgresDynamicTypeEncodable>(_ value: Value) -> String {
        binds.append(value)
        return "$\(binds.count)"
    }

    /// Binds JSON text and returns a placeholder cast to `jsonb`.
    mutating func bindJSON(_ value: JSONValue) -> String {
        "\(bind(value.serializedString()))::jsonb"
    }
}

/// The SQL for a ``CoatyStore/StoreQuery``: a WHERE clause that is either exactly the query's
/// conditions or a necessary condition (every matching row satisfies it), and LIMIT/OFFSET when
/// exact.
///
/// Only conditions on a top-level member are translated (any key: `object -> $key` takes the key
/// as a parameter, so no key needs escaping). Every translation is two-valued (never SQL `NULL`),
/// so negations compose. Exact translations:
/// - Exists, NotExists: `object -> key IS [NOT] NULL` (a JSON `null` is a non-NULL `jsonb`);
/// - Equals, NotEquals, In, NotIn with string operands, on a promoted column (it holds the member
///   only when it is a string) or on `jsonb` (a `jsonb` string equals another exactly when their
///   bytes do); NotEquals and NotIn also hold for a value of another type ("exists and differs");
/// - Equals and NotEquals with a boolean operand;
/// - Contains and NotContains where `@>` gives Coaty's deep containment: a string or boolean
///   operand (an array contains it as an element, a scalar when equal, an object never); an object
///   operand whose members are strings, booleans or such objects (pushed down as
///   `object @> {key: operand}`, which the GIN index serves); a flat array of strings and booleans
///   (an array value must hold each element, an object value must have the elements as members
///   `"0"`, `"1"`, …, as Coaty's `Object.keys` walk does). Operands with numbers (PostgreSQL
///   compares them as exact decimals, JavaScript as doubles), `null` (Coaty throws) or nested
///   arrays (Coaty lets an object contain an array by index keys at any depth) are not pushed.
///
/// Necessary translations (the rows are then filtered again by ``CoatyFilter/ObjectMatcher``):
/// - Equals with a number operand: the value must be a number;
/// - Less/Greater/Between/NotBetween with a number operand below 2^53: a number value below 2^53
///   must compare as a double in SQL; other values stay candidates.
///
/// Ordering is never pushed down (Coaty orders strings by its own collation and mixed types as
/// V8 does); skip and take are pushed down only when the filter is exact and orders nothing.
struct PostgresPlan {
    /// The WHERE clause (never empty) with its parameters.
    var sql: PostgresSQL
    var whereClause: String
    /// ` LIMIT n OFFSET m` (literal numbers) or empty.
    var limitClause = ""
    /// Whether the SQL selects exactly the query's rows (no re-filtering needed).
    var isExact: Bool
    /// Whether the WHERE clause selects exactly the rows matching the conditions (ordering and
    /// paging aside).
    var conditionsAreExact = true

    /// The plan of a query.
    /// - Parameters:
    ///   - query: the query.
    ///   - bound: parameters already bound before the plan's own (theirs are `$1`…).
    ///   - numericProperties: top-level properties known to hold only numbers below 2^53 (or
    ///     nothing) in every row of the query's one collection: comparisons of them with numbers
    ///     are exact and written so that an index on `(object -> 'property')` serves them.
    init(
        _ query: StoreQuery,
        continuing bound: PostgresSQL = PostgresSQL(),
        numericProperties: Set<String> = []
    ) {
        var sql = bound
        var clauses: [String] = []
        switch query.scope {
        case .collection(let name):
            // A literal: the planner then matches a partial index (`WHERE collection = '…'`).
            clauses.append("collection = \(SQLText.literal(name))")
        case .collections(let names) where names.count == 1:
            clauses.append("collection = \(SQLText.literal(names[0]))")
        case .collections(let names):
            clauses.append(names.isEmpty ? "false" : "collection = ANY(\(sql.bind(names)))")
        case .coreTypes(let types):
            clauses.append(types.isEmpty ? "false" : "\"coreType\" = ANY(\(sql.bind(types)))")
        case .coatyObjects:
            clauses.append("\"coreType\" IS NOT NULL AND \"objectType\" IS NOT NULL")
        case .all:
            break
        }
        if let keys = query.keys {
            clauses.append(keys.isEmpty ? "false" : "key = ANY(\(sql.bind(keys)))")
        }
        var isExact = true
        if let conditions = query.filter?.conditions {
            var scratch = sql
            let translated = Self.translate(conditions, &scratch, numeric: numericProperties)
            if let text = translated.text, scratch.binds.count <= SQLText.maximumArguments {
                clauses.append(text)
                sql = scratch
                isExact = translated.isExact
            } else {
                // Beyond PostgreSQL's limits: every row in scope is a candidate for the matcher.
                isExact = translated.text == nil && translated.isExact
            }
        }
        self.whereClause = clauses.isEmpty ? "true" : clauses.map { "(\($0))" }.joined(separator: " AND ")
        self.sql = sql
        self.isExact = isExact
        self.conditionsAreExact = isExact
        if isExact, let filter = query.filter {
            if let paging = filter.exactSQLPaging {
                if let take = paging.take { limitClause += " LIMIT \(take)" }
                if paging.skip > 0 { limitClause += " OFFSET \(paging.skip)" }
            } else {
                self.isExact = false
            }
        }
    }

    /// A translation: `text == nil` means "no restriction" (every row is a candidate).
    struct Translation {
        var text: String?
        var isExact: Bool

        static var unrestricted: Translation { Translation(text: nil, isExact: false) }
        static func exact(_ text: String) -> Translation { Translation(text: text, isExact: true) }
        static func necessary(_ text: String) -> Translation { Translation(text: text, isExact: false) }
    }

    /// Translates conditions, at most ``CoatyStore/SQLText/maximumPushedConditions`` of them (as
    /// ``SQLPlan`` of the SQLite backend does: the first of a longer and-ed list, none of a longer
    /// or-ed list; the matcher checks the rest).
    static func translate(
        _ conditions: ObjectFilterConditions,
        _ sql: inout PostgresSQL,
        numeric: Set<String> = []
    ) -> Translation {
        switch conditions {
        case .condition(let condition):
            return translate(condition, &sql, numeric: numeric)
        case .and(let list):
            var texts: [String] = []
            var isExact = true
            for condition in list {
                guard texts.count < SQLText.maximumPushedConditions else {
                    isExact = false
                    break
                }
                let part = translate(condition, &sql, numeric: numeric)
                if let text = part.text { texts.append(text) }
                isExact = isExact && part.isExact
            }
            return Translation(
                text: texts.isEmpty ? nil : SQLText.balanced(texts.map { "(\($0))" }, " AND "),
                isExact: isExact
            )
        case .or(let list):
            if list.isEmpty { return .exact("false") }
            guard list.count <= SQLText.maximumPushedConditions else { return .unrestricted }
            // Translate into a scratch copy: an unrestricted part drops the whole disjunction.
            var scratch = sql
            let parts = list.map { translate($0, &scratch, numeric: numeric) }
            guard parts.allSatisfy({ $0.text != nil }) else { return .unrestricted }
            sql = scratch
            return Translation(
                text: SQLText.balanced(parts.compactMap(\.text).map { "(\($0))" }, " OR "),
                isExact: parts.allSatisfy(\.isExact)
            )
        }
    }

    /// The number to compare in SQL, or `nil` when the matcher must decide (`JSONValue.isExactSQLNumber`).
    static func smallNumber(_ value: JSONValue?) -> Double? {
        guard let value, value.isExactSQLNumber else { return nil }
        return value.doubleValue
    }

    /// Whether a string can be stored in `jsonb` (PostgreSQL rejects `\u0000`).
    static func isStorable(_ string: String) -> Bool { !string.utf8.contains(0) }

    /// A string, a boolean, or an object whose keys are storable and whose members are such values.
    static func isContainmentTree(_ value: JSONValue) -> Bool {
        switch value {
        case .string(let s): isStorable(s)
        case .bool: true
        case .object(let members):
            members.keys.allSatisfy(isStorable) && members.values.allSatisfy(isContainmentTree)
        default: false
        }
    }

    /// Translates one condition; parameters are bound only when it restricts the rows.
    static func translate(
        _ condition: ObjectFilterCondition,
        _ sql: inout PostgresSQL,
        numeric: Set<String> = []
    ) -> Translation {
        var local = sql
        let path = condition.property.path
        let translation =
            path.count == 1 && numeric.contains(path[0])
            ? numericComparison(condition.expression, key: path[0], &local) ?? translateBinding(condition, &local)
            : translateBinding(condition, &local)
        if translation.text != nil { sql = local }
        return translation
    }

    /// A comparison with numbers of a property that holds only numbers below 2^53 or nothing:
    /// exact (`jsonb` compares numbers numerically; a missing member satisfies none, as Coaty's
    /// operators are false on undefined), two-valued, and served by an index on
    /// `(object -> 'key')`. `nil` for other operators or operands.
    static func numericComparison(_ expression: ObjectFilterExpression, key: String, _ sql: inout PostgresSQL)
        -> Translation?
    {
        let value = "(object -> \(SQLText.literal(key)))"
        func number(_ operand: JSONValue?) -> JSONValue? {
            guard let operand, operand.isExactSQLNumber else { return nil }
            return operand
        }
        switch expression.operator {
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            guard let operand = number(expression.operand1), let op = expression.operator.sqlComparison else {
                return nil
            }
            return .exact("\(value) \(op) \(sql.bindJSON(operand)) AND \(value) IS NOT NULL")
        case .between, .notBetween:
            guard let a = number(expression.operand1), let b = number(expression.operand2),
                let x = a.doubleValue, let y = b.doubleValue
            else { return nil }
            let (low, high) = x <= y ? (a, b) : (b, a)
            let negation = expression.operator == .notBetween ? "NOT " : ""
            return .exact(
                "\(value) \(negation)BETWEEN \(sql.bindJSON(low)) AND \(sql.bindJSON(high)) AND \(value) IS NOT NULL"
            )
        case .equals, .notEquals:
            guard let operand = number(expression.operand1) else { return nil }
            let op = expression.operator == .equals ? "=" : "<>"
            return .exact("\(value) \(op) \(sql.bindJSON(operand)) AND \(value) IS NOT NULL")
        default:
            return nil
        }
    }

    /// The top-level properties a filter compares with numbers (candidates for
    /// ``numericComparison(_:key:_:)``).
    static func numericallyCompared(_ conditions: ObjectFilterConditions?) -> Set<String> {
        SQLText.properties(of: conditions) { expression in
            var scratch = PostgresSQL()
            return numericComparison(expression, key: "x", &scratch) != nil
        }
    }

    static func translateBinding(_ condition: ObjectFilterCondition, _ sql: inout PostgresSQL) -> Translation {
        let path = condition.property.path
        guard path.count == 1, isStorable(path[0]) else { return .unrestricted }
        let key = path[0]
        let promoted = PromotedColumns.names.contains(key) ? "\"\(key)\"" : nil
        let expression = condition.expression
        let value = "(object -> \(sql.bind(key)))"

        /// True exactly when the member is a string equal to one of `strings`.
        func stringIn(_ strings: [String], _ sql: inout PostgresSQL) -> String {
            if let promoted {
                return strings.count == 1
                    ? "coalesce(\(promoted) = \(sql.bind(strings[0])), false)"
                    : "coalesce(\(promoted) = ANY(\(sql.bind(strings))), false)"
            }
            if strings.count == 1 { return "coalesce(\(value) = to_jsonb(\(sql.bind(strings[0]))::text), false)" }
            return
                "coalesce(jsonb_typeof(\(value)) = 'string' AND (\(value) #>> '{}') = ANY(\(sql.bind(strings))), false)"
        }
        func strings(_ operand: JSONValue?) -> [String]? {
            guard case .array(let values)? = operand else { return nil }
            var result: [String] = []
            for case .string(let s) in values where isStorable(s) { result.append(s) }
            return result.count == values.count ? result : nil
        }
        /// True exactly when Coaty's deep Contains holds, or `nil` when it cannot be said in SQL.
        func contains(_ operand: JSONValue?, _ sql: inout PostgresSQL) -> String? {
            guard let operand else { return nil }
            switch operand {
            case .string, .bool:
                guard isContainmentTree(operand) else { return nil }
                return "coalesce(\(value) @> \(sql.bindJSON(operand)), false)"
            case .object:
                guard isContainmentTree(operand) else { return nil }
                let wrapped = JSONValue.object(JSONObject([(key, operand)]))
                return "object @> \(sql.bindJSON(wrapped))"
            case .array(let elements):
                guard elements.allSatisfy({ if case .object = $0 { false } else { isContainmentTree($0) } }) else {
                    return nil
                }
                let byIndex = JSONValue.object(
                    JSONObject(elements.enumerated().map { (String($0.offset), $0.element) })
                )
                return """
                    coalesce(CASE jsonb_typeof(\(value)) WHEN 'object' THEN \(value) @> \(sql.bindJSON(byIndex)) \
                    ELSE \(value) @> \(sql.bindJSON(operand)) END, false)
                    """
            default:
                return nil
            }
        }
        /// A necessary condition for a numeric comparison `value <op> …` (in a CASE, so that no
        /// cast of a non-number is ever evaluated).
        func numeric(_ comparison: String) -> String {
            """
            CASE WHEN jsonb_typeof(\(value)) IS DISTINCT FROM 'number' THEN true \
            WHEN abs(\(value)::numeric) >= 9007199254740992 THEN true \
            ELSE \(value)::numeric::float8 \(comparison) END
            """
        }

        switch expression.operator {
        case .exists:
            return .exact("\(value) IS NOT NULL")
        case .notExists:
            return .exact("\(value) IS NULL")
        case .equals, .notEquals:
            let negated = expression.operator == .notEquals
            let equal: String
            switch expression.operand1 {
            case .string(let s)? where isStorable(s):
                equal = stringIn([s], &sql)
            case .bool(let b)?:
                equal = "coalesce(\(value) = '\(b)'::jsonb, false)"
            case let operand? where !negated && smallNumber(operand) != nil:
                return .necessary("coalesce(jsonb_typeof(\(value)) = 'number', false)")
            default:
                return .unrestricted
            }
            return .exact(negated ? "\(value) IS NOT NULL AND NOT (\(equal))" : equal)
        case .in, .notIn:
            guard let list = strings(expression.operand1) else { return .unrestricted }
            let included = list.isEmpty ? "false" : stringIn(list, &sql)
            return .exact(expression.operator == .in ? included : "\(value) IS NOT NULL AND NOT (\(included))")
        case .contains, .notContains:
            guard let contained = contains(expression.operand1, &sql) else { return .unrestricted }
            return .exact(
                expression.operator == .contains ? contained : "\(value) IS NOT NULL AND NOT (\(contained))"
            )
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            guard let number = smallNumber(expression.operand1) else { return .unrestricted }
            let op = expression.operator.sqlComparison ?? ">="
            return .necessary(numeric("\(op) \(sql.bind(number))"))
        case .between, .notBetween:
            guard let a = smallNumber(expression.operand1), let b = smallNumber(expression.operand2) else {
                return .unrestricted
            }
            let (low, high) = a <= b ? (a, b) : (b, a)
            let negation = expression.operator == .notBetween ? "NOT " : ""
            return .necessary(numeric("\(negation)BETWEEN \(sql.bind(low)) AND \(sql.bind(high))"))
        case .like:
            return .unrestricted
        }
    }
}
