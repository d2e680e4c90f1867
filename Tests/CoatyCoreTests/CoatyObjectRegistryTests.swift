import CoatyCore
import Foundation
import Testing

// A custom object type in the fewest lines: 7 lines, no Codable code.
struct Light: CoatyObject, Hashable {
    static let objectType = "com.example.Light"
    var objectId = CoatyUUID()
    var name: String
    var isOn: Bool
    var luminance: Double
}

// A custom type based on the Task core type: 9 lines.
struct RepairTask: CoatyObject, Hashable {
    static let objectType = "com.example.RepairTask"
    static let coreType = CoreType.task
    var objectId = CoatyUUID()
    var name: String
    var status: TaskStatus
    var creatorId: CoatyUUID
    var creationTimestamp: Double
    var machine: String
}

// A custom type that declares optional base fields and keeps unknown members.
struct Sensor: CoatyObject, CustomFieldsCarrying, Hashable {
    static let objectType = "com.example.Sensor"
    var objectId = CoatyUUID()
    var name: String
    var parentObjectId: CoatyUUID?
    var unit: String
    var custom: JSONObject = [:]
    enum CodingKeys: String, CodingKey { case objectId, name, parentObjectId, unit }
}

// A mistake the decoder catches: an `init(from:)` that never reads `objectId` (as synthesized
// Codable does for a `let objectId = CoatyUUID()`, about which the compiler only warns).
struct ConstantId: CoatyObject {
    static let objectType = "com.example.ConstantId"
    var objectId = CoatyUUID()
    var name: String

    init(from decoder: any Decoder) throws {
        name = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .name)
    }
}

@Suite("Object registry and AnyCoatyObject")
struct CoatyObjectRegistryTests {
    let light = Light(objectId: CoatyUUID(ObjectFixtures.id1)!, name: "Desk lamp", isOn: true, luminance: 0.75)

    @Test func customTypeEncodesWithHeaderAndRoundTripsThroughTheRegistry() throws {
        let json = try JSONValueEncoder().encode(light)
        #expect(
            json.serializedString()
                == #"{"objectType":"com.example.Light","coreType":"CoatyObject","objectId":"\#(ObjectFixtures.id1)","name":"Desk lamp","isOn":true,"luminance":0.75}"#
        )
        let registry = CoatyObjectRegistry()
        registry.register(Light.self)
        let any = try registry.decode(json)
        #expect(any.value is Light)
        #expect(any.as(Light.self) == light)
        #expect(any.objectType == "com.example.Light")
        #expect(any.coreType == .coatyObject)
        #expect(any.name == "Desk lamp")
        #expect(any.objectId == light.objectId)
        // A core-type view of the same object, decoded on demand.
        #expect(any.as(BaseObject.self)?.custom == ["isOn": true, "luminance": 0.75])
        #expect(any.as(CoatyTask.self) == nil)
    }

    @Test func unregisteredTypeFallsBackToItsCoreTypeAndStillConverts() throws {
        let json = try JSONValueEncoder().encode(light)
        let any = try CoatyObjectRegistry().decode(json)
        let base = try #require(any.value as? BaseObject)
        #expect(base.objectType == "com.example.Light")
        #expect(base.custom == ["isOn": true, "luminance": 0.75])
        // Typed access still works by object type.
        #expect(any.as(Light.self) == light)
        // Re-publishing the core struct keeps the unknown fields.
        #expect(try JSONValueEncoder().encode(base) == json)
    }

    @Test func customTaskTypeIsATaskForTheCoreTypeView() throws {
        let creator = CoatyUUID()
        let repair = RepairTask(
            name: "Fix press",
            status: .inProgress,
            creatorId: creator,
            creationTimestamp: 1_700_000_000_000,
            machine: "P7"
        )
        let registry = CoatyObjectRegistry([RepairTask.self])
        let any = try registry.decode(try JSONValueEncoder().encode(repair))
        #expect(any.coreType == .task)
        #expect(any.as(RepairTask.self) == repair)
        let task = try #require(any.as(CoatyTask.self))
        #expect(task.objectType == "com.example.RepairTask")
        #expect(task.status == .inProgress)
        #expect(task.creatorId == creator)
        #expect(task.custom == ["machine": "P7"])
        #expect(any.as(Light.self) == nil)
    }

    @Test func customTypeWithBaseFieldsAndCustomMembers() throws {
        let parent = CoatyUUID()
        var sensor = Sensor(name: "t1", parentObjectId: parent, unit: "C")
        sensor.custom = ["calibrated": true]
        let json = try JSONValueEncoder().encode(sensor)
        #expect(
            json.objectValue?.keys == [
                "objectType", "coreType", "objectId", "name", "parentObjectId", "unit", "calibrated",
            ]
        )
        let any = try CoatyObjectRegistry([Sensor.self]).decode(json)
        let decoded = try #require(any.as(Sensor.self))
        #expect(decoded == sensor)
        #expect(any.parentObjectId == parent)
        #expect(decoded.externalId == nil)
        let light = Light(name: "l", isOn: false, luminance: 0)
        #expect(light.parentObjectId == nil && light.isDeactivated == nil && light.locationId == nil)
    }

    @Test func registeredTypeMissingAFieldIsNamed() throws {
        let registry = CoatyObjectRegistry([Light.self])
        var json = try JSONValueEncoder().encode(light)
        json["luminance"] = nil
        let error = try #require(throws: CoatyObjectError.self) { try registry.decode(json) }
        #expect(error.kind == .missingField)
        #expect(error.field == "luminance")
        #expect(error.description.contains("com.example.Light"))
    }

    @Test func undecodedObjectIdIsAnErrorNotANewIdentity() throws {
        let json: JSONValue = [
            "objectType": "com.example.ConstantId", "coreType": "CoatyObject",
            "objectId": .string(ObjectFixtures.id1), "name": "c",
        ]
        let error = try #require(throws: CoatyObjectError.self) {
            try CoatyObjectRegistry([ConstantId.self]).decode(json)
        }
        #expect(error.field == "objectId")
        #expect(error.description.contains("var"))
    }

    @Test func registeredTypeWithWrongCoreTypeIsRejected() throws {
        let registry = CoatyObjectRegistry([Light.self])
        var json = try JSONValueEncoder().encode(light)
        json["coreType"] = "Task"
        let error = try #require(throws: CoatyObjectError.self) { try registry.decode(json) }
        #expect(error.kind == .coreTypeMismatch(expected: .coatyObject))
    }

    @Test func anyCoatyObjectFromValueAndBack() throws {
        let any = try AnyCoatyObject(light)
        #expect(any.json["isOn"] == true)
        #expect(any.as(Light.self) == light)
        #expect(try AnyCoatyObject(any) == any)
        let reparsed = try CoatyObjectRegistry().decode(try JSONValue(parsing: any.jsonValue.serializedBytes()))
        #expect(reparsed == any)
        #expect(reparsed.hashValue == any.hashValue)
        #expect(Set([any, reparsed]).count == 1)
    }

    @Test func anyCoatyObjectReencodesExactlyWhatWasReceived() throws {
        let text =
            #"{"name":"n","zeta":1.0,"objectId":"\#(ObjectFixtures.id2)","coreType":"CoatyObject","objectType":"x.Y","alpha":[1,2.50]}"#
        let any = try CoatyObjectRegistry().decode(bytes: Array(text.utf8))
        let bytes = try JSONValueEncoder().encodeToBytes(any)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == #"{"name":"n","zeta":1.0,"objectId":"\#(ObjectFixtures.id2)","coreType":"CoatyObject","objectType":"x.Y","alpha":[1,2.5]}"#
        )
    }

    @Test func foundationCodersCarryAnyCoatyObject() throws {
        struct Envelope: Codable {
            var object: AnyCoatyObject
        }
        let payload: JSONValue = ["object": try JSONValueEncoder().encode(light)]
        let data = Data(payload.serializedBytes())
        let decoder = JSONDecoder()
        #expect(try decoder.decode(Envelope.self, from: data).object.value is BaseObject)
        decoder.userInfo[CoatyObjectRegistry.userInfoKey] = CoatyObjectRegistry([Light.self])
        let envelope = try decoder.decode(Envelope.self, from: data)
        #expect(envelope.object.as(Light.self) == light)
        let reencoded = try JSONValue(parsing: [UInt8](try JSONEncoder().encode(envelope)))
        #expect(reencoded == payload)
    }

    @Test func decodesFromRawPayloadMemory() throws {
        let bytes = try JSONValueEncoder().encodeToBytes(light)
        let any = try bytes.withUnsafeBytes { try CoatyObjectRegistry([Light.self]).decode(bytes: $0) }
        #expect(any.as(Light.self) == light)
        #expect(throws: JSONParseError.self) {
            try Array(bytes.dropLast()).withUnsafeBytes { try CoatyObjectRegistry().decode(bytes: $0) }
        }
    }

    @Test func registrationIsExplicitAndReplaceable() {
        let registry = CoatyObjectRegistry()
        #expect(registry.registeredType(for: Light.objectType) == nil)
        registry.register(Light.self)
        #expect(
            registry.registeredType(for: Light.objectType).map(ObjectIdentifier.init) == ObjectIdentifier(Light.self)
        )
        #expect(
            ObjectIdentifier(registry.swiftType(objectType: "com.other", coreType: .log)) == ObjectIdentifier(Log.self)
        )
        registry.unregister(objectType: Light.objectType)
        #expect(registry.registeredType(for: Light.objectType) == nil)
    }

    @Test func concurrentRegistrationAndDecoding() async throws {
        let registry = CoatyObjectRegistry()
        let json = try JSONValueEncoder().encode(light)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<8 {
                group.addTask {
                    if i % 2 == 0 { registry.register(Light.self) }
                    for _ in 0..<200 {
                        let any = try registry.decode(json)
                        #expect(any.objectId == light.objectId)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(
            registry.registeredType(for: Light.objectType).map(ObjectIdentifier.init) == ObjectIdentifier(Light.self)
        )
    }

    @Test func objectsNestedInCodableStructsUseTheDecodersRegistry() throws {
        struct Envelope: Codable {
            var object: AnyCoatyObject
            var privateData: JSONObject?
        }
        let registry = CoatyObjectRegistry([Light.self])
        let payload: JSONValue = ["object": try JSONValueEncoder().encode(light), "privateData": ["k": 1]]
        let envelope = try JSONValueDecoder(registry: registry).decode(Envelope.self, from: payload)
        #expect(envelope.object.value is Light)
        #expect(envelope.privateData == ["k": 1])
        let coreOnly = try JSONValueDecoder().decode(Envelope.self, from: payload)
        #expect(coreOnly.object.value is BaseObject)
        #expect(try JSONValueEncoder().encode(envelope) == payload)
    }
}

@Suite("CoatyUUID")
struct CoatyUUIDObjectTests {
    @Test func generatesVersion4Lowercase() {
        var seen = Set<CoatyUUID>()
        for _ in 0..<100 {
            let id = CoatyUUID()
            #expect(id.version == 4)
            let text = id.uuidString
            #expect(text.count == 36)
            #expect(text == text.lowercased())
            #expect(Array(text)[19].isHexDigit && "89ab".contains(Array(text)[19]))
            #expect(CoatyUUID(text) == id)
            seen.insert(id)
        }
        #expect(seen.count == 100)
    }

    @Test func uniqueAcrossThreadsAndRefills() async {
        // 8 tasks x 1000 UUIDs: every thread's entropy buffer is refilled many times over.
        let ids = await withTaskGroup(of: [CoatyUUID].self) { group in
            for _ in 0..<8 { group.addTask { (0..<1000).map { _ in CoatyUUID() } } }
            var all: [CoatyUUID] = []
            for await batch in group { all += batch }
            return all
        }
        #expect(ids.count == 8000)
        #expect(Set(ids).count == 8000)
        #expect(ids.allSatisfy { $0.version == 4 && $0.low >> 62 == 0b10 })
        // Roughly half of the 122 random bits are set: the bytes are not zeros.
        let ones = ids.reduce(0) { $0 + $1.high.nonzeroBitCount + $1.low.nonzeroBitCount }
        #expect(ones > 8000 * 50 && ones < 8000 * 78)
    }

    @Test func parsesEitherCaseAndPrintsLowercase() throws {
        let id = try #require(CoatyUUID("3B5B8C6E-1F0A-4C1E-9A6F-0C7D2E4B8A11"))
        #expect(id.description == "3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a11")
        #expect(id.compactString == "3b5b8c6e1f0a4c1e9a6f0c7d2e4b8a11")
        #expect(id.high == 0x3b5b8c6e_1f0a4c1e)
        #expect(id.low == 0x9a6f0c7d_2e4b8a11)
    }

    @Test(
        arguments: CoreObjectValidationTests.invalidIds + [
            "3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a11 ", "é5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a1",
        ]
    )
    func rejectsMalformedText(_ text: String) {
        #expect(CoatyUUID(text) == nil)
    }

    /// The parser agrees with the definition — hex digits of either case at the 32 digit places,
    /// dashes at 8, 13, 18 and 23, nothing else — on each of the 256 byte values put at each of
    /// the 36 positions of a valid UUID (so also on the bytes just outside "0"…"9", "a"…"f" and
    /// "A"…"F": "/", ":", "@", "G", "`", "g"), and with Foundation on random UUIDs in both cases.
    /// (Foundation itself is no reference for invalid text on Linux: it accepts a leading space
    /// or "+".)
    @Test func agreesWithTheDefinitionOnEveryByteAtEveryPosition() {
        let valid = Array("3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a11".utf8)
        let hexDigits = Set("0123456789abcdefABCDEF".utf8)
        let dashes: Set = [8, 13, 18, 23]
        for position in valid.indices {
            for byte in UInt8.min...UInt8.max {
                var text = valid
                text[position] = byte
                let ours = text.withUnsafeBytes { CoatyUUID.parse($0) }
                let isUUID = text.indices.allSatisfy {
                    dashes.contains($0) ? text[$0] == UInt8(ascii: "-") : hexDigits.contains(text[$0])
                }
                #expect((ours != nil) == isUUID, "byte \(byte) at \(position)")
                guard let ours, isUUID else { continue }
                let digits = String(decoding: text.filter { $0 != UInt8(ascii: "-") }, as: UTF8.self)
                #expect(ours.high == UInt64(digits.prefix(16), radix: 16), "byte \(byte) at \(position)")
                #expect(ours.low == UInt64(digits.suffix(16), radix: 16), "byte \(byte) at \(position)")
            }
        }
        for _ in 0..<1000 {
            let uuid = UUID()
            for text in [uuid.uuidString, uuid.uuidString.lowercased()] {
                #expect(CoatyUUID(text)?.uuidString == uuid.uuidString.lowercased())
            }
        }
    }

    @Test func codableAsStringWithOursAndFoundationsCoders() throws {
        let id = CoatyUUID()
        #expect(try JSONValueEncoder().encode(id) == .string(id.uuidString))
        #expect(try JSONValueDecoder().decode(CoatyUUID.self, from: .string(id.uuidString)) == id)
        #expect(throws: DecodingError.self) {
            try JSONValueDecoder().decode(CoatyUUID.self, from: JSONValue.string("nope"))
        }
        #expect(throws: DecodingError.self) {
            try JSONValueDecoder().decode([CoatyUUID].self, from: JSONValue.array(["nope"]))
        }
    }

    @Test func reproducibleWithASeededGenerator() {
        struct Counter: RandomNumberGenerator {
            var state: UInt64 = 0
            mutating func next() -> UInt64 {
                state &+= 0x9E37_79B9_7F4A_7C15
                return state
            }
        }
        var a = Counter()
        var b = Counter()
        #expect(CoatyUUID(randomUsing: &a) == CoatyUUID(randomUsing: &b))
    }
}

@Suite("CoreType")
struct CoreTypeObjectTests {
    @Test(arguments: CoreType.allCases)
    func wireNamesAndObjectTypes(_ coreType: CoreType) {
        #expect(coreType.objectType == "coaty." + coreType.rawValue)
        #expect(CoreType(objectType: coreType.objectType) == coreType)
        #expect(coreType.coreObjectType.coreType == coreType)
        #expect(coreType.coreObjectType.objectType == coreType.objectType)
    }

    @Test func thereAreTwelve() {
        #expect(CoreType.allCases.count == 12)
        #expect(CoreType(objectType: "coaty.Device") == nil)
        #expect(CoreType(objectType: "Task") == nil)
        #expect(CoreType(rawValue: "Task") == .task)
    }
}
