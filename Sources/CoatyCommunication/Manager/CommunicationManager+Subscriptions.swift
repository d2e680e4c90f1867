import CoatyFilter
import CoatyModel
import CoatySync
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

extension CommunicationManager {
    // MARK: Subscriptions (reference counted per topic filter)

    /// Adds one reference to `filter` and registers the route in the same critical section.
    /// A `shared` filter is subscribed in ``Options/sharedSubscriptionGroup`` when there is one.
    func retain(_ filter: String, shared: Bool = false, register: (inout ManagerState) -> Void) {
        state.withLock { state in
            if shared, options.sharedSubscriptionGroup != nil { state.sharedFilters.insert(filter) }
            state.refCounts[filter, default: 0] += 1
            register(&state)
        }
        spawnReconcile(filter)
    }

    /// Keeps the broker's subscriptions as they are until ``stop()``: observations that end from
    /// now on only stop being served. For an agent with a persistent session that is about to
    /// stop (a durable recorder): the session keeps its subscriptions, so the broker queues what
    /// is published while the agent is away and delivers it when it returns.
    public func keepSubscriptionsUntilStop() {
        state.withLock { $0.keepsSubscriptions = true }
    }

    /// Drops one reference to `filter` and unregisters the route.
    func release(_ filter: String, unregister: (inout ManagerState) -> Void) {
        state.withLock { state in
            unregister(&state)
            if let count = state.refCounts[filter] {
                if count <= 1 {
                    state.refCounts.removeValue(forKey: filter)
                } else {
                    state.refCounts[filter] = count - 1
                }
            }
        }
        spawnReconcile(filter)
    }

    func spawnReconcile(_ filter: String) {
        let work = state.withLock { state -> BackgroundWork? in
            guard state.started, let work = state.work else { return nil }
            state.pendingReconciles += 1
            return work
        }
        guard let work else { return }
        let spawned = work.spawn { [self] in
            await reconcile(filter)
            reconciled()
        }
        // Stopped meanwhile: nothing to bring in line any more.
        if !spawned { reconciled() }
    }

    /// One reconciliation ended (or will not run): resumes the settle waiters after the last.
    private func reconciled() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.pendingReconciles -= 1
            guard state.pendingReconciles == 0 else { return [] }
            defer { state.settleWaiters.removeAll() }
            return state.settleWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Runs `job` in the background work of the current start (see ``BackgroundWork``); does
    /// nothing while stopped (a routing callback's answer has no connection to go to then).
    func spawn(_ job: @escaping @Sendable () async -> Void) {
        state.withLock { $0.work }?.spawn(job)
    }

    /// Brings the transport's subscription of `filter` in line with its reference count. Only one
    /// task works on a filter at a time; it loops until wanted and established agree, so
    /// overlapping subscribe/unsubscribe requests cannot reorder.
    func reconcile(_ filter: String) async {
        while true {
            enum Action { case subscribe, unsubscribe }
            let action = state.withLock { state -> Action? in
                guard !state.busy.contains(filter) else { return nil }
                let established = state.established.contains(filter)
                let wanted = state.refCounts[filter] != nil || (state.keepsSubscriptions && established)
                guard wanted != established, state.started else {
                    state.resumeWaiters(for: filter)
                    return nil
                }
                state.busy.insert(filter)
                return wanted ? .subscribe : .unsubscribe
            }
            guard let action else { return }
            var succeeded = true
            let brokerFilter = self.brokerFilter(filter)
            do {
                switch action {
                case .subscribe: try await transport.subscribe(brokerFilter, qos: options.qos)
                case .unsubscribe: try await transport.unsubscribe(brokerFilter)
                }
            } catch {
                succeeded = false
                logger.debug("Subscription change failed", metadata: ["filter": "\(filter)", "error": "\(error)"])
            }
            let again = state.withLock { state -> Bool in
                state.busy.remove(filter)
                if succeeded {
                    if action == .subscribe {
                        state.established.insert(filter)
                    } else {
                        state.established.remove(filter)
                    }
                }
                if !succeeded { state.resumeWaiters(for: filter) }
                return succeeded
            }
            if !again { return }
        }
    }

    /// The filter subscribed on the broker for `filter`: in the shared-subscription group when
    /// `filter` is shared and there is a group.
    func brokerFilter(_ filter: String) -> String {
        guard let group = options.sharedSubscriptionGroup, state.withLock({ $0.sharedFilters.contains(filter) }) else {
            return filter
        }
        return Self.sharedSubscriptionFilter(filter, group: group)
    }

    /// The MQTT shared-subscription filter of `filter` in `group`: `$share/<group>/<filter>`.
    ///
    /// - Parameters:
    ///   - filter: a topic filter.
    ///   - group: the group name: not empty, without `/`, `+`, `#` or NUL.
    /// - Returns: the shared filter.
    public static func sharedSubscriptionFilter(_ filter: String, group: String) -> String {
        "$share/\(group)/\(filter)"
    }

    /// Whether `group` can name a shared-subscription group: not empty, no `/`, `+`, `#` or NUL.
    ///
    /// - Parameter group: the name.
    /// - Returns: `true` when it is valid.
    public static func isValidSharedSubscriptionGroup(_ group: String) -> Bool {
        !group.isEmpty && !group.contains { $0 == "/" || $0 == "+" || $0 == "#" || $0 == "\0" }
    }

    /// Waits until `filter` is subscribed on the broker, or no longer wanted, or the manager
    /// cannot subscribe now (not started).
    func awaitEstablished(_ filter: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.established.contains(filter) || state.refCounts[filter] == nil || !state.started {
                    return true
                }
                state.establishWaiters[filter, default: []].append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
        // A subscription that was busy when asked may just have finished: check once more.
        await reconcile(filter)
    }

    /// Waits until every subscription change requested so far has reached the broker (e.g. the
    /// unsubscription after the last observer of a filter ended).
    public func subscriptionsSettled() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.pendingReconciles == 0 { return true }
                state.settleWaiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// The executor that runs tasks on the thread that decodes and routes received events, or `nil`
    /// when the transport has none (CoatyKit's MQTT transport has one).
    ///
    /// Code that must react fast — a responder answering requests, a requester in a tight loop —
    /// can run there and skip a thread hand-off per event:
    ///
    /// ```swift
    /// await withTaskExecutorPreference(manager.deliveryExecutor) {
    ///     for await discover in try manager.observeDiscover() {
    ///         try? await discover.resolve(object: light)
    ///     }
    /// }
    /// ```
    ///
    /// While such code runs, no events are routed: keep it short and never block the thread
    /// (awaiting is fine). Actor-isolated code still runs on its actor.
    public var deliveryExecutor: (any TaskExecutor)? {
        transport.deliveryExecutor
    }

    /// The topic filters currently subscribed through the transport, with their observer counts.
    public var subscribedFilters: [String: Int] {
        state.withLock { state in state.refCounts.filter { state.established.contains($0.key) } }
    }
}
