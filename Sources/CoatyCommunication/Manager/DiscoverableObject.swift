// An object this agent advertises and resolves on Discover: the Discover route and the Advertise
// of ObjectLifecycleController.advertiseDiscoverableObject (CoatyRuntime), here because it routes
// events inside the communication manager.

import CoatyFilter
public import CoatyModel
import CoatySync
import Logging
import Synchronization

/// An object this agent advertises and resolves on Discover; see
/// ``ObjectLifecycleController/advertiseDiscoverableObject(_:privateData:)``.
public final class DiscoverableObject: Sendable {
    private struct State {
        var object: AnyCoatyObject
        var privateData: JSONObject?
        var cancelled = false
    }

    private let manager: CommunicationManager
    private let state: LockedBox<State>
    private let releaser: ReleaseOnce
    private let onCancel: @Sendable (DiscoverableObject) -> Void

    package init(
        manager: CommunicationManager,
        object: AnyCoatyObject,
        privateData: JSONObject?,
        onCancel: @escaping @Sendable (DiscoverableObject) -> Void
    ) throws(CommunicationError) {
        self.manager = manager
        self.onCancel = onCancel
        let state = LockedBox(State(object: object, privateData: privateData))
        self.state = state
        let filter = try manager.subscriptionFilter(.discover)
        let key = CoatyTopic.Event.discover.level
        let token = manager.state.withLock { $0.makeToken() }
        let sink: EventSink = { [weak manager] incoming in
            guard let manager, case .discover(let data) = incoming.payload,
                let correlationId = incoming.topic.correlationUUID
            else { return }
            let answer = state.mutex.withLock { state -> ResolveEventData? in
                guard !state.cancelled, data.matches(state.object) else { return nil }
                var resolve = ResolveEventData(unchecked: state.object)
                resolve.privateData = state.privateData
                return resolve
            }
            guard let answer else { return }
            manager.spawn {
                do {
                    try await manager.publishResponse(.resolve, correlationId: correlationId, payload: answer.json)
                } catch {
                    manager.logger.debug("Could not resolve a Discover", metadata: ["error": "\(error)"])
                }
            }
        }
        releaser = ReleaseOnce { [weak manager] in
            manager?.release(filter) { $0.setRoute(key, token: token, sink: nil) }
        }
        manager.retain(filter) { $0.setRoute(key, token: token, sink: sink) }
    }

    deinit { releaser.release() }

    /// The object as last advertised.
    public var object: AnyCoatyObject { state.mutex.withLock { $0.object } }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { state.mutex.withLock { $0.cancelled } }

    /// Advertises the object as it is now.
    package func advertise() async throws(CommunicationError) {
        let (object, privateData) = state.mutex.withLock { ($0.object, $0.privateData) }
        for message in try manager.advertiseMessage(object, privateData: privateData) {
            try await manager.send(message)
        }
    }

    /// Replaces the object (same objectId) and advertises it again; Discovers are answered with
    /// the new version from now on.
    ///
    /// - Parameters:
    ///   - object: the new version; its objectId must be the original's.
    ///   - privateData: application data for the Advertise and future Resolves.
    /// - Throws: ``CommunicationError/invalidEventData(_:)`` for another objectId or a cancelled
    ///   handle; other ``CommunicationError``s when encoding or publishing fails.
    public func update<Object: CoatyObject>(
        _ object: Object,
        privateData: JSONObject? = nil
    ) async throws(CommunicationError) {
        let wrapped = try AnyCoatyObject.wrapping(object)
        let problem = state.mutex.withLock { state -> String? in
            if state.cancelled { return "the discoverable object was cancelled; advertise it anew" }
            guard state.object.objectId == wrapped.objectId else {
                return "an update must keep objectId \(state.object.objectId), not \(wrapped.objectId)"
            }
            state.object = wrapped
            state.privateData = privateData
            return nil
        }
        if let problem { throw .invalidEventData(CommunicationEventDataError(.advertise, problem)) }
        try await advertise()
    }

    /// Stops answering Discovers and publishes a Deadvertise of the object; later calls do nothing.
    ///
    /// - Throws: ``CommunicationError`` when the Deadvertise cannot be published.
    public func cancel() async throws(CommunicationError) {
        let first = state.mutex.withLock { state -> Bool in
            defer { state.cancelled = true }
            return !state.cancelled
        }
        guard first else { return }
        releaser.release()
        onCancel(self)
        try await manager.publishDeadvertise([object.objectId])
    }
}
