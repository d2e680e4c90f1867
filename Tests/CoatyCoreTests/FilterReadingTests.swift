import CoatyCore
import Testing

@testable import CoatyCommunication
@testable import CoatyFilter
@testable import CoatyModel

/// A received Query's filter is read straight from its JSON (`ObjectFilter(reading:)`) for the
/// shapes agents send, and through `Decodable` otherwise: wherever the direct reading gives a
/// filter, `Decodable` gives the same one, and the direct reading takes the usual shapes.
@Suite("Reading received filters")
struct FilterReadingTests {
    /// A deterministic generator (SplitMix64).
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func operand(_ random: inout Generator) -> JSONValue {
        switch Int.random(in: 0..<9, using: &random) {
        case 0: .int(Int64.random(in: -5...5, using: &random))
        case 1: .double(Double(Int.random(in: 0...20, using: &random)) / 4)
        case 2: .string(["a", "b.c", "%x%", ""].randomElement(using: &random)!)
        case 3: .bool(Bool.random(using: &random))
        case 4: .null
        case 5: .array([.int(1), .string("x")])
        case 6: .object(["k": .int(1)])
        case 7: .int(Int64.random(in: -2...16, using: &random))
        default: .string("z")
        }
    }

    static func property(_ random: inout Generator) -> JSONValue {
        switch Int.random(in: 0..<6, using: &random) {
        case 0: "name"
        case 1: "a.b"
        case 2: ["a", "b.c"]
        case 3: []
        case 4: ["a", 1]  // not a path
        default: .int(3)  // not a property
        }
    }

    static func condition(_ random: inout Generator) -> JSONValue {
        let count = Int.random(in: 0...4, using: &random)
        var expression: [JSONValue] = []
        if count > 0 {
            // Mostly valid operators (0…14), sometimes out of range or not an integer.
            let op: JSONValue =
                switch Int.random(in: 0..<10, using: &random) {
                case 0: .int(15)
                case 1: .double(2)
                case 2: .string("2")
                default: .int(Int64.random(in: 0...14, using: &random))
                }
            expression.append(op)
            for _ in 1..<count { expression.append(operand(&random)) }
        }
        switch Int.random(in: 0..<12, using: &random) {
        case 0: return .array([property(&random)])
        case 1: return .array([property(&random), .array(expression), .int(1)])
        case 2: return .object(["x": .array(expression)])
        default: return .array([property(&random), .array(expression)])
        }
    }

    static func filter(_ random: inout Generator) -> JSONValue {
        var members = JSONObject()
        if Bool.random(using: &random) {
            switch Int.random(in: 0..<7, using: &random) {
            case 0: members["conditions"] = condition(&random)
            case 1: members["conditions"] = .object([:])
            case 2:
                members["conditions"] = .object(["and": .array((0..<3).map { _ in condition(&random) })])
            case 3:
                members["conditions"] = .object(["or": .array((0..<2).map { _ in condition(&random) })])
            case 4: members["conditions"] = .object(["and": .array([]), "or": .array([])])
            case 5: members["conditions"] = .null
            default: members["conditions"] = .object(["and": .array([condition(&random)]), "note": "x"])
            }
        }
        if Bool.random(using: &random) {
            let levels: [JSONValue] = (0..<Int.random(in: 0...2, using: &random)).map { _ in
                switch Int.random(in: 0..<6, using: &random) {
                case 0: .array([property(&random), "Up"])
                case 1: .array([property(&random)])
                default: .array([property(&random), Bool.random(using: &random) ? "Asc" : "Desc"])
                }
            }
            members["orderByProperties"] = .array(levels)
        }
        for key in ["skip", "take"] where Bool.random(using: &random) {
            members[key] =
                switch Int.random(in: 0..<6, using: &random) {
                case 0: .double(2.5)
                case 1: .double(3)
                case 2: .null
                case 3: .string("1")
                default: .int(Int64.random(in: -3...20, using: &random))
                }
        }
        if Int.random(in: 0..<10, using: &random) == 0 { members["extra"] = .int(1) }
        return .object(members)
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func directReadingAgreesWithDecodable(seed: UInt64) throws {
        var random = Generator(state: seed)
        var direct = 0
        var decodable = 0
        for _ in 0..<3000 {
            let json = Self.filter(&random)
            let viaDecodable = try? JSONValueDecoder().decode(ObjectFilter.self, from: json)
            if let viaDecodable {
                decodable += 1
                // Whatever Decodable accepts, written as CoatyKit and Coaty JS write filters, is
                // read directly, to the same filter.
                let canonical = try JSONValueEncoder().encode(viaDecodable)
                #expect(ObjectFilter(reading: canonical) == viaDecodable, "\(canonical)")
            }
            guard let read = ObjectFilter(reading: json) else { continue }
            direct += 1
            #expect(read == viaDecodable, "\(json)")
        }
        #expect(direct > 500 && decodable > 1000, "direct \(direct), Decodable \(decodable)")
    }

    /// A received Query carries the same filter either way, and a malformed one still fails with
    /// Decodable's error.
    @Test func queryPayloadsReadTheirFilter() throws {
        let filter = ObjectFilter.where("value", .lessThan(500)).and("name", .like("n%")).orderBy("seq", .descending)
            .skip(2).take(10)
        let payload = QueryEventData(objectTypes: ["com.example.Bench"], objectFilter: filter).payloadBytes
        let read = try QueryEventData(bytes: payload, registry: CoatyObjectRegistry())
        #expect(read.objectFilter == filter)
        #expect(ObjectFilter(reading: try JSONValue(parsing: #"{"take":1.5}"#)) == nil)
        #expect(throws: CommunicationEventDataError.self) {
            try QueryEventData(
                bytes: Array(#"{"objectTypes":["t"],"objectFilter":{"take":"x"}}"#.utf8),
                registry: CoatyObjectRegistry()
            )
        }
    }
}
