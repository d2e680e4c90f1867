public import CoatyModel

/// A condition for joining related objects into result objects, as sent in a Query event.
///
/// Wire form: `{"localProperty":…,"asProperty":…,"isLocalPropertyArray"?:…,"isOneToOneRelation"?:…}`.
///
/// The value of `localProperty` (a top-level key, not a path) is the objectId of a related object;
/// with `isLocalPropertyArray` it is an array of objectIds. The resolved objects are stored under
/// `asProperty`, replacing any existing value: an array of the found objects, or with
/// `isOneToOneRelation` (and no local array) the one object, the property being removed when
/// none is found.
///
/// ```swift
/// let join = ObjectJoinCondition(localProperty: "locationId", asProperty: "location", isOneToOneRelation: true)
/// let joined = ObjectMatcher.resolveJoins([join], in: tasks) { id in store[id] }
/// ```
public struct ObjectJoinCondition: Sendable, Hashable, Codable {
    /// The key of the property holding an objectId (or an array of objectIds).
    public var localProperty: String
    /// The key under which the resolved object(s) are stored.
    public var asProperty: String
    /// Whether the local property holds an array of objectIds; absent means `false`.
    public var isLocalPropertyArray: Bool?
    /// Whether `asProperty` holds one object instead of an array; absent means `false`.
    public var isOneToOneRelation: Bool?

    /// A join condition.
    /// - Parameters:
    ///   - localProperty: the key holding an objectId or an array of objectIds.
    ///   - asProperty: the key receiving the resolved objects.
    ///   - isLocalPropertyArray: `true` when the local property is an array; `nil` leaves it out of the JSON.
    ///   - isOneToOneRelation: `true` to store one object instead of an array; `nil` leaves it out of the JSON.
    public init(
        localProperty: String,
        asProperty: String,
        isLocalPropertyArray: Bool? = nil,
        isOneToOneRelation: Bool? = nil
    ) {
        self.localProperty = localProperty
        self.asProperty = asProperty
        self.isLocalPropertyArray = isLocalPropertyArray
        self.isOneToOneRelation = isOneToOneRelation
    }
}

/// The `objectJoinConditions` field of a Query: one condition or an array, re-encoded in the
/// form it was decoded from.
public struct ObjectJoinConditionList: Sendable, Hashable, Codable {
    /// The conditions, applied in order.
    public var conditions: [ObjectJoinCondition]
    /// Whether the wire form is a single object rather than an array.
    public var isSingleObject: Bool

    /// A list of conditions, encoded as an array.
    /// - Parameter conditions: the conditions.
    public init(_ conditions: [ObjectJoinCondition]) {
        self.conditions = conditions
        isSingleObject = false
    }

    /// One condition, encoded as a single object.
    /// - Parameter condition: the condition.
    public init(_ condition: ObjectJoinCondition) {
        conditions = [condition]
        isSingleObject = true
    }

    /// Decodes a single condition object or an array of them.
    /// - Throws: `DecodingError` for anything else.
    public init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var list: [ObjectJoinCondition] = []
            while !array.isAtEnd { list.append(try array.decode(ObjectJoinCondition.self)) }
            self.init(list)
        } else {
            self.init(try ObjectJoinCondition(from: decoder))
        }
    }

    /// Encodes a single object or an array, as decoded.
    public func encode(to encoder: any Encoder) throws {
        if isSingleObject, conditions.count == 1 {
            try conditions[0].encode(to: encoder)
        } else {
            var array = encoder.unkeyedContainer()
            for condition in conditions { try array.encode(condition) }
        }
    }
}

extension ObjectMatcher {
    /// Resolves join conditions on one object with an application-defined relation.
    ///
    /// This is Coaty JS's in-memory join: for each local value (each element with
    /// `isLocalPropertyArray`), `related` gives the related objects; with `isOneToOneRelation` only
    /// the first of them counts. The objects found are stored under `asProperty`: an array, or with
    /// `isOneToOneRelation` (and no local array) the first object, the property being removed when
    /// there is none.
    ///
    /// ```swift
    /// // Join tasks to their creator by the creator's "userId" field rather than its objectId.
    /// let join = ObjectJoinCondition(localProperty: "creatorId", asProperty: "creator", isOneToOneRelation: true)
    /// let joined = ObjectMatcher.resolveJoins([join], in: task) { _, value in users.filter { $0["userId"] == value } }
    /// ```
    /// - Parameters:
    ///   - conditions: the join conditions, applied in order.
    ///   - object: the result object; a non-object is returned unchanged.
    ///   - related: the related objects for a condition and one local value.
    /// - Returns: the object with the resolved objects stored under each `asProperty`.
    public static func resolveJoins(
        _ conditions: [ObjectJoinCondition],
        in object: JSONValue,
        related: (ObjectJoinCondition, JSONValue) throws -> [JSONValue]
    ) rethrows -> JSONValue {
        guard case .object(var result) = object, !conditions.isEmpty else { return object }
        for condition in conditions {
            let isArray = condition.isLocalPropertyArray ?? false
            let isOneToOne = condition.isOneToOneRelation ?? false
            let localValue = result[condition.localProperty]
            let localValues: [JSONValue]
            if isArray {
                localValues = localValue?.arrayValue ?? []
            } else {
                localValues = localValue.map { [$0] } ?? []
            }
            var joined: [JSONValue] = []
            for value in localValues {
                let found = try related(condition, value)
                if isOneToOne {
                    if let first = found.first { joined.append(first) }
                } else {
                    joined.append(contentsOf: found)
                }
            }
            if isOneToOne && !isArray {
                result[condition.asProperty] = joined.first
            } else {
                result[condition.asProperty] = .array(joined)
            }
        }
        return .object(result)
    }

    /// Resolves join conditions on each object with an application-defined relation.
    /// - Parameters:
    ///   - conditions: the join conditions, applied in order.
    ///   - objects: the result objects.
    ///   - related: the related objects for a condition and one local value.
    /// - Returns: the objects with their joined properties.
    public static func resolveJoins(
        _ conditions: [ObjectJoinCondition],
        in objects: [JSONValue],
        related: (ObjectJoinCondition, JSONValue) throws -> [JSONValue]
    ) rethrows -> [JSONValue] {
        guard !conditions.isEmpty else { return objects }
        return try objects.map { try resolveJoins(conditions, in: $0, related: related) }
    }

    /// Resolves join conditions on one object whose local properties hold objectIds.
    /// - Parameters:
    ///   - conditions: the join conditions, applied in order.
    ///   - object: the result object; a non-object is returned unchanged.
    ///   - lookup: finds a related object by its objectId.
    /// - Returns: the object with the resolved objects stored under each `asProperty`.
    public static func resolveJoins(
        _ conditions: [ObjectJoinCondition],
        in object: JSONValue,
        lookup: (String) throws -> JSONValue?
    ) rethrows -> JSONValue {
        try resolveJoins(conditions, in: object) { _, value in
            guard case .string(let objectId) = value, let found = try lookup(objectId) else { return [] }
            return [found]
        }
    }

    /// Resolves join conditions on each object whose local properties hold objectIds.
    /// - Parameters:
    ///   - conditions: the join conditions, applied in order.
    ///   - objects: the result objects.
    ///   - lookup: finds a related object by its objectId.
    /// - Returns: the objects with their joined properties.
    public static func resolveJoins(
        _ conditions: [ObjectJoinCondition],
        in objects: [JSONValue],
        lookup: (String) throws -> JSONValue?
    ) rethrows -> [JSONValue] {
        guard !conditions.isEmpty else { return objects }
        return try objects.map { try resolveJoins(conditions, in: $0, lookup: lookup) }
    }

    /// Resolves join conditions on each object against candidate related objects found by objectId.
    /// - Parameters:
    ///   - conditions: the join conditions, applied in order.
    ///   - objects: the result objects.
    ///   - candidates: the objects that may be joined, found by their `objectId`
    ///     (the first of several with the same objectId wins).
    /// - Returns: the objects with their joined properties.
    public static func resolveJoins(
        _ conditions: [ObjectJoinCondition],
        in objects: [JSONValue],
        candidates: [JSONValue]
    ) -> [JSONValue] {
        guard !conditions.isEmpty else { return objects }
        var index: [String: JSONValue] = [:]
        index.reserveCapacity(candidates.count)
        for candidate in candidates {
            if case .string(let id)? = candidate["objectId"], index[id] == nil { index[id] = candidate }
        }
        return resolveJoins(conditions, in: objects) { index[$0] }
    }
}
