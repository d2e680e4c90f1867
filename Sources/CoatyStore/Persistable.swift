public import CoatyModel
import CoatyFilter
public import Foundation

/// A value type stored in a collection under a key, with optional metadata beside it.
///
/// ```swift
/// struct Setting: Persistable {
///     static let collection = "settings"
///     var id: String
///     var value: Int
/// }
/// try Setting(id: "volume", value: 7).write(to: transaction)
/// let volume = try Setting.read(transaction).byKey("volume")
/// ```
///
/// Coaty objects (every ``CoatyModel/CoatyObject`` type and ``CoatyModel/AnyCoatyObject``) need no
/// conformance: they are stored in the collection named by their object type under their
/// objectId, with ``ReceiptMetadata`` as their metadata type.
public protocol Persistable: Identifiable, Codable, Sendable {
    /// The metadata stored beside each item; ``NoMetadata`` by default.
    associatedtype Metadata: Codable & Sendable = NoMetadata

    /// The collection all items of this type are stored in.
    static var collection: String { get }

    /// The key of an id; `String(describing: id)` by default.
    /// - Parameter id: the id.
    /// - Returns: the key.
    static func key(for id: ID) -> String
}

extension Persistable {
    /// `String(describing: id)`.
    /// - Parameter id: the id.
    /// - Returns: the key.
    public static func key(for id: ID) -> String { String(describing: id) }

    /// The key of this item.
    public var key: String { Self.key(for: id) }

    /// The index of this item.
    public var index: StoreIndex { StoreIndex(Self.collection, key) }
}

/// The metadata type of items that have none; it is never stored.
public struct NoMetadata: Codable, Sendable, Hashable {
    /// No metadata.
    public init() {}
}

/// An item read together with its metadata and index.
public struct Stored<Item, Metadata> {
    /// The item.
    public var item: Item
    /// The metadata stored beside it, if any.
    public var metadata: Metadata?
    /// Where it is stored.
    public var index: StoreIndex

    /// A stored item.
    /// - Parameters:
    ///   - item: the item.
    ///   - metadata: its metadata.
    ///   - index: where it is stored.
    public init(item: Item, metadata: Metadata?, index: StoreIndex) {
        self.item = item
        self.metadata = metadata
        self.index = index
    }
}

extension Stored: Sendable where Item: Sendable, Metadata: Sendable {}
extension Stored: Equatable where Item: Equatable, Metadata: Equatable {}

/// How received objects got here: stored as the metadata beside a received Coaty object,
/// never inside it.
///
/// ```swift
/// let receipt = ReceiptMetadata(sourceId: event.sourceId, eventType: "Advertise", topic: topic)
/// try object.write(to: transaction, metadata: receipt)
/// ```
public struct ReceiptMetadata: Codable, Sendable, Hashable {
    /// The objectId of the identity that published the event, when known.
    public var sourceId: CoatyUUID?
    /// The event type name, e.g. `Advertise` or `Channel`.
    public var eventType: String
    /// The MQTT topic the event arrived on.
    public var topic: String
    /// When the event was received.
    public var receivedAt: Date

    /// Receipt metadata.
    /// - Parameters:
    ///   - sourceId: the publishing identity's objectId, when known.
    ///   - eventType: the event type name.
    ///   - topic: the MQTT topic.
    ///   - receivedAt: when the event was received; now by default.
    public init(sourceId: CoatyUUID?, eventType: String, topic: String, receivedAt: Date = Date()) {
        self.sourceId = sourceId
        self.eventType = eventType
        self.topic = topic
        self.receivedAt = receivedAt
    }
}

extension ReceiptMetadata {
    /// The JSON text `JSONValueEncoder` writes for this metadata (members in declaration order, an
    /// absent `sourceId` left out, `receivedAt` in milliseconds since 1970), written straight to
    /// bytes (the recorder writes one receipt per stored object: building its tree and
    /// serializing it was a tenth of the writer's time).
    var jsonText: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96 + topic.utf8.count + eventType.utf8.count)
        out.append(UInt8(ascii: "{"))
        if let sourceId {
            out.append(contentsOf: #""sourceId":"#.utf8)
            sourceId.appendQuoted(to: &out)
            out.append(UInt8(ascii: ","))
        }
        out.append(contentsOf: #""eventType":"#.utf8)
        JSONSerializer.writeString(eventType, to: &out)
        out.append(contentsOf: #","topic":"#.utf8)
        JSONSerializer.writeString(topic, to: &out)
        out.append(contentsOf: #","receivedAt":"#.utf8)
        JSONSerializer.write(Self.milliseconds(receivedAt), to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A date as `JSONValueEncoder` writes it by default: milliseconds since 1970, an integer
    /// when whole and exactly representable (and not `-0`), a double otherwise.
    static func milliseconds(_ date: Date) -> JSONValue {
        let ms = date.timeIntervalSince1970 * 1000
        if ms.rounded(.towardZero) == ms && Swift.abs(ms) <= 9_007_199_254_740_992 && !(ms == 0 && ms.sign == .minus) {
            return .int(Int64(ms))
        }
        return .double(ms)
    }
}

/// How one item type maps to untyped rows: its scope, its index, and its JSON coding.
///
/// The typed readers and writers use it; ``Persistable`` types and Coaty objects get one for
/// free (`Item.storeCoding`), and an application may build one for any other type.
public struct StoreCoding<Item, Metadata: Codable & Sendable>: Sendable {
    /// The rows items of this type are read from (``Reader/all()`` and ``Reader/matching(_:)``).
    public var scope: StoreScope
    /// The index an item is stored at.
    public var index: @Sendable (Item) -> StoreIndex
    /// The index of a key when the scope is one collection; `nil` when a key is looked up
    /// across the scope.
    public var indexForKey: @Sendable (String) -> StoreIndex?
    /// The JSON of an item.
    public var encode: @Sendable (Item) throws -> JSONValue
    /// The item of a JSON value.
    public var decode: @Sendable (JSONValue) throws -> Item

    /// A coding.
    /// - Parameters:
    ///   - scope: the rows items are read from.
    ///   - index: the index an item is stored at.
    ///   - indexForKey: the index of a key, when the scope is one collection.
    ///   - encode: the JSON of an item.
    ///   - decode: the item of a JSON value.
    public init(
        scope: StoreScope,
        index: @escaping @Sendable (Item) -> StoreIndex,
        indexForKey: @escaping @Sendable (String) -> StoreIndex?,
        encode: @escaping @Sendable (Item) throws -> JSONValue,
        decode: @escaping @Sendable (JSONValue) throws -> Item
    ) {
        self.scope = scope
        self.index = index
        self.indexForKey = indexForKey
        self.encode = encode
        self.decode = decode
    }

    /// The same coding with another metadata type (items are coded alike).
    /// - Parameter type: the metadata type.
    /// - Returns: the coding.
    public func withMetadata<Other: Codable & Sendable>(_ type: Other.Type) -> StoreCoding<Item, Other> {
        StoreCoding<Item, Other>(scope: scope, index: index, indexForKey: indexForKey, encode: encode, decode: decode)
    }

    /// The metadata's JSON (`nil` for ``NoMetadata`` and for no metadata).
    func encodeMetadata(_ metadata: Metadata?) throws -> JSONValue? {
        guard let metadata, Metadata.self != NoMetadata.self else { return nil }
        // A receipt (one per object the recorder stores) is written as text: `encodeMetadataText`.
        return try JSONValueEncoder().encode(metadata)
    }

    /// The metadata's JSON text when it is written straight to bytes (a ``ReceiptMetadata``), else `nil`.
    func encodeMetadataText(_ metadata: Metadata?) -> [UInt8]? {
        guard Metadata.self == ReceiptMetadata.self, let metadata else { return nil }
        return _identityCast(metadata, to: ReceiptMetadata.self).jsonText
    }

    /// The metadata of a row, if it has some.
    func decodeMetadata(_ json: JSONValue?) throws -> Metadata? {
        guard let json, Metadata.self != NoMetadata.self else { return nil }
        return try JSONValueDecoder().decode(Metadata.self, from: json)
    }
}

extension Persistable {
    /// The coding of this type: its ``collection``, its key, and its `Codable` JSON.
    public static var storeCoding: StoreCoding<Self, Metadata> {
        StoreCoding(
            scope: .collection(collection),
            index: { $0.index },
            indexForKey: { StoreIndex(Self.collection, $0) },
            encode: { try JSONValueEncoder().encode($0) },
            decode: { try JSONValueDecoder().decode(Self.self, from: $0) }
        )
    }
}

extension CoatyObject {
    /// The coding of a Coaty object type: the collection is the object type, the key the
    /// lowercase objectId. A core type's own struct (e.g. ``CoatyModel/CoatyTask``) reads every
    /// object of its core type, as Coaty decodes them.
    public static var storeCoding: StoreCoding<Self, ReceiptMetadata> {
        coatyStoreCoding(registry: nil)
    }

    /// The coding of a Coaty object type, decoding with a registry (needed for
    /// ``CoatyModel/AnyCoatyObject`` to decode registered types).
    /// - Parameter registry: the registry; core types only when `nil`.
    /// - Returns: the coding.
    public static func coatyStoreCoding(registry: CoatyObjectRegistry?) -> StoreCoding<Self, ReceiptMetadata> {
        let scope: StoreScope
        let indexForKey: @Sendable (String) -> StoreIndex?
        if Self.self == AnyCoatyObject.self {
            scope = .coatyObjects
            indexForKey = { _ in nil }
        } else if Self.objectType == Self.coreType.objectType {
            scope = .coreTypes([Self.coreType.rawValue])
            indexForKey = { _ in nil }
        } else {
            scope = .collection(Self.objectType)
            indexForKey = { StoreIndex(Self.objectType, $0) }
        }
        return StoreCoding(
            scope: scope,
            index: { StoreIndex($0.objectType, $0.objectId.uuidString) },
            indexForKey: indexForKey,
            encode: { item in
                if let any = item as? AnyCoatyObject { return any.jsonValue }
                return try JSONValueEncoder().encode(item)
            },
            decode: { json in
                let registry = registry ?? StoreDefaults.coreTypes
                if Self.self == AnyCoatyObject.self, let any = try registry.decode(json) as? Self { return any }
                return try JSONValueDecoder(registry: registry).decode(Self.self, from: json)
            }
        )
    }
}

/// Shared immutable defaults.
enum StoreDefaults {
    /// A registry of the core types only (never mutated).
    static let coreTypes = CoatyObjectRegistry()
}
