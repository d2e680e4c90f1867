import CoatyCore
import CoatySensorThings
import Foundation
import Testing

/// Objects as a Coaty JS 2.4 agent sends them: written from the TypeScript definitions in
/// `sensor-things/objects.ts` (member names, optionality) and, for the observation, from the
/// object literal of `SensorSourceController.createObservation` (its member order).
enum SensorThingsFixtures {
    static let thingId = "4b5b7c2e-1f59-4a44-9a0b-3c9a2b6f1e01"
    static let sensorId = "a3d7c9e1-5b2f-4c8a-9e6d-1f0b2c3d4e5f"
    static let observationId = "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
    static let featureId = "7e8f9a0b-1c2d-4e3f-8a5b-6c7d8e9f0a1b"
    static let locationId = "5f6e7d8c-9b0a-4f1e-8d2c-3b4a5f6e7d8c"

    static let thing = """
        {"name":"Boiler room","objectId":"\(thingId)","coreType":"CoatyObject",\
        "objectType":"coaty.sensorThings.Thing","description":"The boiler and its sensors",\
        "properties":{"floor":-1,"tags":["heating"]},"locationId":"\(locationId)","locations":["\(locationId)"]}
        """

    static let sensor = """
        {"objectId":"\(sensorId)","objectType":"coaty.sensorThings.Sensor","coreType":"CoatyObject",\
        "name":"Boiler temperature","parentObjectId":"\(thingId)","description":"PT100 on the boiler outlet",\
        "encodingType":"application/pdf","metadata":"https://example.com/pt100.pdf",\
        "unitOfMeasurement":{"name":"Degree Celsius","symbol":"degC",\
        "definition":"http://www.qudt.org/qudt/owl/1.0.0/unit/Instances.html#DegreeCelsius"},\
        "observationType":"http://www.opengis.net/def/observationType/OGC-OM/2.0/OM_Measurement",\
        "observedArea":{"type":"Polygon","coordinates":[[[11.5,48.1],[11.6,48.1],[11.6,48.2],[11.5,48.1]]]},\
        "phenomenonTime":{"start":1700000000000,"end":1700000600000},"resultTime":{"duration":600000},\
        "observedProperty":{"name":"Temperature","definition":"http://dbpedia.org/page/Temperature",\
        "description":"Water temperature at the boiler outlet"}}
        """

    static let observation = """
        {"name":"Observation of Boiler temperature","objectId":"\(observationId)",\
        "parentObjectId":"\(sensorId)","coreType":"CoatyObject","objectType":"coaty.sensorThings.Observation",\
        "phenomenonTime":1700000000123,"result":63.5,"resultTime":1700000000123,\
        "resultQuality":["calibrated"],"validTime":{"start":1700000000123,"duration":60000},\
        "parameters":{"pressure":1.2},"featureOfInterestId":"\(featureId)"}
        """

    static let feature = """
        {"objectId":"\(featureId)","objectType":"coaty.sensorThings.FeatureOfInterest","coreType":"CoatyObject",\
        "name":"Boiler outlet","description":"Where the water leaves the boiler",\
        "encodingType":"application/vnd.geo+json","metadata":{"type":"Point","coordinates":[11.55,48.15]}}
        """
}

@Suite("Sensor Things objects on the wire")
struct SensorThingsObjectTests {
    let registry = CoatyObjectRegistry(SensorThingsTypes.all)

    /// Decodes `text` through the registry, checks its Swift type, and checks that encoding it
    /// again gives the same members with the same values.
    private func decodeAndReencode<T: CoatyObject & Equatable>(_ text: String, as type: T.Type) throws -> T {
        let json = try JSONValue(parsing: text)
        let any = try registry.decode(json)
        let value = try #require(any.value as? T)
        let encoded = try JSONValueEncoder().encode(value)
        guard case .object(let sent) = json, case .object(let again) = encoded else {
            Issue.record("not objects")
            return value
        }
        #expect(Set(again.keys) == Set(sent.keys))
        for key in sent.keys { #expect(again[key] == sent[key], "member \(key)") }
        #expect(try JSONValueDecoder().decode(T.self, from: encoded) == value)
        return value
    }

    @Test("A Coaty JS Sensor decodes with every field, and encodes to the same members")
    func sensor() throws {
        let sensor = try decodeAndReencode(SensorThingsFixtures.sensor, as: Sensor.self)
        #expect(sensor.objectId == CoatyUUID(SensorThingsFixtures.sensorId))
        #expect(sensor.parentObjectId == CoatyUUID(SensorThingsFixtures.thingId))
        #expect(sensor.name == "Boiler temperature")
        #expect(sensor.encodingType == .pdf)
        #expect(sensor.metadata == "https://example.com/pt100.pdf")
        #expect(sensor.unitOfMeasurement == .degreeCelsius)
        #expect(sensor.observationType == .measurement)
        #expect(sensor.observedArea?.type == "Polygon")
        #expect(sensor.observedArea?.coordinates.first?.count == 4)
        #expect(sensor.phenomenonTime == CoatyTimeInterval(start: 1_700_000_000_000, end: 1_700_000_600_000))
        #expect(sensor.resultTime == CoatyTimeInterval(duration: 600_000))
        #expect(sensor.observedProperty.name == "Temperature")
        #expect(sensor.custom.isEmpty)
    }

    @Test("A Coaty JS Observation decodes with every field, and encodes to the same members")
    func observation() throws {
        let observation = try decodeAndReencode(SensorThingsFixtures.observation, as: Observation.self)
        #expect(observation.parentObjectId == CoatyUUID(SensorThingsFixtures.sensorId))
        #expect(observation.phenomenonTime == 1_700_000_000_123)
        #expect(observation.resultTime == 1_700_000_000_123)
        #expect(observation.result == 63.5)
        #expect(observation.resultQuality == ["calibrated"])
        #expect(observation.validTime == CoatyTimeInterval(start: 1_700_000_000_123, duration: 60_000))
        #expect(observation.parameters == ["pressure": 1.2])
        #expect(observation.featureOfInterestId == CoatyUUID(SensorThingsFixtures.featureId))
    }

    @Test("A Coaty JS Thing decodes; a member it does not declare survives a re-publish")
    func thing() throws {
        let thing = try decodeAndReencode(SensorThingsFixtures.thing, as: Thing.self)
        #expect(thing.description == "The boiler and its sensors")
        #expect(thing.properties == ["floor": -1, "tags": ["heating"]])
        #expect(thing.locationId == CoatyUUID(SensorThingsFixtures.locationId))
        #expect(thing.custom == ["locations": [.string(SensorThingsFixtures.locationId)]])
    }

    @Test("A Coaty JS FeatureOfInterest decodes with GeoJSON metadata, and encodes to the same members")
    func featureOfInterest() throws {
        let feature = try decodeAndReencode(SensorThingsFixtures.feature, as: FeatureOfInterest.self)
        #expect(feature.encodingType == .geoJSON)
        #expect(feature.metadata["coordinates"] == [11.55, 48.15])
    }

    @Test(
        "Observation results of every observation type decode as sent",
        arguments: [
            ("true", JSONValue.bool(true)), ("42", .int(42)),
            ("\"http://example.com/red\"", .string("http://example.com/red")),
            ("{\"r\":1}", .object(["r": 1])), ("null", .null),
        ]
    )
    func observationResults(result: String, expected: JSONValue) throws {
        let text = """
            {"name":"o","objectId":"\(SensorThingsFixtures.observationId)","coreType":"CoatyObject",\
            "objectType":"coaty.sensorThings.Observation","phenomenonTime":1,"result":\(result),"resultTime":2}
            """
        let observation = try decodeAndReencode(text, as: Observation.self)
        #expect(observation.result == expected)
        #expect(observation.resultQuality == nil && observation.parentObjectId == nil)
    }

    @Test("A truth sensor's unit of measurement may be empty, as Coaty JS's isSensor accepts")
    func unitlessSensor() throws {
        let text = SensorThingsFixtures.sensor.replacingOccurrences(
            of: #"{"name":"Degree Celsius","symbol":"degC","#
                + #""definition":"http://www.qudt.org/qudt/owl/1.0.0/unit/Instances.html#DegreeCelsius"}"#,
            with: "{}"
        )
        #expect(text != SensorThingsFixtures.sensor)
        let sensor = try decodeAndReencode(text, as: Sensor.self)
        #expect(sensor.unitOfMeasurement == UnitOfMeasurement(name: nil, symbol: nil, definition: nil))
    }

    @Test(
        "A Sensor without a required member is refused, naming the member",
        arguments: [
            "description", "encodingType", "metadata", "unitOfMeasurement", "observationType", "observedProperty",
        ]
    )
    func sensorMissingMember(member: String) throws {
        guard case .object(var json) = try JSONValue(parsing: SensorThingsFixtures.sensor) else {
            Issue.record("fixture is not an object")
            return
        }
        #expect(json.removeValue(forKey: member) != nil)
        #expect {
            try registry.decode(json)
        } throws: { error in
            "\(error)".contains(member)
        }
    }

    @Test("Encoding a Swift-made observation omits absent optionals and writes Coaty JS's member names")
    func encodingOmitsAbsentMembers() throws {
        let observation = Observation(
            objectId: CoatyUUID(SensorThingsFixtures.observationId)!,
            name: "Observation of Boiler temperature",
            phenomenonTime: 1_700_000_000_123,
            result: 63.5,
            resultTime: 1_700_000_000_123,
            parentObjectId: CoatyUUID(SensorThingsFixtures.sensorId)
        )
        let text = try JSONValueEncoder().encode(observation).serializedString()
        #expect(
            text
                == #"{"objectType":"coaty.sensorThings.Observation","coreType":"CoatyObject","#
                + #""objectId":"\#(SensorThingsFixtures.observationId)","name":"Observation of Boiler temperature","#
                + #""parentObjectId":"\#(SensorThingsFixtures.sensorId)","phenomenonTime":1700000000123,"#
                + #""result":63.5,"resultTime":1700000000123}"#
        )
        let any = try registry.decode(try JSONValue(parsing: text))
        #expect(any.as(Observation.self) == observation)
    }

    @Test("Swift-made objects of the four types round-trip through the registry")
    func swiftMadeRoundTrip() throws {
        let thing = Thing(name: "Lab", description: "A lab", properties: ["room": "1.23"])
        let sensor = Sensor(
            name: "Door",
            description: "Reed contact",
            encodingType: .undefined,
            metadata: .null,
            unitOfMeasurement: UnitOfMeasurement(name: nil, symbol: nil, definition: nil),
            observationType: .truth,
            observedProperty: ObservedProperty(name: "Open", definition: "urn:open", description: "Door open"),
            parentObjectId: thing.objectId,
            custom: ["vendor": "ACME"]
        )
        let feature = FeatureOfInterest(
            name: "Door",
            description: "The lab door",
            encodingType: .geoJSON,
            metadata: [:]
        )
        let observation = Observation(
            name: "Door open",
            phenomenonTime: 5,
            result: true,
            resultTime: 6,
            featureOfInterestId: feature.objectId,
            parentObjectId: sensor.objectId
        )
        let objects: [any CoatyObject] = [thing, sensor, feature, observation]
        for object in objects {
            let any = try registry.decode(try JSONValueEncoder().encode(object))
            #expect(type(of: any.value) == type(of: object))
            #expect(any.objectType == type(of: object).objectType)
            #expect(any.coreType == .coatyObject)
        }
        #expect(try registry.decode(try JSONValueEncoder().encode(sensor)).as(Sensor.self) == sensor)
        #expect(try registry.decode(try JSONValueEncoder().encode(thing)).as(Thing.self) == thing)
        #expect(try registry.decode(try JSONValueEncoder().encode(feature)).as(FeatureOfInterest.self) == feature)
        #expect(try registry.decode(try JSONValueEncoder().encode(observation)).as(Observation.self) == observation)
    }

    @Test(
        "Without registration the objects arrive as BaseObject with their members kept; registerSensorThings types them"
    )
    func registration() throws {
        let json = try JSONValue(parsing: SensorThingsFixtures.sensor)
        let untyped = try CoatyObjectRegistry().decode(json)
        #expect(untyped.value is BaseObject)
        #expect(untyped.as(Sensor.self)?.name == "Boiler temperature")
        let registry = CoatyObjectRegistry()
        registry.registerSensorThings()
        #expect(try registry.decode(json).value is Sensor)
        for type in SensorThingsTypes.all { #expect(registry.registeredType(for: type.objectType) != nil) }
    }

    @Test("Object types and the observation and encoding types are Coaty JS's strings")
    func wireConstants() {
        #expect(Thing.objectType == "coaty.sensorThings.Thing")
        #expect(Sensor.objectType == "coaty.sensorThings.Sensor")
        #expect(Observation.objectType == "coaty.sensorThings.Observation")
        #expect(FeatureOfInterest.objectType == "coaty.sensorThings.FeatureOfInterest")
        for type in SensorThingsTypes.all { #expect(type.coreType == .coatyObject) }
        let prefix = "http://www.opengis.net/def/observationType/OGC-OM/2.0/"
        #expect(ObservationType.category.rawValue == prefix + "OM_Category_Observation")
        #expect(ObservationType.count.rawValue == prefix + "OM_CountObservation")
        #expect(ObservationType.measurement.rawValue == prefix + "OM_Measurement")
        #expect(ObservationType.any.rawValue == prefix + "OM_Observation")
        #expect(ObservationType.truth.rawValue == prefix + "OM_TruthObservation")
        #expect(EncodingType.undefined.rawValue == "")
        #expect(EncodingType.pdf.rawValue == "application/pdf")
        #expect(EncodingType.sensorML.rawValue == "http://www.opengis.net/doc/IS/SensorML/2.0")
        #expect(EncodingType.geoJSON.rawValue == "application/vnd.geo+json")
    }

    @Test(
        "Time intervals are valid exactly in Coaty JS's four forms",
        arguments: [
            (CoatyTimeInterval(start: 1, end: 2), true),
            (CoatyTimeInterval(start: 1, duration: 2), true),
            (CoatyTimeInterval(end: 2, duration: 2), true),
            (CoatyTimeInterval(duration: 2), true),
            (CoatyTimeInterval(start: 1), false),
            (CoatyTimeInterval(end: 1), false),
            (CoatyTimeInterval(), false),
            (CoatyTimeInterval(start: 1, end: 2, duration: 1), false),
            (CoatyTimeInterval(duration: -1), false),
            (CoatyTimeInterval(start: -1, end: 2), false),
            (CoatyTimeInterval(end: -2, duration: 1), false),
        ]
    )
    func timeIntervalValidity(interval: CoatyTimeInterval, valid: Bool) {
        #expect(interval.isValid == valid)
    }
}
