public import CoatyModel
public import CoatyFilter

/// What to fetch: a Coaty filter (conditions, ordering, skip, take) and join conditions.
///
/// Join conditions resolve against the store by objectId: the value of `localProperty` (each
/// element with `isLocalPropertyArray`) is the objectId of a stored Coaty object.
public struct FetchOptions: Sendable, Hashable {
    /// The filter; `nil` fetches everything in insertion order.
    public var filter: ObjectFilter?
    /// The join conditions, applied in order to each result.
    public var joins: [ObjectJoinCondition]

    /// Fetch options.
    /// - Parameters:
    ///   - filter: the filter; `nil` fetches everything.
    ///   - joins: the join conditions.
    public init(filter: ObjectFilter? = nil, joins: [ObjectJoinCondition] = []) {
        self.filter = filter
        self.joins = joins
    }

    /// Everything, in insertion order.
    public static var all: FetchOptions { FetchOptions() }
}

/// An aggregate over one property of the objects a filter selects (Coaty JS's `AggregateOp`).
public enum AggregateOperation: Sendable, Hashable, CaseIterable {
    /// The largest number.
    case max
    /// The smallest number.
    case min
    /// The sum of the numbers.
    case sum
    /// The average of the numbers.
    case average
    /// Whether every value is truthy (JavaScript truthiness).
    case every
    /// Whether some value is truthy.
    case some
}

/// The persistence of one entity type, independent of any backend.
///
/// Application code holds an ``AnyRepository`` and never names a backend:
///
/// ```swift
/// let lights: AnyRepository<Light> = AnyRepository(StoreRepository(connection: connection))
/// try await lights.save(light)
/// let bright = try await lights.fetch(FetchOptions(filter: .where("luminance", .greaterThan(0.5))))
/// ```
public protocol PersistentRepository<Entity>: Sendable {
    /// The entity type.
    associatedtype Entity: Sendable

    /// The entities the options select, joins resolved (decoded entities keep joined members
    /// only when their type keeps unknown members, as Coaty objects do).
    /// - Parameter options: the filter and joins.
    /// - Returns: the entities.
    /// - Throws: a backend or decoding error.
    func fetch(_ options: FetchOptions) async throws -> [Entity]

    /// The JSON of the entities the options select, joins resolved.
    /// - Parameter options: the filter and joins.
    /// - Returns: the JSON objects.
    /// - Throws: a backend error.
    func fetchJSON(_ options: FetchOptions) async throws -> [JSONValue]

    /// The entity with an id (its key).
    /// - Parameter id: the key, e.g. a lowercase objectId.
    /// - Returns: the entity, or `nil`.
    /// - Throws: a backend or decoding error.
    func fetch(id: String) async throws -> Entity?

    /// Inserts or replaces entities.
    /// - Parameters:
    ///   - entities: the entities.
    ///   - mode: how existing entities are treated.
    /// - Returns: the keys written.
    /// - Throws: a backend or encoding error.
    @discardableResult
    func save(_ entities: [Entity], mode: StoreWriteMode) async throws -> [String]

    /// Applies `changes` to the stored entity (or to `entity` when it is not stored) and saves the
    /// result, in one write transaction.
    /// - Parameters:
    ///   - entity: the entity.
    ///   - changes: the changes.
    /// - Returns: the saved entity.
    /// - Throws: what `changes` throws (nothing is saved then), a backend or coding error.
    @discardableResult
    func write(_ entity: Entity, changes: @escaping @Sendable (inout Entity) throws -> Void) async throws -> Entity

    /// Deletes entities by id.
    /// - Parameter ids: the keys.
    /// - Returns: the keys deleted.
    /// - Throws: a backend error.
    @discardableResult
    func delete(ids: [String]) async throws -> [String]

    /// Deletes the entities a filter selects.
    /// - Parameter filter: the filter (ordering, skip and take apply).
    /// - Returns: how many were deleted.
    /// - Throws: a backend error.
    @discardableResult
    func delete(matching filter: ObjectFilter) async throws -> Int

    /// Deletes every entity of this repository.
    /// - Returns: how many were deleted.
    /// - Throws: a backend error.
    @discardableResult
    func deleteAll() async throws -> Int

    /// How many entities a filter selects.
    /// - Parameter filter: the filter; `nil` counts all.
    /// - Returns: the count.
    /// - Throws: a backend error.
    func count(_ filter: ObjectFilter?) async throws -> Int

    /// Aggregates a property over the entities a filter selects.
    /// - Parameters:
    ///   - operation: the aggregate.
    ///   - property: the property.
    ///   - filter: the filter; `nil` aggregates over all.
    /// - Returns: the result; `nil` when no selected entity has a value to aggregate.
    /// - Throws: a backend error.
    func aggregate(
        _ operation: AggregateOperation,
        of property: ObjectFilterProperty,
        filter: ObjectFilter?
    ) async throws -> JSONValue?

    /// The keys the options select, in result order (one consistent snapshot).
    /// - Parameter filter: the filter.
    /// - Returns: the keys.
    /// - Throws: a backend error.
    func keys(matching filter: ObjectFilter?) async throws -> [String]

    /// The entities with these keys that still exist, in the order given, joins resolved.
    /// - Parameters:
    ///   - keys: the keys.
    ///   - joins: the join conditions.
    /// - Returns: the entities.
    /// - Throws: a backend or decoding error.
    func fetch(keys: [String], joins: [ObjectJoinCondition]) async throws -> [Entity]
}

extension PersistentRepository {
    /// Inserts or replaces one entity.
    /// - Parameter entity: the entity.
    /// - Throws: a backend or encoding error.
    public func save(_ entity: Entity) async throws {
        try await save([entity], mode: .upsert)
    }

    /// Inserts or replaces entities.
    /// - Parameter entities: the entities.
    /// - Returns: the keys written.
    /// - Throws: a backend or encoding error.
    @discardableResult
    public func save(_ entities: [Entity]) async throws -> [String] {
        try await save(entities, mode: .upsert)
    }

    /// Everything, in insertion order.
    /// - Returns: the entities.
    /// - Throws: a backend or decoding error.
    public func fetchAll() async throws -> [Entity] { try await fetch(.all) }

    /// How many entities there are.
    /// - Returns: the count.
    /// - Throws: a backend error.
    public func count() async throws -> Int { try await count(nil) }

    /// The selected entities in pages of `pageSize`, read lazily page by page.
    ///
    /// The keys are selected once, in one snapshot, when iteration starts; each page is then read
    /// in its own read transaction (an entity deleted meanwhile is left out of its page).
    ///
    /// ```swift
    /// for try await page in repository.pages(FetchOptions(filter: filter), pageSize: 100) { … }
    /// ```
    /// - Parameters:
    ///   - options: the filter and joins.
    ///   - pageSize: the entities per page (at least 1).
    /// - Returns: the pages.
    public func pages(_ options: FetchOptions = .all, pageSize: Int) -> FetchPages<Entity> {
        FetchPages(pageSize: max(1, pageSize)) {
            try await keys(matching: options.filter)
        } page: { keys in
            try await fetch(keys: keys, joins: options.joins)
        }
    }
}

/// The pages of a paged fetch: an `AsyncSequence` of arrays of at most `pageSize` entities.
public struct FetchPages<Entity: Sendable>: AsyncSequence, Sendable {
    /// A page.
    public typealias Element = [Entity]
    /// The page size.
    public let pageSize: Int
    let selectKeys: @Sendable () async throws -> [String]
    let page: @Sendable ([String]) async throws -> [Entity]

    init(
        pageSize: Int,
        selectKeys: @escaping @Sendable () async throws -> [String],
        page: @escaping @Sendable ([String]) async throws -> [Entity]
    ) {
        self.pageSize = pageSize
        self.selectKeys = selectKeys
        self.page = page
    }

    /// The iterator.
    /// - Returns: an iterator that selects the keys on its first call.
    public func makeAsyncIterator() -> Iterator { Iterator(pages: self) }

    /// Reads one page per call.
    public struct Iterator: AsyncIteratorProtocol {
        let pages: FetchPages
        var keys: [String]?
        var offset = 0

        /// The next non-empty page, or `nil` when every selected key was read.
        /// - Returns: the page.
        /// - Throws: a backend or decoding error.
        public mutating func next() async throws -> [Entity]? {
            if keys == nil { keys = try await pages.selectKeys() }
            guard let keys else { return nil }
            while offset < keys.count {
                let end = Swift.min(offset + pages.pageSize, keys.count)
                let slice = Array(keys[offset..<end])
                offset = end
                let entities = try await pages.page(slice)
                if !entities.isEmpty { return entities }
            }
            return nil
        }
    }
}

/// A type-erased ``PersistentRepository``: application code holds this, never a backend type.
public struct AnyRepository<Entity: Sendable>: PersistentRepository {
    private let base: any PersistentRepository<Entity>

    /// Wraps a repository.
    /// - Parameter base: the repository.
    public init(_ base: some PersistentRepository<Entity>) {
        self.base = base
    }

    /// See ``PersistentRepository/fetch(_:)``.
    public func fetch(_ options: FetchOptions) async throws -> [Entity] { try await base.fetch(options) }
    /// See ``PersistentRepository/fetchJSON(_:)``.
    public func fetchJSON(_ options: FetchOptions) async throws -> [JSONValue] { try await base.fetchJSON(options) }
    /// See ``PersistentRepository/fetch(id:)``.
    public func fetch(id: String) async throws -> Entity? { try await base.fetch(id: id) }
    /// See ``PersistentRepository/save(_:mode:)``.
    @discardableResult
    public func save(_ entities: [Entity], mode: StoreWriteMode) async throws -> [String] {
        try await base.save(entities, mode: mode)
    }
    /// See ``PersistentRepository/write(_:changes:)``.
    @discardableResult
    public func write(_ entity: Entity, changes: @escaping @Sendable (inout Entity) throws -> Void) async throws
        -> Entity
    {
        try await base.write(entity, changes: changes)
    }
    /// See ``PersistentRepository/delete(ids:)``.
    @discardableResult
    public func delete(ids: [String]) async throws -> [String] { try await base.delete(ids: ids) }
    /// See ``PersistentRepository/delete(matching:)``.
    @discardableResult
    public func delete(matching filter: ObjectFilter) async throws -> Int { try await base.delete(matching: filter) }
    /// See ``PersistentRepository/deleteAll()``.
    @discardableResult
    public func deleteAll() async throws -> Int { try await base.deleteAll() }
    /// See ``PersistentRepository/count(_:)``.
    public func count(_ filter: ObjectFilter?) async throws -> Int { try await base.count(filter) }
    /// See ``PersistentRepository/aggregate(_:of:filter:)``.
    public func aggregate(_ operation: AggregateOperation, of property: ObjectFilterProperty, filter: ObjectFilter?)
        async throws -> JSONValue?
    {
        try await base.aggregate(operation, of: property, filter: filter)
    }
    /// See ``PersistentRepository/keys(matching:)``.
    public func keys(matching filter: ObjectFilter?) async throws -> [String] { try await base.keys(matching: filter) }
    /// See ``PersistentRepository/fetch(keys:joins:)``.
    public func fetch(keys: [String], joins: [ObjectJoinCondition]) async throws -> [Entity] {
        try await base.fetch(keys: keys, joins: joins)
    }
}

/// A ``PersistentRepository`` over any ``ConnectionType``: the one implementation every
/// transaction-based backend (in-memory, SQLite) shares.
public struct StoreRepository<Connection: ConnectionType, Entity: Sendable, Metadata: Codable & Sendable>:
    PersistentRepository
{
    /// The connection.
    public let connection: Connection
    /// How entities map to rows.
    public let coding: StoreCoding<Entity, Metadata>

    /// A repository for any entity with a coding.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - coding: how entities map to rows.
    public init(connection: Connection, coding: StoreCoding<Entity, Metadata>) {
        self.connection = connection
        self.coding = coding
    }

    private var scope: StoreScope { coding.scope }

    /// See ``PersistentRepository/fetch(_:)``.
    public func fetch(_ options: FetchOptions) async throws -> [Entity] {
        let coding = self.coding
        return try await fetchJSON(options).map(coding.decode)
    }

    /// See ``PersistentRepository/fetchJSON(_:)``.
    public func fetchJSON(_ options: FetchOptions) async throws -> [JSONValue] {
        let scope = self.scope
        // A Query walked on an index, a lookup: answered where the caller is (a responder's
        // delivery thread) when the backend can, saving a hop to a reader and back.
        return try await connection.readBrieflyIfPossible { tx in
            let query = StoreQuery(scope: scope, filter: options.filter, includesMetadata: false)
            let objects = try await tx.rows(matching: query).map(\.object)
            return try await Self.resolveJoins(options.joins, in: objects, transaction: tx)
        }
    }

    /// See ``PersistentRepository/fetch(id:)``.
    public func fetch(id: String) async throws -> Entity? {
        let coding = self.coding
        return try await connection.read { tx in try await Reader(tx, coding: coding).byKey(id) }
    }

    /// See ``PersistentRepository/save(_:mode:)``.
    @discardableResult
    public func save(_ entities: [Entity], mode: StoreWriteMode) async throws -> [String] {
        let coding = self.coding
        return try await connection.write { tx in
            try await Writer(tx, coding: coding).write(entities, mode: mode).map(\.key)
        }
    }

    /// See ``PersistentRepository/write(_:changes:)``.
    @discardableResult
    public func write(_ entity: Entity, changes: @escaping @Sendable (inout Entity) throws -> Void) async throws
        -> Entity
    {
        let coding = self.coding
        return try await connection.write { tx in
            let index = coding.index(entity)
            let stored = try await Reader(tx, coding: coding).withMetadata.atIndex(index)
            var updated = stored?.item ?? entity
            try changes(&updated)
            if coding.index(updated) != index { try await tx.removeRow(at: index) }
            try await Writer(tx, coding: coding).write(updated, metadata: stored?.metadata)
            return updated
        }
    }

    /// See ``PersistentRepository/delete(ids:)``.
    @discardableResult
    public func delete(ids: [String]) async throws -> [String] {
        let coding = self.coding
        return try await connection.write { tx in try await Writer(tx, coding: coding).remove(keys: ids).map(\.key) }
    }

    /// See ``PersistentRepository/delete(matching:)``.
    @discardableResult
    public func delete(matching filter: ObjectFilter) async throws -> Int {
        let coding = self.coding
        return try await connection.write { tx in try await Writer(tx, coding: coding).remove(matching: filter).count }
    }

    /// See ``PersistentRepository/deleteAll()``.
    @discardableResult
    public func deleteAll() async throws -> Int {
        let coding = self.coding
        return try await connection.write { tx in try await Writer(tx, coding: coding).removeAll() }
    }

    /// See ``PersistentRepository/count(_:)``.
    public func count(_ filter: ObjectFilter?) async throws -> Int {
        let scope = self.scope
        return try await connection.read { tx in
            try await tx.count(matching: StoreQuery(scope: scope, filter: filter))
        }
    }

    /// See ``PersistentRepository/aggregate(_:of:filter:)``.
    public func aggregate(_ operation: AggregateOperation, of property: ObjectFilterProperty, filter: ObjectFilter?)
        async throws -> JSONValue?
    {
        let scope = self.scope
        let objects = try await connection.read { tx in
            try await tx.rows(matching: StoreQuery(scope: scope, filter: filter)).map(\.object)
        }
        return Aggregation.aggregate(operation, of: property, in: objects)
    }

    /// See ``PersistentRepository/keys(matching:)``.
    public func keys(matching filter: ObjectFilter?) async throws -> [String] {
        let scope = self.scope
        return try await connection.read { tx in
            try await tx.rows(matching: StoreQuery(scope: scope, filter: filter)).map(\.index.key)
        }
    }

    /// See ``PersistentRepository/fetch(keys:joins:)``.
    public func fetch(keys: [String], joins: [ObjectJoinCondition]) async throws -> [Entity] {
        let coding = self.coding
        let objects = try await connection.read { tx in
            let rows = try await Reader(tx, coding: coding).withMetadata.byKeys(keys)
            let objects = try rows.map { try coding.encode($0.item) }
            return try await Self.resolveJoins(joins, in: objects, transaction: tx)
        }
        return try objects.map(coding.decode)
    }

    static func resolveJoins(
        _ joins: [ObjectJoinCondition],
        in objects: [JSONValue],
        transaction: some ReadTransactionType
    ) async throws -> [JSONValue] {
        guard !joins.isEmpty else { return objects }
        var ids: Set<String> = []
        for object in objects {
            for join in joins {
                switch object[join.localProperty] {
                case .string(let id): ids.insert(id)
                case .array(let values) where join.isLocalPropertyArray ?? false:
                    for case .string(let id) in values { ids.insert(id) }
                default: break
                }
            }
        }
        let candidates = try await transaction.rows(
            matching: StoreQuery(
                scope: .coatyObjects,
                filter: .where("objectId", .in(ids.sorted().map(JSONValue.string)))
            )
        ).map(\.object)
        return ObjectMatcher.resolveJoins(joins, in: objects, candidates: candidates)
    }
}

extension StoreRepository where Entity: Persistable, Metadata == Entity.Metadata {
    /// A repository of a ``Persistable`` type.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - type: the entity type.
    public init(connection: Connection, for type: Entity.Type = Entity.self) {
        self.init(connection: connection, coding: Entity.storeCoding)
    }
}

extension StoreRepository where Entity: CoatyObject, Metadata == ReceiptMetadata {
    /// A repository of a Coaty object type (``CoatyModel/AnyCoatyObject`` for every Coaty object).
    /// - Parameters:
    ///   - connection: the connection.
    ///   - type: the entity type.
    ///   - registry: the registry to decode with; core types when `nil`.
    public init(connection: Connection, coatyObjects type: Entity.Type, registry: CoatyObjectRegistry? = nil) {
        self.init(connection: connection, coding: Entity.coatyStoreCoding(registry: registry))
    }
}

/// Coaty JS's in-memory aggregation.
enum Aggregation {
    static func aggregate(_ operation: AggregateOperation, of property: ObjectFilterProperty, in objects: [JSONValue])
        -> JSONValue?
    {
        let values = objects.compactMap { ObjectMatcher.value(of: property, in: $0) }
        switch operation {
        case .every, .some:
            guard !values.isEmpty else { return nil }
            let truthy = values.map(isTruthy)
            return .bool(operation == .every ? truthy.allSatisfy { $0 } : truthy.contains(true))
        case .max, .min, .sum, .average:
            let numbers = values.filter(\.isNumber)
            guard !numbers.isEmpty else { return nil }
            switch operation {
            case .max: return numbers.max { less($0, $1) }
            case .min: return numbers.min { less($0, $1) }
            case .sum: return sum(numbers)
            default:
                let total = sum(numbers).doubleValue ?? 0
                return .double(total / Double(numbers.count))
            }
        }
    }

    static func less(_ a: JSONValue, _ b: JSONValue) -> Bool {
        if case .int(let x) = a, case .int(let y) = b { return x < y }
        return (a.doubleValue ?? 0) < (b.doubleValue ?? 0)
    }

    static func sum(_ numbers: [JSONValue]) -> JSONValue {
        var integer: Int64 = 0
        var allIntegers = true
        for case .int(let value) in numbers {
            let (result, overflow) = integer.addingReportingOverflow(value)
            if overflow { allIntegers = false; break }
            integer = result
        }
        if allIntegers && numbers.allSatisfy({ if case .int = $0 { true } else { false } }) { return .int(integer) }
        return .double(numbers.reduce(0) { $0 + ($1.doubleValue ?? 0) })
    }

    static func isTruthy(_ value: JSONValue) -> Bool {
        switch value {
        case .null: false
        case .bool(let b): b
        case .int(let i): i != 0
        case .double(let d): d != 0 && !d.isNaN
        case .string(let s): !s.isEmpty
        case .array, .object: true
        }
    }
}
