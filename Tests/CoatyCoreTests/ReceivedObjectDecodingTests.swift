import CoatyCore
import CoatySync
import Foundation
import PropertyBased
import Testing

@testable import CoatyCommunication
@testable import CoatyFilter
@testable import CoatyModel

// A received payload that carries an object (Advertise, Channel, Resolve, Update, Complete) has
// that object decoded straight from its text (`init(receivedBytes:registry:)`, through a member
// index, `ObjectBytes`), and the object's JSON is parsed only when asked for. These tests
// hold that path to the tree path (parse the payload, then `init(json:registry:)`): the same
// object, value, JSON, private data and errors, and check which payloads take which path.

/// A registered type using most value kinds synthesized Codable reads.
private struct Appliance: CoatyObject, Equatable {
    static let objectType = "com.example.Appliance"
    var objectId = CoatyUUID()
    var name: String
    var parentObjectId: CoatyUUID?
    var isOn = true
    var level = 0.75
    var ratio: Float = 0.5
    var count = -42
    var small: Int8 = -8
    var big: UInt64 = 1 << 40
    var when = Date(timeIntervalSince1970: 1_700_000_000.5)
    var tags = ["a", "b\"c", "ü\n"]
    var maybe: [Int?] = [1, nil, 3]
    var grid = [[1, 2], [], [3]]
    var byName = ["x": 1]
    var extra: JSONObject = ["k": [1, "two", nil, ["deep": true]]]
    var anyValue: JSONValue = .double(1.5)
    var link = URL(string: "https://example.com/a?b=c")!
    var kind = CoreType.task
    var nested = Part(label: "p", sizes: [1, 2])
    var optionalPart: Part?
}

private struct Part: Codable, Equatable {
    var label: String
    var sizes: [Int]
}

/// A registered type that reads some members leniently (`try?`), as hand-written decoders do.
private struct Lenient: CoatyObject, Equatable {
    static let objectType = "com.example.Lenient"
    var objectId = CoatyUUID()
    var name = "lenient"
    var level = 0

    enum CodingKeys: String, CodingKey { case objectId, name, level }

    init() {}

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        objectId = try container.decode(CoatyUUID.self, forKey: .objectId)
        name = try container.decode(String.self, forKey: .name)
        level = (try? container.decode(Int.self, forKey: .level)) ?? -1
    }
}

/// A registered type reading a key that is not ASCII.
private struct Kelvin: CoatyObject, Equatable {
    static let objectType = "com.example.Kelvin"
    var objectId = CoatyUUID()
    var name = "kelvin"
    var temperature: Int?

    enum CodingKeys: String, CodingKey {
        case objectId, name
        case temperature = "\u{212A}"  // KELVIN SIGN: equal to "K" under canonical equivalence
    }
}

/// A registered type that reads its whole JSON through the root decoder too.
private struct Keeper: CoatyObject {
    static let objectType = "com.example.Keeper"
    var objectId = CoatyUUID()
    var name = "keeper"
    var raw: JSONObject = [:]

    enum CodingKeys: String, CodingKey { case objectId, name }

    init() {}

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        objectId = try container.decode(CoatyUUID.self, forKey: .objectId)
        name = try container.decode(String.self, forKey: .name)
        raw = try JSONObject(from: decoder)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(objectId, forKey: .objectId)
        try container.encode(name, forKey: .name)
    }
}

private let registry = CoatyObjectRegistry([Appliance.self, Lenient.self, Kelvin.self, Keeper.self])

private func payload(_ object: String, privateData: String? = nil) -> [UInt8] {
    var text = #"{"object":"# + object
    if let privateData { text += #","privateData":"# + privateData }
    return Array((text + "}").utf8)
}

private func objectText<T: CoatyObject>(_ value: T) throws -> String {
    try JSONValueEncoder().encode(value).serializedString()
}

/// Both readings of `bytes`, as results.
private func bothReadings(_ bytes: [UInt8]) -> (
    text: Result<AdvertiseEventData, CommunicationEventDataError>,
    tree: Result<AdvertiseEventData, CommunicationEventDataError>
) {
    let text = Result { () throws(CommunicationEventDataError) in
        try AdvertiseEventData(receivedBytes: bytes, registry: registry)
    }
    let tree = Result { () throws(CommunicationEventDataError) in
        try AdvertiseEventData(json: AdvertiseEventData.parsePayload(bytes), registry: registry)
    }
    return (text, tree)
}

/// Expects both readings to agree on everything, and returns the one read from the text.
@discardableResult
private func expectSameReading(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws
    -> AdvertiseEventData
{
    let (text, tree) = bothReadings(bytes)
    let fromText = try text.get()
    let fromTree = try tree.get()
    #expect(fromText.object.objectType == fromTree.object.objectType, sourceLocation: sourceLocation)
    #expect(fromText.object.coreType == fromTree.object.coreType, sourceLocation: sourceLocation)
    #expect(fromText.privateData == fromTree.privateData, sourceLocation: sourceLocation)
    #expect(fromText.object.json == fromTree.object.json, sourceLocation: sourceLocation)
    #expect(
        JSONValue.object(fromText.object.json).serializedString()
            == JSONValue.object(fromTree.object.json).serializedString(),
        "member order and number forms",
        sourceLocation: sourceLocation
    )
    #expect(
        ObjectIdentifier(type(of: fromText.object.value)) == ObjectIdentifier(type(of: fromTree.object.value)),
        sourceLocation: sourceLocation
    )
    let encoder = JSONValueEncoder()
    #expect(
        try encoder.encode(fromText.object.value) == encoder.encode(fromTree.object.value),
        "the decoded values",
        sourceLocation: sourceLocation
    )
    return fromText
}

@Suite("Received objects decoded from their text")
struct ReceivedObjectDecodingTests {
    @Test("a registered type with every value kind reads as from the tree, from the text")
    func registeredTypeReadsFromText() throws {
        var appliance = Appliance(name: "Washer ünd \"Dryer\"")
        appliance.parentObjectId = CoatyUUID()
        appliance.optionalPart = Part(label: "q", sizes: [])
        let read = try expectSameReading(payload(try objectText(appliance)))
        #expect(read.object.isReceivedText)
        #expect(read.object.as(Appliance.self) == appliance)
        #expect(read.privateData == nil)
    }

    @Test("private data, null private data and unknown payload members")
    func privateDataAndUnknownMembers() throws {
        let object = try objectText(Appliance(name: "a"))
        let withPrivate = try expectSameReading(payload(object, privateData: #"{"a":[1,{"b":null}],"c":"d"}"#))
        #expect(withPrivate.privateData == ["a": [1, ["b": nil]], "c": "d"])
        #expect(withPrivate.object.isReceivedText)
        let nullPrivate = try expectSameReading(payload(object, privateData: "null"))
        #expect(nullPrivate.privateData == nil)
        let unknown = try expectSameReading(
            Array((#"{"x":[1,2,{"y":"z"}],"object":"# + object + #","n":-0.5e3}"#).utf8)
        )
        #expect(unknown.object.isReceivedText)
    }

    @Test("an unregistered type reads into its core type, with its unknown fields in custom, from the tree")
    func coreTypeWithCustomFields() throws {
        let id = CoatyUUID()
        let text =
            #"{"objectType":"com.example.Other","coreType":"CoatyObject","objectId":"\#(id)","name":"o","#
            + #""extra":{"deep":[1,2.5,"x"]},"flag":false,"n":12345678901234567890}"#
        let read = try expectSameReading(payload(text))
        #expect(read.object.isReceivedText, "parsed once, member by member, and its text kept")
        #expect(read.object.receivedText == Array(text.utf8), "the text as received")
        let base = try #require(read.object.as(BaseObject.self))
        #expect(base.custom["flag"] == false)
        #expect(base.custom["extra"] == ["deep": [1, 2.5, "x"]])
        #expect(base.custom["objectType"] == nil, "the header is not a custom field")
    }

    @Test("an object's text as received (whitespace and member order kept); none for a built object")
    func jsonText() throws {
        let id = CoatyUUID()
        let text =
            #"{ "name" : "spaced", "objectType":"com.example.Other","coreType":"CoatyObject","objectId":"\#(id)" }"#
        let read = try expectSameReading(payload(text))
        #expect(read.object.receivedText == Array(text.utf8))
        #expect(read.object.json["name"] == "spaced")
        let built = try AnyCoatyObject(BaseObject(objectType: "com.example.Other", name: "built"))
        #expect(built.receivedText == nil)
    }

    @Test("whitespace everywhere, escapes in values and numbers in every form")
    func whitespaceEscapesAndNumbers() throws {
        let id = CoatyUUID()
        let text =
            " {\n\t\"objectType\" : \"com.example.Lenient\" ,\r\n \"coreType\":\"CoatyObject\", "
            + "\"objectId\": \"\(id)\" , \"name\" : \"tab\\there \\u00fc \\ud83d\\ude00\", \"level\" : 7 } "
        let read = try expectSameReading(Array((" {\"object\" : " + text + " , \"privateData\" : { } } \n").utf8))
        #expect(read.object.isReceivedText)
        #expect(read.object.as(Lenient.self)?.name == "tab\there ü 😀")
        #expect(read.object.as(Lenient.self)?.level == 7)
        #expect(read.privateData == [:])
        // An escaped UUID, and numbers the lenient reader rejects or accepts.
        let escapedId = "\(id)".replacingOccurrences(of: "-", with: "\\u002d")
        for level in ["7.0", "7e0", "-0", "1e400", "\"7\"", "null", "9223372036854775808"] {
            let object =
                #"{"objectType":"com.example.Lenient","coreType":"CoatyObject","objectId":"\#(escapedId)","#
                + #""name":"n","level":\#(level)}"#
            let (text, tree) = bothReadings(payload(object))
            switch (text, tree) {
            case (.success(let a), .success(let b)):
                #expect(a.object.as(Lenient.self) == b.object.as(Lenient.self), "level \(level)")
            case (.failure(let a), .failure(let b)):
                #expect(a.description == b.description, "level \(level)")
            default:
                Issue.record("level \(level): the readings differ: \(text) / \(tree)")
            }
        }
    }

    @Test("a lenient decoder that catches a mismatch gets the same value as from the tree")
    func lenientDecoders() throws {
        let id = CoatyUUID()
        let object =
            #"{"objectType":"com.example.Lenient","coreType":"CoatyObject","objectId":"\#(id)","#
            + #""name":"n","level":"high"}"#
        let read = try expectSameReading(payload(object))
        #expect(read.object.as(Lenient.self)?.level == -1)
        #expect(read.object.isReceivedText)
    }

    @Test("escaped, repeated or non-ASCII keys and a key found only by canonical equivalence read from the tree")
    func keysOutsideTheIndex() throws {
        let id = CoatyUUID()
        let header = #""objectType":"com.example.Lenient","coreType":"CoatyObject","objectId":"\#(id)""#
        let cases = [
            "{" + header + #","n\u0061me":"escaped key","level":1}"#,
            "{" + header + #","name":"first","level":1,"name":"repeated"}"#,
            "{" + header + #","name":"n","lëvel":1}"#,
        ]
        for text in cases {
            let read = try expectSameReading(payload(text))
            #expect(!read.object.isReceivedText, "\(text)")
        }
        // A repeated "object" member: the last one counts.
        let twice = #"{"object":{"a":1},"object":{"# + header + #","name":"second"}}"#
        let read = try expectSameReading(Array(twice.utf8))
        #expect(read.object.name == "second")
        #expect(!read.object.isReceivedText)

        let kelvin =
            #"{"objectType":"com.example.Kelvin","coreType":"CoatyObject","objectId":"\#(id)","#
            + #""name":"k","K":300}"#
        let hot = try expectSameReading(payload(kelvin))
        #expect(hot.object.as(Kelvin.self)?.temperature == 300)
        #expect(!hot.object.isReceivedText)
    }

    @Test("invalid payloads fail with the tree's error, every one")
    func invalidPayloadsFailAlike() throws {
        let id = CoatyUUID()
        let good = #""objectType":"com.example.Appliance","coreType":"CoatyObject","objectId":"\#(id)","name":"n""#
        let texts = [
            "",
            "   ",
            "[]",
            #"{"object":null}"#,
            #"{"object":"x"}"#,
            #"{"privateData":{}}"#,
            #"{"object":{"# + good + #"},"privateData":[1]}"#,
            #"{"object":{"# + good + #"}} x"#,
            #"{"object":{"# + good + #",}}"#,
            #"{"object":{"# + good + #","tags":[1,]}}"#,
            #"{"object":{"# + good + #","v":01}}"#,
            #"{"object":{"# + good + #","s":"\x"}}"#,
            "{\"object\":{" + good + ",\"s\":\"a\u{01}b\"}}",
            #"{"object":{"objectType":"","coreType":"CoatyObject","objectId":"\#(id)","name":"n"}}"#,
            #"{"object":{"objectType":"a.B","coreType":"Nope","objectId":"\#(id)","name":"n"}}"#,
            #"{"object":{"objectType":"com.example.Appliance","coreType":"Task","objectId":"\#(id)","name":"n"}}"#,
            #"{"object":{"objectType":"a.B","coreType":"CoatyObject","objectId":"not-a-uuid","name":"n"}}"#,
            #"{"object":{"objectType":"a.B","coreType":"CoatyObject","objectId":"\#(id)","name":7}}"#,
            #"{"object":{"objectType":"a.B","coreType":"CoatyObject","objectId":"\#(id)"}}"#,
            #"{"object":{"# + good + #","isOn":"yes"}}"#,
            #"{"object":{"# + good + #","small":300}}"#,
            #"{"object":{"# + good + #","nested":{"label":1,"sizes":[]}}}"#,
            String(repeating: "[", count: 600),
        ]
        for text in texts {
            let (fromText, fromTree) = bothReadings(Array(text.utf8))
            switch (fromText, fromTree) {
            case (.failure(let a), .failure(let b)):
                #expect(a.description == b.description, "\(text)")
            default:
                Issue.record("\(text): expected both to fail: \(fromText) / \(fromTree)")
            }
        }
        // Invalid UTF-8 inside a string value and deep nesting inside the object.
        var invalidUTF8 = payload("{" + good + #","s":"ab"}"#)
        invalidUTF8[invalidUTF8.count - 5] = 0xFF
        let deep = payload(
            "{" + good + #","d":"# + String(repeating: "[", count: 511) + String(repeating: "]", count: 511) + "}"
        )
        for bytes in [invalidUTF8, deep] {
            let (fromText, fromTree) = bothReadings(bytes)
            switch (fromText, fromTree) {
            case (.failure(let a), .failure(let b)):
                #expect(a.description == b.description)
            default:
                Issue.record("expected both to fail: \(fromText) / \(fromTree)")
            }
        }
    }

    @Test("Channel, Resolve, Update and Complete payloads read their object from the text, the rest as before")
    func otherObjectCarryingPayloads() throws {
        let object = try objectText(Appliance(name: "other"))
        let related = try objectText(Appliance(name: "related"))
        func check<Data: ObjectCarryingPayload & Equatable>(
            _ type: Data.Type,
            _ text: String,
            sourceLocation: SourceLocation = #_sourceLocation
        ) throws -> Data {
            let bytes = Array(text.utf8)
            let fromText = try Data(receivedBytes: bytes, registry: registry)
            let fromTree = try Data(json: Data.parsePayload(bytes), registry: registry)
            #expect(fromText == fromTree, sourceLocation: sourceLocation)
            #expect(
                JSONValue.object(fromText.json).serializedString()
                    == JSONValue.object(fromTree.json).serializedString(),
                sourceLocation: sourceLocation
            )
            return fromText
        }
        let channel = try check(ChannelEventData.self, #"{"privateData":{"p":1},"object":"# + object + "}")
        #expect(channel.objects.first?.isReceivedText == true)
        #expect(channel.privateData == ["p": 1])
        let resolve = try check(
            ResolveEventData.self,
            #"{"object":"# + object + #","relatedObjects":["# + related + #"],"privateData":{"q":[true]}}"#
        )
        #expect(resolve.object?.isReceivedText == true)
        #expect(resolve.relatedObjects?.first?.isReceivedText == false, "objects in arrays come from the tree")
        let onlyRelated = try check(ResolveEventData.self, #"{"relatedObjects":["# + related + "]}")
        #expect(onlyRelated.object == nil)
        let update = try check(UpdateEventData.self, #"{"object":"# + object + "}")
        #expect(update.object.isReceivedText)
        let complete = try check(CompleteEventData.self, #"{"object":"# + object + #","privateData":null}"#)
        #expect(complete.object.isReceivedText)
        // Rules beyond the object still apply: a Channel with both forms, a Resolve with neither.
        for (text, reading) in [
            (
                #"{"object":"# + object + #","objects":[]}"#,
                { (bytes: [UInt8]) throws(CommunicationEventDataError) in
                    _ = try ChannelEventData(receivedBytes: bytes, registry: registry)
                }
            ),
            (
                #"{"privateData":{}}"#,
                { (bytes: [UInt8]) throws(CommunicationEventDataError) in
                    _ = try ResolveEventData(receivedBytes: bytes, registry: registry)
                }
            ),
        ] {
            #expect(throws: CommunicationEventDataError.self, "\(text)") { try reading(Array(text.utf8)) }
        }
    }

    @Test("a type reading its whole JSON through the root decoder gets all of it")
    func wholeValueThroughTheRootDecoder() throws {
        let id = CoatyUUID()
        let object =
            #"{"objectType":"com.example.Keeper","coreType":"CoatyObject","objectId":"\#(id)","#
            + #""name":"kept","extra":[1,{"a":"b"}]}"#
        let read = try expectSameReading(payload(object))
        let keeper = try #require(read.object.as(Keeper.self))
        #expect(keeper.raw == (try JSONValue(parsing: object).objectValue))
        #expect(keeper.raw.count == 5)
        #expect(read.object.isReceivedText)
    }

    /// Random payloads around valid objects: members replaced by random JSON, removed, repeated
    /// or renamed, keys escaped, whitespace between tokens, private data of every kind. Both
    /// readings must agree on every one, success or failure.
    @Test("random payloads read the same from the text and from the tree")
    func randomPayloadsAgree() async {
        let generator = Generator<[UInt8], Shrink.None<[UInt8]>>(run: { rng in randomPayload(&rng) })
        let outcomes = CoatyMutex((fromText: 0, succeeded: 0, failed: 0))
        await propertyCheck(count: 3000, input: generator) { bytes in
            let (fromText, fromTree) = bothReadings(bytes)
            let text = String(decoding: bytes, as: UTF8.self)
            switch (fromText, fromTree) {
            case (.success(let a), .success(let b)):
                outcomes.withLock {
                    $0.succeeded += 1
                    if a.object.isReceivedText { $0.fromText += 1 }
                }
                #expect(a.object.json == b.object.json, "\(text)")
                #expect(
                    JSONValue.object(a.object.json).serializedString()
                        == JSONValue.object(b.object.json).serializedString(),
                    "\(text)"
                )
                #expect(a.privateData == b.privateData, "\(text)")
                let encoder = JSONValueEncoder()
                #expect(
                    (try? encoder.encode(a.object.value)) == (try? encoder.encode(b.object.value)),
                    "\(text)"
                )
            case (.failure(let a), .failure(let b)):
                outcomes.withLock { $0.failed += 1 }
                #expect(a.description == b.description, "\(text)")
            default:
                Issue.record("the readings differ for \(text): \(fromText) / \(fromTree)")
            }
        }
        // The generator reaches both paths and both outcomes.
        let counts = outcomes.withLock { $0 }
        #expect(counts.fromText > 300, "\(counts)")
        #expect(counts.succeeded - counts.fromText > 300, "\(counts)")
        #expect(counts.failed > 300, "\(counts)")
    }

    @Test("an unregistered type is validated on its text and decoded into BaseObject only when asked for")
    func unregisteredValueDeferred() async throws {
        let id = CoatyUUID()
        let other = CoatyUUID()
        let head = #""objectType":"com.example.Other","coreType":"CoatyObject","objectId":"\#(id)","name":"o""#
        // What BaseObject reads, in every valid form: the value is deferred, and when asked for,
        // it is the tree path's (same type, same encoding, custom fields in order).
        let valid = [
            "{" + head + "}",
            "{" + head + #","externalId":null,"parentObjectId":null,"locationId":null,"isDeactivated":null}"#,
            "{" + head + #","externalId":"e\"x","parentObjectId":"\#(other)","#
                + #""locationId":"\#(other)","isDeactivated":true}"#,
            #"{"isDeactivated":false,"name":"n","objectType":"a.B","coreType":"CoatyObject","objectId":"\#(id)"}"#,
            // An escaped UUID is still a UUID.
            #"{"objectType":"a.B","coreType":"CoatyObject","#
                + #""objectId":"\u0030\#(id.uuidString.dropFirst())","name":"n"}"#,
            "{" + head + #","extra":[1,{"k":"v"}],"flag":false}"#,
        ]
        for text in valid {
            let read = try expectSameReading(payload(text))
            #expect(read.object.isValueDeferred, "\(text)")
            #expect(read.object.receivedText == Array(text.utf8))
            #expect(read.object.objectId == (try registry.decode(bytes: Array(text.utf8))).objectId)
            #expect(read.object.value is BaseObject, "\(text)")
        }
        // What BaseObject does not accept goes the tree's way, with its error.
        let invalid = [
            "{" + head + #","externalId":3}"#,
            "{" + head + #","parentObjectId":"not-a-uuid"}"#,
            "{" + head + #","locationId":true}"#,
            "{" + head + #","isDeactivated":"no"}"#,
            "{" + head + #","parentObjectId":5}"#,
        ]
        for text in invalid {
            let (fromText, fromTree) = bothReadings(payload(text))
            switch (fromText, fromTree) {
            case (.failure(let a), .failure(let b)): #expect(a.description == b.description, "\(text)")
            default: Issue.record("\(text): expected both to fail: \(fromText) / \(fromTree)")
            }
        }
        // The deferred value is read once, and safely from many tasks.
        let shared = try AdvertiseEventData(receivedBytes: payload(valid[2]), registry: registry)
        let expected = try JSONValueEncoder().encode(try registry.decode(bytes: Array(valid[2].utf8)).value)
        let results = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 {
                group.addTask { (try? JSONValueEncoder().encode(shared.object.value)) == expected }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: true, count: 16))
        let base = try #require(shared.object.as(BaseObject.self))
        #expect(base.parentObjectId == other && base.externalId == "e\"x" && base.isDeactivated == true)
    }

    /// A stored row's text (a recorder's Discover answer) decodes on its member index, as a
    /// received object does; the result and errors are those of parsing it and decoding the tree.
    @Test("a stored object's text decodes as its parsed tree does, every one of random texts")
    func storedTextsAgree() async throws {
        let id = CoatyUUID()
        let fixed = [
            #"{"objectType":"a.B","coreType":"CoatyObject","objectId":"\#(id)","name":"n","pad":"xxxxxxxxxxxxxxxxxxxx"}"#,
            " {\"objectType\":\"a.B\",\"coreType\":\"CoatyObject\",\"objectId\":\"\(id)\",\"name\":\"n\"}\n",
            try objectText(Appliance(name: "stored")),
            "[1]", #""text""#, "{", "", "{} x", #"{"objectType":1}"#, #"{"objectId":"\#(id)"}"#,
        ]
        for text in fixed {
            let (fromText, fromTree) = bothStoredReadings(Array(text.utf8))
            switch (fromText, fromTree) {
            case (.success(let a), .success(let b)):
                #expect(a.json == b.json && a.objectId == b.objectId && a.receivedText == Array(text.utf8), "\(text)")
            case (.failure(let a), .failure(let b)): #expect("\(a)" == "\(b)", "\(text)")
            default: Issue.record("\(text): the decodings differ: \(fromText) / \(fromTree)")
            }
        }
        #expect(try registry.decode(storedText: Array(fixed[0].utf8)).isValueDeferred)
        let generator = Generator<String, Shrink.None<String>>(run: { rng in
            sprinkleWhitespace(randomObjectText(&rng), &rng)
        })
        let outcomes = CoatyMutex((deferred: 0, succeeded: 0, failed: 0))
        await propertyCheck(count: 2000, input: generator) { text in
            let bytes = Array(text.utf8)
            switch bothStoredReadings(bytes) {
            case (.success(let a), .success(let b)):
                outcomes.withLock {
                    $0.succeeded += 1
                    if a.isValueDeferred { $0.deferred += 1 }
                }
                #expect(a.json == b.json, "\(text)")
                #expect(
                    JSONValue.object(a.json).serializedString() == JSONValue.object(b.json).serializedString(),
                    "\(text)"
                )
                #expect(a.objectId == b.objectId && a.objectType == b.objectType && a.coreType == b.coreType)
                #expect(a.receivedText == bytes && b.receivedText == bytes, "both keep the stored text")
                let encoder = JSONValueEncoder()
                #expect((try? encoder.encode(a.value)) == (try? encoder.encode(b.value)), "\(text)")
            case (.failure(let a), .failure(let b)):
                outcomes.withLock { $0.failed += 1 }
                #expect("\(a)" == "\(b)", "\(text)")
            case (let a, let b):
                Issue.record("the decodings differ for \(text): \(a) / \(b)")
            }
        }
        let counts = outcomes.withLock { $0 }
        #expect(counts.deferred > 100, "\(counts)")
        #expect(counts.succeeded - counts.deferred > 300, "\(counts)")
        #expect(counts.failed > 200, "\(counts)")
    }

    @Test("the JSON of an object read from its text is parsed once and safe to read from many tasks")
    func lazyJSONIsSharedSafely() async throws {
        let appliance = Appliance(name: "shared")
        let read = try AdvertiseEventData(receivedBytes: payload(try objectText(appliance)), registry: registry)
        #expect(read.object.isReceivedText)
        let expected = try JSONValueEncoder().encode(appliance)
        let results = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 { group.addTask { JSONValue.object(read.object.json) == expected } }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: true, count: 16))
        #expect(read.object == (try AnyCoatyObject(appliance)), "equality follows the JSON")
        #expect(read.object.hashValue == (try AnyCoatyObject(appliance)).hashValue)
    }
}

/// A payload around a valid `Appliance`, `Lenient` or unregistered object, changed at random.
private func randomPayload<R: RandomNumberGenerator>(_ rng: inout R) -> [UInt8] {
    var payload = #"{"object":"# + randomObjectText(&rng)
    switch Int.random(in: 0..<5, using: &rng) {
    case 0: payload += #","privateData":"# + RandomJSON.value(&rng, depth: 0).serializedString()
    case 1: payload += #","privateData":null"#
    case 2: payload += #","privateData":"# + RandomJSON.value(&rng, depth: 4).serializedString()
    default: break
    }
    payload += "}"
    return Array(sprinkleWhitespace(payload, &rng).utf8)
}

/// The text of a valid `Appliance`, `Lenient` or unregistered object, changed at random.
private func randomObjectText<R: RandomNumberGenerator>(_ rng: inout R) -> String {
    var object: JSONObject
    switch Int.random(in: 0..<3, using: &rng) {
    case 0:
        var appliance = Appliance(name: RandomJSON.string(&rng))
        if Bool.random(using: &rng) { appliance.parentObjectId = CoatyUUID() }
        if Bool.random(using: &rng) { appliance.optionalPart = Part(label: "x", sizes: [1]) }
        object = (try? JSONValueEncoder().encode(appliance).objectValue) ?? [:]
    case 1:
        object = (try? JSONValueEncoder().encode(Lenient()).objectValue) ?? [:]
    default:
        object = [
            "objectType": "com.example.Other", "coreType": "CoatyObject", "objectId": .string("\(CoatyUUID())"),
            "name": "o",
        ]
    }
    var keys = object.keys
    var values = object.values
    for _ in 0..<(Bool.random(using: &rng) ? 0 : Int.random(in: 1...3, using: &rng)) {
        let i = Int.random(in: 0..<max(1, keys.count), using: &rng)
        guard i < keys.count else { break }
        switch Int.random(in: 0..<6, using: &rng) {
        case 0: values[i] = RandomJSON.value(&rng, depth: 3)  // a leaf or a small container
        case 1:
            keys.remove(at: i)
            values.remove(at: i)
        case 2:
            keys.append(keys[i])  // a repeated key
            values.append(RandomJSON.value(&rng, depth: 4))
        case 3:
            keys.append(RandomJSON.string(&rng))  // an unknown member
            values.append(RandomJSON.value(&rng, depth: 2))
        case 4: values[i] = .null
        default:
            let j = Int.random(in: 0..<keys.count, using: &rng)
            keys.swapAt(i, j)
            values.swapAt(i, j)
        }
    }
    var text = "{"
    let escaped = Int.random(in: 0..<5, using: &rng) == 0 ? Int.random(in: 0..<max(1, keys.count), using: &rng) : -1
    for (index, key) in keys.enumerated() {
        if index > 0 { text += "," }
        var keyText = JSONValue.string(key).serializedString()
        if index == escaped, let first = key.unicodeScalars.first, first.isASCII {
            // The same key with its first character escaped.
            keyText = "\"\\u" + String(format: "%04x", first.value) + String(keyText.dropFirst(2))
        }
        text += keyText + ":" + values[index].serializedString()
    }
    return text + "}"
}

/// Both decodings of a stored object's text: straight from the text, and from its parsed tree.
private func bothStoredReadings(_ bytes: [UInt8]) -> (text: Result<AnyCoatyObject, any Error>, tree: Result<AnyCoatyObject, any Error>) {
    let text = Result { () throws -> AnyCoatyObject in try registry.decode(storedText: bytes) }
    let tree = Result { () throws -> AnyCoatyObject in
        guard case .object(let json) = try JSONValue(parsing: bytes) else { throw CoatyObjectError(.notAnObject) }
        return try registry.decode(json, text: bytes)
    }
    return (text, tree)
}

/// `text` with random whitespace after structural characters outside strings.
private func sprinkleWhitespace<R: RandomNumberGenerator>(_ text: String, _ rng: inout R) -> String {
    guard Bool.random(using: &rng) else { return text }
    var result = ""
    var inString = false
    var escaped = false
    for character in text {
        result.append(character)
        if inString {
            if escaped {
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                inString = false
            }
            continue
        }
        if character == "\"" {
            inString = true
        } else if "{}[],:".contains(character), Int.random(in: 0..<3, using: &rng) == 0 {
            result += [" ", "\n", "\t", "\r\n "].randomElement(using: &rng)!
        }
    }
    return result
}
