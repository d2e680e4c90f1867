import CoatyCore
import Testing

@testable import CoatyCommunication
@testable import CoatyFilter
@testable import CoatyModel

/// Objects of unregistered types decode into `BaseObject` member by member
/// (`BaseObject(validMembersOf:objectType:)`), not through `JSONValueDecoder`: the two must give
/// the same value for every valid object, and the fast path must step aside (`nil`) wherever the
/// decoder throws, so the error is the decoder's.
@Suite("BaseObject decoded without Decodable")
struct BaseObjectFastPathTests {
    static let id = "2f1c3e2a-9b4d-4c8e-8a1f-2d3e4c5b6a70"

    /// Values each member may take, valid ones first: (valid, refused by the decoder); `nil` is
    /// an absent member.
    static let candidates: [String: (valid: [JSONValue?], invalid: [JSONValue])] = [
        "objectId": ([.string(id), .string(id.uppercased())], [.string("nope"), .int(1), .null]),
        "name": ([.string("n"), .string("")], [.int(3), .null]),
        "externalId": ([.string("e"), .null, nil], [.int(4), .bool(true)]),
        "parentObjectId": ([.string(id), .null, nil], [.string("x"), .array([])]),
        "locationId": ([.string(id), .null, nil], [.double(1.5)]),
        "isDeactivated": ([.bool(false), .bool(true), .null, nil], [.string("true"), .int(0)]),
        "extra": ([.int(1), .object(["a": .null]), .array([.string("x")]), .null, nil], []),
    ]

    @Test("the fast path equals the decoder on valid objects and steps aside on invalid ones")
    func agreesWithTheDecoder() throws {
        var random = SystemRandomNumberGenerator()
        let registry = CoatyObjectRegistry()
        var valid = 0
        var invalid = 0
        for round in 0..<3000 {
            var members: [(String, JSONValue)] = [
                ("objectType", "com.example.Unregistered"), ("coreType", "CoatyObject"),
            ]
            for (key, values) in Self.candidates.sorted(by: { $0.key < $1.key }).shuffled(using: &random) {
                if !values.invalid.isEmpty && Int.random(in: 0..<12, using: &random) == 0 {
                    members.append((key, values.invalid.randomElement(using: &random)!))
                } else if round % 11 == 0 && (key == "objectId" || key == "name") {
                    continue  // missing
                } else if let value = values.valid.randomElement(using: &random)! {
                    members.append((key, value))
                }
            }
            if round % 7 == 0 { members.append(("zeta", .string("last"))) }
            let json = JSONObject(uncheckedKeys: members.map(\.0), values: members.map(\.1))
            let fast = BaseObject(validMembersOf: json, objectType: "com.example.Unregistered")
            let decoded: BaseObject?
            do {
                let decoder = JSONValueDecoder(registry: registry)
                decoded = try decoder.decodeValidatedObject(BaseObject.self, from: json)
            } catch {
                decoded = nil
            }
            if let decoded {
                valid += 1
                #expect(fast == decoded, "\(json)")
                #expect(fast?.custom.keys == decoded.custom.keys, "custom members keep their order")
            } else {
                invalid += 1
                #expect(fast == nil, "\(json)")
            }
        }
        #expect(valid > 100 && invalid > 100)
        // Through the registry, an unregistered type takes the fast path and keeps its JSON.
        let json: JSONObject = [
            "objectType": "com.example.Unregistered", "coreType": "CoatyObject", "objectId": .string(Self.id),
            "name": "lamp", "luminance": 0.5,
        ]
        let object = try registry.decode(json)
        #expect(object.json == json)
        #expect(object.name == "lamp")
        #expect((object.value as? BaseObject)?.custom == ["luminance": 0.5])
        #expect(throws: CoatyObjectError.self) {
            let nameless: JSONObject = ["objectType": "x.Y", "coreType": "CoatyObject", "objectId": .string(Self.id)]
            _ = try registry.decode(nameless)
        }
    }
}
