public import CoatyCommunication
public import CoatyFilter
public import CoatyModel
import CoatySync
import Logging
import Synchronization

/// Keeps track of objects in a Coaty network, and makes this agent's own objects discoverable
/// (Coaty's `ObjectLifecycleController`, both sides of its distributed lifecycle management).
///
/// Observing: ``observeObjectLifecycle(coreType:filter:)`` and its variants yield an
/// ``ObjectLifecycleInfo`` for every object advertised, resolved, changed or deadvertised.
///
/// Advertising: ``advertiseDiscoverableObject(_:privateData:)`` advertises an object, answers
/// the Discovers it matches with a Resolve, and deadvertises it when its
/// ``DiscoverableObject/cancel()`` is called or, in an ``AgentContainer``, when the
/// communication manager is about to stop.
///
/// ```swift
/// let lifecycle = ObjectLifecycleController(communicationManager: manager)
/// var light = Light(name: "desk", isOn: false, parentObjectId: manager.identity.objectId)
/// let handle = try await lifecycle.advertiseDiscoverableObject(light)
/// light.isOn = true
/// try await handle.update(light)         // observers see it as changed
/// try await handle.cancel()              // observers see it removed
/// ```
///
/// Give your objects the agent's identity id as `parentObjectId`: observers then remove them
/// when the agent stops or dies (its last will deadvertises the identity).
public final class ObjectLifecycleController: Controller {
    /// The communication manager it observes and advertises with.
    public let communicationManager: CommunicationManager

    private let handles = CoatyMutex<[ObjectIdentifier: DiscoverableObject]>([:])

    /// Creates the controller.
    /// - Parameter communicationManager: the agent's communication manager.
    public init(communicationManager: CommunicationManager) {
        self.communicationManager = communicationManager
    }

    // MARK: Observing

    /// Observes the lifecycle of objects of a core type (whatever their object type).
    ///
    /// - Parameters:
    ///   - coreType: the core type, e.g. ``CoreType/identity`` to track agents.
    ///   - filter: the conditions an object must meet to be tracked (ordering and paging do not
    ///     apply), with Coaty's ``ObjectMatcher`` semantics; `nil` tracks every object.
    /// - Returns: the lazy sequence of change sets.
    /// - Throws: ``CommunicationError`` only for an invalid namespace.
    public func observeObjectLifecycle(
        coreType: CoreType,
        filter: ObjectFilter? = nil
    ) throws(CommunicationError) -> ObjectLifecycleSequence {
        try observeObjectLifecycle(coreType: coreType, where: Self.predicate(filter))
    }

    /// Observes the lifecycle of objects of a core type that satisfy a predicate.
    ///
    /// - Parameters:
    ///   - coreType: the core type.
    ///   - predicate: whether to track an object; evaluated on the thread that dispatches events,
    ///     so keep it quick.
    /// - Returns: the lazy sequence of change sets.
    /// - Throws: ``CommunicationError`` only for an invalid namespace.
    public func observeObjectLifecycle(
        coreType: CoreType,
        where predicate: @escaping @Sendable (AnyCoatyObject) -> Bool
    ) throws(CommunicationError) -> ObjectLifecycleSequence {
        try makeSequence(.advertise(.coreType(coreType)), discover: .coreTypes([coreType]), predicate: predicate)
    }

    /// Observes the lifecycle of objects of an object type.
    ///
    /// - Parameters:
    ///   - objectType: the object type, e.g. `com.example.Light`.
    ///   - filter: the conditions an object must meet to be tracked; `nil` tracks every object.
    /// - Returns: the lazy sequence of change sets.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an object type that cannot be a topic level.
    public func observeObjectLifecycle(
        objectType: String,
        filter: ObjectFilter? = nil
    ) throws(CommunicationError) -> ObjectLifecycleSequence {
        try observeObjectLifecycle(objectType: objectType, where: Self.predicate(filter))
    }

    /// Observes the lifecycle of objects of an object type that satisfy a predicate.
    ///
    /// - Parameters:
    ///   - objectType: the object type.
    ///   - predicate: whether to track an object; keep it quick.
    /// - Returns: the lazy sequence of change sets.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an object type that cannot be a topic level.
    public func observeObjectLifecycle(
        objectType: String,
        where predicate: @escaping @Sendable (AnyCoatyObject) -> Bool
    ) throws(CommunicationError) -> ObjectLifecycleSequence {
        try makeSequence(
            .advertise(.observing(objectType: objectType)),
            discover: .objectTypes([objectType]),
            predicate: { $0.objectType == objectType && predicate($0) }
        )
    }

    private static func predicate(_ filter: ObjectFilter?) -> @Sendable (AnyCoatyObject) -> Bool {
        guard let filter, filter.conditions != nil else { return { _ in true } }
        return { ObjectMatcher.matches($0.jsonValue, filter: filter) }
    }

    private func makeSequence(
        _ advertise: CoatyTopic.Event,
        discover: DiscoverEventData,
        predicate: @escaping @Sendable (AnyCoatyObject) -> Bool
    ) throws(CommunicationError) -> ObjectLifecycleSequence {
        _ = try communicationManager.subscriptionFilter(advertise)
        return ObjectLifecycleSequence(
            manager: communicationManager,
            advertise: advertise,
            discover: discover,
            includes: predicate
        )
    }

    // MARK: Advertising

    /// Advertises an object and answers every Discover it matches (by objectId, externalId,
    /// object type or core type, as ``DiscoverEventData/matches(_:)`` says) with a Resolve,
    /// until the returned handle is cancelled or the communication manager is about to stop.
    /// The controller keeps the handle until then; when both the controller and the handle are
    /// released, the object is no longer answered (but not deadvertised).
    ///
    /// - Parameters:
    ///   - object: the object.
    ///   - privateData: application data sent with the Advertise and every Resolve.
    /// - Returns: the handle to update or withdraw the object.
    /// - Throws: ``CommunicationError`` when the object cannot be encoded or published.
    public func advertiseDiscoverableObject<Object: CoatyObject>(
        _ object: Object,
        privateData: JSONObject? = nil
    ) async throws(CommunicationError) -> DiscoverableObject {
        let wrapped = try AnyCoatyObject.wrapping(object)
        let handle = try DiscoverableObject(
            manager: communicationManager,
            object: wrapped,
            privateData: privateData
        ) { [weak self] handle in
            _ = self?.handles.withLock { $0.removeValue(forKey: ObjectIdentifier(handle)) }
        }
        handles.withLock { $0[ObjectIdentifier(handle)] = handle }
        do {
            try await handle.advertise()
        } catch {
            try? await handle.cancel()
            throw error
        }
        return handle
    }

    /// The objects currently made discoverable by this controller.
    public var discoverableObjects: [DiscoverableObject] { handles.withLock { Array($0.values) } }

    /// Deadvertises every discoverable object of this controller and stops answering for them.
    public func cancelDiscoverableObjects() async {
        for handle in discoverableObjects { try? await handle.cancel() }
    }

    /// Deadvertises every discoverable object (the communication manager is about to stop).
    /// - Parameter context: unused.
    public func onCommunicationManagerStopping(_ context: ControllerContext) async {
        await cancelDiscoverableObjects()
    }
}
