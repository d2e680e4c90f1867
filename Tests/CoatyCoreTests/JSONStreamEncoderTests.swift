import CoatyCore
import Foundation
import PropertyBased
import Testing

@testable import CoatyCommunication
@testable import CoatyFilter
@testable import CoatyModel

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

/// Whether `value` is encoded by the stream alone (no fallback to the tree).
private func streams<T: Encodable>(_ value: T) -> Bool {
    let context = StreamEncodingContext(JSONValueEncoder())
    do {
        try context.write(value, parent: nil, key: nil)
    } catch {
        return false
    }
    return !context.failed && context.frames.isEmpty
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

/// A value whose encoding fails before writing anything.
private struct Thrower: Encodable {
    func encode(to encoder: any Encoder) throws { throw Failing.Refused() }
}

/// A value whose encoding fails after writing a member.
private struct PartialThrower: Encodable {
    func encode(to encoder: any Encoder) throws {
        enum K: String, CodingKey { case x }
        var container = encoder.container(keyedBy: K.self)
        try container.encode(1, forKey: .x)
        throw Failing.Refused()
    }
}

/// Catches its members' errors and goes on, in every kind of container.
private struct CatchesAndGoesOn: Encodable {
    func encode(to encoder: any Encoder) throws {
        enum K: String, CodingKey { case a, b, c, d, e }
        var container = encoder.container(keyedBy: K.self)
        do { try container.encode(Thrower(), forKey: .a) } catch { try container.encode("fallback", forKey: .a) }
        try? container.encode(PartialThrower(), forKey: .b)
        try container.encode(2, forKey: .c)
        var list = container.nestedUnkeyedContainer(forKey: .d)
        try? list.encode(Thrower())
        try list.encode(3)
        try container.encode(CatchesSingle(), forKey: .e)
    }
}

/// A single value whose encoding fails, caught.
private struct CatchesSingle: Encodable {
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try? container.encode(Thrower())
    }
}

/// A parent container kept where a member's encoding can reach it.
private final class ContainerBox {
    var container: KeyedEncodingContainer<JSONCodingKeyForTests>?
}

private struct JSONCodingKeyForTests: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// A member that writes into its parent's container before its own.
private struct WritesIntoParent: Encodable {
    let box: ContainerBox
    func encode(to encoder: any Encoder) throws {
        try box.container?.encode(9, forKey: JSONCodingKeyForTests("x"))
        _ = encoder.container(keyedBy: JSONCodingKeyForTests.self)
    }
}

private struct ParentOfWriter: Encodable {
    func encode(to encoder: any Encoder) throws {
        let box = ContainerBox()
        var container = encoder.container(keyedBy: JSONCodingKeyForTests.self)
        box.container = container  // a copy writing into the same object
        try container.encode(WritesIntoParent(box: box), forKey: JSONCodingKeyForTests("a"))
    }
}

/// Nested containers under keys already written.
private struct NestedOnUsedKeys: Encodable {
    func encode(to encoder: any Encoder) throws {
        enum K: String, CodingKey { case a, b, x }
        var container = encoder.container(keyedBy: K.self)
        try container.encode(1, forKey: .a)
        var inner = container.nestedContainer(keyedBy: K.self, forKey: .a)
        try inner.encode(2, forKey: .x)
        var first = container.nestedUnkeyedContainer(forKey: .b)
        try first.encode(1)
        var second = container.nestedUnkeyedContainer(forKey: .b)
        try second.encode(2)
    }
}

/// Writes its coding path as a string.
private struct PathReporter: Encodable {
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(encoder.codingPath.map(\.stringValue).joined(separator: "."))
    }
}

/// Reads coding paths and counts through nested containers.
private struct NestedPathsAndCounts: Encodable {
    func encode(to encoder: any Encoder) throws {
        enum K: String, CodingKey { case a, b, c, d, e }
        var container = encoder.container(keyedBy: K.self)
        var inner = container.nestedContainer(keyedBy: K.self, forKey: .a)
        try inner.encode(PathReporter(), forKey: .b)
        try inner.encode(inner.codingPath.map(\.stringValue).joined(separator: "."), forKey: .c)
        var list = container.nestedUnkeyedContainer(forKey: .d)
        try list.encode(1)
        var deeper = list.nestedUnkeyedContainer()
        try deeper.encode(PathReporter())
        try list.encode(2)
        var counts = container.nestedUnkeyedContainer(forKey: .e)
        try counts.encode(list.count)
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

    /// Random tasks and locations with random custom members, from a concrete generator.
    @Test func randomTasksAndLocationsStreamTheTreeEncodersBytes() throws {
        var rng = Xoshiro(seed: (1, 2, 3, UInt64(Date().timeIntervalSince1970)))
        func custom() -> JSONObject {
            var object = JSONObject()
            for _ in 0..<Int.random(in: 0...4, using: &rng) {
                let key = (Bool.random(using: &rng) ? "name" : "x_") + RandomJSON.string(&rng)
                object[key] = RandomJSON.value(&rng, depth: 2)
            }
            return object
        }
        for _ in 0..<200 {
            var task = CoatyTask(
                objectType: "com.example.T" + RandomJSON.string(&rng),
                name: RandomJSON.string(&rng),
                status: TaskStatus.allCases.randomElement(using: &rng)!,
                creatorId: CoatyUUID(randomUsing: &rng),
                creationTimestamp: RandomJSON.double(&rng),
                custom: custom()
            )
            if Bool.random(using: &rng) { task.duration = RandomJSON.double(&rng) }
            if Bool.random(using: &rng) { task.requirements = custom() }
            let taskEncodings = try bothEncodings(task)
            #expect(taskEncodings.streamed == taskEncodings.tree, "task \(taskEncodings.tree)")

            var coords = GeoCoordinates(latitude: RandomJSON.double(&rng), longitude: 1, accuracy: 2)
            coords.custom = custom()
            var geo = GeoLocation(coords: coords, timestamp: RandomJSON.double(&rng))
            geo.custom = custom()
            let location = Location(name: RandomJSON.string(&rng), geoLocation: geo, custom: custom())
            let locationEncodings = try bothEncodings(location)
            #expect(locationEncodings.streamed == locationEncodings.tree, "location \(locationEncodings.tree)")
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

    @Test func whatStreamsAndWhatFallsBack() {
        #expect(streams(Gadget(name: "g", parentObjectId: CoatyUUID())))
        #expect(streams(NestedInOrder()))
        #expect(streams(TwoContainers()))
        #expect(streams(Nothing()))
        var task = CoatyTask(name: "t", status: .pending, creatorId: CoatyUUID(), creationTimestamp: 1)
        task.custom = ["extra": [1, 2], "name": "shadowed"]
        #expect(streams(task))
        #expect(!streams(NestedOutOfOrder()))
        #expect(!streams(Derived()))
        #expect(!streams(TwiceSingle()))
        #expect(!streams(CatchesAndGoesOn()))
        #expect(!streams(ParentOfWriter()))
        #expect(!streams(NestedOnUsedKeys()))
        #expect(streams(StoresHeader(objectType: "com.example.Other")))  // the stored header is the instance's
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

    @Test func scalarsAndJSONValuesStreamAsTheTreeWritesThem() throws {
        #expect(try bothEncodings(Optional<Int>.none).streamed == "null")
        #expect(try bothEncodings(2.0).streamed == "2")
        #expect(try bothEncodings(-0.0).streamed == "-0.0")
        #expect(try bothEncodings(Double.infinity).streamed == "null")
        #expect(try bothEncodings(UInt64.max).streamed == "1.8446744073709552e+19")
        var rng = Xoshiro(seed: (4, 5, 6, UInt64(Date().timeIntervalSince1970)))
        for _ in 0..<200 {
            let value = RandomJSON.generator.run(using: &rng)
            let (tree, streamed) = try bothEncodings(value)
            #expect(streamed == tree)
            #expect(streamed == value.serializedString())
        }
    }

    @Test func encodingErrorsAreTheTreeEncodersErrors() {
        #expect(throws: Failing.Refused.self) { try JSONValueEncoder().encodeToBytes(Failing()) }
        #expect(throws: Failing.Refused.self) { try JSONValueEncoder().encodeToBytes(["x": [Failing()]]) }
    }

    @Test func errorsCaughtByTheValueLeaveNothingBehind() throws {
        let caught = try bothEncodings(CatchesAndGoesOn())
        #expect(caught.streamed == caught.tree)
        #expect(caught.streamed == #"{"a":"fallback","c":2,"d":[3],"e":{}}"#)
        #expect(try bothEncodings(CatchesSingle()).streamed == "{}")
    }

    @Test func aMemberWritingIntoItsParentFallsBack() throws {
        let (tree, streamed) = try bothEncodings(ParentOfWriter())
        #expect(streamed == tree)
        #expect(streamed == #"{"x":9,"a":{}}"#)
    }

    @Test func nestedContainersUnderWrittenKeysReplaceThemAsTheTreeDoes() throws {
        let (tree, streamed) = try bothEncodings(NestedOnUsedKeys())
        #expect(streamed == tree)
        #expect(streamed == #"{"a":{"x":2},"b":[2]}"#)
    }

    @Test func codingPathsAndCountsThroughNestedContainers() throws {
        let (tree, streamed) = try bothEncodings(NestedPathsAndCounts())
        #expect(streamed == tree)
        #expect(streamed == #"{"a":{"b":"a.b","c":"a"},"d":[1,["d.1.0"],2],"e":[3]}"#)
    }

    @Test func duplicateCustomNamesKeepTheFirst() throws {
        var object = BaseObject(objectType: "com.example.Thing", name: "thing")
        object.custom = JSONObject(uncheckedKeys: ["z", "z"], values: [1, 2])
        let (tree, streamed) = try bothEncodings(object)
        #expect(streamed == tree)
        #expect(streamed.hasSuffix(#""z":1}"#))
    }
}
