import CoatyFilter
public import CoatyModel
import CoatySync
import Logging
import Synchronization

/// A mutex in a class, for state shared by escaping closures.
package final class LockedBox<Value: Sendable>: Sendable {
    let mutex: CoatyMutex<Value>

    init(_ value: Value) {
        mutex = CoatyMutex(value)
    }
}

// MARK: - Observing

extension CommunicationManager {
    /// Registers an observation of Coaty events on `event` (routed by its event level).
    func makeObservation<Element: Sendable>(
        _ event: CoatyTopic.Event,
        transform: @escaping @Sendable (IncomingEvent) -> Element?
    ) throws(CommunicationError) -> EventObservation<Element> {
        makeObservation(
            filter: try subscriptionFilter(event),
            routeKey: event.level,
            shared: Self.isSharedInGroup(event),
            transform: transform
        )
    }

    /// Whether observations of `event` subscribe in the shared-subscription group (see
    /// ``Options/sharedSubscriptionGroup``): the events that carry work — Advertise, Channel,
    /// Update, Discover, Query, Call. Deadvertise (agents and objects gone, which every member
    /// must learn), Associate and IoValue (addressed to each IO point) and the responses reach
    /// every observer.
    static func isSharedInGroup(_ event: CoatyTopic.Event) -> Bool {
        switch event {
        case .advertise, .channel, .update, .discover, .query, .call: true
        case .deadvertise, .associate, .ioValue, .resolve, .retrieve, .complete, .return: false
        }
    }

    /// Registers an observation of Coaty events received on `filter` and routed by `routeKey`;
    /// a `shared` one subscribes in the shared-subscription group when there is one.
    func makeObservation<Element: Sendable>(
        filter: String,
        routeKey: String,
        shared: Bool = false,
        transform: @escaping @Sendable (IncomingEvent) -> Element?
    ) -> EventObservation<Element> {
        let token = state.withLock { $0.makeToken() }
        let releaser = ReleaseOnce { [weak self] in
            self?.release(filter) { state in state.setRoute(routeKey, token: token, sink: nil) }
        }
        let buffer = makeBuffer(of: Element.self, filter: filter, releaser: releaser)
        let sink: EventSink = { incoming in
            guard let element = transform(incoming) else { return }
            buffer.push(element)
        }
        retain(filter, shared: shared) { state in state.setRoute(routeKey, token: token, sink: sink) }
        return EventObservation(
            buffer: buffer,
            registration: ObservationRegistration(manager: self, filter: filter, releaser: releaser)
        )
    }

    /// A new observation buffer, back-pressured through the manager's gate at
    /// ``Options/observerBufferLimit`` (see ``ObservationBuffering``).
    private func makeBuffer<Element>(
        of: Element.Type,
        filter: String,
        releaser: ReleaseOnce
    ) -> ObservationBuffer<Element> {
        let counters = self.counters
        return ObservationBuffer(
            limit: options.observerBufferLimit,
            headroom: options.effectiveRequestHeadroom,
            wakeups: wakeups,
            gate: gate,
            overflow: { counters.observerOverflow($0) },
            drops: DropReporter(logger: logger, interval: options.dropLogInterval, topicFilter: filter),
            topicFilter: filter,
            releaser: releaser
        )
    }

    /// Observes Advertise events of a Swift object type, yielding typed values.
    ///
    /// Subscribes `ADV::<objectType>`, or `ADV:<CoreType>` for a core type's own object type
    /// (then keeps only objects of exactly that object type). Register the type in the
    /// manager's ``registry`` so received objects decode into it directly.
    ///
    /// - Parameter type: the object type, e.g. `Light.self`.
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an object type that cannot be a topic level.
    public func observeAdvertise<Object: CoatyObject>(
        _ type: Object.Type
    ) throws(CommunicationError) -> EventObservation<AdvertiseEvent<Object>> {
        let objectType = Object.objectType
        return try makeObservation(.advertise(.observing(objectType: objectType))) { incoming in
            guard case .advertise(let data) = incoming.payload, data.object.objectType == objectType,
                let object = data.object.as(Object.self)
            else { return nil }
            return AdvertiseEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                object: object,
                privateData: data.privateData
            )
        }
    }

    /// Observes every Advertise of a core type (`ADV:<CoreType>`), whatever its object type.
    ///
    /// - Parameter coreType: the core type.
    /// - Returns: the observation; objects keep every field received (see ``AnyCoatyObject``).
    /// - Throws: ``CommunicationError`` (only for an invalid namespace).
    public func observeAdvertise(
        coreType: CoreType
    ) throws(CommunicationError) -> EventObservation<AdvertiseEvent<AnyCoatyObject>> {
        try makeObservation(.advertise(.coreType(coreType))) { incoming in
            guard case .advertise(let data) = incoming.payload else { return nil }
            return AdvertiseEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                object: data.object,
                privateData: data.privateData
            )
        }
    }

    /// Observes Advertise events of an object type given by name.
    ///
    /// - Parameter objectType: the object type, e.g. `com.example.Light` or `coaty.Task`.
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid object type.
    public func observeAdvertise(
        objectType: String
    ) throws(CommunicationError) -> EventObservation<AdvertiseEvent<AnyCoatyObject>> {
        try makeObservation(.advertise(.observing(objectType: objectType))) { incoming in
            guard case .advertise(let data) = incoming.payload, data.object.objectType == objectType else { return nil }
            return AdvertiseEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                object: data.object,
                privateData: data.privateData
            )
        }
    }

    /// Observes Deadvertise events.
    ///
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError`` (only for an invalid namespace).
    public func observeDeadvertise() throws(CommunicationError) -> EventObservation<DeadvertiseEvent> {
        try makeObservation(.deadvertise) { incoming in
            guard case .deadvertise(let data) = incoming.payload else { return nil }
            return DeadvertiseEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                objectIds: data.objectIds
            )
        }
    }

    /// Observes Channel events on a channel.
    ///
    /// - Parameter channelId: the channel id (characters `[A-Za-z0-9.-_]`).
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid channel id.
    public func observeChannel(_ channelId: String) throws(CommunicationError) -> EventObservation<ChannelEvent> {
        try makeObservation(.channel(id: channelId)) { incoming in
            guard case .channel(let data) = incoming.payload else { return nil }
            return ChannelEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                channelId: channelId,
                data: data
            )
        }
    }

    /// Observes Update requests for a Swift object type; answer each with
    /// ``UpdateEvent/complete(object:privateData:)``.
    ///
    /// - Parameter type: the object type.
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid object type.
    public func observeUpdate<Object: CoatyObject>(
        _ type: Object.Type
    ) throws(CommunicationError) -> EventObservation<UpdateEvent<Object>> {
        let objectType = Object.objectType
        return try makeObservation(.update(.observing(objectType: objectType))) { [weak self] incoming in
            guard let self, case .update(let data) = incoming.payload, data.object.objectType == objectType,
                let object = data.object.as(Object.self)
            else { return nil }
            return self.updateEvent(incoming, object: object)
        }
    }

    /// Observes every Update request of a core type (`UPD:<CoreType>`).
    ///
    /// - Parameter coreType: the core type.
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError`` (only for an invalid namespace).
    public func observeUpdate(coreType: CoreType) throws(CommunicationError) -> EventObservation<
        UpdateEvent<AnyCoatyObject>
    > {
        try makeObservation(.update(.coreType(coreType))) { [weak self] incoming in
            guard let self, case .update(let data) = incoming.payload else { return nil }
            return self.updateEvent(incoming, object: data.object)
        }
    }

    /// Observes Update requests of an object type given by name; answer each with
    /// ``UpdateEvent/complete(object:privateData:)``.
    ///
    /// Subscribes `UPD::<objectType>`, or `UPD:<CoreType>` for a core type's own object type
    /// (then keeps only objects of exactly that object type), as ``observeAdvertise(objectType:)``.
    ///
    /// ```swift
    /// for await update in try manager.observeUpdate(objectType: "com.example.Light") {
    ///     try await update.complete(object: update.object)
    /// }
    /// ```
    ///
    /// - Parameter objectType: the object type, e.g. `com.example.Light` or `coaty.Task`.
    /// - Returns: the observation; objects keep every field received (see ``AnyCoatyObject``).
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid object type.
    public func observeUpdate(objectType: String) throws(CommunicationError) -> EventObservation<
        UpdateEvent<AnyCoatyObject>
    > {
        try makeObservation(.update(.observing(objectType: objectType))) { [weak self] incoming in
            guard let self, case .update(let data) = incoming.payload, data.object.objectType == objectType else {
                return nil
            }
            return self.updateEvent(incoming, object: data.object)
        }
    }

    /// The Update request `incoming` carrying `object`, answered through this manager; `nil`
    /// without a correlation id.
    private func updateEvent<Object: CoatyObject>(_ incoming: IncomingEvent, object: Object) -> UpdateEvent<Object>? {
        guard let correlationId = incoming.topic.correlationUUID else { return nil }
        return UpdateEvent(
            sourceId: incoming.topic.sourceUUID,
            topic: incoming.topic,
            object: object,
            route: ResponseRoute(manager: self, correlationId: correlationId)
        )
    }

    /// Observes Discover requests; answer with ``DiscoverEvent/resolve(object:relatedObjects:privateData:)``.
    ///
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError`` (only for an invalid namespace).
    public func observeDiscover() throws(CommunicationError) -> EventObservation<DiscoverEvent> {
        try makeObservation(.discover) { [weak self] incoming in
            guard let self, case .discover(let data) = incoming.payload,
                let correlationId = incoming.topic.correlationUUID
            else { return nil }
            return DiscoverEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                data: data,
                route: ResponseRoute(manager: self, correlationId: correlationId)
            )
        }
    }

    /// Observes Query requests; answer with ``QueryEvent/retrieve(objects:privateData:)``.
    ///
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError`` (only for an invalid namespace).
    public func observeQuery() throws(CommunicationError) -> EventObservation<QueryEvent> {
        try makeObservation(.query) { [weak self] incoming in
            guard let self, case .query(let data) = incoming.payload,
                let correlationId = incoming.topic.correlationUUID
            else { return nil }
            return QueryEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                data: data,
                route: ResponseRoute(manager: self, correlationId: correlationId)
            )
        }
    }

    /// Observes Call requests of an operation that this agent handles in `context`.
    ///
    /// Coaty's rule: a call with a context filter is handled when `context` is given and matches
    /// it; a call with a filter is not handled without a context; a call without filter is
    /// always handled.
    ///
    /// - Parameters:
    ///   - operation: the operation name.
    ///   - context: the responder's context object, matched against each call's filter.
    /// - Returns: the observation of the calls to handle.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid operation name.
    public func observeCall(
        operation: String,
        context: JSONValue? = nil
    ) throws(CommunicationError) -> EventObservation<CallEvent> {
        try makeObservation(.call(operation: operation)) { [weak self] incoming in
            guard let self, case .call(let data) = incoming.payload,
                let correlationId = incoming.topic.correlationUUID,
                ObjectMatcher.handlesCall(filter: data.filter, context: context)
            else { return nil }
            return CallEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                operation: operation,
                data: data,
                route: ResponseRoute(manager: self, correlationId: correlationId)
            )
        }
    }

    /// Observes Raw messages on an MQTT topic filter (`+`/`#` wildcards). Messages on `coaty/…`
    /// topics are never delivered, even when the filter matches them.
    ///
    /// When several subscribed filters of this agent match one topic, brokers such as
    /// mosquitto deliver one copy per filter, and each matching observer receives each copy.
    ///
    /// - Parameter topicFilter: the MQTT topic filter.
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid filter.
    public func observeRaw(_ topicFilter: String) throws(CommunicationError) -> EventObservation<RawEvent> {
        do throws(CoatyTopicError) {
            try CoatyTopic.validateRawSubscriptionFilter(topicFilter)
        } catch {
            throw .invalidTopic(error)
        }
        let token = state.withLock { $0.makeToken() }
        let releaser = ReleaseOnce { [weak self] in
            self?.release(topicFilter) { state in state.rawRoutes[token] = nil }
        }
        let buffer = makeBuffer(of: RawEvent.self, filter: topicFilter, releaser: releaser)
        let sink: RawSink = { event in buffer.push(event) }
        retain(topicFilter) { state in state.rawRoutes[token] = (topicFilter, sink) }
        return EventObservation(
            buffer: buffer,
            registration: ObservationRegistration(manager: self, filter: topicFilter, releaser: releaser)
        )
    }
}

// MARK: - IO routing events

extension CommunicationManager {
    /// Observes Associate events of an IO context.
    ///
    /// - Parameter ioContextName: the IO context name.
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid name.
    public func observeAssociate(ioContextName: String) throws(CommunicationError) -> EventObservation<AssociateEvent> {
        try makeObservation(.associate(ioContextName: ioContextName)) { incoming in
            guard case .associate(let data) = incoming.payload else { return nil }
            return AssociateEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                ioContextName: ioContextName,
                data: data
            )
        }
    }

    /// Publishes an Associate (or, without route, a disassociate) for an IO context.
    ///
    /// - Parameters:
    ///   - ioContextName: the IO context name.
    ///   - data: the association.
    /// - Throws: ``CommunicationError`` for an invalid name or a permanent transport failure.
    public func publishAssociate(ioContextName: String, data: AssociateEventData) async throws(CommunicationError) {
        let topic = try topic(.associate(ioContextName: ioContextName))
        try await send(TransportMessage(topic: topic.name, payload: data.payloadBytes))
    }

    /// The Coaty route of an IoSource's values: `coaty/3/<namespace>/IOV/<ioSourceId>`.
    ///
    /// - Parameter ioSourceId: the IoSource.
    /// - Returns: the topic.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` when the id is not a version 4 UUID.
    public func ioValueTopic(ioSourceId: CoatyUUID) throws(CommunicationError) -> String {
        do throws(CoatyTopicError) {
            return try CoatyTopic(event: .ioValue, namespace: options.namespace, sourceId: ioSourceId).name
        } catch {
            throw .invalidTopic(error)
        }
    }

    /// Publishes an IoValue of an IoSource as JSON on its Coaty route. (For an external route,
    /// a topic outside `coaty/`, use ``publishRaw(topic:payload:retain:)``.)
    ///
    /// - Parameters:
    ///   - value: the value.
    ///   - ioSourceId: the IoSource publishing it (the topic's source id).
    /// - Throws: ``CommunicationError`` for a permanent transport failure.
    public func publishIoValue(_ value: JSONValue, ioSourceId: CoatyUUID) async throws(CommunicationError) {
        try await publishIoValue(rawBytes: value.serializedBytes(), ioSourceId: ioSourceId)
    }

    /// Publishes a raw IoValue (an IoSource with `useRawIoValues`) on its Coaty route.
    ///
    /// - Parameters:
    ///   - rawBytes: the bytes.
    ///   - ioSourceId: the IoSource publishing it.
    /// - Throws: ``CommunicationError`` for a permanent transport failure.
    public func publishIoValue(rawBytes: [UInt8], ioSourceId: CoatyUUID) async throws(CommunicationError) {
        try await send(TransportMessage(topic: try ioValueTopic(ioSourceId: ioSourceId), payload: rawBytes))
    }

    /// Observes the IoValues of one IoSource on its Coaty route.
    ///
    /// - Parameter ioSourceId: the IoSource.
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` when the id is not a version 4 UUID.
    public func observeIoValue(ioSourceId: CoatyUUID) throws(CommunicationError) -> EventObservation<IoValueEvent> {
        var filter = try ioValueTopic(ioSourceId: ioSourceId)
        if options.crossNamespacing {
            filter = "coaty/3/+/IOV/" + ioSourceId.uuidString
        }
        return makeObservation(filter: filter, routeKey: CoatyTopic.Event.ioValue.level) { incoming in
            guard case .ioValue(let bytes) = incoming.payload, incoming.topic.sourceUUID == ioSourceId else {
                return nil
            }
            return IoValueEvent(ioSourceId: ioSourceId, topic: incoming.topic, payload: bytes)
        }
    }
}

// MARK: - Publishing one-way events

extension CommunicationManager {
    /// Publishes an Advertise of an object: on `ADV:<CoreType>`, and also on `ADV::<objectType>`
    /// when the object type is not the core type's own. Deferred while offline.
    ///
    /// - Parameters:
    ///   - object: the object.
    ///   - privateData: application data.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError`` for an invalid object type or a permanent transport failure.
    public func publishAdvertise<Object: CoatyObject>(
        _ object: Object,
        privateData: JSONObject? = nil,
        qos: TransportQoS = .atMostOnce
    ) async throws(CommunicationError) {
        let payload = try AnyCoatyObject.payloadBytes(object: object, privateData: privateData)
        // Every topic is built before anything is sent: an invalid object type sends nothing.
        for topic in try advertiseTopicNames(objectType: object.objectType, coreType: object.coreType) {
            try await send(TransportMessage(topic: topic, payload: payload, qos: qos))
        }
    }

    /// Publishes a Deadvertise of object ids.
    ///
    /// - Parameters:
    ///   - objectIds: the ids of the objects that are gone.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError`` for a permanent transport failure.
    public func publishDeadvertise(_ objectIds: [CoatyUUID], qos: TransportQoS = .atMostOnce)
        async throws(CommunicationError)
    {
        let topic = try topic(.deadvertise)
        try await send(
            TransportMessage(
                topic: topic.name,
                payload: DeadvertiseEventData(objectIds: objectIds).payloadBytes,
                qos: qos
            )
        )
    }

    /// Publishes a Channel event with one object (`{"object":…}`).
    ///
    /// - Parameters:
    ///   - channelId: the channel id.
    ///   - object: the object.
    ///   - privateData: application data.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError`` for an invalid channel id or a permanent transport failure.
    public func publishChannel<Object: CoatyObject>(
        _ channelId: String,
        object: Object,
        privateData: JSONObject? = nil,
        qos: TransportQoS = .atMostOnce
    ) async throws(CommunicationError) {
        let payload = try AnyCoatyObject.payloadBytes(object: object, privateData: privateData)
        let topic = try topic(.channel(id: channelId))
        try await send(TransportMessage(topic: topic.name, payload: payload, qos: qos))
    }

    /// Publishes a Channel event with an array of objects (`{"objects":[…]}`).
    ///
    /// - Parameters:
    ///   - channelId: the channel id.
    ///   - objects: the objects.
    ///   - privateData: application data.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError`` for an invalid channel id or a permanent transport failure.
    public func publishChannel(
        _ channelId: String,
        objects: [any CoatyObject],
        privateData: JSONObject? = nil,
        qos: TransportQoS = .atMostOnce
    ) async throws(CommunicationError) {
        var wrapped: [AnyCoatyObject] = []
        for object in objects { wrapped.append(try AnyCoatyObject.wrapping(object)) }
        try await publishChannel(
            channelId,
            data: ChannelEventData(objects: wrapped, privateData: privateData),
            qos: qos
        )
    }

    /// Publishes a Channel event payload.
    ///
    /// - Parameters:
    ///   - channelId: the channel id.
    ///   - data: the payload.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError`` for an invalid channel id or a permanent transport failure.
    public func publishChannel(
        _ channelId: String,
        data: ChannelEventData,
        qos: TransportQoS = .atMostOnce
    ) async throws(CommunicationError) {
        let topic = try topic(.channel(id: channelId))
        try await send(TransportMessage(topic: topic.name, payload: data.payloadBytes, qos: qos))
    }

    /// Publishes a Raw message on a topic that does not start with `coaty/`.
    ///
    /// - Parameters:
    ///   - topic: the MQTT topic name.
    ///   - payload: the bytes.
    ///   - retain: whether the broker keeps the message for future subscribers.
    ///   - qos: this publication's QoS, when it should be higher than ``Options/qos``.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid or `coaty/` topic.
    public func publishRaw(
        topic: String,
        payload: [UInt8],
        retain: Bool = false,
        qos: TransportQoS = .atMostOnce
    ) async throws(CommunicationError) {
        do throws(CoatyTopicError) {
            try CoatyTopic.validateRawTopic(topic)
        } catch {
            throw .invalidTopic(error)
        }
        try await send(TransportMessage(topic: topic, payload: payload, qos: qos, retain: retain))
    }
}

// MARK: - Two-way requests

extension CommunicationManager {
    /// Prepares a Discover; iterating the result publishes it and yields the valid Resolves.
    ///
    /// A Resolve whose object does not match the Discover's ids or types is dropped and counted.
    ///
    /// - Parameter data: the Discover, e.g. `.coreTypes([.identity])` or `.objectId(id)`.
    /// - Returns: the lazy response sequence.
    public func publishDiscover(_ data: DiscoverEventData) -> ResponseSequence<ResolveEvent> {
        ResponseSequence(
            manager: self,
            requests: [.init(event: .discover, payload: data.payloadBytes)],
            responseEvent: .resolve
        ) { incoming, _ in
            guard case .resolve(let resolve) = incoming.payload else { return nil }
            if let object = resolve.object, !data.matches(object) { return nil }
            return ResolveEvent(sourceId: incoming.topic.sourceUUID, topic: incoming.topic, data: resolve)
        }
    }

    /// Prepares a Query; iterating the result publishes it and yields the valid Retrieves.
    ///
    /// A Retrieve with an object of a type that was not queried is dropped and counted.
    ///
    /// - Parameter data: the Query.
    /// - Returns: the lazy response sequence.
    public func publishQuery(_ data: QueryEventData) -> ResponseSequence<RetrieveEvent> {
        ResponseSequence(
            manager: self,
            requests: [.init(event: .query, payload: data.payloadBytes)],
            responseEvent: .retrieve
        ) { incoming, _ in
            guard case .retrieve(let retrieve) = incoming.payload,
                retrieve.objects.allSatisfy({ data.matchesType(of: $0) })
            else { return nil }
            return RetrieveEvent(sourceId: incoming.topic.sourceUUID, topic: incoming.topic, data: retrieve)
        }
    }

    /// Prepares an Update; iterating the result publishes it (twice, with one correlation id
    /// each, when the object type is not its core type's own) and yields the merged Completes.
    ///
    /// A Complete whose object has another objectId is dropped and counted.
    ///
    /// - Parameter object: the full updated object.
    /// - Returns: the lazy response sequence.
    /// - Throws: ``CommunicationError`` when the object cannot be encoded or its object type
    ///   cannot be a topic level.
    public func publishUpdate<Object: CoatyObject>(
        _ object: Object
    ) throws(CommunicationError) -> ResponseSequence<CompleteEvent> {
        let wrapped = try AnyCoatyObject.wrapping(object)
        let payload = UpdateEventData(object: wrapped).payloadBytes
        let filters = CoatyTopic.TypeFilter.publishing(objectType: wrapped.objectType, coreType: wrapped.coreType)
        for filter in filters { _ = try topic(.update(filter), correlationId: CoatyUUID()) }
        let objectId = wrapped.objectId
        return ResponseSequence(
            manager: self,
            requests: filters.map { .init(event: .update($0), payload: payload) },
            responseEvent: .complete
        ) { incoming, _ in
            guard case .complete(let complete) = incoming.payload, complete.object.objectId == objectId else {
                return nil
            }
            return CompleteEvent(sourceId: incoming.topic.sourceUUID, topic: incoming.topic, data: complete)
        }
    }

    /// Prepares a Call of an operation; iterating the result publishes it and yields the Returns.
    ///
    /// - Parameters:
    ///   - operation: the operation name.
    ///   - data: parameters and context filter.
    /// - Returns: the lazy response sequence.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid operation name.
    public func publishCall(
        _ operation: String,
        data: CallEventData = CallEventData()
    ) throws(CommunicationError) -> ResponseSequence<ReturnEvent> {
        _ = try topic(.call(operation: operation), correlationId: CoatyUUID())
        return ResponseSequence(
            manager: self,
            requests: [.init(event: .call(operation: operation), payload: data.payloadBytes)],
            responseEvent: .return
        ) { incoming, _ in
            guard case .return(let value) = incoming.payload else { return nil }
            return ReturnEvent(sourceId: incoming.topic.sourceUUID, topic: incoming.topic, data: value)
        }
    }

    /// Subscribes the response topics, publishes the requests, and returns the response stream.
    func startRequest<Response: Sendable>(
        _ sequence: ResponseSequence<Response>
    ) async -> (AsyncThrowingStream<Response, any Error>, RequestRun) {
        // Responses are few per request; the request headroom bounds a flood of them.
        let (stream, continuation) = AsyncThrowingStream<Response, any Error>.makeStream(
            bufferingPolicy: .bufferingNewest(max(1, options.effectiveRequestHeadroom))
        )
        let ids = sequence.requests.map { _ in CoatyUUID() }
        var filters: [String] = []
        for id in ids {
            do throws(CommunicationError) {
                filters.append(try subscriptionFilter(sequence.responseEvent, correlationId: id))
            } catch {
                continuation.finish(throwing: error)
                return (stream, RequestRun(releaser: ReleaseOnce {}))
            }
        }
        var indexById: [CoatyUUID: Int] = [:]
        for (index, id) in ids.enumerated() { indexById[id] = index }
        let limit = sequence.limit
        let delivered = LockedBox(0)
        let counters = self.counters
        let metrics = self.metrics
        let accept = sequence.accept
        let requestIndex = indexById
        let requestType = sequence.requests.first?.event.eventType
        // When the requests were published, for the response-time metric of the first response.
        let published = LockedBox<ContinuousClock.Instant?>(nil)
        let sink: EventSink = { incoming in
            guard let id = incoming.topic.correlationUUID, let index = requestIndex[id] else { return }
            guard let response = accept(incoming, index) else {
                counters.invalidResponse(on: incoming.topic)
                return
            }
            let (deliver, finish, first) = delivered.mutex.withLock { count -> (Bool, Bool, Bool) in
                if let limit, count >= limit { return (false, false, false) }
                count += 1
                return (true, limit.map { count >= $0 } ?? false, count == 1)
            }
            guard deliver else { return }
            if first, let requestType, let start = published.mutex.withLock({ $0 }) {
                metrics.responseArrived(for: requestType, after: ContinuousClock.now - start)
            }
            if case .dropped = continuation.yield(response) { counters.observerOverflow() }
            if finish { continuation.finish() }
        }
        // The timeout's token, and whether the request was already released (it can end on the
        // transport's delivery thread before its timeout is scheduled).
        let timer = LockedBox<(released: Bool, token: Int?)>((false, nil))
        let timers = requestTimers
        let routes = Array(zip(ids, filters))
        let releaser = ReleaseOnce { [weak self] in
            let token = timer.mutex.withLock { timer -> Int? in
                timer.released = true
                return timer.token
            }
            if let token { timers.cancel(token) }
            for (id, filter) in routes { self?.releaseResponseRoute(id: id, filter: filter) }
        }
        continuation.onTermination = { _ in releaser.release() }
        for (id, filter) in routes where !subscribeResponseNow(id: id, filter: filter, sink: sink) {
            retain(filter) { state in state.responseRoutes[id] = sink }
            await awaitEstablished(filter)
        }
        published.mutex.withLock { $0 = ContinuousClock.now }
        do throws(CommunicationError) {
            for (request, id) in zip(sequence.requests, ids) {
                let topic = try topic(request.event, correlationId: id)
                try await send(TransportMessage(topic: topic.name, payload: request.payload))
            }
        } catch {
            continuation.finish(throwing: error)
        }
        if let timeout = sequence.timeout {
            let token = timers.schedule(after: timeout) { continuation.finish() }
            let released = timer.mutex.withLock { timer -> Bool in
                timer.token = token
                return timer.released
            }
            if released { timers.cancel(token) }
        }
        return (stream, RequestRun(releaser: releaser))
    }

    /// Routes responses of `id` and subscribes their topic without waiting
    /// (``CoatyTransport/subscribeNow(_:qos:acknowledged:)``): no reference counting (the filter
    /// is unique to the request) and no task awaits the acknowledgement. Returns `false` when the
    /// transport cannot (offline, or not supported); the caller then subscribes the counted way.
    func subscribeResponseNow(id: CoatyUUID, filter: String, sink: @escaping EventSink) -> Bool {
        let started = state.withLock { state -> Bool in
            guard state.started else { return false }
            state.responseRoutes[id] = sink
            state.directResponseFilters.insert(filter)
            return true
        }
        guard started else { return false }
        let logger = self.logger
        let queued = transport.subscribeNow(filter, qos: options.qos) { error in
            guard let error else { return }
            logger.debug("Response subscription failed", metadata: ["filter": "\(filter)", "error": "\(error)"])
        }
        if !queued {
            state.withLock { state in
                state.responseRoutes[id] = nil
                state.directResponseFilters.remove(filter)
            }
        }
        return queued
    }

    /// Ends the routing of a request's responses and its response subscription.
    func releaseResponseRoute(id: CoatyUUID, filter: String) {
        let direct = state.withLock { state -> Bool in
            guard state.directResponseFilters.remove(filter) != nil else { return false }
            state.responseRoutes[id] = nil
            return true
        }
        if direct {
            transport.unsubscribeNow(filter) { _ in }
        } else {
            release(filter) { state in state.responseRoutes[id] = nil }
        }
    }
}

// MARK: Routes for the agent runtime

extension CommunicationManager {
    /// Hands every received event of `events` to `sink` (decoded once, without an observer's
    /// buffer) from the moment the broker acknowledged their subscriptions until the returned
    /// closure is called. For controllers that keep state up to date from events, e.g. the
    /// object cache: the sink runs on the routing thread and must return promptly.
    /// - Parameters:
    ///   - events: the one-way events to route (their namespace is this manager's).
    ///   - sink: receives each event.
    /// - Returns: ends the routes and releases their subscriptions; call it once.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an event that cannot be a topic.
    package func route(
        _ events: [CoatyTopic.Event],
        to sink: @escaping EventSink
    ) async throws(CommunicationError) -> @Sendable () -> Void {
        var built: [(key: String, filter: String)] = []
        for event in events { built.append((key: event.level, filter: try subscriptionFilter(event))) }
        let routes = built
        let token = state.withLock { $0.makeToken() }
        for route in routes {
            retain(route.filter) { $0.setRoute(route.key, token: token, sink: sink) }
        }
        for route in routes { await awaitEstablished(route.filter) }
        let ended = Atomic(false)
        return { [weak self] in
            guard let self, !ended.exchange(true, ordering: .relaxed) else { return }
            for route in routes {
                self.release(route.filter) { $0.setRoute(route.key, token: token, sink: nil) }
            }
        }
    }
}
