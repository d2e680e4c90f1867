public import CoatyCore

// The four Sensor Things object types of Coaty JS (`sensor-things/objects.ts`, object types in
// `sensor-things/types.ts`), all of core type `CoatyObject`. Each struct has the base fields, its
// own fields, and `custom` for unknown members (kept for re-publishing); Codable is synthesized
// from `CodingKeys`, which leave out `custom`.

/// A thing of the physical or the information world that can be identified and integrated into
/// communication networks; object type `coaty.sensorThings.Thing`.
///
/// A thing's ``Sensor``s name it as their `parentObjectId`; its `locationId` is the Location it is
/// at.
///
/// ```swift
/// let thing = Thing(name: "Boiler room", description: "The boiler and its sensors")
/// ```
public struct Thing: CoatyObject, CustomFieldsCarrying, Hashable {
    /// `coaty.sensorThings.Thing`.
    public static let objectType = "coaty.sensorThings.Thing"

    /// The unique id.
    public var objectId: CoatyUUID
    /// The name (may be empty).
    public var name: String
    /// An external id.
    public var externalId: String?
    /// The id of the parent object.
    public var parentObjectId: CoatyUUID?
    /// The id of the Location object the thing is at.
    public var locationId: CoatyUUID?
    /// Whether the object is no longer in use.
    public var isDeactivated: Bool?
    /// A short description.
    public var description: String
    /// User-annotated properties.
    public var properties: JSONObject?
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectId, name, externalId, parentObjectId, locationId, isDeactivated, description, properties
    }

    /// Creates a thing; optional fields default to absent.
    /// - Parameters:
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - description: a short description.
    ///   - properties: user-annotated properties.
    ///   - externalId: an external id.
    ///   - parentObjectId: the id of the parent object.
    ///   - locationId: the id of the Location object the thing is at.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        description: String,
        properties: JSONObject? = nil,
        externalId: String? = nil,
        parentObjectId: CoatyUUID? = nil,
        locationId: CoatyUUID? = nil,
        isDeactivated: Bool? = nil,
        custom: JSONObject = [:]
    ) {
        self.objectId = objectId
        self.name = name
        self.externalId = externalId
        self.parentObjectId = parentObjectId
        self.locationId = locationId
        self.isDeactivated = isDeactivated
        self.description = description
        self.properties = properties
        self.custom = custom
    }
}

/// An instrument that observes a property or phenomenon; object type `coaty.sensorThings.Sensor`.
///
/// Its `parentObjectId` is the id of the ``Thing`` it belongs to; its ``Observation``s name it as
/// their `parentObjectId`.
///
/// ```swift
/// let sensor = Sensor(
///     name: "Boiler temperature", description: "PT100 on the boiler", encodingType: .pdf,
///     metadata: "https://example.com/pt100.pdf", unitOfMeasurement: .degreeCelsius,
///     observationType: .measurement,
///     observedProperty: ObservedProperty(name: "Temperature", definition: "…", description: "…"),
///     parentObjectId: thing.objectId)
/// ```
public struct Sensor: CoatyObject, CustomFieldsCarrying, Hashable {
    /// `coaty.sensorThings.Sensor`.
    public static let objectType = "coaty.sensorThings.Sensor"

    /// The unique id.
    public var objectId: CoatyUUID
    /// The name (may be empty).
    public var name: String
    /// An external id.
    public var externalId: String?
    /// The id of the ``Thing`` this sensor belongs to.
    public var parentObjectId: CoatyUUID?
    /// The id of the Location object this object is associated with.
    public var locationId: CoatyUUID?
    /// Whether the object is no longer in use.
    public var isDeactivated: Bool?
    /// A description.
    public var description: String
    /// How ``metadata`` is encoded.
    public var encodingType: EncodingType
    /// The detailed description of the sensor, in the form ``encodingType`` says (any JSON; `null`
    /// allowed, but the member must be present).
    public var metadata: JSONValue
    /// The unit of the observations' results.
    public var unitOfMeasurement: UnitOfMeasurement
    /// The kind of the observations, which decides the type of their results.
    public var observationType: ObservationType
    /// The bounding area of the features of interest of all observations.
    public var observedArea: GeoJSONPolygon?
    /// The interval of the phenomenon times of all observations.
    public var phenomenonTime: CoatyTimeInterval?
    /// The interval of the result times of all observations.
    public var resultTime: CoatyTimeInterval?
    /// The property every observation of this sensor observes.
    public var observedProperty: ObservedProperty
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectId, name, externalId, parentObjectId, locationId, isDeactivated, description, encodingType, metadata,
            unitOfMeasurement, observationType, observedArea, phenomenonTime, resultTime, observedProperty
    }

    /// Creates a sensor; optional fields default to absent.
    /// - Parameters:
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - description: a description.
    ///   - encodingType: how `metadata` is encoded.
    ///   - metadata: the detailed description.
    ///   - unitOfMeasurement: the unit of the results.
    ///   - observationType: the kind of the observations.
    ///   - observedProperty: the property observed.
    ///   - observedArea: the bounding area of the features of interest.
    ///   - phenomenonTime: the interval of the phenomenon times.
    ///   - resultTime: the interval of the result times.
    ///   - parentObjectId: the id of the ``Thing`` the sensor belongs to.
    ///   - externalId: an external id.
    ///   - locationId: the id of a Location object.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        description: String,
        encodingType: EncodingType,
        metadata: JSONValue,
        unitOfMeasurement: UnitOfMeasurement,
        observationType: ObservationType,
        observedProperty: ObservedProperty,
        observedArea: GeoJSONPolygon? = nil,
        phenomenonTime: CoatyTimeInterval? = nil,
        resultTime: CoatyTimeInterval? = nil,
        parentObjectId: CoatyUUID? = nil,
        externalId: String? = nil,
        locationId: CoatyUUID? = nil,
        isDeactivated: Bool? = nil,
        custom: JSONObject = [:]
    ) {
        self.objectId = objectId
        self.name = name
        self.externalId = externalId
        self.parentObjectId = parentObjectId
        self.locationId = locationId
        self.isDeactivated = isDeactivated
        self.description = description
        self.encodingType = encodingType
        self.metadata = metadata
        self.unitOfMeasurement = unitOfMeasurement
        self.observationType = observationType
        self.observedArea = observedArea
        self.phenomenonTime = phenomenonTime
        self.resultTime = resultTime
        self.observedProperty = observedProperty
        self.custom = custom
    }
}

/// The act of measuring or otherwise determining the value of a property; object type
/// `coaty.sensorThings.Observation`.
///
/// Its `parentObjectId` is the id of the ``Sensor`` that made it. Times are milliseconds since
/// 1970 (UTC), as JavaScript's `Date.now()` gives them.
public struct Observation: CoatyObject, CustomFieldsCarrying, Hashable {
    /// `coaty.sensorThings.Observation`.
    public static let objectType = "coaty.sensorThings.Observation"

    /// The unique id.
    public var objectId: CoatyUUID
    /// The name (may be empty).
    public var name: String
    /// An external id.
    public var externalId: String?
    /// The id of the ``Sensor`` that made the observation.
    public var parentObjectId: CoatyUUID?
    /// The id of the Location object this object is associated with.
    public var locationId: CoatyUUID?
    /// Whether the object is no longer in use.
    public var isDeactivated: Bool?
    /// When the observed phenomenon happened, in milliseconds since 1970.
    public var phenomenonTime: Double
    /// The observed value; its type follows the sensor's ``Sensor/observationType``.
    public var result: JSONValue
    /// When the result was generated, in milliseconds since 1970.
    public var resultTime: Double
    /// The quality of the result.
    public var resultQuality: [String]?
    /// The period during which the result may be used.
    public var validTime: CoatyTimeInterval?
    /// The environmental conditions during the measurement.
    public var parameters: JSONObject?
    /// The id of the ``FeatureOfInterest`` (or Location) observed.
    public var featureOfInterestId: CoatyUUID?
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectId, name, externalId, parentObjectId, locationId, isDeactivated, phenomenonTime, result, resultTime,
            resultQuality, validTime, parameters, featureOfInterestId
    }

    /// Creates an observation; optional fields default to absent.
    /// - Parameters:
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - phenomenonTime: when the phenomenon happened, in milliseconds since 1970.
    ///   - result: the observed value.
    ///   - resultTime: when the result was generated, in milliseconds since 1970.
    ///   - resultQuality: the quality of the result.
    ///   - validTime: the period during which the result may be used.
    ///   - parameters: the environmental conditions.
    ///   - featureOfInterestId: the id of the feature of interest.
    ///   - parentObjectId: the id of the ``Sensor`` that made the observation.
    ///   - externalId: an external id.
    ///   - locationId: the id of a Location object.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        phenomenonTime: Double,
        result: JSONValue,
        resultTime: Double,
        resultQuality: [String]? = nil,
        validTime: CoatyTimeInterval? = nil,
        parameters: JSONObject? = nil,
        featureOfInterestId: CoatyUUID? = nil,
        parentObjectId: CoatyUUID? = nil,
        externalId: String? = nil,
        locationId: CoatyUUID? = nil,
        isDeactivated: Bool? = nil,
        custom: JSONObject = [:]
    ) {
        self.objectId = objectId
        self.name = name
        self.externalId = externalId
        self.parentObjectId = parentObjectId
        self.locationId = locationId
        self.isDeactivated = isDeactivated
        self.phenomenonTime = phenomenonTime
        self.result = result
        self.resultTime = resultTime
        self.resultQuality = resultQuality
        self.validTime = validTime
        self.parameters = parameters
        self.featureOfInterestId = featureOfInterestId
        self.custom = custom
    }
}

/// The feature whose property an ``Observation`` observes (often the Location of the
/// ``Thing``, or a sensed area); object type `coaty.sensorThings.FeatureOfInterest`.
public struct FeatureOfInterest: CoatyObject, CustomFieldsCarrying, Hashable {
    /// `coaty.sensorThings.FeatureOfInterest`.
    public static let objectType = "coaty.sensorThings.FeatureOfInterest"

    /// The unique id.
    public var objectId: CoatyUUID
    /// The name (may be empty).
    public var name: String
    /// An external id.
    public var externalId: String?
    /// The id of the parent object.
    public var parentObjectId: CoatyUUID?
    /// The id of the Location object this object is associated with.
    public var locationId: CoatyUUID?
    /// Whether the object is no longer in use.
    public var isDeactivated: Bool?
    /// A description.
    public var description: String
    /// How ``metadata`` is encoded, e.g. ``EncodingType/geoJSON``.
    public var encodingType: EncodingType
    /// The detailed description of the feature, in the form ``encodingType`` says.
    public var metadata: JSONValue
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectId, name, externalId, parentObjectId, locationId, isDeactivated, description, encodingType, metadata
    }

    /// Creates a feature of interest; optional fields default to absent.
    /// - Parameters:
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - description: a description.
    ///   - encodingType: how `metadata` is encoded.
    ///   - metadata: the detailed description.
    ///   - externalId: an external id.
    ///   - parentObjectId: the id of the parent object.
    ///   - locationId: the id of a Location object.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        description: String,
        encodingType: EncodingType,
        metadata: JSONValue,
        externalId: String? = nil,
        parentObjectId: CoatyUUID? = nil,
        locationId: CoatyUUID? = nil,
        isDeactivated: Bool? = nil,
        custom: JSONObject = [:]
    ) {
        self.objectId = objectId
        self.name = name
        self.externalId = externalId
        self.parentObjectId = parentObjectId
        self.locationId = locationId
        self.isDeactivated = isDeactivated
        self.description = description
        self.encodingType = encodingType
        self.metadata = metadata
        self.custom = custom
    }
}

/// The Sensor Things object types, to register with an agent's ``CoatyObjectRegistry`` (Coaty
/// JS's `SensorThingsTypes`).
///
/// ```swift
/// let registry = CoatyObjectRegistry(SensorThingsTypes.all)
/// ```
public enum SensorThingsTypes {
    /// ``Thing``, ``Sensor``, ``Observation`` and ``FeatureOfInterest``.
    public static let all: [any CoatyObject.Type] = [Thing.self, Sensor.self, Observation.self, FeatureOfInterest.self]
}

extension CoatyObjectRegistry {
    /// Registers ``Thing``, ``Sensor``, ``Observation`` and ``FeatureOfInterest``, so received
    /// objects of their object types decode into them.
    public func registerSensorThings() {
        register(Thing.self)
        register(Sensor.self)
        register(Observation.self)
        register(FeatureOfInterest.self)
    }
}
