import PostgresNIO

/// The text of a PostgreSQL failure for a log line or an error message: what the server said
/// (its message, SQLSTATE, detail and hint), or which step of the client failed and why.
///
/// postgres-nio's `PSQLError` prints as a generic sentence ("PSQLError – Generic description …")
/// so that it cannot leak data to an end user, and its `String(reflecting:)` adds the whole
/// statement with its bindings (megabytes for a Query of many conditions). This names what failed
/// and nothing of the statement's data.
enum PostgresErrorText {
    /// The SQLSTATEs of `CREATE INDEX IF NOT EXISTS` losing a race with another session creating
    /// the same index: `unique_violation` on `pg_class_relname_nsp_index` (the catalog's name
    /// index) and `duplicate_table` (42P07: the relation exists).
    static let concurrentCreationStates: Set<String> = ["23505", "42P07"]

    /// Whether `error` is `CREATE INDEX IF NOT EXISTS` losing a race with another session
    /// (``concurrentCreationStates``): the index exists.
    /// - Parameter error: the error of the statement.
    /// - Returns: `true` for those SQLSTATEs.
    static func isConcurrentCreation(_ error: any Error) -> Bool {
        sqlState(of: error).map(concurrentCreationStates.contains) ?? false
    }

    /// The description of `error` (see the type's summary).
    /// - Parameter error: any error; a PostgreSQL one (`PSQLError`, `PostgresTransactionError`) is
    ///   described by its parts, another by `String(describing:)`.
    /// - Returns: one line.
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError { return describe(error) }
        if let error = error as? PostgresTransactionError { return describe(error) }
        return String(describing: error).split(whereSeparator: \.isNewline).joined(separator: " ")
    }

    /// The SQLSTATE the server reported, if the failure came from the server.
    /// - Parameter error: any error (a `PostgresTransactionError` is looked into).
    /// - Returns: the five-character code, or `nil`.
    static func sqlState(of error: any Error) -> String? {
        if let error = error as? PSQLError { return error.serverInfo?[.sqlState] }
        if let error = error as? PostgresTransactionError {
            for part in [error.beginError, error.closureError, error.commitError] {
                if let part, let state = sqlState(of: part) { return state }
            }
        }
        return nil
    }

    private static func describe(_ error: PSQLError) -> String {
        guard let info = error.serverInfo else {
            var text = "PostgreSQL client error \(error.code)"
            if let underlying = error.underlying { text += ": \(describe(underlying))" }
            return text
        }
        var text = "PostgreSQL: \(info[.message] ?? "(no message)")"
        var parts: [String] = []
        if let state = info[.sqlState] { parts.append("SQLSTATE \(state)") }
        if let detail = info[.detail] { parts.append("detail: \(detail)") }
        if let hint = info[.hint] { parts.append("hint: \(hint)") }
        if let table = info[.tableName] { parts.append("table: \(table)") }
        if let constraint = info[.constraintName] { parts.append("constraint: \(constraint)") }
        if !parts.isEmpty { text += " (" + parts.joined(separator: "; ") + ")" }
        return text
    }

    private static func describe(_ error: PostgresTransactionError) -> String {
        var parts: [String] = []
        if let begin = error.beginError { parts.append("BEGIN failed: \(describe(begin))") }
        if let closure = error.closureError { parts.append(describe(closure)) }
        if let commit = error.commitError { parts.append("COMMIT failed: \(describe(commit))") }
        if let rollback = error.rollbackError { parts.append("ROLLBACK failed: \(describe(rollback))") }
        return parts.isEmpty ? "PostgreSQL transaction failed" : parts.joined(separator: "; ")
    }
}
