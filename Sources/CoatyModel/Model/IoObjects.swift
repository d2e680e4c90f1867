// Core type structs of IO routing: IoContext, IoNode, IoSource, IoActor (see CoreObjects.swift for
// how every core type struct is built).

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
