// The typed API's entry points: `Item.read(transaction)`, `item.write(to:)`, … for plain
// `Persistable` values and for Coaty objects; both serve the one Reader/Writer implementation
// (TypedAPI.swift) with their own coding.

public import CoatyModel
import CoatyFilter

// MARK: - Entry points for Persistable types

extension Persistable {
    /// A reader of this type in a transaction.
    /// - Parameter transaction: the transaction.
    /// - Returns: the reader.
    public static func read(_ transaction: some ReadTransactionType) -> Reader<Self, Metadata> {
        Reader(transaction, coding: storeCoding)
    }

    /// A writer of this type in a transaction.
    /// - Parameter transaction: the transaction.
    /// - Returns: the writer.
    public static func writer(_ transaction: some WriteTransactionType) -> Writer<Self, Metadata> {
        Writer(transaction, coding: storeCoding)
    }

    /// Writes this item (replacing an existing one).
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - metadata: the metadata stored beside it; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to transaction: some WriteTransactionType, metadata: Metadata? = nil) async throws {
        try await Self.writer(transaction).write(self, metadata: metadata)
    }

    /// Writes this item in its own write transaction.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - metadata: the metadata stored beside it; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to connection: some ConnectionType, metadata: Metadata? = nil) async throws {
        try await connection.write { tx in try await self.write(to: tx, metadata: metadata) }
    }

    /// Removes this item.
    /// - Parameter transaction: the transaction.
    /// - Returns: whether it was stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from transaction: some WriteTransactionType) async throws -> Bool {
        try await Self.writer(transaction).remove(self)
    }

    /// Removes this item in its own write transaction.
    /// - Parameter connection: the connection.
    /// - Returns: whether it was stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from connection: some ConnectionType) async throws -> Bool {
        try await connection.write { tx in try await self.remove(from: tx) }
    }

    /// Removes every item of this type.
    /// - Parameter transaction: the transaction.
    /// - Returns: how many were removed.
    /// - Throws: a backend error.
    @discardableResult
    public static func removeAll(from transaction: some WriteTransactionType) async throws -> Int {
        try await writer(transaction).removeAll()
    }
}

extension Sequence where Element: Persistable {
    /// Writes these items (replacing existing ones).
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - metadata: the metadata stored beside each; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to transaction: some WriteTransactionType, metadata: Element.Metadata? = nil) async throws {
        try await Element.writer(transaction).write(self, metadata: metadata)
    }

    /// Writes these items in one write transaction.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - metadata: the metadata stored beside each; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to connection: some ConnectionType, metadata: Element.Metadata? = nil) async throws {
        let items = Array(self)
        try await connection.write { tx in try await items.write(to: tx, metadata: metadata) }
    }

    /// Removes these items.
    /// - Parameter transaction: the transaction.
    /// - Returns: how many were stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from transaction: some WriteTransactionType) async throws -> Int {
        try await Element.writer(transaction).remove(self)
    }

    /// Removes these items in one write transaction.
    /// - Parameter connection: the connection.
    /// - Returns: how many were stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from connection: some ConnectionType) async throws -> Int {
        let items = Array(self)
        return try await connection.write { tx in try await items.remove(from: tx) }
    }
}

// MARK: - Entry points for Coaty objects

extension CoatyObject {
    /// A reader of this Coaty object type in a transaction.
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - registry: the registry to decode with (for ``CoatyModel/AnyCoatyObject``); core types when `nil`.
    /// - Returns: the reader.
    public static func read(
        _ transaction: some ReadTransactionType,
        registry: CoatyObjectRegistry? = nil
    ) -> Reader<Self, ReceiptMetadata> {
        Reader(transaction, coding: coatyStoreCoding(registry: registry))
    }

    /// A writer of this Coaty object type in a transaction.
    /// - Parameter transaction: the transaction.
    /// - Returns: the writer.
    public static func writer(_ transaction: some WriteTransactionType) -> Writer<Self, ReceiptMetadata> {
        Writer(transaction, coding: storeCoding)
    }

    /// Writes this object (replacing an existing one with the same objectId and object type).
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - metadata: how it was received, stored beside it; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to transaction: some WriteTransactionType, metadata: ReceiptMetadata? = nil) async throws {
        try await Self.writer(transaction).write(self, metadata: metadata)
    }

    /// Writes this object in its own write transaction.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - metadata: how it was received; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to connection: some ConnectionType, metadata: ReceiptMetadata? = nil) async throws {
        try await connection.write { tx in try await self.write(to: tx, metadata: metadata) }
    }

    /// Removes this object.
    /// - Parameter transaction: the transaction.
    /// - Returns: whether it was stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from transaction: some WriteTransactionType) async throws -> Bool {
        try await Self.writer(transaction).remove(self)
    }

    /// Removes this object in its own write transaction.
    /// - Parameter connection: the connection.
    /// - Returns: whether it was stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from connection: some ConnectionType) async throws -> Bool {
        try await connection.write { tx in try await self.remove(from: tx) }
    }

    /// Removes every object this type reads.
    /// - Parameter transaction: the transaction.
    /// - Returns: how many were removed.
    /// - Throws: a backend error.
    @discardableResult
    public static func removeAll(from transaction: some WriteTransactionType) async throws -> Int {
        try await writer(transaction).removeAll()
    }
}

extension Sequence where Element: CoatyObject {
    /// Writes these objects (replacing existing ones).
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - metadata: how they were received; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to transaction: some WriteTransactionType, metadata: ReceiptMetadata? = nil) async throws {
        try await Element.writer(transaction).write(self, metadata: metadata)
    }

    /// Writes these objects in one write transaction.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - metadata: how they were received; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to connection: some ConnectionType, metadata: ReceiptMetadata? = nil) async throws {
        let items = Array(self)
        try await connection.write { tx in try await items.write(to: tx, metadata: metadata) }
    }

    /// Removes these objects.
    /// - Parameter transaction: the transaction.
    /// - Returns: how many were stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from transaction: some WriteTransactionType) async throws -> Int {
        try await Element.writer(transaction).remove(self)
    }

    /// Removes these objects in one write transaction.
    /// - Parameter connection: the connection.
    /// - Returns: how many were stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from connection: some ConnectionType) async throws -> Int {
        let items = Array(self)
        return try await connection.write { tx in try await items.remove(from: tx) }
    }
}
