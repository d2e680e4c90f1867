// The events observers and requesters receive: the source, the topic and the typed data.

import CoatyFilter
public import CoatyModel
import ServiceContextModule
import Tracing

/// A received Advertise.
public struct AdvertiseEvent<Object: CoatyObject>: Sendable {
    /// The identity id of the publishing agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The advertised object.
    public let object: Object
    /// Application data, if any.
    public let privateData: JSONObject?
}

/// A received Deadvertise.
public struct DeadvertiseEvent: Sendable {
    /// The identity id of the publishing agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The ids of the objects that are gone.
    public let objectIds: [CoatyUUID]
}

/// A received Channel event.
public struct ChannelEvent: Sendable {
    /// The identity id of the publishing agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The channel id.
    public let channelId: String
    /// The payload.
    public let data: ChannelEventData
}

/// A received Raw message (never a `coaty/…` topic).
public struct RawEvent: Sendable, Hashable {
    /// The topic.
    public let topic: String
    /// The payload bytes.
    public let payload: [UInt8]
    /// Whether the broker delivered a retained message.
    public let retain: Bool
}

/// What a responder needs to answer a request: the manager, the request's correlation id, and the span of its
/// handling when the manager's tracer records one.
struct ResponseRoute: Sendable {
    let manager: CommunicationManager
    let correlationId: CoatyUUID
    let span: HandledRequestSpan?

    /// Publishes the response and ends the span at the first one.
    func respond(_ event: CoatyTopic.Event, payload: JSONObject) async throws(CommunicationError) {
        try await manager.publishResponse(event, correlationId: correlationId, payload: payload, span: span)
    }

    /// Publishes the response with its payload already serialized.
    func respond(_ event: CoatyTopic.Event, payloadBytes: [UInt8]) async throws(CommunicationError) {
        try await manager.publishResponse(event, correlationId: correlationId, payloadBytes: payloadBytes, span: span)
    }

    /// Runs `body` with the handling's span as the current span context (nothing changes when not traced).
    func withTraceContext<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        guard let span else { return try await body() }
        return try await ServiceContext.withValue(span.context) { try await body() }
    }
}

/// A received Discover; answer it with ``resolve(object:relatedObjects:privateData:)``.
public struct DiscoverEvent: Sendable {
    /// The identity id of the requesting agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The payload.
    public let data: DiscoverEventData
    let route: ResponseRoute

    /// Runs `body` with the span of this request's handling as the current span context, so that the spans and
    /// the requests started inside it (a Query made to answer this one, say) are its children and join its trace.
    /// Without a tracer (the default) it just runs `body`.
    /// - Parameter body: the handling.
    /// - Returns: what `body` returns.
    public func withTraceContext<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        try await route.withTraceContext(body)
    }

    /// Publishes a Resolve to this Discover, in the responder's own namespace.
    ///
    /// - Parameters:
    ///   - object: the resolved object.
    ///   - relatedObjects: related objects.
    ///   - privateData: application data.
    /// - Throws: ``CommunicationError`` when neither object nor related objects are given, or when
    ///   publishing fails permanently.
    public func resolve(
        object: (any CoatyObject)?,
        relatedObjects: [any CoatyObject]? = nil,
        privateData: JSONObject? = nil
    ) async throws(CommunicationError) {
        // The common answer, one object: encoded straight into the payload's bytes, as an Advertise is, instead of
        // into a JSON tree that is then serialized (a quarter of a responder's instructions per request); an object
        // with its text (received, or read from a store, as a recorder's) as that text.
        if let object, relatedObjects == nil {
            let payload = try AnyCoatyObject.payloadBytes(object: object, privateData: privateData)
            try await route.respond(.resolve, payloadBytes: payload)
            return
        }
        var wrappedObject: AnyCoatyObject?
        if let object { wrappedObject = try AnyCoatyObject.wrapping(object) }
        var wrappedRelated: [AnyCoatyObject]?
        if let relatedObjects {
            var list: [AnyCoatyObject] = []
            for related in relatedObjects { list.append(try AnyCoatyObject.wrapping(related)) }
            wrappedRelated = list
        }
        let payload: ResolveEventData
        do throws(CommunicationEventDataError) {
            payload = try ResolveEventData(
                object: wrappedObject,
                relatedObjects: wrappedRelated,
                privateData: privateData
            )
        } catch {
            throw .invalidEventData(error)
        }
        try await route.respond(.resolve, payload: payload.json)
    }
}

/// A received Query; answer it with ``retrieve(objects:privateData:)``.
public struct QueryEvent: Sendable {
    /// The identity id of the requesting agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The payload.
    public let data: QueryEventData
    let route: ResponseRoute

    /// Runs `body` with the span of this request's handling as the current span context, so that the spans and
    /// the requests started inside it (a Query made to answer this one, say) are its children and join its trace.
    /// Without a tracer (the default) it just runs `body`.
    /// - Parameter body: the handling.
    /// - Returns: what `body` returns.
    public func withTraceContext<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        try await route.withTraceContext(body)
    }

    /// Publishes a Retrieve to this Query, in the responder's own namespace.
    ///
    /// - Parameters:
    ///   - objects: the retrieved objects (may be empty); each should match the query's types.
    ///   - privateData: application data.
    /// - Throws: ``CommunicationError`` when publishing fails permanently.
    public func retrieve(objects: [any CoatyObject], privateData: JSONObject? = nil) async throws(CommunicationError) {
        var wrapped: [AnyCoatyObject] = []
        wrapped.reserveCapacity(objects.count)
        for object in objects { wrapped.append(try AnyCoatyObject.wrapping(object)) }
        let payload = RetrieveEventData(objects: wrapped, privateData: privateData)
        try await route.respond(.retrieve, payload: payload.json)
    }
}

/// A received Update; answer it with ``complete(object:privateData:)``.
public struct UpdateEvent<Object: CoatyObject>: Sendable {
    /// The identity id of the requesting agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The full updated object.
    public let object: Object
    let route: ResponseRoute

    /// Runs `body` with the span of this request's handling as the current span context, so that the spans and
    /// the requests started inside it (a Query made to answer this one, say) are its children and join its trace.
    /// Without a tracer (the default) it just runs `body`.
    /// - Parameter body: the handling.
    /// - Returns: what `body` returns.
    public func withTraceContext<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        try await route.withTraceContext(body)
    }

    /// Publishes a Complete to this Update, in the responder's own namespace.
    ///
    /// - Parameters:
    ///   - object: the object after the update; its objectId must be the updated object's, or
    ///     the requester drops the response.
    ///   - privateData: application data.
    /// - Throws: ``CommunicationError`` when publishing fails permanently.
    public func complete(object: some CoatyObject, privateData: JSONObject? = nil) async throws(CommunicationError) {
        let payload = CompleteEventData(object: try AnyCoatyObject.wrapping(object), privateData: privateData)
        try await route.respond(.complete, payload: payload.json)
    }
}

/// A received Call; answer it with ``returnResult(_:executionInfo:)`` or
/// ``returnError(code:message:executionInfo:)``.
public struct CallEvent: Sendable {
    /// The identity id of the requesting agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The operation name.
    public let operation: String
    /// The payload (parameters and context filter).
    public let data: CallEventData
    let route: ResponseRoute

    /// Runs `body` with the span of this request's handling as the current span context, so that the spans and
    /// the requests started inside it (a Query made to answer this one, say) are its children and join its trace.
    /// Without a tracer (the default) it just runs `body`.
    /// - Parameter body: the handling.
    /// - Returns: what `body` returns.
    public func withTraceContext<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        try await route.withTraceContext(body)
    }

    /// Publishes a successful Return to this Call.
    ///
    /// - Parameters:
    ///   - result: the result; `.null` is valid.
    ///   - executionInfo: execution info.
    /// - Throws: ``CommunicationError`` when publishing fails permanently.
    public func returnResult(_ result: JSONValue, executionInfo: JSONValue? = nil) async throws(CommunicationError) {
        let payload = ReturnEventData(result: result, executionInfo: executionInfo)
        try await route.respond(.return, payload: payload.json)
    }

    /// Publishes a failed Return to this Call.
    ///
    /// - Parameters:
    ///   - code: the error code (−32768…−32000 are reserved; −32602 is "Invalid params").
    ///   - message: the error message.
    ///   - executionInfo: execution info.
    /// - Throws: ``CommunicationError`` when publishing fails permanently.
    public func returnError(code: Int, message: String, executionInfo: JSONValue? = nil)
        async throws(CommunicationError)
    {
        try await returnError(ReturnError(code: code, message: message), executionInfo: executionInfo)
    }

    /// Publishes a failed Return to this Call.
    ///
    /// - Parameters:
    ///   - error: the error, e.g. ``ReturnError/invalidParameters``.
    ///   - executionInfo: execution info.
    /// - Throws: ``CommunicationError`` when publishing fails permanently.
    public func returnError(_ error: ReturnError, executionInfo: JSONValue? = nil) async throws(CommunicationError) {
        let payload = ReturnEventData(error: error, executionInfo: executionInfo)
        try await route.respond(.return, payload: payload.json)
    }
}

/// A received Resolve (a response to your Discover).
public struct ResolveEvent: Sendable {
    /// The identity id of the responding agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The payload.
    public let data: ResolveEventData
}

/// A received Retrieve (a response to your Query).
public struct RetrieveEvent: Sendable {
    /// The identity id of the responding agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The payload.
    public let data: RetrieveEventData
}

/// A received Complete (a response to your Update).
public struct CompleteEvent: Sendable {
    /// The identity id of the responding agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The payload.
    public let data: CompleteEventData
}

/// A received Return (a response to your Call).
public struct ReturnEvent: Sendable {
    /// The identity id of the responding agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The payload.
    public let data: ReturnEventData
}

/// A received Associate (or disassociate).
public struct AssociateEvent: Sendable {
    /// The identity id of the publishing agent.
    public let sourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The IO context name.
    public let ioContextName: String
    /// The payload.
    public let data: AssociateEventData
}

/// A received IoValue.
public struct IoValueEvent: Sendable {
    /// The IoSource that published it (the topic's source id).
    public let ioSourceId: CoatyUUID
    /// The topic it arrived on.
    public let topic: CoatyTopic
    /// The payload bytes: UTF-8 JSON, or raw bytes when the IoSource has `useRawIoValues`.
    public let payload: [UInt8]

    /// The value as JSON.
    /// - Returns: the parsed value.
    /// - Throws: ``JSONParseError`` when the payload is not JSON (e.g. a raw IoValue).
    public func value() throws(JSONParseError) -> JSONValue {
        try JSONValue(parsing: payload)
    }
}
