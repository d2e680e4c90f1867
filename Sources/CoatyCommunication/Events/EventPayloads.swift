// The payloads of the one-way Coaty events (PROTOCOL.md, "Payloads"): Advertise, Deadvertise,
// Channel, Associate; the request/response pairs are in RequestPayloads.swift.

import CoatyFilter
public import CoatyModel

/// The payload of an Advertise: `{"object":O,"privateData"?:{…}}`.
public struct AdvertiseEventData: CommunicationEventData, ObjectCarryingPayload, Hashable {
    /// ``CommunicationEventType/advertise``.
    public static var eventType: CommunicationEventType { .advertise }
    /// The advertised object.
    public var object: AnyCoatyObject
    /// Application data that is not part of the object.
    public var privateData: JSONObject?

    /// Creates the payload.
    /// - Parameters:
    ///   - object: the advertised object.
    ///   - privateData: application data, if any.
    public init(object: AnyCoatyObject, privateData: JSONObject? = nil) {
        self.object = object
        self.privateData = privateData
    }

    /// Reads a received Advertise payload; `object` must be a valid Coaty object.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: decodes the object.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        try self.init(reader: PayloadReader(json: json, eventType: Self.eventType, registry: registry))
    }

    init(reader: PayloadReader) throws(CommunicationEventDataError) {
        object = try reader.requiredTopicObject("object")
        privateData = try reader.privateData()
    }

    /// The wire JSON.
    public var json: JSONObject {
        var writer = PayloadWriter()
        writer.set("object", object)
        writer.set("privateData", privateData)
        return writer.json
    }
}

/// The payload of a Deadvertise: `{"objectIds":[id,…]}` (may be empty).
public struct DeadvertiseEventData: CommunicationEventData, Hashable {
    /// ``CommunicationEventType/deadvertise``.
    public static var eventType: CommunicationEventType { .deadvertise }
    /// The ids of the objects that are gone.
    public var objectIds: [CoatyUUID]

    /// Creates the payload.
    /// - Parameter objectIds: the ids of the objects that are gone.
    public init(objectIds: [CoatyUUID]) {
        self.objectIds = objectIds
    }

    /// Reads a received Deadvertise payload; every id must be a UUID.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: unused.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        let reader = PayloadReader(json: json, eventType: Self.eventType, registry: registry)
        guard let strings = try reader.strings("objectIds") else { throw reader.fail("'objectIds' is missing") }
        var ids: [CoatyUUID] = []
        ids.reserveCapacity(strings.count)
        for string in strings {
            guard let id = CoatyUUID(string) else { throw reader.fail("'objectIds' contains '\(string)', not a UUID") }
            ids.append(id)
        }
        objectIds = ids
    }

    /// The wire JSON.
    public var json: JSONObject {
        ["objectIds": .array(objectIds.map { .string($0.uuidString) })]
    }
}

/// The payload of a Channel: `{"object":O}` or `{"objects":[O…]}`, plus `privateData`.
public struct ChannelEventData: CommunicationEventData, ObjectCarryingPayload, Hashable {
    /// ``CommunicationEventType/channel``.
    public static var eventType: CommunicationEventType { .channel }
    /// The objects (one when the wire form is `object`).
    public var objects: [AnyCoatyObject]
    /// Whether the wire form is the single `object` field.
    public var isSingleObject: Bool
    /// Application data, if any.
    public var privateData: JSONObject?

    /// A payload with one object (`{"object":O}`).
    /// - Parameters:
    ///   - object: the object.
    ///   - privateData: application data, if any.
    public init(object: AnyCoatyObject, privateData: JSONObject? = nil) {
        objects = [object]
        isSingleObject = true
        self.privateData = privateData
    }

    /// A payload with an array of objects (`{"objects":[…]}`).
    /// - Parameters:
    ///   - objects: the objects.
    ///   - privateData: application data, if any.
    public init(objects: [AnyCoatyObject], privateData: JSONObject? = nil) {
        self.objects = objects
        isSingleObject = false
        self.privateData = privateData
    }

    /// Reads a received Channel payload: exactly one of `object` / `objects`.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: decodes the objects.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        try self.init(reader: PayloadReader(json: json, eventType: Self.eventType, registry: registry))
    }

    init(reader: PayloadReader) throws(CommunicationEventDataError) {
        let single = try reader.object("object")
        let many = try reader.objects("objects")
        switch (single, many) {
        case (let object?, nil):
            objects = [object]
            isSingleObject = true
        case (nil, let array?):
            objects = array
            isSingleObject = false
        default:
            throw reader.fail("exactly one of 'object' and 'objects' must be given")
        }
        privateData = try reader.privateData()
    }

    /// The wire JSON.
    public var json: JSONObject {
        var writer = PayloadWriter()
        if isSingleObject, objects.count == 1 {
            writer.set("object", objects[0])
        } else {
            writer.set("objects", objects)
        }
        writer.set("privateData", privateData)
        return writer.json
    }
}

/// The payload of an Associate: `{"ioSourceId","ioActorId","associatingRoute"?,"updateRate"?}`;
/// without a route it disassociates.
public struct AssociateEventData: CommunicationEventData, Hashable {
    /// ``CommunicationEventType/associate``.
    public static var eventType: CommunicationEventType { .associate }
    /// The IoSource.
    public var ioSourceId: CoatyUUID
    /// The IoActor.
    public var ioActorId: CoatyUUID
    /// The topic the IoSource publishes its values on, or `nil` to disassociate.
    public var associatingRoute: String?
    /// The recommended update rate in milliseconds, if any.
    public var updateRate: Double?

    /// Creates an Associate (or a disassociate without route).
    /// - Parameters:
    ///   - ioSourceId: the IoSource.
    ///   - ioActorId: the IoActor.
    ///   - associatingRoute: the route, or `nil` to disassociate.
    ///   - updateRate: the update rate in milliseconds.
    public init(ioSourceId: CoatyUUID, ioActorId: CoatyUUID, associatingRoute: String? = nil, updateRate: Double? = nil)
    {
        self.ioSourceId = ioSourceId
        self.ioActorId = ioActorId
        self.associatingRoute = associatingRoute
        self.updateRate = updateRate
    }

    /// Whether this Associate removes the association (no route).
    public var isDisassociation: Bool { associatingRoute == nil }

    /// Reads a received Associate payload.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: unused.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        let reader = PayloadReader(json: json, eventType: Self.eventType, registry: registry)
        guard let source = try reader.uuid("ioSourceId") else { throw reader.fail("'ioSourceId' is missing") }
        guard let actor = try reader.uuid("ioActorId") else { throw reader.fail("'ioActorId' is missing") }
        ioSourceId = source
        ioActorId = actor
        associatingRoute = try reader.string("associatingRoute")
        if let rate = reader.optional("updateRate") {
            guard let number = rate.doubleValue else { throw reader.fail("'updateRate' must be a number") }
            updateRate = number
        }
    }

    /// The wire JSON.
    public var json: JSONObject {
        var writer = PayloadWriter()
        writer.set("ioSourceId", .string(ioSourceId.uuidString))
        writer.set("ioActorId", .string(ioActorId.uuidString))
        writer.set("associatingRoute", associatingRoute.map { JSONValue.string($0) })
        if let updateRate {
            writer.set("updateRate", Int64(exactly: updateRate).map { JSONValue.int($0) } ?? .double(updateRate))
        }
        return writer.json
    }
}
