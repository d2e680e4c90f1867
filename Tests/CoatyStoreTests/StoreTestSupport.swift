import CoatyCore
import CoatySQLite
import CoatyStore
import Foundation
import Testing

/// The backends every contract test runs against.
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case inMemory
    case sqlite

    var testDescription: String { rawValue }

    /// A fresh, empty database's connection (SQLite: a real file in a new temporary directory).
    func makeConnection() async throws -> any ConnectionType {
        switch self {
        case .inMemory: InMemoryDatabase().makeConnection()
        case .sqlite: try SQLiteDatabase(path: TemporaryDirectory().file("store.sqlite")).makeConnection()
        }
    }
}

/// A new directory under the system's temporary directory.
struct TemporaryDirectory {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("coaty-store-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }
}

/// The repository of every Coaty object over a connection.
func objectRepository<C: ConnectionType>(_ connection: C) -> AnyRepository<AnyCoatyObject> {
    AnyRepository(StoreRepository(connection: connection, coatyObjects: AnyCoatyObject.self))
}

/// A deterministic random number generator (SplitMix64) for reproducible random tests.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The test objects of Coaty JS's `db-in-memory.spec.ts` (100 objects), with two relations by
/// objectId for joins: `relatedId` (itself) and `relatedIds` (itself and the next two).
enum SpecObjects {
    static let objectType = "coaty.test.DbTestObject"

    static func objectId(_ i: Int) -> String {
        "00000000-0000-4000-8000-\(String(repeating: "0", count: 12 - String(i).count))\(i)"
    }

    static func json(_ i: Int) -> JSONObject {
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

    static func object(_ json: JSONObject) throws -> AnyCoatyObject {
        try CoatyObjectRegistry().decode(json)
    }

    static func all() throws -> [AnyCoatyObject] {
        try (1...100).map { try object(json($0)) }
    }

    static func renamed(_ object: AnyCoatyObject, suffix: String) throws -> AnyCoatyObject {
        var json = object.json
        json["name"] = .string(object.name + suffix)
        return try Self.object(json)
    }
}

/// A Persistable type with its own metadata.
struct Setting: Persistable, Equatable {
    struct Audit: Codable, Sendable, Equatable {
        var changedBy: String
    }
    typealias Metadata = Audit

    static let collection = "settings"
    var id: String
    var value: Int
}

/// A Persistable type without metadata.
struct Note: Persistable, Equatable {
    static let collection = "notes"
    var id: Int
    var text: String
}

/// A custom Coaty object type.
struct Light: CoatyObject, Hashable {
    static let objectType = "com.example.Light"
    var objectId = CoatyUUID()
    var name: String
    var isOn: Bool
    var luminance: Double
}
