import CoatyCore
import Foundation
import Testing

@Suite("Codable bridge (JSONValueEncoder / JSONValueDecoder)")
struct JSONValueCodableCodecTests {
    struct Reading: Codable, Equatable {
        enum Unit: String, Codable { case celsius, fahrenheit }
        var value: Double
        var unit: Unit
        var sensor: CoatyUUID
        var tags: [String]
        var limits: [String: Int]
        var note: String?
        var raw: JSONValue?
        var small: UInt8
        var big: UInt64
        var ratio: Float
    }

    let reading = Reading(
        value: 21,
        unit: .celsius,
        sensor: CoatyUUID("8f14e45f-ceea-467a-9f4e-3a2b1c0d9e22")!,
        tags: ["lab", "north"],
        limits: ["max": 30],
        note: nil,
        raw: .null,
        small: 255,
        big: 1 << 63,
        ratio: 0.5
    )

    @Test func encodesCompactlyOmittingNilAndKeepingExplicitNull() throws {
        let json = try JSONValueEncoder().encode(reading)
        let object = try #require(json.objectValue)
        #expect(object.keys == ["value", "unit", "sensor", "tags", "limits", "raw", "small", "big", "ratio"])
        #expect(jsonIdentical(object["value"]!, .int(21)))  // integral Double → integer, as JavaScript writes it
        #expect(object["unit"] == "celsius")
        #expect(object["sensor"] == "8f14e45f-ceea-467a-9f4e-3a2b1c0d9e22")
        #expect(object["raw"] == .null)
        #expect(jsonIdentical(object["big"]!, .double(9_223_372_036_854_775_808.0)))
        #expect(jsonIdentical(object["ratio"]!, .double(0.5)))
    }

    @Test func roundTripsThroughValueAndBytes() throws {
        let decoded = try JSONValueDecoder().decode(Reading.self, from: try JSONValueEncoder().encode(reading))
        #expect(decoded == reading)
        let viaBytes = try JSONValueDecoder().decode(
            [Reading].self,
            from: try JSONValueEncoder().encodeToBytes([reading])
        )
        #expect(viaBytes.count == 1 && viaBytes[0].tags == reading.tags)
    }

    @Test func interoperatesWithFoundation() throws {
        struct Envelope: Codable, Equatable {
            var data: JSONValue
            var extra: JSONObject
        }
        let envelope = Envelope(data: ["a": [1, 2.5, "x", nil, true]], extra: ["k": "v"])
        let viaFoundation = try JSONDecoder().decode(Envelope.self, from: try JSONEncoder().encode(envelope))
        #expect(viaFoundation == envelope)
        let ours = try JSONValueEncoder().encodeToBytes(envelope)
        #expect(try JSONDecoder().decode(Envelope.self, from: Data(ours)) == envelope)
        let foundationBytes = try JSONEncoder().encode(envelope)
        #expect(try JSONValueDecoder().decode(Envelope.self, from: [UInt8](foundationBytes)) == envelope)
    }

    struct Manual: Codable, Equatable {
        var id: Int
        var point: (x: Double, y: Double)
        var list: [Int]
        var base: String

        enum Keys: String, CodingKey { case id, point, list, x, y }

        init(id: Int, point: (x: Double, y: Double), list: [Int], base: String) {
            self.id = id
            self.point = point
            self.list = list
            self.base = base
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            id = try c.decode(Int.self, forKey: .id)
            let p = try c.nestedContainer(keyedBy: Keys.self, forKey: .point)
            point = (try p.decode(Double.self, forKey: .x), try p.decode(Double.self, forKey: .y))
            var l = try c.nestedUnkeyedContainer(forKey: .list)
            var list: [Int] = []
            while !l.isAtEnd { list.append(try l.decode(Int.self)) }
            self.list = list
            base = try String(from: c.superDecoder())
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            var p = c.nestedContainer(keyedBy: Keys.self, forKey: .point)
            try c.encode(id, forKey: .id)
            var l = c.nestedUnkeyedContainer(forKey: .list)
            try base.encode(to: c.superEncoder())
            try p.encode(point.x, forKey: .x)
            try p.encode(point.y, forKey: .y)
            for v in list { try l.encode(v) }
        }

        static func == (a: Manual, b: Manual) -> Bool {
            a.id == b.id && a.point == b.point && a.list == b.list && a.base == b.base
        }
    }

    @Test func nestedContainersAndSuperEncoders() throws {
        let value = Manual(id: 7, point: (1.5, -2), list: [3, 4], base: "b")
        let json = try JSONValueEncoder().encode(value)
        #expect(json.serializedString() == #"{"point":{"x":1.5,"y":-2},"id":7,"list":[3,4],"super":"b"}"#)
        #expect(try JSONValueDecoder().decode(Manual.self, from: json) == value)
    }

    @Test func numbersConvertOnlyWhenExact() throws {
        struct Ints: Codable { var a: Int; var b: UInt8? }
        #expect(try JSONValueDecoder().decode(Ints.self, from: ["a": 3.0]).a == 3)
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(Ints.self, from: ["a": 3.5]) }
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(Ints.self, from: ["a": 1, "b": 256]) }
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(Ints.self, from: ["a": "1"]) }
        #expect(try JSONValueDecoder().decode(Ints.self, from: ["a": 1, "b": nil]).b == nil)
        #expect(jsonIdentical(try JSONValueEncoder().encode(-0.0), .double(-0.0)))
        #expect(try JSONValueEncoder().encode([Float(0.1)]).serializedString() == "[0.1]")
        #expect(try JSONValueDecoder().decode([Float].self, from: try JSONValueEncoder().encode([Float(0.1)])) == [0.1])
        #expect(jsonIdentical(try JSONValueEncoder().encode(1e300), .double(1e300)))
        #expect(jsonIdentical(try JSONValueEncoder().encode(9_007_199_254_740_992.0), .int(9_007_199_254_740_992)))
    }

    @Test func errorsCarryTheCodingPath() throws {
        struct Inner: Codable { var n: Int }
        struct Outer: Codable { var items: [Inner] }
        let error = try #require(throws: DecodingError.self) {
            try JSONValueDecoder().decode(Outer.self, from: ["items": [["n": 1], ["m": 2]]])
        }
        guard case .keyNotFound(let key, let context) = error else {
            Issue.record("expected keyNotFound, got \(error)")
            return
        }
        #expect(key.stringValue == "n")
        #expect(context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue } == ["items", "1"])
    }

    @Test func datesAsMillisecondsOrISO8601() throws {
        struct Stamp: Codable { var at: Date }
        let date = Date(timeIntervalSince1970: 1_700_000_000.5)
        let ms = try JSONValueEncoder().encode(Stamp(at: date))
        #expect(jsonIdentical(ms["at"]!, .int(1_700_000_000_500)))
        #expect(abs(try JSONValueDecoder().decode(Stamp.self, from: ms).at.timeIntervalSince(date)) < 0.001)

        var encoder = JSONValueEncoder()
        encoder.dateEncodingStrategy = .iso8601
        let iso = try encoder.encode(Stamp(at: date))
        #expect(iso["at"] == "2023-11-14T22:13:20.500Z")
        var decoder = JSONValueDecoder()
        decoder.dateDecodingStrategy = .iso8601
        #expect(abs(try decoder.decode(Stamp.self, from: iso).at.timeIntervalSince(date)) < 0.001)
        #expect(
            try decoder.decode(Stamp.self, from: ["at": "2023-11-14T22:13:20Z"]).at
                == Date(timeIntervalSince1970: 1_700_000_000)
        )
        #expect(throws: DecodingError.self) { try decoder.decode(Stamp.self, from: ["at": "yesterday"]) }
    }

    @Test func userInfoReachesCodableImplementations() throws {
        struct Probe: Codable {
            static let key = CodingUserInfoKey(rawValue: "probe")!
            var seen: String
            init(seen: String) { self.seen = seen }
            init(from decoder: any Decoder) throws { seen = decoder.userInfo[Probe.key] as? String ?? "none" }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.singleValueContainer()
                try c.encode(encoder.userInfo[Probe.key] as? String ?? "none")
            }
        }
        var decoder = JSONValueDecoder()
        decoder.userInfo[Probe.key] = "yes"
        #expect(try decoder.decode(Probe.self, from: .null).seen == "yes")
        var encoder = JSONValueEncoder()
        encoder.userInfo[Probe.key] = "enc"
        #expect(try encoder.encode(Probe(seen: "")) == "enc")
    }

    @Test func malformedBytesThrowParseErrors() {
        #expect(throws: JSONParseError.self) { try JSONValueDecoder().decode(Reading.self, from: Array("{".utf8)) }
    }
}
