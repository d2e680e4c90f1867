public import CoatyCommunication
import CoatyFilter
public import CoatyModel
import CoatySync

/// A change of the agents online, as a ``ConnectionStateController`` sees it.
///
/// At least one of ``joined`` and ``left`` is not empty.
public struct AgentConnectionChange: Sendable, Hashable {
    /// Agents that came online: advertised their identity, or resolved the controller's
    /// Discover of identities.
    public var joined: [Identity]
    /// Agents that went offline: deadvertised their identity (on stop, or by their last will
    /// when their connection broke), or all of them when the controller stopped.
    public var left: [Identity]
    /// Every agent online after this change, in the order they were first seen.
    public var online: [Identity]

    /// Creates a change.
    /// - Parameters:
    ///   - joined: agents that came online.
    ///   - left: agents that went offline.
    ///   - online: the agents online after the change.
    public init(joined: [Identity] = [], left: [Identity] = [], online: [Identity] = []) {
        self.joined = joined
        self.left = left
        self.online = online
    }
}

/// The changes of the agents online, from a ``ConnectionStateController``: each change once, in
/// the order the controller applied them.
///
/// Made by ``ConnectionStateController/changes()``, it receives the changes from then on; it
/// ends when the controller's ``ConnectionStateController/run()`` ends, or when the iterating
/// task is cancelled.
public typealias AgentConnectionChanges = UpdateSequence<AgentConnectionChange>

/// Tracks which other agents are online (Coaty's connection state of agents), from their
/// identities' Advertises and Deadvertises.
///
/// While ``run()`` runs, it observes the Advertise and Deadvertise of identities and, once
/// subscribed, publishes a Discover of the core type `Identity` so that agents online before it
/// are found too. An agent leaves when its identity is deadvertised: when it stops, or when its
/// connection breaks and the broker publishes its last will (a Deadvertise of its identity).
/// The own agent is not tracked.
///
/// ```swift
/// let agents = ConnectionStateController(communicationManager: manager)
/// let changes = agents.changes()
/// // run it in an AgentContainer (or call run() in a task group), then:
/// for await change in changes {
///     print("joined", change.joined.map(\.name), "left", change.left.map(\.name), "online", change.online.count)
/// }
/// ```
///
/// It builds on ``ObjectLifecycleSequence``: events are applied in the order they arrive, and an
/// agent whose Resolve and Advertise both arrive joins once.
public final class ConnectionStateController: Controller {
    private struct State {
        var online: [Identity] = []
    }

    /// The communication manager it observes with.
    public let communicationManager: CommunicationManager

    private let state = CoatyMutex(State())
    private let runOnce = SingleRun()
    private let broadcast = Broadcast<AgentConnectionChange>()

    /// Creates the controller; nothing is observed until ``run()``.
    /// - Parameter communicationManager: the agent's communication manager.
    public init(communicationManager: CommunicationManager) {
        self.communicationManager = communicationManager
    }

    /// The agents online now (other than this one), in the order they were first seen.
    public var onlineAgents: [Identity] { state.withLock { $0.online } }

    /// Whether the agent with this identity id is online now.
    /// - Parameter identityId: the objectId of the agent's identity.
    /// - Returns: `true` when it is among ``onlineAgents``.
    public func isOnline(_ identityId: CoatyUUID) -> Bool {
        state.withLock { $0.online.contains { $0.objectId == identityId } }
    }

    /// The changes from now on; see ``AgentConnectionChanges``. Take ``onlineAgents`` for the
    /// agents already online.
    /// - Returns: the changes.
    public func changes() -> AgentConnectionChanges {
        AgentConnectionChanges(broadcast.stream())
    }

    /// Returns once ``run()`` has subscribed to the identities' Advertises and Deadvertises and
    /// published its Discover; from then on, no agent that joins or leaves is missed.
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

    /// Tracks the agents until the task is cancelled; then reports every agent as left and ends
    /// every ``changes()`` sequence. Call it once, with the communication manager started.
    /// - Throws: ``AgentRuntimeError/controllerAlreadyRan(_:)`` on a second call;
    ///   ``CommunicationError`` for an invalid namespace.
    public func run() async throws {
        try runOnce.begin(name)
        defer {
            runOnce.markReady()
            stop()
        }
        let advertise = CoatyTopic.Event.advertise(.coreType(.identity))
        _ = try communicationManager.subscriptionFilter(advertise)
        let ownId = communicationManager.identity.objectId
        let sequence = ObjectLifecycleSequence(
            manager: communicationManager,
            advertise: advertise,
            discover: .coreTypes([.identity]),
            includes: { $0.coreType == .identity && $0.objectId != ownId }
        )
        var lifecycle = await sequence.started()
        runOnce.markReady()
        while let info = await lifecycle.next() {
            apply(info)
        }
        _ = lifecycle
    }

    private func apply(_ info: ObjectLifecycleInfo) {
        let identities = { (objects: [AnyCoatyObject]) in objects.compactMap { $0.as(Identity.self) } }
        state.withLock { state in
            state.online = identities(info.objects)
            let change = AgentConnectionChange(
                joined: identities(info.added),
                left: identities(info.removed),
                online: state.online
            )
            // A re-advertised identity with other content changes the snapshot, not who is online.
            guard !change.joined.isEmpty || !change.left.isEmpty else { return }
            broadcast.yield(change)
        }
    }

    private func stop() {
        state.withLock { state in
            if !state.online.isEmpty { broadcast.yield(AgentConnectionChange(left: state.online)) }
            state.online = []
        }
        broadcast.finish()
    }
}
