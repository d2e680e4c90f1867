// The payloads of the two-way Coaty events (PROTOCOL.md, "Payloads"): Discover/Resolve,
// Query/Retrieve, Update/Complete, Call/Return.

public import CoatyFilter
public import CoatyModel

/// The payload of a Discover: by object id, by external id (optionally with types), or by types.
///
/// Valid forms: `objectId` only; `externalId` alone or with `objectTypes` and/or `coreTypes`;
/// `objectId` + `externalId` without types; no ids and exactly one of `coreTypes` / `objectTypes`.
public struct DiscoverEventData: CommunicationEventData, Hashable {
    /// ``CommunicationEventType/discover``.
    public static var eventType: CommunicationEventType { .discover }
    /// The external id to find.
    public private(set) var externalId: String?
    /// The object id to find.
    public private(set) var objectId: CoatyUUID?
    /// The object types to find.
    public private(set) var objectTypes: [String]?
    /// The core types to find.
    public private(set) var coreTypes: [CoreType]?

    /// Creates a Discover, checking that the combination is one of the valid forms.
    /// - Parameters:
    ///   - externalId: the external id to find.
    ///   - objectId: the object id to find.
    ///   - objectTypes: object types to find.
    ///   - coreTypes: core types to find.
    /// - Throws: ``CommunicationEventDataError`` for an invalid combination.
    public init(
        externalId: String? = nil,
        objectId: CoatyUUID? = nil,
        objectTypes: [String]? = nil,
        coreTypes: [CoreType]? = nil
    ) throws(CommunicationEventDataError) {
        self.externalId = externalId
        self.objectId = objectId
        self.objectTypes = objectTypes
        self.coreTypes = coreTypes
        try validate()
    }

    /// Discovers the object with this id.
    /// - Parameter objectId: the id.
    /// - Returns: the payload.
    public static func objectId(_ objectId: CoatyUUID) -> DiscoverEventData {
        DiscoverEventData(unchecked: nil, objectId, nil, nil)
    }

    /// Discovers objects of these core types.
    /// - Parameter coreTypes: the core types (at least one).
    /// - Returns: the payload.
    public static func coreTypes(_ coreTypes: [CoreType]) -> DiscoverEventData {
        DiscoverEventData(unchecked: nil, nil, nil, coreTypes)
    }

    /// Discovers objects of these object types.
    /// - Parameter objectTypes: the object types (at least one).
    /// - Returns: the payload.
    public static func objectTypes(_ objectTypes: [String]) -> DiscoverEventData {
        DiscoverEventData(unchecked: nil, nil, objectTypes, nil)
    }

    /// Discovers objects with this external id, optionally restricted to types.
    /// - Parameters:
    ///   - externalId: the external id.
    ///   - objectTypes: object types, if any.
    ///   - coreTypes: core types, if any.
    /// - Returns: the payload.
    public static func externalId(
        _ externalId: String,
        objectTypes: [String]? = nil,
        coreTypes: [CoreType]? = nil
    ) -> DiscoverEventData {
        DiscoverEventData(unchecked: externalId, nil, objectTypes, coreTypes)
    }

    private init(
        unchecked externalId: String?,
        _ objectId: CoatyUUID?,
        _ objectTypes: [String]?,
        _ coreTypes: [CoreType]?
    ) {
        self.externalId = externalId
        self.objectId = objectId
        self.objectTypes = objectTypes
        self.coreTypes = coreTypes
    }

    /// Reads a received Discover payload and checks its form.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: unused.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        let reader = PayloadReader(json: json, eventType: Self.eventType, registry: registry)
        externalId = try reader.string("externalId")
        objectId = try reader.uuid("objectId")
        objectTypes = try reader.objectTypes()
        coreTypes = try reader.coreTypes()
        try validate()
    }

    func validate() throws(CommunicationEventDataError) {
        let hasTypes = objectTypes != nil || coreTypes != nil
        let valid: Bool
        switch (objectId != nil, externalId != nil) {
        case (true, false): valid = !hasTypes
        case (false, true): valid = true
        case (true, true): valid = !hasTypes
        case (false, false): valid = (objectTypes != nil) != (coreTypes != nil)
        }
        guard valid else {
            throw CommunicationEventDataError(
                .discover,
                "use objectId only, externalId (optionally with types), objectId with externalId, "
                    + "or exactly one of objectTypes / coreTypes"
            )
        }
    }

    /// Whether `object` matches this Discover (the rule for validating Resolve responses): every
    /// given id must be equal; given types must contain the object's type.
    /// - Parameter object: a resolved object.
    /// - Returns: whether the object answers this Discover.
    public func matches(_ object: AnyCoatyObject) -> Bool {
        if let objectId, object.objectId != objectId { return false }
        if let externalId, object.externalId != externalId { return false }
        if objectTypes != nil || coreTypes != nil {
            let byObjectType = objectTypes?.contains(object.objectType) ?? false
            let byCoreType = coreTypes?.contains(object.coreType) ?? false
            return byObjectType || byCoreType
        }
        return true
    }

    /// The wire JSON.
    public var json: JSONObject {
        var writer = PayloadWriter()
        writer.set("externalId", externalId.map { JSONValue.string($0) })
        writer.set("objectId", objectId.map { JSONValue.string($0.uuidString) })
        writer.set("objectTypes", objectTypes)
        writer.set("coreTypes", coreTypes?.map(\.rawValue))
        return writer.json
    }
}

/// The payload of a Resolve: `{"object"?,"relatedObjects"?:[…],"privateData"?}`, at least one of
/// `object` / `relatedObjects`.
public struct ResolveEventData: CommunicationEventData, ObjectCarryingPayload, Hashable {
    /// ``CommunicationEventType/resolve``.
    public static var eventType: CommunicationEventType { .resolve }
    /// The resolved object.
    public private(set) var object: AnyCoatyObject?
    /// Related objects.
    public private(set) var relatedObjects: [AnyCoatyObject]?
    /// Application data, if any.
    public var privateData: JSONObject?

    /// Creates a Resolve.
    /// - Parameters:
    ///   - object: the resolved object.
    ///   - relatedObjects: related objects.
    ///   - privateData: application data.
    /// - Throws: ``CommunicationEventDataError`` when both `object` and `relatedObjects` are `nil`.
    public init(
        object: AnyCoatyObject?,
        relatedObjects: [AnyCoatyObject]? = nil,
        privateData: JSONObject? = nil
    ) throws(CommunicationEventDataError) {
        guard object != nil || relatedObjects != nil else {
            throw CommunicationEventDataError(.resolve, "at least one of 'object' and 'relatedObjects' must be given")
        }
        self.object = object
        self.relatedObjects = relatedObjects
        self.privateData = privateData
    }

    /// A Resolve with an object, valid by construction.
    init(unchecked object: AnyCoatyObject) {
        self.object = object
    }

    /// Reads a received Resolve payload.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: decodes the objects.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        try self.init(reader: PayloadReader(json: json, eventType: Self.eventType, registry: registry))
    }

    init(reader: PayloadReader) throws(CommunicationEventDataError) {
        try self.init(
            object: try reader.object("object"),
            relatedObjects: try reader.objects("relatedObjects"),
            privateData: try reader.privateData()
        )
    }

    /// The wire JSON.
    public var json: JSONObject {
        var writer = PayloadWriter()
        writer.set("object", object)
        writer.set("relatedObjects", relatedObjects)
        writer.set("privateData", privateData)
        return writer.json
    }
}

/// The payload of a Query: exactly one of `objectTypes` / `coreTypes`, an optional object filter
/// and optional join conditions (one object or an array).
public struct QueryEventData: CommunicationEventData, Hashable {
    /// ``CommunicationEventType/query``.
    public static var eventType: CommunicationEventType { .query }
    /// The object types queried (exclusive with ``coreTypes``).
    public private(set) var objectTypes: [String]?
    /// The core types queried (exclusive with ``objectTypes``).
    public private(set) var coreTypes: [CoreType]?
    /// The filter the retrieved objects must match.
    public var objectFilter: ObjectFilter?
    /// Join conditions that relate further objects into the results.
    public var objectJoinConditions: ObjectJoinConditionList?

    /// Queries objects of object types.
    ///
    /// Without a filter an empty one (`{}`: every object of the types) is sent: Coaty JS 2.4.1
    /// drops a Query without `objectFilter` (`isObjectFilterValid(undefined)` throws).
    /// - Parameters:
    ///   - objectTypes: the object types.
    ///   - objectFilter: the filter; `nil` leaves it out of the payload, which Coaty JS 2.4.1 rejects.
    ///   - objectJoinConditions: join conditions.
    public init(
        objectTypes: [String],
        objectFilter: ObjectFilter? = ObjectFilter(),
        objectJoinConditions: ObjectJoinConditionList? = nil
    ) {
        self.objectTypes = objectTypes
        self.objectFilter = objectFilter
        self.objectJoinConditions = objectJoinConditions
    }

    /// Queries objects of core types.
    ///
    /// Without a filter an empty one (`{}`: every object of the types) is sent: Coaty JS 2.4.1
    /// drops a Query without `objectFilter` (`isObjectFilterValid(undefined)` throws).
    /// - Parameters:
    ///   - coreTypes: the core types.
    ///   - objectFilter: the filter; `nil` leaves it out of the payload, which Coaty JS 2.4.1 rejects.
    ///   - objectJoinConditions: join conditions.
    public init(
        coreTypes: [CoreType],
        objectFilter: ObjectFilter? = ObjectFilter(),
        objectJoinConditions: ObjectJoinConditionList? = nil
    ) {
        self.coreTypes = coreTypes
        self.objectFilter = objectFilter
        self.objectJoinConditions = objectJoinConditions
    }

    /// Reads a received Query payload.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: unused.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        let reader = PayloadReader(json: json, eventType: Self.eventType, registry: registry)
        objectTypes = try reader.objectTypes()
        coreTypes = try reader.coreTypes()
        guard (objectTypes != nil) != (coreTypes != nil) else {
            throw reader.fail("exactly one of 'objectTypes' and 'coreTypes' must be given")
        }
        if let json = reader.optional("objectFilter"), let filter = ObjectFilter(reading: json) {
            objectFilter = filter
        } else {
            objectFilter = try reader.decode(ObjectFilter.self, "objectFilter")
        }
        objectJoinConditions = try reader.decode(ObjectJoinConditionList.self, "objectJoinConditions")
    }

    /// Whether an object has one of the queried types (the rule for validating Retrieve responses).
    /// - Parameter object: a retrieved object.
    /// - Returns: whether its type is queried.
    public func matchesType(of object: AnyCoatyObject) -> Bool {
        if let objectTypes { return objectTypes.contains(object.objectType) }
        if let coreTypes { return coreTypes.contains(object.coreType) }
        return false
    }

    /// Whether an object has a queried type and matches the object filter.
    /// - Parameter object: a candidate object.
    /// - Returns: whether it belongs in the results (before ordering and paging).
    public func matches(_ object: AnyCoatyObject) -> Bool {
        matchesType(of: object) && ObjectMatcher.matches(object.jsonValue, filter: objectFilter)
    }

    /// The wire JSON.
    public var json: JSONObject {
        var writer = PayloadWriter()
        writer.set("objectTypes", objectTypes)
        writer.set("coreTypes", coreTypes?.map(\.rawValue))
        writer.set(encoding: "objectFilter", objectFilter)
        writer.set(encoding: "objectJoinConditions", objectJoinConditions)
        return writer.json
    }
}

/// The payload of a Retrieve: `{"objects":[…],"privateData"?}` (may be empty).
public struct RetrieveEventData: CommunicationEventData, Hashable {
    /// ``CommunicationEventType/retrieve``.
    public static var eventType: CommunicationEventType { .retrieve }
    /// The retrieved objects.
    public var objects: [AnyCoatyObject]
    /// Application data, if any.
    public var privateData: JSONObject?

    /// Creates a Retrieve.
    /// - Parameters:
    ///   - objects: the retrieved objects.
    ///   - privateData: application data.
    public init(objects: [AnyCoatyObject], privateData: JSONObject? = nil) {
        self.objects = objects
        self.privateData = privateData
    }

    /// Reads a received Retrieve payload.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: decodes the objects.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        let reader = PayloadReader(json: json, eventType: Self.eventType, registry: registry)
        guard let objects = try reader.objects("objects") else { throw reader.fail("'objects' is missing") }
        self.objects = objects
        privateData = try reader.privateData()
    }

    /// The wire JSON.
    public var json: JSONObject {
        var writer = PayloadWriter()
        writer.set("objects", objects)
        writer.set("privateData", privateData)
        return writer.json
    }
}

/// The payload of an Update: `{"object":O}`, the full object.
public struct UpdateEventData: CommunicationEventData, ObjectCarryingPayload, Hashable {
    /// ``CommunicationEventType/update``.
    public static var eventType: CommunicationEventType { .update }
    /// The full updated object.
    public var object: AnyCoatyObject

    /// Creates an Update.
    /// - Parameter object: the full updated object.
    public init(object: AnyCoatyObject) {
        self.object = object
    }

    /// Reads a received Update payload.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: decodes the object.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        try self.init(reader: PayloadReader(json: json, eventType: Self.eventType, registry: registry))
    }

    init(reader: PayloadReader) throws(CommunicationEventDataError) {
        object = try reader.requiredTopicObject("object")
    }

    /// The wire JSON.
    public var json: JSONObject { ["object": .object(object.json)] }
}

/// The payload of a Complete: `{"object":O,"privateData"?}`.
public struct CompleteEventData: CommunicationEventData, ObjectCarryingPayload, Hashable {
    /// ``CommunicationEventType/complete``.
    public static var eventType: CommunicationEventType { .complete }
    /// The object as the responder has it after the update.
    public var object: AnyCoatyObject
    /// Application data, if any.
    public var privateData: JSONObject?

    /// Creates a Complete.
    /// - Parameters:
    ///   - object: the object after the update.
    ///   - privateData: application data.
    public init(object: AnyCoatyObject, privateData: JSONObject? = nil) {
        self.object = object
        self.privateData = privateData
    }

    /// Reads a received Complete payload.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: decodes the object.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        try self.init(reader: PayloadReader(json: json, eventType: Self.eventType, registry: registry))
    }

    init(reader: PayloadReader) throws(CommunicationEventDataError) {
        object = try reader.requiredObject("object")
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

/// The payload of a Call: `{"parameters"?: [...] or {...}, "filter"?: ContextFilter}`.
public struct CallEventData: CommunicationEventData, Hashable {
    /// ``CommunicationEventType/call``.
    public static var eventType: CommunicationEventType { .call }
    /// The parameters: a JSON array (by position) or object (by name), or `nil`.
    public private(set) var parameters: JSONValue?
    /// The context filter a responder's context must match.
    public var filter: ContextFilter?

    /// Creates a Call with parameters by name.
    /// - Parameters:
    ///   - parameters: named parameters.
    ///   - filter: the context filter.
    public init(parameters: JSONObject? = nil, filter: ContextFilter? = nil) {
        self.parameters = parameters.map { .object($0) }
        self.filter = filter
    }

    /// Creates a Call with parameters by position.
    /// - Parameters:
    ///   - parameters: positional parameters.
    ///   - filter: the context filter.
    public init(positionalParameters parameters: [JSONValue], filter: ContextFilter? = nil) {
        self.parameters = .array(parameters)
        self.filter = filter
    }

    /// Reads a received Call payload: parameters must be an array or an object.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: unused.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        let reader = PayloadReader(json: json, eventType: Self.eventType, registry: registry)
        if let parameters = reader.optional("parameters") {
            switch parameters {
            case .array, .object: self.parameters = parameters
            default: throw reader.fail("'parameters' must be an array or an object")
            }
        }
        filter = try reader.decode(ContextFilter.self, "filter")
    }

    /// The parameter with this name, when parameters are given by name.
    /// - Parameter name: the parameter name.
    /// - Returns: its value, if present.
    public func parameter(_ name: String) -> JSONValue? {
        parameters?.objectValue?[name]
    }

    /// The parameter at this position, when parameters are given by position.
    /// - Parameter index: the position.
    /// - Returns: its value, if present.
    public func parameter(at index: Int) -> JSONValue? {
        guard let array = parameters?.arrayValue, array.indices.contains(index) else { return Optional.none }
        return array[index]
    }

    /// The wire JSON.
    public var json: JSONObject {
        var writer = PayloadWriter()
        writer.set("parameters", parameters)
        writer.set(encoding: "filter", filter)
        return writer.json
    }
}

/// The error of a Return: `{"code":int,"message":str}`.
public struct ReturnError: Sendable, Hashable, Error, CustomStringConvertible {
    /// The error code; −32768…−32000 are reserved.
    public var code: Int
    /// The error message.
    public var message: String

    /// Creates a Return error.
    /// - Parameters:
    ///   - code: the code.
    ///   - message: the message.
    public init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    /// The predefined error for invalid parameters: code −32602, message "Invalid params".
    public static let invalidParameters = ReturnError(code: -32602, message: "Invalid params")

    /// `message (code)`.
    public var description: String { "\(message) (\(code))" }
}

/// The payload of a Return: a result or an error, plus optional execution info.
public struct ReturnEventData: CommunicationEventData, Hashable {
    /// ``CommunicationEventType/return``.
    public static var eventType: CommunicationEventType { .return }
    /// The outcome: `.success(result)` (the result may be JSON `null`) or `.failure(error)`.
    public var outcome: Result<JSONValue, ReturnError>
    /// Information about the execution, if any.
    public var executionInfo: JSONValue?

    /// A successful Return.
    /// - Parameters:
    ///   - result: the result; `.null` is valid.
    ///   - executionInfo: execution info.
    public init(result: JSONValue, executionInfo: JSONValue? = nil) {
        outcome = .success(result)
        self.executionInfo = executionInfo
    }

    /// A failed Return.
    /// - Parameters:
    ///   - error: the error.
    ///   - executionInfo: execution info.
    public init(error: ReturnError, executionInfo: JSONValue? = nil) {
        outcome = .failure(error)
        self.executionInfo = executionInfo
    }

    /// The result, or `nil` for an error.
    public var result: JSONValue? { if case .success(let value) = outcome { value } else { nil } }
    /// The error, or `nil` for a result.
    public var error: ReturnError? { if case .failure(let error) = outcome { error } else { nil } }

    /// Reads a received Return payload: exactly one of `result` (which may be `null`) and `error`.
    /// - Parameters:
    ///   - json: the payload.
    ///   - registry: unused.
    /// - Throws: ``CommunicationEventDataError``.
    public init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        let reader = PayloadReader(json: json, eventType: Self.eventType, registry: registry)
        let result = json["result"]
        let error = reader.optional("error")
        switch (result, error) {
        case (let result?, nil):
            outcome = .success(result)
        case (nil, let error?):
            guard case .object(let object) = error, let code = object["code"]?.intValue,
                let message = object["message"]?.stringValue
            else {
                throw reader.fail("'error' must be {\"code\": integer, \"message\": string}")
            }
            outcome = .failure(ReturnError(code: code, message: message))
        default:
            throw reader.fail("exactly one of 'result' and 'error' must be given")
        }
        executionInfo = reader.optional("executionInfo")
    }

    /// The wire JSON.
    public var json: JSONObject {
        var writer = PayloadWriter()
        switch outcome {
        case .success(let result):
            writer.json["result"] = result
        case .failure(let error):
            writer.json["error"] = ["code": .int(Int64(error.code)), "message": .string(error.message)]
        }
        writer.set("executionInfo", executionInfo)
        return writer.json
    }
}
