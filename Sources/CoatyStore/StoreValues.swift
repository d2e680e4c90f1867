public import CoatyModel
public import CoatyFilter
import CoatySync
import Synchronization

/// Where a stored item lives: a key inside a collection.
///
/// A Coaty object is stored in the collection named by its object type, under its objectId.
public struct StoreIndex: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The collection, e.g. `com.example.Light`.
    public var collection: String
    /// The key inside the collection, e.g. a lowercase objectId.
    public var key: String

    /// An index.
    /// - Parameters:
    ///   - collection: the collection.
    ///   - key: the key inside the collection.
    public init(_ collection: String, _ key: String) {
        self.collection = collection
        self.key = key
    }

    /// `collection/key`.
    public var description: String { "\(collection)/\(key)" }
}

/// One untyped stored row: an item's JSON and its metadata's JSON at an index.
public struct StoreRow: Sendable, Hashable {
    /// Where the row is stored.
    public var index: StoreIndex
    /// The item's JSON (a JSON object for every Coaty object). A row made with
    /// ``init(index:objectText:metadataText:)`` parses it from ``objectText`` when asked for
    /// (`.null` for a text that does not parse); setting it drops that text (it would no longer be
    /// the object's).
    public var object: JSONValue {
        get { storedObject ?? text.flatMap { try? JSONValue(parsing: $0) } ?? .null }
        set {
            storedObject = newValue
            text = nil
        }
    }
    /// The object as given (not parsed from ``objectText``); `nil` for a row made from its text.
    private var storedObject: JSONValue?
    /// The metadata's JSON, stored beside the item; `nil` when the item has none. A row made with
    /// ``init(index:object:metadataText:)`` parses it from ``metadataText`` when asked for;
    /// setting it drops that text.
    public var metadata: JSONValue? {
        get { storedMetadata ?? metadataText.flatMap { try? JSONValue(parsing: $0) } }
        set {
            storedMetadata = newValue
            metadataText = nil
        }
    }
    /// The metadata's JSON text (UTF-8) when the writer wrote it straight to bytes (a recorder's
    /// receipt): a backend that stores text stores these bytes, without a JSON tree built for
    /// them and serialized again.
    public private(set) var metadataText: [UInt8]?
    /// The metadata as given (not parsed from ``metadataText``).
    private var storedMetadata: JSONValue?
    /// The item's JSON text (UTF-8) when the writer has it already, e.g. a received object's
    /// text (``CoatyModel/AnyCoatyObject/receivedText``): a backend that stores text stores these
    /// bytes instead of serializing ``object`` again. When set, it must be a JSON text of
    /// ``object``. Not part of equality or hashing. Setting it on a row made from its text keeps
    /// the object that text was.
    public var objectText: [UInt8]? {
        get { text }
        set {
            if storedObject == nil { storedObject = object }
            text = newValue
        }
    }
    /// ``objectText``'s storage.
    private var text: [UInt8]?

    /// A row.
    /// - Parameters:
    ///   - index: where the row is stored.
    ///   - object: the item's JSON.
    ///   - metadata: the metadata's JSON, if any.
    public init(index: StoreIndex, object: JSONValue, metadata: JSONValue? = nil) {
        self.index = index
        self.storedObject = object
        self.storedMetadata = metadata
    }

    /// A row given as the texts a backend stored, parsed only when ``object`` or ``metadata`` is
    /// read: for a reader that sends the stored bytes on as they are (a Discover answered from the
    /// store) and validates them itself.
    /// - Parameters:
    ///   - index: where the row is stored.
    ///   - objectText: the item's UTF-8 JSON text.
    ///   - metadataText: the metadata's UTF-8 JSON text, if any.
    public init(index: StoreIndex, objectText: [UInt8], metadataText: [UInt8]? = nil) {
        self.index = index
        self.text = objectText
        self.metadataText = metadataText
    }

    /// A row whose metadata is given as its JSON text.
    /// - Parameters:
    ///   - index: where the row is stored.
    ///   - object: the item's JSON.
    ///   - metadataText: a UTF-8 JSON text of the metadata (valid JSON: it is parsed when
    ///     ``metadata`` is asked for).
    public init(index: StoreIndex, object: JSONValue, metadataText: [UInt8]) {
        self.index = index
        self.storedObject = object
        self.metadataText = metadataText
    }

    /// The row with its object and metadata as JSON trees (parsed from ``objectText`` and
    /// ``metadataText`` where that is all it has), for a store that keeps rows as values and
    /// reads them again.
    public var withParsedJSON: StoreRow {
        var row = self
        if storedObject == nil { row.storedObject = object }
        if storedMetadata == nil, metadataText != nil { row.storedMetadata = metadata }
        return row
    }

    /// The row's promoted columns: from ``object``, or for a row made from its text, read from
    /// ``objectText`` without parsing it into a tree.
    public var promotedColumns: PromotedColumns {
        if let storedObject { return PromotedColumns(storedObject) }
        return text.map { PromotedColumns(text: $0) } ?? PromotedColumns(.null)
    }

    /// Whether ``object`` is parsed from ``objectText`` each time it is read (a row made with
    /// ``init(index:objectText:metadataText:)``).
    public var isObjectDeferred: Bool { storedObject == nil }

    /// Equal when index, object and metadata are equal.
    public static func == (lhs: StoreRow, rhs: StoreRow) -> Bool {
        lhs.index == rhs.index && lhs.object == rhs.object && lhs.metadata == rhs.metadata
    }

    /// Hashes index, object and metadata.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(index)
        hasher.combine(object)
        hasher.combine(metadata)
    }
}

/// Which rows a query or a typed reader looks at.
public enum StoreScope: Sendable, Hashable {
    /// The rows of one collection.
    case collection(String)
    /// The rows of several collections.
    case collections([String])
    /// The Coaty objects whose `coreType` member is one of these wire strings (e.g. `"Task"`).
    case coreTypes([String])
    /// Every row that is a Coaty object (it has string `objectType` and `coreType` members).
    case coatyObjects
    /// Every row.
    case all

    /// Whether a row at `index` with the given promoted columns is in this scope.
    /// - Parameters:
    ///   - index: the row's index.
    ///   - columns: the row's promoted columns.
    /// - Returns: `true` when the row belongs to the scope.
    public func contains(_ index: StoreIndex, columns: PromotedColumns) -> Bool {
        switch self {
        case .collection(let name): index.collection == name
        case .collections(let names): names.contains(index.collection)
        case .coreTypes(let types): columns.coreType.map(types.contains) ?? false
        case .coatyObjects: columns.coreType != nil && columns.objectType != nil
        case .all: true
        }
    }
}

/// A description of the rows to read: a scope, optionally some keys, and a Coaty filter.
///
/// Backends evaluate the filter with Coaty's exact semantics (``ObjectMatcher``), conditions,
/// ordering, skip and take included; SQL backends push down only what gives the same result.
public struct StoreQuery: Sendable, Hashable {
    /// The rows looked at.
    public var scope: StoreScope
    /// When set, only rows with one of these keys.
    public var keys: [String]?
    /// The filter: conditions, ordering, skip and take; `nil` selects every row in scope.
    public var filter: ObjectFilter?
    /// Whether the rows must carry their metadata; `false` lets a backend skip reading and parsing
    /// it (``StoreRow/metadata`` may then be `nil`), for a reader that needs the objects only.
    public var includesMetadata: Bool

    /// A query.
    /// - Parameters:
    ///   - scope: the rows looked at.
    ///   - keys: only rows with one of these keys, when set.
    ///   - filter: the Coaty filter, when set.
    ///   - includesMetadata: whether the rows carry their metadata (default `true`).
    public init(scope: StoreScope, keys: [String]? = nil, filter: ObjectFilter? = nil, includesMetadata: Bool = true) {
        self.scope = scope
        self.keys = keys
        self.filter = filter
        self.includesMetadata = includesMetadata
    }
}

extension ObjectFilter {
    /// The rows to skip and take when a backend's SQL selects exactly the filter's matches and
    /// may page them itself; `take` is `nil` for no limit.
    ///
    /// `nil` when paging must be left to ``CoatyFilter/ObjectMatcher``: the filter orders its
    /// results (SQL's collation is not Coaty's), or its `take` is negative.
    public var exactSQLPaging: (skip: Int, take: Int?)? {
        if let ordering = orderByProperties, !ordering.isEmpty { return nil }
        let take = self.take ?? 0
        if take < 0 { return nil }
        return (max(skip ?? 0, 0), take > 0 ? take : nil)
    }
}

extension StoreScope {
    /// The one collection this scope names, if it names exactly one.
    public var singleCollection: String? {
        switch self {
        case .collection(let name): name
        case .collections(let names) where names.count == 1: names[0]
        default: nil
        }
    }
}

/// The JSON-property indexes declared on a database (``JSONPropertyIndexing``), shared by its
/// connections; the SQL backends keep the declarations in their own table and load them here.
public final class JSONIndexDeclarations: Sendable {
    /// A declared index: a top-level property of the items of one collection.
    public struct Key: Hashable, Sendable {
        /// The collection.
        public var collection: String
        /// The property.
        public var property: String

        /// A declaration.
        /// - Parameters:
        ///   - collection: the collection.
        ///   - property: the property.
        public init(collection: String, property: String) {
            self.collection = collection
            self.property = property
        }

        /// The index's name in the database: `coaty_json_` and a hash of collection and property.
        public var indexName: String {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in (collection + "\u{0}" + property).utf8 {
                hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
            }
            return "coaty_json_" + String(hash, radix: 16)
        }
    }

    private let keys = CoatyMutex<Set<Key>>([])

    /// No declarations yet.
    public init() {}

    /// Records declarations.
    /// - Parameter new: the declarations.
    public func insert(_ new: [Key]) { keys.withLock { $0.formUnion(new) } }

    /// Whether an index is declared on `property` of `collection`.
    /// - Parameters:
    ///   - collection: the collection.
    ///   - property: the property.
    /// - Returns: `true` when declared.
    public func contains(collection: String, property: String) -> Bool {
        keys.withLock { $0.contains(Key(collection: collection, property: property)) }
    }

    /// Every declaration.
    public var all: [Key] { keys.withLock { Array($0) } }

    /// Whether `property` can be indexed: a top-level member named with ASCII letters, digits and
    /// `_`, not starting with a digit (it is written into SQL as a JSON path).
    /// - Parameter property: the property.
    /// - Returns: `true` when it can.
    public static func isIndexable(_ property: String) -> Bool {
        guard let first = property.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            return false
        }
        return property.utf8.allSatisfy { c in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(c)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) || c == UInt8(ascii: "_")
        }
    }
}
