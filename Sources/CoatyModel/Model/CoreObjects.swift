// Core type structs of the Coaty object model (protocol version 3).
//
// Every struct: the base fields, its own fields, and `custom` for unknown members; Codable is
// synthesized from `CodingKeys` (which leave out `custom`), and unknown members are captured
// and written back generically by JSONValueDecoder/JSONValueEncoder (see CustomFieldsCarrying).

/// A Coaty object of core type `CoatyObject` with any object type: the base shape plus `custom`.
///
/// Its object type is usually `coaty.CoatyObject`, but it carries any object type based on its core type.
public struct BaseObject: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.coatyObject.objectType
    /// The core type.
    public static let coreType = CoreType.coatyObject

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

    /// Creates a BaseObject value; optional fields default to absent.
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
        name: String,
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

/// A user, after SCIM 2 (RFC 7643); the SCIM `userName` is the object's `name`.
///
/// Its object type is usually `coaty.User`, but it carries any object type based on its core type.
public struct User: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.user.objectType
    /// The core type.
    public static let coreType = CoreType.user

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
    /// The components of the user's name.
    public var names: ScimUserNames
    /// The name to display.
    public var displayName: String?
    /// The casual name.
    public var nickName: String?
    /// The user's title.
    public var title: String?
    /// The relationship to the organization (Employee, Contractor…).
    public var userType: String?
    /// Preferred languages, as an HTTP Accept-Language value.
    public var preferredLanguage: String?
    /// The default locale (RFC 5646 language tag).
    public var locale: String?
    /// The time zone (IANA name).
    public var timezone: String?
    /// The administrative status.
    public var active: Bool?
    /// A password (hashed, preferably).
    public var password: String?
    /// Email addresses.
    public var emails: [ScimMultiValuedAttribute]?
    /// Phone numbers.
    public var phoneNumbers: [ScimMultiValuedAttribute]?
    /// Instant messaging addresses.
    public var ims: [ScimMultiValuedAttribute]?
    /// Photo URLs.
    public var photos: [ScimMultiValuedAttribute]?
    /// Postal addresses.
    public var addresses: [ScimAddress]?
    /// Groups the user belongs to.
    public var groups: [ScimMultiValuedAttribute]?
    /// Entitlements.
    public var entitlements: [JSONValue]?
    /// Roles.
    public var roles: [String]?
    /// Base64 DER X.509 certificates.
    public var x509Certificates: [String]?
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectType, objectId, name, externalId, parentObjectId, locationId, isDeactivated, names, displayName,
            nickName, title, userType, preferredLanguage, locale, timezone, active, password, emails, phoneNumbers, ims,
            photos, addresses, groups, entitlements, roles, x509Certificates
    }

    /// Creates a User value; optional fields default to absent.
    /// - Parameters:
    ///   - objectType: the object type; the core type's own by default.
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - names: the components of the user's name.
    ///   - displayName: the name to display.
    ///   - nickName: the casual name.
    ///   - title: the user's title.
    ///   - userType: the relationship to the organization (Employee, Contractor…).
    ///   - preferredLanguage: preferred languages, as an HTTP Accept-Language value.
    ///   - locale: the default locale (RFC 5646 language tag).
    ///   - timezone: the time zone (IANA name).
    ///   - active: the administrative status.
    ///   - password: a password (hashed, preferably).
    ///   - emails: email addresses.
    ///   - phoneNumbers: phone numbers.
    ///   - ims: instant messaging addresses.
    ///   - photos: photo URLs.
    ///   - addresses: postal addresses.
    ///   - groups: groups the user belongs to.
    ///   - entitlements: entitlements.
    ///   - roles: roles.
    ///   - x509Certificates: base64 DER X.509 certificates.
    ///   - externalId: an external id.
    ///   - parentObjectId: the id of the parent object.
    ///   - locationId: the id of the Location object this object is associated with.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectType: String = Self.objectType,
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        names: ScimUserNames,
        displayName: String? = nil,
        nickName: String? = nil,
        title: String? = nil,
        userType: String? = nil,
        preferredLanguage: String? = nil,
        locale: String? = nil,
        timezone: String? = nil,
        active: Bool? = nil,
        password: String? = nil,
        emails: [ScimMultiValuedAttribute]? = nil,
        phoneNumbers: [ScimMultiValuedAttribute]? = nil,
        ims: [ScimMultiValuedAttribute]? = nil,
        photos: [ScimMultiValuedAttribute]? = nil,
        addresses: [ScimAddress]? = nil,
        groups: [ScimMultiValuedAttribute]? = nil,
        entitlements: [JSONValue]? = nil,
        roles: [String]? = nil,
        x509Certificates: [String]? = nil,
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
        self.names = names
        self.displayName = displayName
        self.nickName = nickName
        self.title = title
        self.userType = userType
        self.preferredLanguage = preferredLanguage
        self.locale = locale
        self.timezone = timezone
        self.active = active
        self.password = password
        self.emails = emails
        self.phoneNumbers = phoneNumbers
        self.ims = ims
        self.photos = photos
        self.addresses = addresses
        self.groups = groups
        self.entitlements = entitlements
        self.roles = roles
        self.x509Certificates = x509Certificates
        self.custom = custom
    }
}

/// An annotation: text or media attached to something.
///
/// Its object type is usually `coaty.Annotation`, but it carries any object type based on its core type.
public struct Annotation: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.annotation.objectType
    /// The core type.
    public static let coreType = CoreType.annotation

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
    /// The kind of annotation.
    public var type: AnnotationType
    /// The id of the user who created it.
    public var creatorId: CoatyUUID
    /// When it was created, in milliseconds since 1970 (UTC).
    public var creationTimestamp: Double
    /// The storage status of its media.
    public var status: AnnotationStatus
    /// Media variants with download URLs.
    public var variants: [AnnotationVariant]?
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectType, objectId, name, externalId, parentObjectId, locationId, isDeactivated, type, creatorId,
            creationTimestamp, status, variants
    }

    /// Creates a Annotation value; optional fields default to absent.
    /// - Parameters:
    ///   - objectType: the object type; the core type's own by default.
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - type: the kind of annotation.
    ///   - creatorId: the id of the user who created it.
    ///   - creationTimestamp: when it was created, in milliseconds since 1970 (UTC).
    ///   - status: the storage status of its media.
    ///   - variants: media variants with download URLs.
    ///   - externalId: an external id.
    ///   - parentObjectId: the id of the parent object.
    ///   - locationId: the id of the Location object this object is associated with.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectType: String = Self.objectType,
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        type: AnnotationType,
        creatorId: CoatyUUID,
        creationTimestamp: Double,
        status: AnnotationStatus,
        variants: [AnnotationVariant]? = nil,
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
        self.type = type
        self.creatorId = creatorId
        self.creationTimestamp = creationTimestamp
        self.status = status
        self.variants = variants
        self.custom = custom
    }
}

/// A task or task request (core type `Task`; named `CoatyTask` to stay clear of Swift's `Task`).
///
/// Its object type is usually `coaty.Task`, but it carries any object type based on its core type.
public struct CoatyTask: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.task.objectType
    /// The core type.
    public static let coreType = CoreType.task

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
    /// The status.
    public var status: TaskStatus
    /// The id of the user who created the task.
    public var creatorId: CoatyUUID
    /// When it was created, in milliseconds since 1970 (UTC).
    public var creationTimestamp: Double
    /// When it was last changed, in milliseconds since 1970.
    public var lastModificationTimestamp: Double?
    /// When it is due, in milliseconds since 1970.
    public var dueTimestamp: Double?
    /// When it was done, in milliseconds since 1970.
    public var doneTimestamp: Double?
    /// How long it takes or took, in milliseconds.
    public var duration: Double?
    /// Required competencies, roles etc. as key-value pairs (all must hold).
    public var requirements: JSONObject?
    /// A description.
    public var description: String?
    /// The id of the object the task is assigned to.
    public var assigneeObjectId: CoatyUUID?
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectType, objectId, name, externalId, parentObjectId, locationId, isDeactivated, status, creatorId,
            creationTimestamp, lastModificationTimestamp, dueTimestamp, doneTimestamp, duration, requirements,
            description, assigneeObjectId
    }

    /// Creates a CoatyTask value; optional fields default to absent.
    /// - Parameters:
    ///   - objectType: the object type; the core type's own by default.
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - status: the status.
    ///   - creatorId: the id of the user who created the task.
    ///   - creationTimestamp: when it was created, in milliseconds since 1970 (UTC).
    ///   - lastModificationTimestamp: when it was last changed, in milliseconds since 1970.
    ///   - dueTimestamp: when it is due, in milliseconds since 1970.
    ///   - doneTimestamp: when it was done, in milliseconds since 1970.
    ///   - duration: how long it takes or took, in milliseconds.
    ///   - requirements: required competencies, roles etc. as key-value pairs (all must hold).
    ///   - description: a description.
    ///   - assigneeObjectId: the id of the object the task is assigned to.
    ///   - externalId: an external id.
    ///   - parentObjectId: the id of the parent object.
    ///   - locationId: the id of the Location object this object is associated with.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectType: String = Self.objectType,
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        status: TaskStatus,
        creatorId: CoatyUUID,
        creationTimestamp: Double,
        lastModificationTimestamp: Double? = nil,
        dueTimestamp: Double? = nil,
        doneTimestamp: Double? = nil,
        duration: Double? = nil,
        requirements: JSONObject? = nil,
        description: String? = nil,
        assigneeObjectId: CoatyUUID? = nil,
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
        self.status = status
        self.creatorId = creatorId
        self.creationTimestamp = creationTimestamp
        self.lastModificationTimestamp = lastModificationTimestamp
        self.dueTimestamp = dueTimestamp
        self.doneTimestamp = doneTimestamp
        self.duration = duration
        self.requirements = requirements
        self.description = description
        self.assigneeObjectId = assigneeObjectId
        self.custom = custom
    }
}

/// The context of IO routing; its `name` identifies it within an application.
///
/// Its object type is usually `coaty.IoContext`, but it carries any object type based on its core type.
public struct IoContext: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.ioContext.objectType
    /// The core type.
    public static let coreType = CoreType.ioContext

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

    /// Creates a IoContext value; optional fields default to absent.
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
        name: String,
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

/// An IO node: the IO sources and actors of one agent in one IO context (`name` is the context's name).
///
/// Its object type is usually `coaty.IoNode`, but it carries any object type based on its core type.
public struct IoNode: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.ioNode.objectType
    /// The core type.
    public static let coreType = CoreType.ioNode

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
    /// The IO sources of the node.
    public var ioSources: [IoSource]
    /// The IO actors of the node.
    public var ioActors: [IoActor]
    /// Node-specific characteristics for IO routers.
    public var characteristics: JSONObject?
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectType, objectId, name, externalId, parentObjectId, locationId, isDeactivated, ioSources, ioActors,
            characteristics
    }

    /// Creates a IoNode value; optional fields default to absent.
    /// - Parameters:
    ///   - objectType: the object type; the core type's own by default.
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - ioSources: the IO sources of the node.
    ///   - ioActors: the IO actors of the node.
    ///   - characteristics: node-specific characteristics for IO routers.
    ///   - externalId: an external id.
    ///   - parentObjectId: the id of the parent object.
    ///   - locationId: the id of the Location object this object is associated with.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectType: String = Self.objectType,
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        ioSources: [IoSource],
        ioActors: [IoActor],
        characteristics: JSONObject? = nil,
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
        self.ioSources = ioSources
        self.ioActors = ioActors
        self.characteristics = characteristics
        self.custom = custom
    }
}

/// A source of IO values.
///
/// Its object type is usually `coaty.IoSource`, but it carries any object type based on its core type.
public struct IoSource: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.ioSource.objectType
    /// The core type.
    public static let coreType = CoreType.ioSource

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
    /// The semantic type of the values, e.g. `com.example.Temperature`.
    public var valueType: String
    /// Whether values are raw bytes instead of JSON.
    public var useRawIoValues: Bool?
    /// The maximum rate of publication, in milliseconds.
    public var updateRate: Double?
    /// A route to an external sink.
    public var externalRoute: String?
    /// How values published faster than the update rate are handled.
    public var updateStrategy: IoSourceUpdateStrategy?
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectType, objectId, name, externalId, parentObjectId, locationId, isDeactivated, valueType,
            useRawIoValues, updateRate, externalRoute, updateStrategy
    }

    /// Creates a IoSource value; optional fields default to absent.
    /// - Parameters:
    ///   - objectType: the object type; the core type's own by default.
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - valueType: the semantic type of the values, e.g. `com.example.Temperature`.
    ///   - useRawIoValues: whether values are raw bytes instead of JSON.
    ///   - updateRate: the maximum rate of publication, in milliseconds.
    ///   - externalRoute: a route to an external sink.
    ///   - updateStrategy: how values published faster than the update rate are handled.
    ///   - externalId: an external id.
    ///   - parentObjectId: the id of the parent object.
    ///   - locationId: the id of the Location object this object is associated with.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectType: String = Self.objectType,
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        valueType: String,
        useRawIoValues: Bool? = nil,
        updateRate: Double? = nil,
        externalRoute: String? = nil,
        updateStrategy: IoSourceUpdateStrategy? = nil,
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
        self.valueType = valueType
        self.useRawIoValues = useRawIoValues
        self.updateRate = updateRate
        self.externalRoute = externalRoute
        self.updateStrategy = updateStrategy
        self.custom = custom
    }
}

/// A consumer of IO values.
///
/// Its object type is usually `coaty.IoActor`, but it carries any object type based on its core type.
public struct IoActor: CoatyObject, CustomFieldsCarrying, Hashable {
    /// The object type of the core type.
    public static let objectType = CoreType.ioActor.objectType
    /// The core type.
    public static let coreType = CoreType.ioActor

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
    /// The semantic type of the values, e.g. `com.example.Temperature`.
    public var valueType: String
    /// Whether values are raw bytes instead of JSON.
    public var useRawIoValues: Bool?
    /// The desired rate of values, in milliseconds.
    public var updateRate: Double?
    /// A route from an external source.
    public var externalRoute: String?
    /// Members this struct does not declare, kept for re-publishing.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case objectType, objectId, name, externalId, parentObjectId, locationId, isDeactivated, valueType,
            useRawIoValues, updateRate, externalRoute
    }

    /// Creates a IoActor value; optional fields default to absent.
    /// - Parameters:
    ///   - objectType: the object type; the core type's own by default.
    ///   - objectId: the id; a fresh UUID by default.
    ///   - name: the name.
    ///   - valueType: the semantic type of the values, e.g. `com.example.Temperature`.
    ///   - useRawIoValues: whether values are raw bytes instead of JSON.
    ///   - updateRate: the desired rate of values, in milliseconds.
    ///   - externalRoute: a route from an external source.
    ///   - externalId: an external id.
    ///   - parentObjectId: the id of the parent object.
    ///   - locationId: the id of the Location object this object is associated with.
    ///   - isDeactivated: whether the object is no longer in use.
    ///   - custom: further members.
    public init(
        objectType: String = Self.objectType,
        objectId: CoatyUUID = CoatyUUID(),
        name: String,
        valueType: String,
        useRawIoValues: Bool? = nil,
        updateRate: Double? = nil,
        externalRoute: String? = nil,
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
        self.valueType = valueType
        self.useRawIoValues = useRawIoValues
        self.updateRate = updateRate
        self.externalRoute = externalRoute
        self.custom = custom
    }
}

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
