/// Any JSON value, as it travels on the wire.
///
/// `JSONValue` is the one dynamic representation CoatyKit uses: for the unknown fields of an
/// object (`custom`), `privateData`, call parameters and filter operands. Object keys keep the
/// order they arrived in, and numbers keep their integer or floating-point form, so a decoded
/// value encodes back to the same JSON.
///
/// ```swift
/// let reading: JSONValue = ["unit": "°C", "value": 21.5, "tags": ["lab", 3]]
/// reading["value"]?.doubleValue   // 21.5
/// reading["tags"]?[1]             // .int(3)
/// ```
///
/// Equality is JSON equality: objects compare by key set regardless of order, and an integer
/// equals a floating-point number of the same value (`.int(1) == .double(1.0)`).
public enum JSONValue: Sendable {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number written without fraction or exponent that fits in 64 bits.
    case int(Int64)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object, with its keys in order.
    case object(JSONObject)
}

/// A JSON object whose keys keep their order.
///
/// Lookups are linear, which is the fastest choice for the small objects Coaty exchanges.
/// Setting a key that exists replaces its value in place; setting `nil` removes it.
public struct JSONObject: Sendable {
    /// The keys, in order.
    public private(set) var keys: [String]
    /// The values, in the order of ``keys``.
    public private(set) var values: [JSONValue]

    /// An empty object.
    public init() {
        keys = []
        values = []
    }

    /// An object with the given members; a later duplicate key replaces an earlier one.
    /// - Parameter members: key/value pairs in order.
    public init<S: Sequence>(_ members: S) where S.Element == (String, JSONValue) {
        self.init()
        for (key, value) in members { self[key] = value }
    }

    /// Builds an object from parallel key and value arrays without checking for duplicates.
    ///
    /// For decoders that have already rejected or resolved duplicate keys.
    public init(uncheckedKeys keys: [String], values: [JSONValue]) {
        precondition(keys.count == values.count, "JSONObject keys and values differ in count")
        self.keys = keys
        self.values = values
    }

    /// Appends a member without looking for an existing key; for encoders that know the key is new.
    @inline(__always)
    package mutating func appendUnchecked(_ key: String, _ value: JSONValue) {
        keys.append(key)
        values.append(value)
    }

    /// Reserves room for `capacity` members.
    /// - Parameter capacity: the number of members to make room for.
    public mutating func reserveCapacity(_ capacity: Int) {
        keys.reserveCapacity(capacity)
        values.reserveCapacity(capacity)
    }

    /// The number of members.
    public var count: Int { keys.count }

    /// Whether the object has no members.
    public var isEmpty: Bool { keys.isEmpty }

    /// The index of `key` in ``keys``, if present.
    @inlinable
    public func index(forKey key: String) -> Int? {
        keys.firstIndex(of: key)
    }

    /// The value for `key`; setting `nil` removes the key.
    public subscript(key: String) -> JSONValue? {
        get {
            guard let i = index(forKey: key) else { return nil }
            return values[i]
        }
        set {
            if let i = index(forKey: key) {
                if let newValue {
                    values[i] = newValue
                } else {
                    keys.remove(at: i)
                    values.remove(at: i)
                }
            } else if let newValue {
                keys.append(key)
                values.append(newValue)
            }
        }
    }

    /// Removes `key` and returns its value, if it was present.
    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSONValue? {
        guard let i = index(forKey: key) else { return nil }
        keys.remove(at: i)
        return values.remove(at: i)
    }
}

extension JSONObject: Sequence {
    /// Iterates the members in order as `(key, value)` pairs.
    public func makeIterator() -> some IteratorProtocol<(key: String, value: JSONValue)> {
        MemberIterator(keys: keys, values: values)
    }
}

/// Iterates the members of a ``JSONObject`` without boxing.
struct MemberIterator: IteratorProtocol {
    let keys: [String]
    let values: [JSONValue]
    var index = 0

    mutating func next() -> (key: String, value: JSONValue)? {
        guard index < keys.count else { return nil }
        defer { index += 1 }
        return (keys[index], values[index])
    }
}

extension JSONObject: Hashable {
    /// Objects are equal when they have the same key set and equal values per key; order is ignored.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for (i, key) in lhs.keys.enumerated() {
            guard let other = rhs[key], other == lhs.values[i] else { return false }
        }
        return true
    }

    /// Hashes independently of key order.
    public func hash(into hasher: inout Hasher) {
        var combined = 0
        for (i, key) in keys.enumerated() {
            var member = Hasher()
            member.combine(key)
            member.combine(values[i])
            combined ^= member.finalize()
        }
        hasher.combine(count)
        hasher.combine(combined)
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    /// An object with the literal's members, in the literal's order.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements)
    }
}

extension JSONValue: Hashable {
    /// JSON equality: numbers by value across integer and floating form, objects ignoring key order.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.double(let a), .double(let b)): return a == b
        case (.int(let a), .double(let b)), (.double(let b), .int(let a)):
            return Double(a) == b && Double(exactly: a) != nil
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)): return a == b
        default: return false
        }
    }

    /// Hashes consistently with ``==(_:_:)``: an integral double hashes like the integer.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null:
            hasher.combine(0)
        case .bool(let b):
            hasher.combine(1)
            hasher.combine(b)
        case .int(let i):
            hasher.combine(2)
            hasher.combine(Double(i))
        case .double(let d):
            hasher.combine(2)
            hasher.combine(d)
        case .string(let s):
            hasher.combine(3)
            hasher.combine(s)
        case .array(let a):
            hasher.combine(4)
            hasher.combine(a)
        case .object(let o):
            hasher.combine(5)
            hasher.combine(o)
        }
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByNilLiteral {
    /// `nil` is JSON `null`.
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    /// A boolean literal.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    /// An integer literal.
    public init(integerLiteral value: Int64) { self = .int(value) }
}

extension JSONValue: ExpressibleByFloatLiteral {
    /// A floating-point literal.
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension JSONValue: ExpressibleByStringLiteral {
    /// A string literal.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension JSONValue: ExpressibleByArrayLiteral {
    /// An array literal.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// An object literal, keys in the literal's order.
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
}

// MARK: - Access

extension JSONValue {
    /// The member `key` of an object; `nil` for a missing key or a non-object.
    /// Setting on a non-object replaces it with an object.
    public subscript(key: String) -> JSONValue? {
        get {
            guard case .object(let o) = self else { return nil }
            return o[key]
        }
        set {
            var o: JSONObject
            if case .object(let existing) = self { o = existing } else { o = JSONObject() }
            o[key] = newValue
            self = .object(o)
        }
    }

    /// The element at `index` of an array; `nil` when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let a) = self, a.indices.contains(index) else { return nil }
        return a[index]
    }

    /// Whether this is `null`.
    public var isNull: Bool { if case .null = self { true } else { false } }
    /// The boolean, if this is one.
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    /// The string, if this is one.
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    /// The number as a `Double`, if this is a number.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }
    /// The number as an `Int64`, if this is an integer or an integral double that fits.
    public var int64Value: Int64? {
        switch self {
        case .int(let i): i
        case .double(let d): Int64(exactly: d)
        default: nil
        }
    }
    /// The number as an `Int`, if it is integral and fits.
    public var intValue: Int? { int64Value.flatMap { Int(exactly: $0) } }
    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    /// The object, if this is one.
    public var objectValue: JSONObject? { if case .object(let o) = self { o } else { nil } }
    /// Whether this is a number (integer or floating-point).
    public var isNumber: Bool {
        switch self {
        case .int, .double: true
        default: false
        }
    }
}
