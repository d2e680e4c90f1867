import CoatyFilter
public import CoatyModel
import CoatySync
import Logging
import Synchronization

/// One change of the objects an ``ObjectLifecycleSequence`` tracks, with all tracked objects after it.
///
/// Exactly the objects that changed are listed; at least one of ``added``, ``changed`` and
/// ``removed`` is not empty.
public struct ObjectLifecycleInfo: Sendable, Hashable {
    /// Objects advertised or discovered for the first time.
    public var added: [AnyCoatyObject]
    /// Objects advertised or discovered again with different content (Coaty's deep equality).
    public var changed: [AnyCoatyObject]
    /// Objects deadvertised, their descendants (by `parentObjectId`), and objects re-advertised
    /// so that they no longer pass the filter.
    public var removed: [AnyCoatyObject]
    /// Every tracked object after this change, in the order they were first seen.
    public var objects: [AnyCoatyObject]

    /// Creates a change set.
    /// - Parameters:
    ///   - added: new objects.
    ///   - changed: changed objects.
    ///   - removed: removed objects.
    ///   - objects: the tracked objects after the change.
    public init(
        added: [AnyCoatyObject] = [],
        changed: [AnyCoatyObject] = [],
        removed: [AnyCoatyObject] = [],
        objects: [AnyCoatyObject] = []
    ) {
        self.added = added
        self.changed = changed
        self.removed = removed
        self.objects = objects
    }

    /// The ids of ``added``.
    public var addedIds: [CoatyUUID] { added.map(\.objectId) }
    /// The ids of ``changed``.
    public var changedIds: [CoatyUUID] { changed.map(\.objectId) }
    /// The ids of ``removed``.
    public var removedIds: [CoatyUUID] { removed.map(\.objectId) }
}

/// The objects of one core type or object type that agents advertise, deadvertise and resolve,
/// as a sequence of ``ObjectLifecycleInfo`` change sets (Coaty's object lifecycle management).
///
/// Nothing happens until iteration starts: the first `next()` subscribes Advertise (of the type)
/// and Deadvertise, waits for the broker's acknowledgement, then publishes one Discover of the
/// type to find the objects already there. Advertise and Deadvertise events are applied in the
/// order they arrive. The subscriptions end when the iteration ends, the iterating task is
/// cancelled, or the iterator is released.
///
/// ```swift
/// let lifecycle = ObjectLifecycleController(communicationManager: manager)
/// for await info in try lifecycle.observeObjectLifecycle(objectType: "com.example.Light") {
///     print("added", info.addedIds, "removed", info.removedIds, "now", info.objects.count)
/// }
/// ```
///
/// A Deadvertise of an id also removes every tracked object whose `parentObjectId` is that id,
/// transitively; so objects whose parent is their agent's identity disappear with the agent (its
/// last will deadvertises the identity). Change sets are buffered like events of an
/// ``EventObservation``: nothing is dropped; a consumer that falls
/// ``CommunicationManager/Options/observerBufferLimit`` change sets behind holds the manager's
/// reads from the broker until it catches up (back-pressure).
public struct ObjectLifecycleSequence: AsyncSequence, Sendable {
    /// Never fails: a Discover that cannot be published is logged, and tracking goes on.
    public typealias Failure = Never

    let manager: CommunicationManager
    let advertise: CoatyTopic.Event
    let discover: DiscoverEventData
    let includes: @Sendable (AnyCoatyObject) -> Bool

    /// A sequence that tracks the objects `advertise` and `discover` find and `includes` accepts.
    /// - Parameters:
    ///   - manager: the communication manager.
    ///   - advertise: the Advertise event observed (a core type or an object type).
    ///   - discover: the Discover published once the subscriptions are acknowledged.
    ///   - includes: which objects are tracked.
    package init(
        manager: CommunicationManager,
        advertise: CoatyTopic.Event,
        discover: DiscoverEventData,
        includes: @escaping @Sendable (AnyCoatyObject) -> Bool
    ) {
        self.manager = manager
        self.advertise = advertise
        self.discover = discover
        self.includes = includes
    }

    /// An iterator whose observation has started: its routes are registered, their subscriptions
    /// acknowledged and the Discover published (for a caller that reports readiness after that).
    /// - Returns: the iterator.
    package func started() async -> Iterator {
        var iterator = Iterator(sequence: self)
        let (buffer, run) = await start()
        iterator.base = buffer
        iterator.run = run
        return iterator
    }

    /// Creates the iterator; the observation starts with its first `next()`.
    /// - Returns: the iterator.
    public func makeAsyncIterator() -> Iterator { Iterator(sequence: self) }

    /// The iterator of an ``ObjectLifecycleSequence``.
    public struct Iterator: AsyncIteratorProtocol {
        let sequence: ObjectLifecycleSequence
        var base: ObservationBuffer<ObjectLifecycleInfo>?
        var run: LifecycleRun?

        /// The next change set; the first call starts the observation.
        /// - Returns: the change set, or `nil` when the iterating task is cancelled.
        public mutating func next() async -> ObjectLifecycleInfo? {
            if base == nil {
                if run != nil { return nil }
                let (buffer, run) = await sequence.start()
                self.run = run
                base = buffer
            }
            return await base?.next(isolation: nil)
        }
    }

    /// Registers the routes, waits for the subscriptions, publishes the Discover.
    func start() async -> (ObservationBuffer<ObjectLifecycleInfo>, LifecycleRun) {
        let manager = self.manager
        let tracker = LifecycleTracker(includes: includes)
        let counters = manager.counters
        let discover = self.discover
        let correlationId = CoatyUUID()
        let filters: (advertise: String, deadvertise: String, resolve: String)
        do throws(CommunicationError) {
            filters = (
                try manager.subscriptionFilter(advertise),
                try manager.subscriptionFilter(.deadvertise),
                try manager.subscriptionFilter(.resolve, correlationId: correlationId)
            )
        } catch {
            // The filters were validated when the sequence was made; only a broken invariant lands here.
            manager.logger.error("Cannot observe an object lifecycle", metadata: ["error": "\(error)"])
            let ended = makeBuffer(filter: "", releaser: ReleaseOnce {})
            ended.finish()
            return (ended, LifecycleRun(buffer: ended))
        }
        let advertiseKey = advertise.level
        let deadvertiseKey = CoatyTopic.Event.deadvertise.level
        let token = manager.state.withLock { $0.makeToken() }
        let releaser = ReleaseOnce { [weak manager] in
            manager?.release(filters.advertise) { $0.setRoute(advertiseKey, token: token, sink: nil) }
            manager?.release(filters.deadvertise) { $0.setRoute(deadvertiseKey, token: token, sink: nil) }
            manager?.release(filters.resolve) { state in
                state.responseRoutes[correlationId] = nil
                state.standingResponseIds.remove(correlationId)
            }
        }
        let buffer = makeBuffer(filter: filters.advertise, releaser: releaser)
        let emit: @Sendable (ObjectLifecycleInfo?) -> Void = { info in
            guard let info else { return }
            buffer.push(info)
        }
        let advertiseSink: EventSink = { incoming in
            guard case .advertise(let data) = incoming.payload else { return }
            emit(tracker.track(data.object))
        }
        let deadvertiseSink: EventSink = { incoming in
            guard case .deadvertise(let data) = incoming.payload else { return }
            emit(tracker.remove(data.objectIds))
        }
        let resolveSink: EventSink = { incoming in
            guard case .resolve(let data) = incoming.payload, let object = data.object else { return }
            guard discover.matches(object) else {
                counters.invalidResponse(on: incoming.topic)
                return
            }
            emit(tracker.track(object))
        }
        manager.retain(filters.advertise) { $0.setRoute(advertiseKey, token: token, sink: advertiseSink) }
        manager.retain(filters.deadvertise) { $0.setRoute(deadvertiseKey, token: token, sink: deadvertiseSink) }
        manager.retain(filters.resolve) { state in
            state.standingResponseIds.insert(correlationId)
            state.responseRoutes[correlationId] = resolveSink
        }
        for filter in [filters.advertise, filters.deadvertise, filters.resolve] {
            await manager.awaitEstablished(filter)
        }
        do throws(CommunicationError) {
            let topic = try manager.topic(.discover, correlationId: correlationId)
            try await manager.send(TransportMessage(topic: topic.name, payload: discover.payloadBytes))
        } catch {
            manager.logger.warning(
                "Could not publish the initial Discover of an object lifecycle observation",
                metadata: ["error": "\(error)"]
            )
        }
        return (buffer, LifecycleRun(buffer: buffer))
    }

    /// The change-set buffer: back-pressured through the manager's gate, as an observation's.
    private func makeBuffer(filter: String, releaser: ReleaseOnce) -> ObservationBuffer<ObjectLifecycleInfo> {
        let counters = manager.counters
        return ObservationBuffer(
            limit: manager.options.observerBufferLimit,
            headroom: manager.options.effectiveRequestHeadroom,
            wakeups: manager.wakeups,
            gate: manager.gate,
            overflow: { counters.observerOverflow($0) },
            topicFilter: filter,
            releaser: releaser
        )
    }
}

/// Ends an object lifecycle observation (its buffer and routing) when the iterator is released.
final class LifecycleRun: Sendable {
    let buffer: ObservationBuffer<ObjectLifecycleInfo>

    init(buffer: ObservationBuffer<ObjectLifecycleInfo>) {
        self.buffer = buffer
    }

    deinit { buffer.finish() }
}

/// The tracked objects of one lifecycle observation, in first-seen order.
final class LifecycleTracker: Sendable {
    struct Registry {
        var objects: [CoatyUUID: AnyCoatyObject] = [:]
        var order: [CoatyUUID] = []

        var all: [AnyCoatyObject] { order.compactMap { objects[$0] } }

        mutating func remove(_ id: CoatyUUID) -> AnyCoatyObject? {
            guard let removed = objects.removeValue(forKey: id) else { return nil }
            order.removeAll { $0 == id }
            return removed
        }
    }

    let includes: @Sendable (AnyCoatyObject) -> Bool
    let registry = CoatyMutex(Registry())

    init(includes: @escaping @Sendable (AnyCoatyObject) -> Bool) {
        self.includes = includes
    }

    /// Applies an advertised or resolved object.
    /// - Returns: the change, or `nil` when nothing changed.
    func track(_ object: AnyCoatyObject) -> ObjectLifecycleInfo? {
        let included = includes(object)
        return registry.withLock { registry -> ObjectLifecycleInfo? in
            let id = object.objectId
            guard included else {
                // An object re-advertised so that it no longer passes the filter is gone for us.
                guard let removed = registry.remove(id) else { return nil }
                return ObjectLifecycleInfo(removed: [removed], objects: registry.all)
            }
            guard let previous = registry.objects[id] else {
                registry.objects[id] = object
                registry.order.append(id)
                return ObjectLifecycleInfo(added: [object], objects: registry.all)
            }
            guard !ObjectMatcher.equals(previous.jsonValue, object.jsonValue) else { return nil }
            registry.objects[id] = object
            return ObjectLifecycleInfo(changed: [object], objects: registry.all)
        }
    }

    /// Applies a Deadvertise: removes the objects and, transitively, their children.
    /// - Returns: the change, or `nil` when nothing tracked was removed.
    func remove(_ ids: [CoatyUUID]) -> ObjectLifecycleInfo? {
        registry.withLock { registry -> ObjectLifecycleInfo? in
            var removed: [AnyCoatyObject] = []
            var pending = ids
            var visited: Set<CoatyUUID> = []
            while let id = pending.popLast() {
                guard visited.insert(id).inserted else { continue }
                if let object = registry.remove(id) { removed.append(object) }
                for child in registry.order where registry.objects[child]?.parentObjectId == id {
                    pending.append(child)
                }
            }
            guard !removed.isEmpty else { return nil }
            return ObjectLifecycleInfo(removed: removed, objects: registry.all)
        }
    }
}
