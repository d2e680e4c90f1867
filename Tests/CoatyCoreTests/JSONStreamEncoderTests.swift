import CoatyCore
import Foundation
import PropertyBased
import Testing

// `JSONValueEncoder.encodeToBytes` streams values straight into bytes; these tests hold it to the
// bytes of the tree encoder serialized (`encode(_:)` then `serializedBytes()`), for values it
// streams and for the container uses where it has to fall back to the tree.

/// The tree encoder's bytes and the streamed bytes of `value`, for comparison.
private func bothEncodings<T: Encodable>(_ value: T, _ encoder: JSONValueEncoder = JSONValueEncoder()) throws -> (
    tree: String, streamed: String
) {
    let tree = try encoder.encode(value).serializedString()
    let streamed = String(decoding: try encoder.encodeToBytes(value), as: UTF8.self)
    return (tree, streamed)
}

/// A custom object type using most value kinds synthesized Codable writes.
private struct Gadget: CoatyObject, Equatable {
    static let objectType = "com.example.Gadget"
    var objectId = CoatyUUID()
    var name: String
    var parentObjectId: CoatyUUID?
    var isOn = true
    var level = 0.75
    var whole = 3.0
    var ratio: Float = 0.1
    var count = -42
    var small: Int8 = -8
    var big: UInt64 = .max
    var when = Date(timeIntervalSince1970: 1_700_000_000.5)
    var tags = ["a", "b\"c", "ü\n"]
    var maybe: [Int?] = [1, nil, 3]
    var grid = [[1, 2], [], [3]]
    var byName = ["x": 1]
    var byNumber = [7: "seven"]
    var extra: JSONObject = ["k": [1, "two", nil, ["deep": true]]]
    var anyValue: JSONValue = .double(1.5)
    var link = URL(string: "https://example.com/a?b=c")!
    var mode = Mode.dimmed(level: 3, label: "low")
    var empty = Nothing()
    var kind = CoreType.task
}

private enum Mode: Codable, Equatable {
    case off
    case dimmed(level: Int, label: String)
}

/// A value that encodes nothing (the tree encoder writes `{}`).
private struct Nothing: Codable, Equatable {
    func encode(to encoder: any Encoder) throws {}
}

/// Hand-written encoding with nested containers used in order.
private struct NestedInOrder: Encodable {
    func encode(to encoder: any Encoder) throws {
        enum K: String, CodingKey { case a, b, c, d }
        var container = encoder.container(keyedBy: K.self)
        try container.encode(1, forKey: .a)
        var inner = container.nestedContainer(keyedBy: K.self, forKey: .b)
        try inner.encode("x", forKey: .c)
        var list = inner.nestedUnkeyedContainer(forKey: .d)
        try list.encode(true)
        var deeper = list.nestedContainer(keyedBy: K.self)
        try deeper.encodeNil(forKey: .a)
        try list.encode(2.5)
        try container.encode("after", forKey: .c)
    }
}

/// A nested container written to after its parent wrote a later member: the stream cannot place it.
private struct NestedOutOfOrder: Encodable {
    func encode(to encoder: any Encoder) throws {
        enum K: String, CodingKey { case a, b, c }
        var container = encoder.container(keyedBy: K.self)
        var inner = container.nestedContainer(keyedBy: K.self, forKey: .a)
        try container.encode(1, forKey: .b)
        try inner.encode(2, forKey: .c)
    }
}

/// Class inheritance through a super encoder.
private class Base: Encodable {
    var base = 1
    func encode(to encoder: any Encoder) throws {
        enum K: String, CodingKey { case base }
        var container = encoder.container(keyedBy: K.self)
        try container.encode(base, forKey: .base)
    }
}

private final class Derived: Base {
    var own = "own"
    override func encode(to encoder: any Encoder) throws {
        enum K: String, CodingKey { case own }
        var container = encoder.container(keyedBy: K.self)
        try container.encode(own, forKey: .own)
        try super.encode(to: container.superEncoder())
    }
}

/// Two values through one single-value container (the tree keeps the last).
private struct TwiceSingle: Encodable {
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(1)
        try container.encode("two")
    }
}

/// Two keyed containers on one encoder share one object.
private struct TwoContainers: Encodable {
    func encode(to encoder: any Encoder) throws {
        enum A: String, CodingKey { case a }
        enum B: String, CodingKey { case b }
        var first = encoder.container(keyedBy: A.self)
        try first.encode(1, forKey: .a)
        var second = encoder.container(keyedBy: B.self)
        try second.encode(2, forKey: .b)
    }
}

/// A Coaty object that stores and encodes its header itself.
private struct StoresHeader: CoatyObject {
    static let objectType = "com.example.StoresHeader"
    var objectId = CoatyUUID()
    var name = "h"
    var objectType: String
    var coreType: CoreType = .coatyObject
}

/// A value whose encoding fails.
private struct Failing: Encodable {
    struct Refused: Error {}
    func encode(to encoder: any Encoder) throws {
        enum K: String, CodingKey { case a }
        var container = encoder.container(keyedBy: K.self)
        try container.encode(1, forKey: .a)
        throw Refused()
    }
}

@Suite("Streaming JSON encoder")
struct JSONStreamEncoderTests {
    @Test func customObjectStreamsTheTreeEncodersBytes() throws {
        let gadget = Gadget(name: "Gadget \u{1F600}", parentObjectId: CoatyUUID())
        let (tree, streamed) = try bothEncodings(gadget)
        #expect(streamed == tree)
        #expect(streamed.hasPrefix(#"{"objectType":"com.example.Gadget","coreType":"CoatyObject","#))
        var iso = JSONValueEncoder()
        iso.dateEncodingStrategy = .iso8601
        let isoEncodings = try bothEncodings(gadget, iso)
        #expect(isoEncodings.streamed == isoEncodings.tree)
        #expect(isoEncodings.streamed.contains(#""when":"2023-11-14T22:13:20.500Z""#))
    }

    @Test func randomTasksAndLocationsStreamTheTreeEncodersBytes() async {
        await propertyCheck(count: 200, input: RandomObjects.task) { task in
            let (tree, streamed) = try bothEncodings(task)
            #expect(streamed == tree)
        }
        await propertyCheck(count: 200, input: RandomObjects.location) { location in
            let (tree, streamed) = try bothEncodings(location)
            #expect(streamed == tree)
        }
    }

    @Test func customMembersAreAppendedUnlessDeclared() throws {
        var object = BaseObject(objectType: "com.example.Thing", name: "thing")
        object.custom = ["zeta": 1, "name": "shadowed", "objectType": "shadowed", "alpha": ["x": nil]]
        let (tree, streamed) = try bothEncodings(object)
        #expect(streamed == tree)
        #expect(!streamed.contains("shadowed"))
        #expect(streamed.contains(#""zeta":1"#))
    }

    @Test func containersUsedInNestingOrderStream() throws {
        let (tree, streamed) = try bothEncodings(NestedInOrder())
        #expect(streamed == tree)
        #expect(streamed == #"{"a":1,"b":{"c":"x","d":[true,{"a":null},2.5]},"c":"after"}"#)
        let two = try bothEncodings(TwoContainers())
        #expect(two.streamed == two.tree)
        #expect(two.streamed == #"{"a":1,"b":2}"#)
    }

    @Test func usesTheStreamCannotPlaceFallBackToTheTree() throws {
        let outOfOrder = try bothEncodings(NestedOutOfOrder())
        #expect(outOfOrder.streamed == outOfOrder.tree)
        #expect(outOfOrder.streamed == #"{"a":{"c":2},"b":1}"#)
        let inherited = try bothEncodings(Derived())
        #expect(inherited.streamed == inherited.tree)
        #expect(inherited.streamed == #"{"own":"own","super":{"base":1}}"#)
        let twice = try bothEncodings(TwiceSingle())
        #expect(twice.streamed == twice.tree)
        #expect(twice.streamed == #""two""#)
        // Inside a larger value the fallback re-encodes the whole value.
        let wrapped = try bothEncodings(["list": [NestedOutOfOrder()]])
        #expect(wrapped.streamed == wrapped.tree)
    }

    @Test func aStoredHeaderReplacesTheWrittenOne() throws {
        let same = StoresHeader(objectType: StoresHeader.objectType)
        let sameEncodings = try bothEncodings(same)
        #expect(sameEncodings.streamed == sameEncodings.tree)
        // The instance's header is written first; a type writing another value wins in place.
        let other = StoresHeader(objectType: "com.example.Other", coreType: .task)
        let otherEncodings = try bothEncodings(other)
        #expect(otherEncodings.streamed == otherEncodings.tree)
        #expect(otherEncodings.streamed.hasPrefix(#"{"objectType":"com.example.Other","coreType":"Task","#))
    }

    @Test func valuesThatEncodeNothingBecomeEmptyObjects() throws {
        #expect(try bothEncodings(Nothing()).streamed == "{}")
        let nested = try bothEncodings(["a": Nothing()])
        #expect(nested.streamed == nested.tree)
        #expect(try bothEncodings([Nothing(), Nothing()]).streamed == "[{},{}]")
    }

    @Test func scalarsAndJSONValuesStreamAsTheTreeWritesThem() async throws {
        #expect(try bothEncodings(Optional<Int>.none).streamed == "null")
        #expect(try bothEncodings(2.0).streamed == "2")
        #expect(try bothEncodings(-0.0).streamed == "-0.0")
        #expect(try bothEncodings(Double.infinity).streamed == "null")
        #expect(try bothEncodings(UInt64.max).streamed == "1.8446744073709552e+19")
        await propertyCheck(count: 200, input: RandomJSON.generator) { value in
            let (tree, streamed) = try bothEncodings(value)
            #expect(streamed == tree)
            #expect(streamed == value.serializedString())
        }
    }

    @Test func encodingErrorsAreTheTreeEncodersErrors() {
        #expect(throws: Failing.Refused.self) { try JSONValueEncoder().encodeToBytes(Failing()) }
        #expect(throws: Failing.Refused.self) { try JSONValueEncoder().encodeToBytes(["x": [Failing()]]) }
    }
}
