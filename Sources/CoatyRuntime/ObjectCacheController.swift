public import CoatyCommunication
import CoatyFilter
public import CoatyModel
import CoatySync

/// Resolves objects by objectId with a Discover and keeps them in a bounded cache (Coaty's
/// `ObjectCacheController`).
///
/// ``resolve(objectId:)`` answers from the cache, or publishes a Discover of the id and caches
/// the first Resolve whose object is accepted. While ``run()`` runs, an Advertise of a cached
/// object replaces it, and a Deadvertise of its id removes it; when the cache is full, the
/// object used least recently is evicted.
///
/// ```swift
/// let cache = ObjectCacheController(communicationManager: manager, coreTypes: [.task])
/// // run it in an AgentContainer (or call run() in a task group), then:
/// if let task = try await cache.resolve(CoatyTask.self, objectId: id) { print(task.name) }
/// ```
///
/// As in Coaty JS, concurrent resolves of an id that is not cached share one Discover; unlike
/// Coaty JS, a resolve gives up after ``resolveTimeout``.
public final class ObjectCacheController: Controller {
    private struct Entry {
        var object: AnyCoatyObject
        var lastUse: UInt64
    }

    private struct Cache {
        var entries: [CoatyUUID: Entry] = [:]
        var clock: UInt64 = 0
        /// The ids being discovered, with the resolves waiting for the outcome.
        var pending: [CoatyUUID: [CheckedContinuation<AnyCoatyObject?, Never>]] = [:]

        mutating func touch(_ id: CoatyUUID) -> AnyCoatyObject? {
            guard entries[id] != nil else { return nil }
            clock += 1
            entries[id]?.lastUse = clock
            return entries[id]?.object
        }

        mutating func insert(_ object: AnyCoatyObject, capacity: Int) {
            clock += 1
            if entries[object.objectId] == nil, entries.count >= capacity,
                let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key
            {
                entries[oldest] = nil
            }
            entries[object.objectId] = Entry(object: object, lastUse: clock)
        }
    }

    /// The communication manager it discovers and observes with.
    public let communicationManager: CommunicationManager
    /// The core types of the objects it caches; Advertises of these core types update the cache.
    public let coreTypes: [CoreType]
    /// The most objects kept; at least 1.
    public let capacity: Int
    /// How long ``resolve(objectId:)`` waits for a Resolve, or `nil` to wait until the task is
    /// cancelled.
    public let resolveTimeout: Duration?

    private let includes: @Sendable (AnyCoatyObject) -> Bool
    private let cache = CoatyMutex(Cache())
    private let runOnce = SingleRun()

    /// Creates the controller.
    /// - Parameters:
    ///   - communicationManager: the agent's communication manager.
    ///   - coreTypes: the core types of the objects to cache; every core type by default (Coaty
    ///     JS caches one, `CoatyObject` by default).
    ///   - capacity: the most objects kept (at least 1); 1000 by default.
    ///   - resolveTimeout: how long a resolve waits for a Resolve; 10 seconds by default, `nil`
    ///     for no limit.
    ///   - filter: whether to accept a resolved object (Coaty JS's `objectFilter`); every object
    ///     by default. Keep it quick.
    public init(
        communicationManager: CommunicationManager,
        coreTypes: [CoreType] = CoreType.allCases,
        capacity: Int = 1000,
        resolveTimeout: Duration? = .seconds(10),
        filter: @escaping @Sendable (AnyCoatyObject) -> Bool = { _ in true }
    ) {
        self.communicationManager = communicationManager
        self.coreTypes = coreTypes
        self.capacity = max(1, capacity)
        self.resolveTimeout = resolveTimeout
        self.includes = { [coreTypes] object in coreTypes.contains(object.coreType) && filter(object) }
    }

    /// The number of objects cached now.
    public var count: Int { cache.withLock { $0.entries.count } }

    /// The cached object with this id, without resolving it.
    /// - Parameter objectId: the object's id.
    /// - Returns: the object, or `nil` when it is not cached.
    public func cachedObject(objectId: CoatyUUID) -> AnyCoatyObject? {
        cache.withLock { $0.touch(objectId) }
    }

    /// The object with this id: from the cache, or resolved by a Discover of the id (then cached).
    ///
    /// While a Discover of the id is pending, further resolves of it wait for its outcome instead
    /// of publishing another.
    ///
    /// - Parameter objectId: the object's id.
    /// - Returns: the object, or `nil` when no accepted Resolve arrived within ``resolveTimeout``
    ///   (or the resolve that published the Discover failed or was cancelled).
    /// - Throws: ``CommunicationError`` when the Discover cannot be published; `CancellationError`
    ///   is not thrown: a cancelled resolve returns `nil`.
    public func resolve(objectId: CoatyUUID) async throws -> AnyCoatyObject? {
        if let cached = cachedObject(objectId: objectId) { return cached }
        let leads = cache.withLock { cache -> Bool in
            guard cache.pending[objectId] == nil else { return false }
            cache.pending[objectId] = []
            return true
        }
        guard leads else {
            return await withCheckedContinuation { continuation in
                // The Discover may have ended meanwhile: then the cache has the outcome.
                let outcome = cache.withLock { cache -> AnyCoatyObject?? in
                    guard cache.pending[objectId] == nil else {
                        cache.pending[objectId]?.append(continuation)
                        return nil
                    }
                    return .some(cache.touch(objectId))
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        }
        var found: AnyCoatyObject?
        defer {
            let waiters = cache.withLock { cache in
                if let found { cache.insert(found, capacity: capacity) }
                return cache.pending.removeValue(forKey: objectId) ?? []
            }
            for waiter in waiters { waiter.resume(returning: found) }
        }
        let resolves = communicationManager.publishDiscover(.objectId(objectId)).responses(timeout: resolveTimeout)
        for try await resolve in resolves {
            guard let object = resolve.data.object, object.objectId == objectId, includes(object) else { continue }
            found = object
            break
        }
        return found
    }

    /// The object with this id as a Swift type; see ``resolve(objectId:)``.
    ///
    /// - Parameters:
    ///   - type: the type, e.g. `Task.self`.
    ///   - objectId: the object's id.
    /// - Returns: the object, or `nil` when none was resolved or it does not decode as `type`.
    /// - Throws: ``CommunicationError`` when the Discover cannot be published.
    public func resolve<Object: CoatyObject>(_ type: Object.Type, objectId: CoatyUUID) async throws -> Object? {
        try await resolve(objectId: objectId)?.as(type)
    }

    /// Removes every cached object.
    public func removeAll() {
        cache.withLock { $0.entries = [:] }
    }

    /// Returns once ``run()`` has subscribed to the Advertises and Deadvertises that keep the cache
    /// up to date.
    public func started() async {
        await runOnce.waitUntilReady()
    }

    /// Runs ``run()``.
    /// - Parameter context: unused.
    /// - Throws: ``AgentRuntimeError/controllerAlreadyRan(_:)`` on a second run;
    ///   ``CommunicationError`` for an invalid namespace.
    public func run(_ context: ControllerContext) async throws {
        try await run()
    }

    /// Keeps the cache up to date until the task is cancelled, then empties it. Call it once.
    /// - Throws: ``AgentRuntimeError/controllerAlreadyRan(_:)`` on a second call;
    ///   ``CommunicationError`` for an invalid namespace.
    public func run() async throws {
        try runOnce.begin(name)
        defer {
            runOnce.markReady()
            removeAll()
        }
        let events = coreTypes.map { CoatyTopic.Event.advertise(.coreType($0)) } + [.deadvertise]
        let endRoutes = try await communicationManager.route(events) { [weak self] incoming in
            switch incoming.payload {
            case .advertise(let data): self?.advertised(data.object)
            case .deadvertise(let data): self?.deadvertised(data.objectIds)
            default: break
            }
        }
        defer { endRoutes() }
        runOnce.markReady()
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(3600))
        }
    }

    /// An Advertise replaces a cached object (and removes it when it is no longer accepted).
    private func advertised(_ object: AnyCoatyObject) {
        let accepted = includes(object)
        cache.withLock { cache in
            guard cache.entries[object.objectId] != nil else { return }
            if accepted {
                cache.entries[object.objectId]?.object = object
            } else {
                cache.entries[object.objectId] = nil
            }
        }
    }

    private func deadvertised(_ objectIds: [CoatyUUID]) {
        cache.withLock { cache in
            for id in objectIds { cache.entries[id] = nil }
        }
    }
}
