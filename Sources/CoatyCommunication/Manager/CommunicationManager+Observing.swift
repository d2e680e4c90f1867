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
    /// Registers an observation of Coaty events on `event` (routed by its event level); `transform` makes each
    /// received event the observation's element or throws ``ObservationSkip`` to leave it out.
    func makeObservation<Element: Sendable>(
        _ event: CoatyTopic.Event,
        transform: @escaping @Sendable (IncomingEvent) throws(ObservationSkip) -> Element
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
        transform: @escaping @Sendable (IncomingEvent) throws(ObservationSkip) -> Element
    ) -> EventObservation<Element> {
        let token = state.withLock { $0.makeToken() }
        let releaser = ReleaseOnce { [weak self] in
            self?.release(filter) { state in state.setRoute(routeKey, token: token, sink: nil) }
        }
        let buffer = makeBuffer(of: Element.self, filter: filter, releaser: releaser)
        let sink: EventSink = { incoming in
            // A skipped event is thrown, not returned as `nil`: unspecialized generic code pays a runtime metadata
            // lookup for each `Element?` it handles, about a thousand instructions per event.
            do throws(ObservationSkip) { buffer.push(try transform(incoming)) } catch { return }
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
        return try makeObservation(.advertise(.observing(objectType: objectType))) { incoming throws(ObservationSkip) in
            guard case .advertise(let data) = incoming.payload, data.object.objectType == objectType,
                let object = data.object.as(Object.self)
            else { throw ObservationSkip() }
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
        try makeObservation(.advertise(.coreType(coreType))) { incoming throws(ObservationSkip) in
            guard case .advertise(let data) = incoming.payload else { throw ObservationSkip() }
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
        try makeObservation(.advertise(.observing(objectType: objectType))) { incoming throws(ObservationSkip) in
            guard case .advertise(let data) = incoming.payload, data.object.objectType == objectType else {
                throw ObservationSkip()
            }
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
        try makeObservation(.deadvertise) { incoming throws(ObservationSkip) in
            guard case .deadvertise(let data) = incoming.payload else { throw ObservationSkip() }
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
        try makeObservation(.channel(id: channelId)) { incoming throws(ObservationSkip) in
            guard case .channel(let data) = incoming.payload else { throw ObservationSkip() }
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
        return try makeObservation(.update(.observing(objectType: objectType))) {
            [weak self] incoming throws(ObservationSkip) in
            guard let self, case .update(let data) = incoming.payload, data.object.objectType == objectType,
                let object = data.object.as(Object.self)
            else { throw ObservationSkip() }
            return try self.updateEvent(incoming, object: object)
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
        try makeObservation(.update(.coreType(coreType))) { [weak self] incoming throws(ObservationSkip) in
            guard let self, case .update(let data) = incoming.payload else { throw ObservationSkip() }
            return try self.updateEvent(incoming, object: data.object)
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
        try makeObservation(.update(.observing(objectType: objectType))) {
            [weak self] incoming throws(ObservationSkip) in
            guard let self, case .update(let data) = incoming.payload, data.object.objectType == objectType else {
                throw ObservationSkip()
            }
            return try self.updateEvent(incoming, object: data.object)
        }
    }

    /// The Update request `incoming` carrying `object`, answered through this manager; `nil`
    /// without a correlation id.
    private func updateEvent<Object: CoatyObject>(_ incoming: IncomingEvent, object: Object) throws(ObservationSkip)
        -> UpdateEvent<Object>
    {
        guard let correlationId = incoming.topic.correlationUUID else { throw ObservationSkip() }
        return UpdateEvent(
            sourceId: incoming.topic.sourceUUID,
            topic: incoming.topic,
            object: object,
            route: responseRoute(.update, incoming, correlationId)
        )
    }

    /// How a request received by an observer is answered, with the span of its handling when the tracer records.
    private func responseRoute(
        _ event: CommunicationEventType,
        _ incoming: IncomingEvent,
        _ correlationId: CoatyUUID
    ) -> ResponseRoute {
        let span =
            isTracing
            ? HandledRequestSpan.start(
                tracer: tracer,
                event: event,
                topic: incoming.topic,
                correlationId: correlationId,
                agentId: identity.objectId,
                parent: TraceContextPropagation.remoteContext(in: incoming.userProperties, tracer: tracer)
            ) : nil
        return ResponseRoute(manager: self, correlationId: correlationId, span: span)
    }

    /// Observes Discover requests; answer with ``DiscoverEvent/resolve(object:relatedObjects:privateData:)``.
    ///
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError`` (only for an invalid namespace).
    public func observeDiscover() throws(CommunicationError) -> EventObservation<DiscoverEvent> {
        try makeObservation(.discover) { [weak self] incoming throws(ObservationSkip) in
            guard let self, case .discover(let data) = incoming.payload,
                let correlationId = incoming.topic.correlationUUID
            else { throw ObservationSkip() }
            return DiscoverEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                data: data,
                route: responseRoute(.discover, incoming, correlationId)
            )
        }
    }

    /// Observes Query requests; answer with ``QueryEvent/retrieve(objects:privateData:)``.
    ///
    /// - Returns: the observation.
    /// - Throws: ``CommunicationError`` (only for an invalid namespace).
    public func observeQuery() throws(CommunicationError) -> EventObservation<QueryEvent> {
        try makeObservation(.query) { [weak self] incoming throws(ObservationSkip) in
            guard let self, case .query(let data) = incoming.payload,
                let correlationId = incoming.topic.correlationUUID
            else { throw ObservationSkip() }
            return QueryEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                data: data,
                route: responseRoute(.query, incoming, correlationId)
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
        try makeObservation(.call(operation: operation)) { [weak self] incoming throws(ObservationSkip) in
            guard let self, case .call(let data) = incoming.payload,
                let correlationId = incoming.topic.correlationUUID,
                ObjectMatcher.handlesCall(filter: data.filter, context: context)
            else { throw ObservationSkip() }
            return CallEvent(
                sourceId: incoming.topic.sourceUUID,
                topic: incoming.topic,
                operation: operation,
                data: data,
                route: responseRoute(.call, incoming, correlationId)
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

/// Thrown by an observation's transform for a received event the observation leaves out (another object type, a
/// request without correlation id, a Call this agent does not handle).
struct ObservationSkip: Error {}
