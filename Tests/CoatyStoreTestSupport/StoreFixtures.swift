public import CoatyCore
public import CoatyStore

/// The repository of every Coaty object over a connection.
/// - Parameter connection: the connection.
/// - Returns: the repository.
public func objectRepository<C: ConnectionType>(_ connection: C) -> AnyRepository<AnyCoatyObject> {
    AnyRepository(StoreRepository(connection: connection, coatyObjects: AnyCoatyObject.self))
}

/// A deterministic random number generator (SplitMix64) for reproducible random tests.
public struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    /// A generator.
    public init(seed: UInt64) { state = seed }

    /// The next number.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The test objects of Coaty JS's `db-in-memory.spec.ts` (100 objects), with two relations by
/// objectId for joins: `relatedId` (itself) and `relatedIds` (itself and the next two).
public enum SpecObjects {
    public static let objectType = "coaty.test.DbTestObject"

    public static func objectId(_ i: Int) -> String {
        "00000000-0000-4000-8000-\(String(repeating: "0", count: 12 - String(i).count))\(i)"
    }

    public static func json(_ i: Int) -> JSONObject {
        let n = JSONValue.int(Int64(i))
        let values: JSONValue = [n, .int(Int64(i + 1)), .int(Int64(i + 2)), "foo"]
        let related = (i...(i + 2)).filter { $0 <= 100 }.map { JSONValue.string(objectId($0)) }
        return [
            "objectId": .string(objectId(i)),
            "name": .string("Test Object \(i)"),
            "coreType": "CoatyObject",
            "objectType": .string(objectType),
            "externalId": .string("\(100 + i)"),
            "testId": n,
            "testValue": values,
            "testText": .string("\(i)"),
            "testBool": .bool(i % 2 == 0),
            "testObj": [
                "": n,
                "name": .string("Test SubObject \(i)"),
                "testId": n,
                "testValue": values,
                "testText": .string("\(i)"),
                "testBool": .bool(i % 2 == 0),
            ],
            " ": "blank",
            "": ["": ["": n]],
            ".": [".": [".": n]],
            "relatedId": .string(objectId(i)),
            "relatedIds": .array(related),
        ]
    }

    public static func object(_ json: JSONObject) throws -> AnyCoatyObject {
        try CoatyObjectRegistry().decode(json)
    }

    public static func all() throws -> [AnyCoatyObject] {
        try (1...100).map { try object(json($0)) }
    }

    public static func renamed(_ object: AnyCoatyObject, suffix: String) throws -> AnyCoatyObject {
        var json = object.json
        json["name"] = .string(object.name + suffix)
        return try Self.object(json)
    }
}

/// A Persistable type with its own metadata.
public struct Setting: Persistable, Equatable {
    /// Who changed it.
    public struct Audit: Codable, Sendable, Equatable {
        /// The name.
        public var changedBy: String
        /// An audit.
        public init(changedBy: String) { self.changedBy = changedBy }
    }
    /// The metadata.
    public typealias Metadata = Audit

    /// The collection.
    public static let collection = "settings"
    /// The key.
    public var id: String
    /// The value.
    public var value: Int
    /// A setting.
    public init(id: String, value: Int) {
        self.id = id
        self.value = value
    }
}

/// A Persistable type without metadata.
public struct Note: Persistable, Equatable {
    /// The collection.
    public static let collection = "notes"
    /// The key.
    public var id: Int
    /// The text.
    public var text: String
    /// A note.
    public init(id: Int, text: String) {
        self.id = id
        self.text = text
    }
}

/// A custom Coaty object type.
public struct Light: CoatyObject, Hashable {
    /// The object type.
    public static let objectType = "com.example.Light"
    /// The objectId.
    public var objectId = CoatyUUID()
    /// The name.
    public var name: String
    /// Whether it is on.
    public var isOn: Bool
    /// Its luminance.
    public var luminance: Double
    /// A light.
    public init(name: String, isOn: Bool, luminance: Double) {
        self.name = name
        self.isOn = isOn
        self.luminance = luminance
    }
}

/// Random JSON objects and filters mixing the member types Coaty compares differently.
public enum RandomValues {
    public static let strings: [JSONValue] = ["alpha", "beta", "Alpha", "", "10", "9", "1e3", "ä", "x y", "null"]
    public static let numbers: [JSONValue] = [0, 1, -1, 9, 10, 2.5, -0.5, 1000, .int(1 << 60), .double(1.5e16)]
    public static let keys = [
        "name", "externalId", "objectType", "n", "s", "b", "missing", "tags", "nested", "coreType",
    ]

    public static func scalar(_ random: inout SplitMix64) -> JSONValue {
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<4: strings.randomElement(using: &random)!
        case 4..<8: numbers.randomElement(using: &random)!
        case 8: .bool(Bool.random(using: &random))
        default: .null
        }
    }

    public static func value(_ random: inout SplitMix64) -> JSONValue? {
        switch Int.random(in: 0..<12, using: &random) {
        case 0: nil
        case 1: .array((0..<Int.random(in: 0..<3, using: &random)).map { _ in scalar(&random) })
        case 2: ["x": scalar(&random)]
        default: scalar(&random)
        }
    }

    public static func object(_ random: inout SplitMix64) -> JSONValue {
        var object = JSONObject()
        if Int.random(in: 0..<5, using: &random) > 0 {
            object["objectId"] = .string(CoatyUUID(randomUsing: &random).uuidString)
            object["objectType"] = ["t.A", "t.B", "coaty.Task"].randomElement(using: &random).map(JSONValue.string)
            object["coreType"] = ["CoatyObject", "Task"].randomElement(using: &random).map(JSONValue.string)
        }
        for key in keys where key != "objectType" && key != "coreType" {
            if let value = value(&random) { object[key] = value }
        }
        return .object(object)
    }

    public static func expression(_ random: inout SplitMix64) -> ObjectFilterExpression {
        let op = ObjectFilterOperator.allCases.randomElement(using: &random)!
        func operand() -> JSONValue {
            switch Int.random(in: 0..<6, using: &random) {
            case 0..<3: scalar(&random)
            case 3:
                .array((0..<Int.random(in: 0..<4, using: &random)).map { _ in strings.randomElement(using: &random)! })
            case 4: .array((0..<Int.random(in: 0..<3, using: &random)).map { _ in scalar(&random) })
            default: numbers.randomElement(using: &random)!
            }
        }
        switch op {
        case .exists, .notExists: return ObjectFilterExpression(op)
        case .between, .notBetween:
            return ObjectFilterExpression(op, numbers.randomElement(using: &random)!, operand())
        case .like: return .like(["a%", "%a", "_", "%"].randomElement(using: &random)!)
        default: return ObjectFilterExpression(op, operand())
        }
    }

    public static func condition(_ random: inout SplitMix64) -> ObjectFilterCondition {
        var key = keys.randomElement(using: &random)!
        if Int.random(in: 0..<8, using: &random) == 0 { key += ".x" }
        return ObjectFilterCondition(ObjectFilterProperty(key), expression(&random))
    }

    public static func filter(_ random: inout SplitMix64) -> ObjectFilter {
        var filter = ObjectFilter()
        let count = Int.random(in: 0..<4, using: &random)
        let conditions = (0..<count).map { _ in condition(&random) }
        switch Int.random(in: 0..<3, using: &random) {
        case 0 where count == 1: filter.conditions = .condition(conditions[0])
        case 1: filter.conditions = .or(conditions)
        default: filter.conditions = count == 0 ? nil : .and(conditions)
        }
        if Int.random(in: 0..<4, using: &random) == 0 {
            filter.orderByProperties = [
                ObjectFilterOrdering(ObjectFilterProperty(keys.randomElement(using: &random)!), .descending)
            ]
        }
        if Int.random(in: 0..<3, using: &random) == 0 { filter.skip = Int.random(in: -1..<20, using: &random) }
        if Int.random(in: 0..<3, using: &random) == 0 { filter.take = Int.random(in: -1..<20, using: &random) }
        return filter
    }
}

extension StoreContract {
    /// Writes rows (upserts) and then removes some indexes, in one write transaction.
    /// - Parameters:
    ///   - rows: the rows.
    ///   - removals: the indexes removed after the writes.
    ///   - connection: the connection.
    public static func load(_ rows: [StoreRow], removing removals: [StoreIndex], into connection: some ConnectionType)
        async throws
    {
        try await connection.write { tx in
            for row in rows { try await tx.write(row, mode: .upsert) }
            for index in removals { try await tx.removeRow(at: index) }
        }
    }
}
