import Foundation

// Enums and nested structures of the core types. Enums travel as integers; nested structures
// keep unknown members in `custom` like the core types.

/// The status of a ``CoatyTask``.
public enum TaskStatus: Int, Sendable, Hashable, CaseIterable, Codable {
    /// The initial state of a new task.
    case pending = 0
    /// In progress.
    case inProgress = 1
    /// Completed.
    case done = 2
    /// Blocked, e.g. by a problem.
    case blocked = 3
    /// Cancelled.
    case cancelled = 4
    /// A task request.
    case request = 5
    /// A cancelled task request.
    case requestCancelled = 6
}

/// The kind of an ``Annotation``.
public enum AnnotationType: Int, Sendable, Hashable, CaseIterable, Codable {
    /// Text.
    case text = 0
    /// An image.
    case image = 1
    /// Audio.
    case audio = 2
    /// Video.
    case video = 3
    /// A 3D object.
    case object3D = 4
    /// A PDF document.
    case pdf = 5
    /// The URL of a web document.
    case webDocumentUrl = 6
    /// The URL of live data.
    case liveDataUrl = 7
}

/// The storage status of an ``Annotation``'s media.
public enum AnnotationStatus: Int, Sendable, Hashable, CaseIterable, Codable {
    /// Stored by the creator only.
    case storedLocally = 0
    /// An Advertise asking to store the media is being sent.
    case storageRequest = 1
    /// Stored by a service.
    case published = 2
    /// Outdated; no longer to be used.
    case outdated = 3
}

/// The level of a ``Log`` record.
public enum LogLevel: Int, Sendable, Hashable, CaseIterable, Codable, Comparable {
    /// Fine-grained developer information.
    case debug = 10
    /// Informational.
    case info = 20
    /// Potentially harmful.
    case warning = 30
    /// A non-fatal error.
    case error = 40
    /// A fatal error.
    case fatal = 50

    /// Orders by severity.
    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// How an ``IoSource`` handles values published faster than its update rate.
public enum IoSourceUpdateStrategy: Int, Sendable, Hashable, CaseIterable, Codable {
    /// `none` without an update rate, else `sample`.
    case `default` = 0
    /// Publish every value at once.
    case none = 1
    /// Publish the latest value once per update interval.
    case sample = 2
    /// Publish a value only after an update interval without another value.
    case throttle = 3
}

/// The components of a ``User``'s name (SCIM).
public struct ScimUserNames: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// The full name formatted for display.
    public var formatted: String?
    /// The family (last) name.
    public var familyName: String?
    /// The given (first) name.
    public var givenName: String?
    /// The middle name(s).
    public var middleName: String?
    /// Honorific prefixes, e.g. "Ms.".
    public var honorificPrefix: String?
    /// Honorific suffixes, e.g. "III".
    public var honorificSuffix: String?
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case formatted, familyName, givenName, middleName, honorificPrefix, honorificSuffix
    }

    /// Creates a name; every part is optional.
    /// - Parameters:
    ///   - formatted: the full name for display.
    ///   - familyName: the family name.
    ///   - givenName: the given name.
    ///   - middleName: the middle name(s).
    ///   - honorificPrefix: honorific prefixes.
    ///   - honorificSuffix: honorific suffixes.
    public init(
        formatted: String? = nil,
        familyName: String? = nil,
        givenName: String? = nil,
        middleName: String? = nil,
        honorificPrefix: String? = nil,
        honorificSuffix: String? = nil
    ) {
        self.formatted = formatted
        self.familyName = familyName
        self.givenName = givenName
        self.middleName = middleName
        self.honorificPrefix = honorificPrefix
        self.honorificSuffix = honorificSuffix
    }
}

/// A SCIM multi-valued attribute (an email address, phone number, group…).
public struct ScimMultiValuedAttribute: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// The label, e.g. "work" or "home".
    public var type: String
    /// The value, e.g. the address.
    public var value: String
    /// Whether this is the preferred value.
    public var primary: Bool?
    /// A human-readable form.
    public var display: String?
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case type, value, primary, display
    }

    /// Creates an attribute.
    /// - Parameters:
    ///   - type: the label.
    ///   - value: the value.
    ///   - primary: whether it is the preferred value.
    ///   - display: a human-readable form.
    public init(type: String, value: String, primary: Bool? = nil, display: String? = nil) {
        self.type = type
        self.value = value
        self.primary = primary
        self.display = display
    }
}

/// A SCIM postal address.
public struct ScimAddress: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// The label, e.g. "work" or "home".
    public var type: String
    /// The attribute's value.
    public var value: String
    /// Whether this is the preferred address.
    public var primary: Bool?
    /// A human-readable form.
    public var display: String?
    /// The full address formatted for display.
    public var formatted: String?
    /// The street address.
    public var streetAddress: String?
    /// The city.
    public var locality: String?
    /// The state or region.
    public var region: String?
    /// The postal code.
    public var postalCode: String?
    /// The ISO 3166-1 alpha-2 country code.
    public var country: String?
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case type, value, primary, display, formatted, streetAddress, locality, region, postalCode, country
    }

    /// Creates an address.
    /// - Parameters:
    ///   - type: the label.
    ///   - value: the attribute's value.
    ///   - formatted: the full address for display.
    ///   - streetAddress: the street address.
    ///   - locality: the city.
    ///   - region: the state or region.
    ///   - postalCode: the postal code.
    ///   - country: the country code.
    public init(
        type: String,
        value: String,
        formatted: String? = nil,
        streetAddress: String? = nil,
        locality: String? = nil,
        region: String? = nil,
        postalCode: String? = nil,
        country: String? = nil
    ) {
        self.type = type
        self.value = value
        self.formatted = formatted
        self.streetAddress = streetAddress
        self.locality = locality
        self.region = region
        self.postalCode = postalCode
        self.country = country
    }
}

/// A media variant of an ``Annotation``.
public struct AnnotationVariant: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// The description key of the variant.
    public var variant: String
    /// Where to download it.
    public var downloadUrl: String
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case variant, downloadUrl
    }

    /// Creates a variant.
    /// - Parameters:
    ///   - variant: the description key.
    ///   - downloadUrl: the download URL.
    public init(variant: String, downloadUrl: String) {
        self.variant = variant
        self.downloadUrl = downloadUrl
    }
}

/// The host a ``Log`` record comes from.
public struct LogHost: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// Package, build and configuration information of the agent.
    public var agentInfo: JSONValue?
    /// The process id.
    public var pid: Double?
    /// The host name.
    public var hostname: String?
    /// The user agent (browsers).
    public var userAgent: String?
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case agentInfo, pid, hostname, userAgent
    }

    /// Creates host information.
    /// - Parameters:
    ///   - agentInfo: agent information.
    ///   - pid: the process id.
    ///   - hostname: the host name.
    ///   - userAgent: the user agent.
    public init(agentInfo: JSONValue? = nil, pid: Double? = nil, hostname: String? = nil, userAgent: String? = nil) {
        self.agentInfo = agentInfo
        self.pid = pid
        self.hostname = hostname
        self.userAgent = userAgent
    }
}

/// A position with the time it was taken (W3C Geolocation).
public struct GeoLocation: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// The coordinates.
    public var coords: GeoCoordinates
    /// When the position was taken, in milliseconds.
    public var timestamp: Double
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case coords, timestamp
    }

    /// Creates a position.
    /// - Parameters:
    ///   - coords: the coordinates.
    ///   - timestamp: when it was taken, in milliseconds.
    public init(coords: GeoCoordinates, timestamp: Double) {
        self.coords = coords
        self.timestamp = timestamp
    }
}

/// WGS84 coordinates (W3C Geolocation).
public struct GeoCoordinates: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// Latitude in decimal degrees.
    public var latitude: Double
    /// Longitude in decimal degrees.
    public var longitude: Double
    /// Accuracy of latitude and longitude, in meters.
    public var accuracy: Double
    /// Height above the WGS84 ellipsoid, in meters.
    public var altitude: Double?
    /// Accuracy of the altitude, in meters.
    public var altitudeAccuracy: Double?
    /// Direction of travel in degrees clockwise from true north.
    public var heading: Double?
    /// Horizontal speed in meters per second.
    public var speed: Double?
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case latitude, longitude, accuracy, altitude, altitudeAccuracy, heading, speed
    }

    /// Creates coordinates.
    /// - Parameters:
    ///   - latitude: latitude in degrees.
    ///   - longitude: longitude in degrees.
    ///   - accuracy: accuracy in meters.
    ///   - altitude: altitude in meters.
    ///   - altitudeAccuracy: altitude accuracy in meters.
    ///   - heading: heading in degrees.
    ///   - speed: speed in meters per second.
    public init(
        latitude: Double,
        longitude: Double,
        accuracy: Double,
        altitude: Double? = nil,
        altitudeAccuracy: Double? = nil,
        heading: Double? = nil,
        speed: Double? = nil
    ) {
        self.latitude = latitude
        self.longitude = longitude
        self.accuracy = accuracy
        self.altitude = altitude
        self.altitudeAccuracy = altitudeAccuracy
        self.heading = heading
        self.speed = speed
    }
}

extension Log {
    /// ISO 8601 text (UTC, with milliseconds) for a time, as Coaty's `logDate` wants.
    /// - Parameter milliseconds: milliseconds since 1970-01-01T00:00:00Z.
    /// - Returns: text such as `2026-11-22T07:45:00.123Z`.
    public static func isoDate(millisecondsSince1970 milliseconds: Double) -> String {
        ISO8601Dates.format(Date(timeIntervalSince1970: milliseconds / 1000))
    }

    /// ISO 8601 text (UTC, with milliseconds) for the current time.
    /// - Returns: text such as `2026-11-22T07:45:00.123Z`.
    public static func currentISODate() -> String {
        ISO8601Dates.format(Date())
    }
}

/// A snapshot of another object at a point in time; `parentObjectId` (required here) is the
/// id of the object.
public struct Snapshot: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.snapshot.objectType
    /// The core type.
    public static let coreType = CoreType.snapshot

    /// The object type of this object.
    public var objectType: String
    /// The unique id.
    public var objectId: CoatyUUID
    /// The name (may be empty).
    public var name: String
    /// An external id.
    public var externalId: String?
    /// The id of the object this is a snapshot of; required for a Snapshot.
    public var parentObjectId: CoatyUUID?
    /// The id of the Location object this object is associated with.
    public var locationId: CoatyUUID?
    /// Whether the object is no longer in use.
    public var isDeactivated: Bool?
    /// When the snapshot was taken, in milliseconds since 1970 (UTC).
    public var creationTimestamp: Double
    /// The id of the component that took it.
    public var creatorId: CoatyUUID
    /// Tags for retrieval.
    public var tags: [String]?
    /// A deep copy of the object.
    public var object: AnyCoatyObject
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectType, objectId, name, externalId, parentObjectId, locationId, isDeactivated
        case creationTimestamp, creatorId, tags, object
    }

    /// Creates a snapshot of `object`.
    /// - Parameters:
    ///   - object: the object captured.
    ///   - creatorId: the id of the component taking the snapshot.
    ///   - creationTimestamp: when, in milliseconds since 1970.
    ///   - objectType: the object type; `coaty.Snapshot` by default.
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - tags: tags for retrieval.
    ///   - externalId: an external id.
    ///   - locationId: a Location object id.
    ///   - isDeactivated: whether no longer in use.
    ///   - custom: further members.
    public init(
        of object: AnyCoatyObject,
        creatorId: CoatyUUID,
        creationTimestamp: Double,
        objectType: String = Self.objectType,
        objectId: CoatyUUID = CoatyUUID(),
        name: String = "Snapshot",
        tags: [String]? = nil,
        externalId: String? = nil,
        locationId: CoatyUUID? = nil,
        isDeactivated: Bool? = nil,
        custom: JSONObject = [:]
    ) {
        self.objectType = objectType
        self.objectId = objectId
        self.name = name
        self.externalId = externalId
        self.parentObjectId = object.objectId
        self.locationId = locationId
        self.isDeactivated = isDeactivated
        self.creationTimestamp = creationTimestamp
        self.creatorId = creatorId
        self.tags = tags
        self.object = object
        self.custom = custom
    }

    /// Decodes a snapshot; `parentObjectId` is required.
    /// - Parameter decoder: the decoder.
    /// - Throws: `DecodingError.keyNotFound` for a missing required field.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        objectType = try c.decode(String.self, forKey: .objectType)
        objectId = try c.decode(CoatyUUID.self, forKey: .objectId)
        name = try c.decode(String.self, forKey: .name)
        externalId = try c.decodeIfPresent(String.self, forKey: .externalId)
        parentObjectId = try c.decode(CoatyUUID.self, forKey: .parentObjectId)
        locationId = try c.decodeIfPresent(CoatyUUID.self, forKey: .locationId)
        isDeactivated = try c.decodeIfPresent(Bool.self, forKey: .isDeactivated)
        creationTimestamp = try c.decode(Double.self, forKey: .creationTimestamp)
        creatorId = try c.decode(CoatyUUID.self, forKey: .creatorId)
        tags = try c.decodeIfPresent([String].self, forKey: .tags)
        object = try c.decode(AnyCoatyObject.self, forKey: .object)
        custom = [:]
    }
}
