public import CoatyModel
import CoatyFilter

/// How a write treats an existing row at the same index.
public enum StoreWriteMode: Sendable, Hashable {
    /// Insert, or replace the existing row (the row keeps its position in insertion order).
    case upsert
    /// Insert only; an existing row is kept and the write is skipped.
    case insert
    /// Replace only; when there is no row the write is skipped.
    case update
}
/// The untyped primitives a write transaction adds to reading.
public protocol WriteTransactionType: ReadTransactionType {
    /// Writes a row.
    /// - Parameters:
    ///   - row: the row, with its metadata (`nil` stores none).
    ///   - mode: how an existing row at the same index is treated.
    /// - Returns: whether the row was written.
    /// - Throws: a backend error.
    @discardableResult
    func write(_ row: StoreRow, mode: StoreWriteMode) async throws -> Bool

    /// Writes rows in order, with the effect of writing each in turn with ``write(_:mode:)``
    /// (the default does that). A backend for which a statement is a round trip writes many rows
    /// with one statement (PostgreSQL).
    /// - Parameters:
    ///   - rows: the rows, with their metadata.
    ///   - mode: how an existing row at the same index is treated.
    /// - Returns: how many rows were written.
    /// - Throws: a backend error.
    @discardableResult
    func writeRows(_ rows: [StoreRow], mode: StoreWriteMode) async throws -> Int

    /// Removes the row at an index.
    /// - Parameter index: the index.
    /// - Returns: whether a row was removed.
    /// - Throws: a backend error.
    @discardableResult
    func removeRow(at index: StoreIndex) async throws -> Bool

    /// Removes the rows a query selects.
    /// - Parameter query: the query.
    /// - Returns: the indexes of the removed rows.
    /// - Throws: a backend error.
    @discardableResult
    func removeRows(matching query: StoreQuery) async throws -> [StoreIndex]

    /// Sets or removes (`nil`) a value of a local key/value store.
    /// - Parameters:
    ///   - value: the value; `nil` removes the key.
    ///   - key: the key.
    ///   - store: the store's name (`""` is the default store).
    /// - Throws: a backend error.
    func setLocalValue(_ value: JSONValue?, forKey key: String, in store: String) async throws
}

extension WriteTransactionType {
    /// Writes each row in turn with ``write(_:mode:)``.
    /// - Parameters:
    ///   - rows: the rows.
    ///   - mode: how an existing row at the same index is treated.
    /// - Returns: how many rows were written.
    /// - Throws: a backend error.
    @discardableResult
    public func writeRows(_ rows: [StoreRow], mode: StoreWriteMode) async throws -> Int {
        var written = 0
        for row in rows where try await write(row, mode: mode) { written += 1 }
        return written
    }

    /// Sets or removes (`nil`) a value of the default local store.
    /// - Parameters:
    ///   - value: the value; `nil` removes the key.
    ///   - key: the key.
    /// - Throws: a backend error.
    public func setLocalValue(_ value: JSONValue?, forKey key: String) async throws {
        try await setLocalValue(value, forKey: key, in: "")
    }

    /// Removes by reading the rows first; backends may override this.
    /// - Parameter query: the query.
    /// - Returns: the indexes of the removed rows.
    /// - Throws: a backend error.
    @discardableResult
    public func removeRows(matching query: StoreQuery) async throws -> [StoreIndex] {
        var removed: [StoreIndex] = []
        for row in try await rows(matching: query) where try await removeRow(at: row.index) {
            removed.append(row.index)
        }
        return removed
    }
}
