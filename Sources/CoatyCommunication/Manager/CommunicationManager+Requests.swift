import CoatyFilter
public import CoatyModel
import CoatySync
import Logging
import Synchronization

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
        ) { incoming in
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
        ) { incoming in
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
        ) { incoming in
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
        ) { incoming in
            guard case .return(let value) = incoming.payload else { return nil }
            return ReturnEvent(sourceId: incoming.topic.sourceUUID, topic: incoming.topic, data: value)
        }
    }

    /// Subscribes the response topics, publishes the requests, and returns the responses routed to them (each one
    /// that ``RequestPlan/answers`` accepts, up to the plan's limit) and the run that ends their routing.
    func startRequest(_ plan: RequestPlan) async -> (ResponseQueue, RequestRun) {
        // Responses are few per request; the request headroom bounds a flood of them.
        let responses = ResponseQueue(limit: options.effectiveRequestHeadroom)
        let ids = plan.requests.map { _ in CoatyUUID() }
        var filters: [String] = []
        for id in ids {
            do throws(CommunicationError) {
                filters.append(try responseFilter(plan.responseEvent, correlationId: id))
            } catch {
                responses.finish(throwing: error)
                return (responses, RequestRun(releaser: ReleaseOnce {}))
            }
        }
        let limit = plan.limit
        let delivered = LockedBox(0)
        let counters = self.counters
        let metrics = self.metrics
        let answers = plan.answers
        let requestType = plan.requests.first?.event.eventType
        let tracer = self.tracer
        let span = requestType.map {
            RequestSpan(
                tracer: tracer,
                event: $0,
                correlationIds: ids,
                agentId: identity.objectId,
                namespace: options.namespace
            )
        }
        // The request span's context for the responders (MQTT 5 only).
        let traceProperties = requestTraceProperties(span)
        // When the requests were published, for the response-time metric of the first response.
        let published = LockedBox<ContinuousClock.Instant?>(nil)
        let sink: EventSink = { incoming in
            // One or two correlation ids (an Update of a custom type is published twice): a search, not a dictionary.
            guard let id = incoming.topic.correlationUUID, ids.contains(id) else { return }
            guard answers(incoming) else {
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
            if first, let span {
                let remote =
                    span.isRecording
                    ? TraceContextPropagation.remoteContext(in: incoming.userProperties, tracer: tracer) : nil
                span.responded(remote: remote)
            }
            if !responses.yield(incoming) { counters.observerOverflow() }
            if finish { responses.finish() }
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
            span?.finished(responses: delivered.mutex.withLock { $0 })
            for (id, filter) in routes { self?.releaseResponseRoute(id: id, filter: filter) }
        }
        responses.onEnd { releaser.release() }
        for (id, filter) in routes where !subscribeResponseNow(id: id, filter: filter, sink: sink) {
            retain(filter) { state in state.responseRoutes[id] = sink }
            await awaitEstablished(filter)
        }
        published.mutex.withLock { $0 = ContinuousClock.now }
        do throws(CommunicationError) {
            for (request, id) in zip(plan.requests, ids) {
                let topic = try twoWayTopicName(request.event, correlationId: id)
                span?.published(on: topic)
                try await send(TransportMessage(topic: topic, payload: request.payload, userProperties: traceProperties))
            }
        } catch {
            span?.failed(error)
            responses.finish(throwing: error)
        }
        if let timeout = plan.timeout {
            let token = timers.schedule(after: timeout) { responses.finish() }
            let released = timer.mutex.withLock { timer -> Bool in
                timer.token = token
                return timer.released
            }
            if released { timers.cancel(token) }
        }
        return (responses, RequestRun(releaser: releaser))
    }

    /// The user properties that carry a request span's context to the responders: also an unsampled one's, so the
    /// responders follow the requester's sampling decision (W3C `traceparent` flag 00). None without a tracer or over
    /// MQTT 3.1.1.
    private func requestTraceProperties(_ span: RequestSpan?) -> [MQTTUserProperty] {
        guard isTracing, let span else { return [] }
        return TraceContextPropagation.properties(of: span.context, tracer: tracer, transport: transport)
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
