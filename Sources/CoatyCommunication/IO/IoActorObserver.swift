import CoatyFilter
public import CoatyModel
import CoatySync
public import Logging
public import ServiceLifecycle
import Synchronization

/// A value received by an IoActor from an associated IoSource.
public struct IoActorValue: Sendable, Hashable {
    /// The route it arrived on (a Coaty `IOV` topic or an external topic).
    public let route: String
    /// The IoSources associated with the actor on this route (usually one).
    public let ioSourceIds: [CoatyUUID]
    /// The payload bytes: UTF-8 JSON, or raw bytes for an actor with `useRawIoValues`.
    public let payload: [UInt8]

    /// The value as JSON.
    /// - Returns: the parsed value.
    /// - Throws: ``JSONParseError`` when the payload is not JSON (e.g. a raw value).
    public func value() throws(JSONParseError) -> JSONValue {
        try JSONValue(parsing: payload)
    }
}

/// The values an ``IoActorObserver`` receives, as an `AsyncSequence` (iterate it once).
public struct IoActorValues: AsyncSequence, Sendable {
    /// Never fails.
    public typealias Failure = Never

    let stream: AsyncStream<IoActorValue>

    /// Creates the iterator.
    /// - Returns: the iterator.
    public func makeAsyncIterator() -> Iterator { Iterator(base: stream.makeAsyncIterator()) }

    /// The iterator of ``IoActorValues``.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<IoActorValue>.Iterator

        /// The next value, or `nil` when the observer stopped.
        public mutating func next() async -> IoActorValue? { await base.next() }

        /// The next value, or `nil` when the observer stopped.
        /// - Parameter actor: the caller's isolation.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> IoActorValue? {
            await base.next(isolation: actor)
        }
    }
}

/// Receives the values of the IoSources currently associated with one of the agent's IoActors
/// (Coaty JS's `IoActorController`).
///
/// It follows the Associate events of the IO context for its actor: on an Associate it
/// subscribes the associating route (a source associated on a new route leaves its previous
/// one), on a disassociate it drops the source, and it unsubscribes a route when no source is
/// left on it. ``values`` yields what arrives on the subscribed routes; a value arriving after
/// its route was dropped is not yielded. The actor counts as associated once the route of an
/// association is subscribed.
///
/// Run it (it is a `Service`) before the IoNode holding the actor is advertised, or await
/// ``subscribed()`` first, so it sees the router's Associate events.
///
/// ```swift
/// let observer = try IoActorObserver(communicationManager: manager, actor: display, ioContextName: "kitchen")
/// // in a ServiceGroup, or: Task { try await observer.run() }
/// for await value in observer.values { print(try value.value()) }
/// ```
public final class IoActorObserver: Service, Sendable {
    /// The manager it observes with.
    public let communicationManager: CommunicationManager
    /// The IoActor.
    public let actor: IoActor
    /// The IO context name of the IoNode holding the actor.
    public let ioContextName: String
    /// The values received from associated sources (buffering the newest
    /// ``CommunicationManager/Options/observerBufferLimit`` values). Iterate it once.
    public let values: IoActorValues
    private let continuation: AsyncStream<IoActorValue>.Continuation
    private let logger: Logger
    private let follower: AssociationFollower
    private let routes = CoatyMutex(ActorAssociations())

    /// Creates the observer and subscribes the Associate events of the context.
    ///
    /// - Parameters:
    ///   - communicationManager: the agent's manager.
    ///   - actor: the IoActor (one of the agent's IoNodes).
    ///   - ioContextName: the IO context name (the IoNode's `name`).
    ///   - logger: where to log unusable routes; the manager's logger when `nil`.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` when the name cannot be a topic level.
    public init(
        communicationManager: CommunicationManager,
        actor: IoActor,
        ioContextName: String,
        logger: Logger? = nil
    ) throws(CommunicationError) {
        self.communicationManager = communicationManager
        self.actor = actor
        self.ioContextName = ioContextName
        self.logger = logger ?? communicationManager.logger
        self.follower = try AssociationFollower(communicationManager, ioContextName: ioContextName)
        let (stream, continuation) = AsyncStream.makeStream(
            of: IoActorValue.self,
            bufferingPolicy: .bufferingNewest(max(1, communicationManager.options.observerBufferLimit))
        )
        self.values = IoActorValues(stream: stream)
        self.continuation = continuation
    }

    /// Waits until the broker acknowledged the subscription of the Associate events.
    public func subscribed() async {
        await follower.associates.subscribed()
    }

    /// Whether at least one IoSource is associated with the actor (and its route subscribed).
    public var isAssociated: Bool { follower.state.value }

    /// The IoSources currently associated with the actor.
    public var associatedSourceIds: [CoatyUUID] {
        routes.withLock { $0.sourceIds }
    }

    /// The association state now and at every change (distinct values).
    /// - Returns: a stream that ends when the observer stops.
    public func associationStates() -> IoAssociationStates {
        IoAssociationStates(follower.state.stream())
    }

    /// Stops ``run()``.
    public func stop() {
        follower.stop()
    }

    /// Follows the Associate events of the actor and forwards the values of its routes until
    /// graceful shutdown, ``stop()`` or cancellation; then ends ``values``. Run it once.
    public func run() async throws {
        await follower.run {
            var forwarders: [String: Task<Void, Never>] = [:]
            for await event in self.follower.associates where event.data.ioActorId == self.actor.objectId {
                let (added, removed) = self.apply(event.data)
                for route in removed { forwarders.removeValue(forKey: route)?.cancel() }
                if let route = added {
                    if let forwarder = await self.subscribe(route) {
                        forwarders[route] = forwarder
                        self.routes.withLock { $0.enter(route, ioSourceId: event.data.ioSourceId) }
                    }
                }
                self.follower.state.set(self.routes.withLock { $0.isAssociated })
            }
            for forwarder in forwarders.values { forwarder.cancel() }
        }
        routes.withLock { $0 = ActorAssociations() }
        continuation.finish()
    }

    /// Applies an Associate for the actor; returns a new route to subscribe (entered once it is
    /// subscribed) and the routes to drop.
    private func apply(_ data: AssociateEventData) -> (added: String?, removed: [String]) {
        routes.withLock { $0.apply(data) }
    }

    /// Subscribes a route (the exact Coaty `IOV` topic, or an external topic as Raw) and
    /// forwards its values; `nil` when the route cannot be observed.
    private func subscribe(_ route: String) async -> Task<Void, Never>? {
        switch CoatyTopic.classify(route) {
        case .coaty(let topic) where topic.eventType == .ioValue:
            let observation = communicationManager.makeObservation(
                filter: route,
                routeKey: CoatyTopic.Event.ioValue.level
            ) { incoming throws(ObservationSkip) -> [UInt8] in
                guard incoming.topic.name == route, case .ioValue(let bytes) = incoming.payload else {
                    throw ObservationSkip()
                }
                return bytes
            }
            await observation.subscribed()
            return forward(observation, route: route) { $0 }
        case .raw:
            guard let observation = try? communicationManager.observeRaw(route) else { break }
            await observation.subscribed()
            return forward(observation, route: route) { $0.payload }
        default:
            break
        }
        logger.warning("IoActor cannot observe the associating route", metadata: ["route": "\(route)"])
        return nil
    }

    private func forward<Element: Sendable>(
        _ observation: EventObservation<Element>,
        route: String,
        payload: @escaping @Sendable (Element) -> [UInt8]
    ) -> Task<Void, Never> {
        // Owned by run() (its forwarders, per route): cancelled when the association ends or the
        // observer stops.
        return Task { [self] in
            for await element in observation {
                guard let sources = routes.withLock({ $0.routes[route] }) else { continue }
                continuation.yield(IoActorValue(route: route, ioSourceIds: sources, payload: payload(element)))
            }
        }
    }
}
