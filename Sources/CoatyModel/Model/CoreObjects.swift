// Core type structs of the Coaty object model (protocol version 3): the base shape, users,
// annotations and tasks; IO routing objects are in IoObjects.swift, agent-related ones in
// AgentObjects.swift.
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
