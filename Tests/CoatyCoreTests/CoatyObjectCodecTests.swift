import CoatyCore
import Testing

/// Coaty JS-shaped objects of every core type, with the fields of `src/model/*.ts` and a few
/// unknown members (top level and nested) that must survive decode → encode.
enum ObjectFixtures {
    static let id1 = "3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a11"
    static let id2 = "8f14e45f-ceea-467a-9f4e-3a2b1c0d9e22"
    static let id3 = "c9f0f895-fb98-4b91-8c3d-7e6a5b4c3d33"

    struct Case: Sendable, CustomStringConvertible {
        let coreType: CoreType
        let text: String
        var description: String { coreType.rawValue }
    }

    static let objects: [Case] = [
        Case(
            coreType: .coatyObject,
            text: """
                {"objectType":"coaty.CoatyObject","coreType":"CoatyObject","objectId":"\(id1)","name":"Thing",
                 "externalId":"ext-1","parentObjectId":"\(id2)","locationId":"\(id3)","isDeactivated":false,
                 "assigneeUserId":"\(id2)","extra":{"nested":[1,2.5,"x",null,true]}}
                """
        ),
        Case(
            coreType: .user,
            text: """
                {"objectType":"coaty.User","coreType":"User","objectId":"\(id1)","name":"bjensen",
                 "names":{"formatted":"Ms. Barbara J Jensen, III","familyName":"Jensen","givenName":"Barbara",
                          "middleName":"Jane","honorificPrefix":"Ms.","honorificSuffix":"III","phonetic":"BAR-ba-ra"},
                 "displayName":"Babs Jensen","nickName":"Babs","title":"Tour Guide","userType":"Employee",
                 "preferredLanguage":"en-US","locale":"en-US","timezone":"America/Los_Angeles","active":true,
                 "password":"t1meMa$heen",
                 "emails":[{"type":"work","value":"bjensen@example.com","primary":true},{"type":"home","value":"babs@jensen.org","display":"Babs"}],
                 "phoneNumbers":[{"type":"work","value":"tel:+1-201-555-0123"}],
                 "ims":[{"type":"xmpp","value":"babs@jabber.org"}],
                 "photos":[{"type":"photo","value":"https://photos.example.com/profilephoto/72930000000Ccne/F"}],
                 "addresses":[{"type":"work","value":"w1","streetAddress":"100 Universal City Plaza","locality":"Hollywood",
                               "region":"CA","postalCode":"91608","country":"US","formatted":"100 Universal City Plaza\\nHollywood, CA 91608 USA","primary":true}],
                 "groups":[{"type":"direct","value":"e9e30dba-f08f-4109-8486-d5c6a331660a","display":"Tour Guides"}],
                 "entitlements":["admin",{"scope":"all"}],"roles":["student","faculty"],"x509Certificates":["MIIDQzCC"],
                 "department":"Sales"}
                """
        ),
        Case(
            coreType: .annotation,
            text: """
                {"objectType":"coaty.Annotation","coreType":"Annotation","objectId":"\(id1)","name":"Photo of the pump",
                 "type":1,"creatorId":"\(id2)","creationTimestamp":1700000000123,"status":2,
                 "variants":[{"variant":"hd","downloadUrl":"https://example.com/a.png","sizeBytes":1024},
                             {"variant":"thumb","downloadUrl":"https://example.com/t.png"}],
                 "parentObjectId":"\(id3)"}
                """
        ),
        Case(
            coreType: .task,
            text: """
                {"objectType":"coaty.Task","coreType":"Task","objectId":"\(id1)","name":"Repair pump 3",
                 "status":5,"creatorId":"\(id2)","creationTimestamp":1700000000000,"lastModificationTimestamp":1700000001000,
                 "dueTimestamp":1700003600000,"doneTimestamp":1700007200000,"duration":3600000.5,
                 "requirements":{"skill":"welding","level":3},"description":"Replace the seal",
                 "assigneeObjectId":"\(id3)","workflowId":"wf-7","priority":2}
                """
        ),
        Case(
            coreType: .ioContext,
            text: """
                {"objectType":"com.example.TemperatureContext","coreType":"IoContext","objectId":"\(id1)",
                 "name":"TemperatureMeasurement","building":"B7"}
                """
        ),
        Case(
            coreType: .ioNode,
            text: """
                {"objectType":"coaty.IoNode","coreType":"IoNode","objectId":"\(id1)","name":"TemperatureMeasurement",
                 "ioSources":[{"objectType":"coaty.IoSource","coreType":"IoSource","objectId":"\(id2)","name":"Sensor 1",
                               "valueType":"com.example.Temperature","updateRate":500,"updateStrategy":2,"unit":"C"}],
                 "ioActors":[{"objectType":"coaty.IoActor","coreType":"IoActor","objectId":"\(id3)","name":"Display",
                              "valueType":"com.example.Temperature","useRawIoValues":false}],
                 "characteristics":{"isResponsive":true,"room":"1.23"}}
                """
        ),
        Case(
            coreType: .ioSource,
            text: """
                {"objectType":"coaty.IoSource","coreType":"IoSource","objectId":"\(id1)","name":"Raw sensor",
                 "valueType":"com.example.Raw","useRawIoValues":true,"updateRate":0.5,"externalRoute":"ext/sensor/1",
                 "updateStrategy":3}
                """
        ),
        Case(
            coreType: .ioActor,
            text: """
                {"objectType":"coaty.IoActor","coreType":"IoActor","objectId":"\(id1)","name":"Lamp",
                 "valueType":"com.example.Brightness","updateRate":100,"externalRoute":"ext/lamp","vendor":"ACME"}
                """
        ),
        Case(
            coreType: .identity,
            text: """
                {"objectType":"coaty.Identity","coreType":"Identity","objectId":"\(id1)","name":"Coaty Agent",
                 "agentVersion":"2.4.1"}
                """
        ),
        Case(
            coreType: .log,
            text: """
                {"objectType":"coaty.Log","coreType":"Log","objectId":"\(id1)","name":"Log",
                 "logLevel":40,"logMessage":"Disk \\"/\\" almost full\\n","logDate":"2020-03-02T10:17:54.123+01:00",
                 "logTags":["service","disk"],"logLabels":{"disk":"/dev/sda1","free":0.02},
                 "logHost":{"agentInfo":{"packageInfo":{"name":"agent","version":"1.0.0"},"buildInfo":{"buildDate":"2020-03-01","buildMode":"production"},
                            "configInfo":{"serviceHost":"host1"}},"pid":4711,"hostname":"host1","arch":"x64"},
                 "traceId":"abc"}
                """
        ),
        Case(
            coreType: .location,
            text: """
                {"objectType":"coaty.Location","coreType":"Location","objectId":"\(id1)","name":"Forklift position",
                 "geoLocation":{"coords":{"latitude":48.1351,"longitude":11.582,"accuracy":5,"altitude":519.5,
                                          "altitudeAccuracy":2,"heading":90,"speed":1.25,"floor":3},"timestamp":1700000000000,"source":"gps"}}
                """
        ),
        Case(
            coreType: .snapshot,
            text: """
                {"objectType":"coaty.Snapshot","coreType":"Snapshot","objectId":"\(id1)","name":"Snapshot",
                 "parentObjectId":"\(id2)","creationTimestamp":1700000000000,"creatorId":"\(id3)","tags":["hourly"],
                 "object":{"objectType":"com.example.Machine","coreType":"CoatyObject","objectId":"\(id2)","name":"Press",
                           "temperature":71.5},
                 "retention":"30d"}
                """
        ),
    ]
}

@Suite("Core object codec")
struct CoreObjectCodecTests {
    @Test func everyCoreTypeHasAFixture() {
        #expect(Set(ObjectFixtures.objects.map(\.coreType)) == Set(CoreType.allCases))
    }

    @Test(arguments: ObjectFixtures.objects)
    func decodeEncodeRoundTripKeepsEveryField(_ fixture: ObjectFixtures.Case) throws {
        let json = try JSONValue(parsing: fixture.text)
        let object = try CoatyObjectRegistry().decode(json)
        #expect(object.coreType == fixture.coreType)
        #expect(type(of: object.value) == fixture.coreType.coreObjectType)
        #expect(object.objectId == CoatyUUID(ObjectFixtures.id1))

        // Encoding the decoded core struct gives the same JSON (order aside), unknown fields included.
        let reencoded = try encodeOpened(object.value)
        #expect(reencoded == json, "\(reencoded)")
        // Numbers keep their integer/fraction form, too.
        #expect(jsonIdentical(try JSONValue(parsing: reencoded.serializedBytes()).sortedKeys(), json.sortedKeys()))
        // The AnyCoatyObject writes back exactly what was received.
        #expect(jsonIdentical(try JSONValueEncoder().encode(object), json))
        // And the header comes first.
        #expect(reencoded.objectValue?.keys.prefix(2) == ["objectType", "coreType"])
    }

    @Test func unknownFieldsLandInCustomAtEveryLevel() throws {
        let any = try CoatyObjectRegistry().decode(try JSONValue(parsing: ObjectFixtures.objects[10].text))
        let location = try #require(any.as(Location.self))
        #expect(location.geoLocation.custom == ["source": "gps"])
        #expect(location.geoLocation.coords.custom == ["floor": 3])
        #expect(location.custom.isEmpty)

        let task = try #require(
            try CoatyObjectRegistry().decode(try JSONValue(parsing: ObjectFixtures.objects[3].text)).as(CoatyTask.self)
        )
        #expect(task.custom == ["workflowId": "wf-7", "priority": 2])
        #expect(task.status == .request)
        #expect(task.duration == 3_600_000.5)
        #expect(task.requirements?["skill"] == "welding")

        let base = try #require(
            try CoatyObjectRegistry().decode(try JSONValue(parsing: ObjectFixtures.objects[0].text)).as(BaseObject.self)
        )
        #expect(base.custom.keys == ["assigneeUserId", "extra"])
        #expect(base.isDeactivated == false)
    }

    @Test func snapshotDecodesItsObjectThroughTheRegistry() throws {
        let registry = CoatyObjectRegistry()
        let any = try registry.decode(try JSONValue(parsing: ObjectFixtures.objects[11].text))
        let snapshot = try #require(any.as(Snapshot.self))
        #expect(snapshot.object.objectType == "com.example.Machine")
        #expect(snapshot.object.as(BaseObject.self)?.custom["temperature"] == 71.5)
        #expect(snapshot.parentObjectId == CoatyUUID(ObjectFixtures.id2))
    }

    @Test func coreStructsEncodeWithoutNullsAndWithHeader() throws {
        let task = CoatyTask(name: "T", status: .pending, creatorId: CoatyUUID(), creationTimestamp: 1_700_000_000_000)
        let json = try #require(try JSONValueEncoder().encode(task).objectValue)
        #expect(
            json.keys == ["objectType", "coreType", "objectId", "name", "status", "creatorId", "creationTimestamp"]
        )
        #expect(json["coreType"] == "Task")
        #expect(json["objectType"] == "coaty.Task")
        #expect(jsonIdentical(json["creationTimestamp"]!, .int(1_700_000_000_000)))
        #expect(!json.values.contains(.null))

        let identity = Identity()
        #expect(identity.name == "Coaty Agent")
        #expect(identity.objectType == "coaty.Identity")
        #expect(identity.coreType == .identity)
    }

    @Test func customFieldsAreWrittenAfterDeclaredOnesAndNeverOverrideThem() throws {
        var object = BaseObject(name: "x", custom: ["name": "shadow", "extra": 1])
        object.externalId = "e"
        let json = try #require(try JSONValueEncoder().encode(object).objectValue)
        #expect(json["name"] == "x")
        #expect(json.keys.last == "extra")
    }

    @Test func enumsTravelAsIntegers() throws {
        let log = Log(name: "log", logLevel: .warning, logMessage: "m", logDate: Log.isoDate(millisecondsSince1970: 0))
        let json = try JSONValueEncoder().encode(log)
        #expect(jsonIdentical(json["logLevel"]!, .int(30)))
        #expect(json["logDate"] == "1970-01-01T00:00:00.000Z")
        let source = IoSource(name: "s", valueType: "v", updateStrategy: .throttle)
        #expect(jsonIdentical(try JSONValueEncoder().encode(source)["updateStrategy"]!, .int(3)))
    }
}

@Suite("Core object validation")
struct CoreObjectValidationTests {
    struct Missing: Sendable, CustomStringConvertible {
        let fixture: Int
        let path: [String]
        let field: String
        var description: String { "\(ObjectFixtures.objects[fixture].coreType.rawValue): \(field)" }
    }

    static let missing: [Missing] = [
        Missing(fixture: 0, path: ["objectId"], field: "objectId"),
        Missing(fixture: 0, path: ["name"], field: "name"),
        Missing(fixture: 0, path: ["objectType"], field: "objectType"),
        Missing(fixture: 0, path: ["coreType"], field: "coreType"),
        Missing(fixture: 1, path: ["names"], field: "names"),
        Missing(fixture: 1, path: ["emails", "0", "value"], field: "emails.0.value"),
        Missing(fixture: 2, path: ["type"], field: "type"),
        Missing(fixture: 2, path: ["creatorId"], field: "creatorId"),
        Missing(fixture: 2, path: ["creationTimestamp"], field: "creationTimestamp"),
        Missing(fixture: 2, path: ["status"], field: "status"),
        Missing(fixture: 3, path: ["status"], field: "status"),
        Missing(fixture: 3, path: ["creatorId"], field: "creatorId"),
        Missing(fixture: 3, path: ["creationTimestamp"], field: "creationTimestamp"),
        Missing(fixture: 5, path: ["ioSources"], field: "ioSources"),
        Missing(fixture: 5, path: ["ioActors"], field: "ioActors"),
        Missing(fixture: 5, path: ["ioSources", "0", "valueType"], field: "valueType"),
        Missing(fixture: 6, path: ["valueType"], field: "valueType"),
        Missing(fixture: 7, path: ["valueType"], field: "valueType"),
        Missing(fixture: 9, path: ["logLevel"], field: "logLevel"),
        Missing(fixture: 9, path: ["logMessage"], field: "logMessage"),
        Missing(fixture: 9, path: ["logDate"], field: "logDate"),
        Missing(fixture: 10, path: ["geoLocation"], field: "geoLocation"),
        Missing(fixture: 10, path: ["geoLocation", "coords", "latitude"], field: "geoLocation.coords.latitude"),
        Missing(fixture: 10, path: ["geoLocation", "timestamp"], field: "geoLocation.timestamp"),
        Missing(fixture: 11, path: ["parentObjectId"], field: "parentObjectId"),
        Missing(fixture: 11, path: ["creationTimestamp"], field: "creationTimestamp"),
        Missing(fixture: 11, path: ["creatorId"], field: "creatorId"),
        Missing(fixture: 11, path: ["object"], field: "object"),
        Missing(fixture: 11, path: ["object", "name"], field: "name"),
    ]

    @Test(arguments: missing)
    func missingRequiredFieldIsNamedWithTheObjectType(_ c: Missing) throws {
        let fixture = ObjectFixtures.objects[c.fixture]
        let json = try JSONValue(parsing: fixture.text).removing(path: c.path)
        let error = try #require(throws: CoatyObjectError.self) { try CoatyObjectRegistry().decode(json) }
        #expect(error.kind == .missingField)
        #expect(error.field == c.field)
        #expect(error.description.contains("\"\(c.field)\""))
        if c.path.count == 1 && c.path != ["objectType"] && c.path != ["coreType"] {
            #expect(error.description.contains(json["objectType"]!.stringValue!))
        }
    }

    static let invalidIds = [
        "", "xyz", "3b5b8c6e1f0a4c1e9a6f0c7d2e4b8a11", "3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a1",
        "3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a11a", "3b5b8c6e_1f0a-4c1e-9a6f-0c7d2e4b8a11",
        "3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a1g", "{3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a1}",
    ]

    @Test(arguments: invalidIds)
    func invalidObjectIdIsRejected(_ id: String) throws {
        var json = try JSONValue(parsing: ObjectFixtures.objects[0].text)
        json["objectId"] = .string(id)
        let error = try #require(throws: CoatyObjectError.self) { try CoatyObjectRegistry().decode(json) }
        #expect(error.field == "objectId")
        #expect(CoatyUUID(id) == nil)
    }

    @Test func invalidNestedUUIDIsNamed() throws {
        var json = try JSONValue(parsing: ObjectFixtures.objects[3].text)
        json["creatorId"] = "not-a-uuid"
        let error = try #require(throws: CoatyObjectError.self) { try CoatyObjectRegistry().decode(json) }
        #expect(error.field == "creatorId")
        guard case .invalidField = error.kind else {
            Issue.record("expected invalidField, got \(error.kind)")
            return
        }
    }

    struct BadHeader: Sendable, CustomStringConvertible {
        let key: String
        let value: JSONValue
        let expected: CoatyObjectError.Kind
        var description: String { "\(key)=\(value)" }
    }

    static let badHeaders: [BadHeader] = [
        BadHeader(key: "objectType", value: "", expected: .invalidField(reason: "must not be empty")),
        BadHeader(key: "objectType", value: 3, expected: .invalidField(reason: "expected a string")),
        BadHeader(key: "coreType", value: "Device", expected: .unknownCoreType("Device")),
        BadHeader(key: "name", value: 5, expected: .invalidField(reason: "expected a string")),
        BadHeader(key: "name", value: nil, expected: .missingField),
        BadHeader(key: "objectId", value: 7, expected: .invalidField(reason: "expected a UUID string")),
    ]

    @Test(arguments: badHeaders)
    func invalidHeadersAreRejected(_ c: BadHeader) throws {
        var json = try JSONValue(parsing: ObjectFixtures.objects[0].text)
        json[c.key] = c.value
        let error = try #require(throws: CoatyObjectError.self) { try CoatyObjectRegistry().decode(json) }
        #expect(error.kind == c.expected)
        #expect(error.field == c.key)
    }

    @Test func nullRequiredFieldCountsAsMissing() throws {
        var json = try JSONValue(parsing: ObjectFixtures.objects[3].text)
        json["status"] = .null
        let error = try #require(throws: CoatyObjectError.self) { try CoatyObjectRegistry().decode(json) }
        #expect(error.kind == .missingField)
        #expect(error.field == "status")
    }

    @Test func emptyNameIsValid() throws {
        var json = try JSONValue(parsing: ObjectFixtures.objects[0].text)
        json["name"] = ""
        #expect(try CoatyObjectRegistry().decode(json).name == "")
    }

    @Test func enumOutOfRangeIsInvalid() throws {
        var json = try JSONValue(parsing: ObjectFixtures.objects[3].text)
        json["status"] = 9
        let error = try #require(throws: CoatyObjectError.self) { try CoatyObjectRegistry().decode(json) }
        #expect(error.field == "status")
        #expect(error.objectType == "coaty.Task")
    }

    @Test func nonObjectIsRejected() {
        #expect(throws: CoatyObjectError(.notAnObject)) { try CoatyObjectRegistry().decode(JSONValue.array([])) }
    }
}

// MARK: - Helpers

/// Encodes an existential object through its concrete type.
func encodeOpened<T: CoatyObject>(_ value: T) throws -> JSONValue {
    try JSONValueEncoder().encode(value)
}

extension JSONValue {
    /// A copy without the member at `path` (object keys or array indexes as strings).
    func removing(path: [String]) -> JSONValue {
        guard let first = path.first else { return self }
        switch self {
        case .object(var object):
            if path.count == 1 {
                object[first] = nil
            } else if let child = object[first] {
                object[first] = child.removing(path: Array(path.dropFirst()))
            }
            return .object(object)
        case .array(var elements):
            guard let index = Int(first), elements.indices.contains(index) else { return self }
            if path.count == 1 {
                elements.remove(at: index)
            } else {
                elements[index] = elements[index].removing(path: Array(path.dropFirst()))
            }
            return .array(elements)
        default:
            return self
        }
    }

    /// The same value with object keys sorted, for order-insensitive structural comparison.
    func sortedKeys() -> JSONValue {
        switch self {
        case .array(let elements): return .array(elements.map { $0.sortedKeys() })
        case .object(let object):
            let pairs = zip(object.keys, object.values).sorted { $0.0 < $1.0 }
            return .object(JSONObject(uncheckedKeys: pairs.map(\.0), values: pairs.map { $0.1.sortedKeys() }))
        default: return self
        }
    }
}
