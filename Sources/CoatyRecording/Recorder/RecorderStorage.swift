public import CoatyCore
public import CoatyStore

/// One change the recorder applies to its store, in arrival order.
public enum RecorderMutation: Sendable, Hashable {
    /// Store (insert or replace) a received object with how it was received. Rows of the same
    /// objectId under another object type are removed, so an objectId is stored once.
    case store(AnyCoatyObject, ReceiptMetadata)
    /// Remove the objects with these objectIds and, recursively, their children by
    /// `parentObjectId` (a Deadvertise).
    case remove(objectIds: [String])
}

/// What applying one ``RecorderMutation`` did.
public enum RecorderMutationOutcome: Sendable, Hashable {
    /// The object was stored.
    case stored
    /// These objectIds were removed (the deadvertised ones that were stored, and their
    /// descendants).
    case removed([String])
}

/// The store a ``CoatyRecorder`` writes to and answers from.
///
/// ``ConnectionRecorderStorage`` implements it once for every ``ConnectionType`` backend
/// (in-memory, SQLite, PostgreSQL); a store that is not such a backend implements these five
/// operations directly.
public protocol RecorderStorage: Sendable {
    /// Applies mutations in order, in **one** transaction: all of them are committed, or none.
    /// - Parameter mutations: the mutations, in arrival order.
    /// - Returns: one outcome per mutation, in the same order.
    /// - Throws: a backend or encoding error; nothing is committed then.
    func apply(_ mutations: [RecorderMutation]) async throws -> [RecorderMutationOutcome]

    /// The objects a Query selects: in scope, matching the filter (conditions, ordering, skip,
    /// take, with Coaty's exact semantics), joins resolved by objectId.
    /// - Parameters:
    ///   - scope: the object types or core types queried.
    ///   - filter: the Query's object filter.
    ///   - joins: the Query's join conditions.
    /// - Returns: the objects' JSON.
    /// - Throws: a backend error.
    func objects(in scope: StoreScope, filter: ObjectFilter?, joins: [ObjectJoinCondition]) async throws -> [JSONValue]

    /// The stored objects whose member `property` (`objectId` or `externalId`) equals `value`,
    /// in insertion order.
    /// - Parameters:
    ///   - property: the member name.
    ///   - value: the value.
    /// - Returns: the objects' JSON.
    /// - Throws: a backend error.
    func objects(where property: String, equals value: String) async throws -> [JSONValue]

    /// ``objects(where:equals:)`` with each object's stored JSON text where the store keeps it:
    /// a Discover answered from the store sends those bytes as they are. By default the objects
    /// without their text.
    /// - Parameters:
    ///   - property: the member name.
    ///   - value: the value.
    /// - Returns: the objects' JSON, each with its text or `nil`.
    /// - Throws: a backend error.
    func objectsWithText(where property: String, equals value: String) async throws -> [StoredObject]

    /// Replaces the stored object with the same objectId by `object` (an Update), keeping one
    /// row per objectId; does nothing when no object with that objectId is stored.
    /// - Parameters:
    ///   - object: the updated object.
    ///   - receipt: how the Update was received.
    /// - Returns: the stored object's JSON after the update, or `nil` when it was not stored.
    /// - Throws: a backend or encoding error.
    func update(_ object: AnyCoatyObject, receipt: ReceiptMetadata) async throws -> JSONValue?
}

/// A stored object's JSON and, where the store keeps it, the text it was stored as.
public struct StoredObject: Sendable, Hashable {
    /// The object's JSON; for an object made with ``init(text:)``, parsed from ``text`` when
    /// asked for (`.null` for a text that does not parse).
    public var json: JSONValue {
        get { parsed ?? text.flatMap { try? JSONValue(parsing: $0) } ?? .null }
        set { parsed = newValue }
    }
    /// A UTF-8 JSON text of ``json`` (the one stored), or `nil`.
    public var text: [UInt8]?
    /// The JSON as given; `nil` for an object made with ``init(text:)``.
    public private(set) var parsed: JSONValue?

    /// A stored object.
    /// - Parameters:
    ///   - json: the object's JSON.
    ///   - text: a UTF-8 JSON text of `json`, if the store has it.
    public init(json: JSONValue, text: [UInt8]? = nil) {
        self.parsed = json
        self.text = text
    }

    /// A stored object given as its stored text alone: nothing is parsed until ``json`` is read
    /// (a recorder validates the text as it decodes it, as it does a received object's).
    /// - Parameter text: the object's UTF-8 JSON text.
    public init(text: [UInt8]) {
        self.text = text
    }

    /// Equal when JSON and text are equal.
    public static func == (lhs: StoredObject, rhs: StoredObject) -> Bool {
        lhs.json == rhs.json && lhs.text == rhs.text
    }

    /// Hashes JSON and text.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(json)
        hasher.combine(text)
    }
}

extension RecorderStorage {
    /// The objects of ``objects(where:equals:)``, without their text.
    /// - Parameters:
    ///   - property: the member name.
    ///   - value: the value.
    /// - Returns: the objects.
    /// - Throws: a backend error.
    public func objectsWithText(where property: String, equals value: String) async throws -> [StoredObject] {
        try await objects(where: property, equals: value).map { StoredObject(json: $0) }
    }
}

/// ``RecorderStorage`` over any ``ConnectionType`` (``InMemoryConnection``, the SQLite
/// connection, a test double).
///
/// ```swift
/// let storage = ConnectionRecorderStorage(try SQLiteDatabase(path: "coaty.sqlite").makeConnection())
/// ```
public struct ConnectionRecorderStorage<Connection: ConnectionType>: RecorderStorage {
    /// The connection.
    public let connection: Connection

    /// Storage over a connection.
    /// - Parameter connection: the connection.
    public init(_ connection: Connection) {
        self.connection = connection
    }

    /// See ``RecorderStorage/apply(_:)``.
    public func apply(_ mutations: [RecorderMutation]) async throws -> [RecorderMutationOutcome] {
        try await connection.write { tx in try await Self.apply(mutations, in: tx) }
    }

    /// Applies mutations in order in `tx`.
    static func apply(_ mutations: [RecorderMutation], in tx: Connection.WriteTransaction) async throws
        -> [RecorderMutationOutcome]
    {
        // One lookup per batch for the objectIds stored under another object type.
        let ids = mutations.compactMap { mutation -> String? in
            if case .store(let object, _) = mutation { return object.objectId.uuidString }
            return nil
        }
        var otherRows = try await tx.coatyObjectIndexes(withObjectIds: ids)
        let writer = AnyCoatyObject.writer(tx)
        var outcomes: [RecorderMutationOutcome] = []
        outcomes.reserveCapacity(mutations.count)
        // The usual batch: new objectIds, each once. Then no store replaces a row of another
        // object type, and the rows written need no tracking (tracking each in `otherRows`
        // cost an array and a dictionary entry per object: 2.7 µs of the writer's 44).
        // Then the stores between two removes are written together (one statement per few hundred
        // rows on PostgreSQL instead of a round trip per row).
        let tracking = !otherRows.isEmpty || repeats(ids)
        var stores = 0
        var pending: [StoreRow] = []
        for mutation in mutations {
            switch mutation {
            case .store(let object, let receipt):
                let id = ids[stores]
                stores += 1
                if tracking {
                    let index = StoreIndex(object.objectType, id)
                    for other in otherRows[id] ?? [] where other != index { try await tx.removeRow(at: other) }
                    otherRows[id] = [index]
                    try await writer.write(object, metadata: receipt)
                } else {
                    pending.append(try writer.row(for: object, metadata: receipt))
                }
                outcomes.append(.stored)
            case .remove(let objectIds):
                if !pending.isEmpty {
                    try await tx.writeRows(pending, mode: .upsert)
                    pending.removeAll(keepingCapacity: true)
                }
                let removed = try await removeWithDescendants(objectIds, in: tx)
                for id in removed { otherRows[id] = nil }
                outcomes.append(.removed(removed))
            }
        }
        if !pending.isEmpty { try await tx.writeRows(pending, mode: .upsert) }
        return outcomes
    }

    /// Whether some objectId occurs more than once.
    static func repeats(_ ids: [String]) -> Bool {
        var seen = Set<String>(minimumCapacity: ids.count)
        for id in ids where !seen.insert(id).inserted { return true }
        return false
    }

    /// See ``RecorderStorage/objects(in:filter:joins:)``.
    public func objects(in scope: StoreScope, filter: ObjectFilter?, joins: [ObjectJoinCondition]) async throws
        -> [JSONValue]
    {
        let repository = StoreRepository(
            connection: connection,
            coding: StoreCoding<JSONValue, NoMetadata>(
                scope: scope,
                index: { StoreIndex($0["objectType"]?.stringValue ?? "", $0["objectId"]?.stringValue ?? "") },
                indexForKey: { _ in nil },
                encode: { $0 },
                decode: { $0 }
            )
        )
        return try await repository.fetchJSON(FetchOptions(filter: filter, joins: joins))
    }

    /// See ``RecorderStorage/objects(where:equals:)``.
    public func objects(where property: String, equals value: String) async throws -> [JSONValue] {
        // objectId and externalId are promoted, indexed columns: a lookup (SQLite: on this thread).
        try await connection.lookUpRows(matching: Self.lookup(property, value)).map(\.object)
    }

    /// See ``RecorderStorage/objectsWithText(where:equals:)``.
    public func objectsWithText(where property: String, equals value: String) async throws -> [StoredObject] {
        try await connection.lookUpRowTexts(matching: Self.lookup(property, value)).map { row in
            if row.isObjectDeferred, let text = row.objectText { return StoredObject(text: text) }
            return StoredObject(json: row.object, text: row.objectText)
        }
    }

    /// A lookup of the Coaty objects whose promoted `property` equals `value`.
    static func lookup(_ property: String, _ value: String) -> StoreQuery {
        let filter = ObjectFilter.where(ObjectFilterProperty(path: [property]), .equals(.string(value)))
        return StoreQuery(scope: .coatyObjects, filter: filter, includesMetadata: false)
    }

    /// See ``RecorderStorage/update(_:receipt:)``.
    public func update(_ object: AnyCoatyObject, receipt: ReceiptMetadata) async throws -> JSONValue? {
        try await connection.write { tx in
            let id = object.objectId.uuidString
            let existing = try await tx.rows(matching: .coatyObjects(withObjectIds: [id]))
            guard !existing.isEmpty else { return nil }
            let index = StoreIndex(object.objectType, id)
            for row in existing where row.index != index { try await tx.removeRow(at: row.index) }
            try await AnyCoatyObject.writer(tx).write(object, metadata: receipt)
            return try await tx.row(at: index)?.object
        }
    }

    /// Removes the objects with `objectIds` and their descendants by `parentObjectId`, breadth
    /// first; returns the objectIds removed.
    static func removeWithDescendants(_ objectIds: [String], in tx: Connection.WriteTransaction) async throws
        -> [String]
    {
        var visited: Set<String> = []
        var frontier = Array(Set(objectIds)).sorted()
        var removed: [String] = []
        while !frontier.isEmpty {
            visited.formUnion(frontier)
            var next: Set<String> = []
            // In chunks: a Deadvertise may name any number of objects, a statement binds a few
            // thousand values at most.
            for start in stride(from: 0, to: frontier.count, by: 1000) {
                let ids = Array(frontier[start..<min(start + 1000, frontier.count)])
                let values = ids.map(JSONValue.string)
                let rows = try await tx.rows(matching: .coatyObjects(withObjectIds: ids))
                for row in rows where try await tx.removeRow(at: row.index) {
                    if let id = row.object["objectId"]?.stringValue { removed.append(id) }
                }
                let children = try await tx.rows(
                    matching: StoreQuery(scope: .coatyObjects, filter: .where("parentObjectId", .in(values)))
                )
                next.formUnion(children.compactMap { $0.object["objectId"]?.stringValue })
            }
            frontier = Array(next.subtracting(visited)).sorted()
        }
        return removed
    }
}

/// A ``RecorderStorage`` whose transactions commit one at a time, in the order they were requested
/// (``ConnectionType/writesInCallOrder``, the SQLite backend). The recorder's writer then requests
/// its next transaction while the previous one is being written, and takes the next batch when
/// that transaction begins: the database's thread goes from one commit to the next batch without
/// waiting for another thread in between.
protocol OrderedRecorderStorage: RecorderStorage {
    /// Whether transactions commit in the order they were requested.
    var appliesInRequestOrder: Bool { get }

    /// Applies, in one transaction, the mutations `take` returns once the transaction has begun.
    /// - Parameters:
    ///   - take: called once, inside the transaction, for the mutations to apply.
    ///   - failing: called inside the transaction when applying them failed, before it is rolled
    ///     back (and so before the next transaction begins).
    /// - Returns: the outcomes, one per mutation `take` returned.
    /// - Throws: a backend or encoding error; nothing is committed then.
    func apply(
        taking take: @escaping @Sendable () -> [RecorderMutation],
        failing: @escaping @Sendable () -> Void
    ) async throws -> [RecorderMutationOutcome]
}

extension ConnectionRecorderStorage: OrderedRecorderStorage {
    var appliesInRequestOrder: Bool { Connection.writesInCallOrder }

    func apply(
        taking take: @escaping @Sendable () -> [RecorderMutation],
        failing: @escaping @Sendable () -> Void
    ) async throws -> [RecorderMutationOutcome] {
        try await connection.write { tx in
            let mutations = take()
            guard !mutations.isEmpty else { return [] }
            do {
                return try await Self.apply(mutations, in: tx)
            } catch {
                failing()
                throw error
            }
        }
    }
}
