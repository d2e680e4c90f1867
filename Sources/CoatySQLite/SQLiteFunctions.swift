import CoatyFilter
import CoatyModel
import GRDB
import GRDBSQLite

/// The SQL functions every connection of a ``SQLiteDatabase`` has: conditions on and orderings by
/// a JSON property that has no index, evaluated with ``CoatyModel/JSONMemberProbe`` (one pass over
/// the object's top level, nothing built) instead of `json_type` and `json_extract` (each a full
/// parse of the object, three of them per row for one numeric condition).
///
/// - `coaty_number(object, 'key')`: `NULL` when the object certainly has no such member, the
///   number when it is one below 2^53 in magnitude, else the text `'?'` (not a number, a larger
///   one, or undecided).
/// - `coaty_numeric_test(object, 'key', test, a, b)`: 1 when the row is a candidate for a numeric
///   condition (``NumericTest``) on the member, else 0. It is a *necessary* condition with the
///   semantics of the SQL it replaces: a missing member never matches; a number below 2^53
///   compares; a larger number, or a member the probe cannot decide, is a candidate; any other
///   value is a candidate for the comparisons (JavaScript compares strings, `null` and booleans
///   as numbers) and not for equality.
enum SQLiteFunctions {
    /// The tests of `coaty_numeric_test`, by their code in SQL.
    enum NumericTest: Int32 {
        case lessThan = 1
        case lessThanOrEqual
        case greaterThan
        case greaterThanOrEqual
        case between
        case notBetween
        case equals
    }

    /// Adds the functions to a connection (in `prepareDatabase`).
    static func register(_ db: Database) throws {
        // Deterministic (SQLite may factor out calls with the same arguments) and innocuous (no
        // side effects: allowed in views and triggers of an untrusted schema).
        let flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS
        for (name, arity, function) in [
            ("coaty_number", Int32(2), coatyNumber),
            ("coaty_numeric_test", Int32(5), coatyNumericTest),
        ] {
            let code = sqlite3_create_function_v2(db.sqliteConnection, name, arity, flags, nil, function, nil, nil, nil)
            guard code == SQLITE_OK else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot add the function \(name)")
            }
        }
    }

    /// `coaty_number(object, key)` in SQL.
    static func number(_ key: String) -> String { "coaty_number(object, '\(key)')" }

    /// `coaty_numeric_test(object, key, test, ?, ?)` in SQL (two arguments to bind: `a`, and `b`
    /// or `NULL`).
    static func numericTest(_ key: String, _ test: NumericTest) -> String {
        "coaty_numeric_test(object, '\(key)', \(test.rawValue), ?, ?)"
    }
}

/// The probe of argument 0 (the object's text) for the member named by argument 1.
private func probe(_ arguments: UnsafeMutablePointer<OpaquePointer?>) -> JSONMemberProbe {
    guard let text = sqlite3_value_text(arguments[0]), let key = sqlite3_value_text(arguments[1]) else {
        return .undecided
    }
    return JSONMemberProbe.probe(
        UnsafeRawBufferPointer(start: key, count: Int(sqlite3_value_bytes(arguments[1]))),
        in: UnsafeRawBufferPointer(start: text, count: Int(sqlite3_value_bytes(arguments[0])))
    )
}

/// `coaty_number`: called by SQLite on the querying thread, a C function pointer (no captures).
private let coatyNumber: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = {
    context,
    _,
    arguments in
    guard let arguments else { return sqlite3_result_null(context) }
    switch probe(arguments) {
    case .missing: sqlite3_result_null(context)
    case .integer(let value): sqlite3_result_int64(context, value)
    case .real(let value): sqlite3_result_double(context, value)
    case .nonNumber, .undecided:
        // A static string's bytes live as long as the program: SQLite may keep the pointer.
        let text: StaticString = "?"
        sqlite3_result_text(context, UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self), 1, nil)
    }
}

/// `coaty_numeric_test`: see ``SQLiteFunctions``.
private let coatyNumericTest: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void =
    { context, _, arguments in
        guard let arguments, let test = SQLiteFunctions.NumericTest(rawValue: sqlite3_value_int(arguments[2])) else {
            return sqlite3_result_int(context, 1)
        }
        let value: Double
        switch probe(arguments) {
        case .missing: return sqlite3_result_int(context, 0)
        case .nonNumber: return sqlite3_result_int(context, test == .equals ? 0 : 1)
        case .undecided: return sqlite3_result_int(context, 1)
        case .integer(let integer): value = Double(integer)
        case .real(let real): value = real
        }
        // Operands are numbers below 2^53 (``SQLPlan/smallNumber(_:)``): exact as doubles, as the
        // member's value is.
        let a = sqlite3_value_double(arguments[3])
        let b = sqlite3_value_double(arguments[4])
        let result: Bool
        switch test {
        case .lessThan: result = value < a
        case .lessThanOrEqual: result = value <= a
        case .greaterThan: result = value > a
        case .greaterThanOrEqual: result = value >= a
        case .between: result = value >= a && value <= b
        case .notBetween: result = value < a || value > b
        case .equals: result = value == a
        }
        sqlite3_result_int(context, result ? 1 : 0)
    }
