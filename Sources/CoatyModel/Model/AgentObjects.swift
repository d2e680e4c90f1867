// Core type structs that describe agents and their surroundings: Identity, Log, Location (see
// CoreObjects.swift for how every core type struct is built).

/// The identity of an agent (default name "Coaty Agent").
///
/// Its object type is usually `coaty.Identity`, but it carries any object type based on its core type.
public struct Identity: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.identity.objectType
    /// The core type.
    public static let coreType = CoreType.identity

    /// The object type of this object.
    public var objectType: String
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
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectType, objectId, name, externalId, parentObjectId, locationId, isDeactivated
    }

    /// Creates a Identity value; optional fields default to absent.
    /// - Parameters:
    ///   - objectType: the object type; the core type's own by default.
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - externalId: an external id.
    ///   - parentObjectId: the id of the parent object.
    ///   - locationId: the id of the Location object this object is associated with.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectType: String = Self.objectType,
        objectId: CoatyUUID = CoatyUUID(),
        name: String = "Coaty Agent",
        externalId: String? = nil,
        parentObjectId: CoatyUUID? = nil,
        locationId: CoatyUUID? = nil,
        isDeactivated: Bool? = nil,
        custom: JSONObject = [:]
    ) {
        self.objectType = objectType
        self.objectId = objectId
        self.name = name
        self.externalId = externalId
        self.parentObjectId = parentObjectId
        self.locationId = locationId
        self.isDeactivated = isDeactivated
        self.custom = custom
    }
}

/// A log record.
///
/// Its object type is usually `coaty.Log`, but it carries any object type based on its core type.
public struct Log: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.log.objectType
    /// The core type.
    public static let coreType = CoreType.log

    /// The object type of this object.
    public var objectType: String
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
    /// The level.
    public var logLevel: LogLevel
    /// The message.
    public var logMessage: String
    /// When it was logged, as ISO 8601 text (see ``Log/currentISODate()``).
    public var logDate: String
    /// Tags to categorize the record.
    public var logTags: [String]?
    /// Labels as key-value pairs.
    public var logLabels: JSONObject?
    /// Information about the host that logged.
    public var logHost: LogHost?
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectType, objectId, name, externalId, parentObjectId, locationId, isDeactivated, logLevel, logMessage,
            logDate, logTags, logLabels, logHost
    }

    /// Creates a Log value; optional fields default to absent.
    /// - Parameters:
    ///   - objectType: the object type; the core type's own by default.
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - logLevel: the level.
    ///   - logMessage: the message.
    ///   - logDate: when it was logged, as ISO 8601 text (see ``Log/currentISODate()``).
    ///   - logTags: tags to categorize the record.
    ///   - logLabels: labels as key-value pairs.
    ///   - logHost: information about the host that logged.
    ///   - externalId: an external id.
    ///   - parentObjectId: the id of the parent object.
    ///   - locationId: the id of the Location object this object is associated with.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectType: String = Self.objectType,
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        logLevel: LogLevel,
        logMessage: String,
        logDate: String,
        logTags: [String]? = nil,
        logLabels: JSONObject? = nil,
        logHost: LogHost? = nil,
        externalId: String? = nil,
        parentObjectId: CoatyUUID? = nil,
        locationId: CoatyUUID? = nil,
        isDeactivated: Bool? = nil,
        custom: JSONObject = [:]
    ) {
        self.objectType = objectType
        self.objectId = objectId
        self.name = name
        self.externalId = externalId
        self.parentObjectId = parentObjectId
        self.locationId = locationId
        self.isDeactivated = isDeactivated
        self.logLevel = logLevel
        self.logMessage = logMessage
        self.logDate = logDate
        self.logTags = logTags
        self.logLabels = logLabels
        self.logHost = logHost
        self.custom = custom
    }
}

/// A geographic location (W3C Geolocation API).
///
/// Its object type is usually `coaty.Location`, but it carries any object type based on its core type.
public struct Location: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.location.objectType
    /// The core type.
    public static let coreType = CoreType.location

    /// The object type of this object.
    public var objectType: String
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
    /// The position.
    public var geoLocation: GeoLocation
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectType, objectId, name, externalId, parentObjectId, locationId, isDeactivated, geoLocation
    }

    /// Creates a Location value; optional fields default to absent.
    /// - Parameters:
    ///   - objectType: the object type; the core type's own by default.
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - geoLocation: the position.
    ///   - externalId: an external id.
    ///   - parentObjectId: the id of the parent object.
    ///   - locationId: the id of the Location object this object is associated with.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectType: String = Self.objectType,
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        geoLocation: GeoLocation,
        externalId: String? = nil,
        parentObjectId: CoatyUUID? = nil,
        locationId: CoatyUUID? = nil,
        isDeactivated: Bool? = nil,
        custom: JSONObject = [:]
    ) {
        self.objectType = objectType
        self.objectId = objectId
        self.name = name
        self.externalId = externalId
        self.parentObjectId = parentObjectId
        self.locationId = locationId
        self.isDeactivated = isDeactivated
        self.geoLocation = geoLocation
        self.custom = custom
    }
}
