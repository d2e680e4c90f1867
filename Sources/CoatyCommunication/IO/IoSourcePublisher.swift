import CoatyFilter
public import CoatyModel
import CoatySync
public import Logging
public import ServiceLifecycle
import Synchronization

/// Publishes the values of one of the agent's IoSources while it is associated, respecting its
/// update strategy and the update rate of its associations (Coaty JS's `IoSourceController`).
///
/// It follows the Associate events of the IO context for its source: the source is associated
/// while at least one IoActor is associated with it; values are published on the associating
/// route (a Coaty `IOV` route or an external topic); values given while the source is not
/// associated are discarded. With an update rate `r` (milliseconds, from the Associate events),
/// the source's ``IoSource/updateStrategy`` decides:
/// - `.default` and `.sample`: every `r` the latest value given since the previous tick is
///   published (nothing when there was none);
/// - `.throttle`: a value is published once `r` has passed without a newer value (the last
///   value of a burst);
/// - `.none`, or no rate (or 0): every value is published at once.
///
/// Run it (it is a `Service`) before the IoNode holding the source is advertised, or await
/// ``subscribed()`` first, so it sees the router's Associate events.
///
/// ```swift
/// let publisher = try IoSourcePublisher(communicationManager: manager, source: thermometer, ioContextName: "kitchen")
/// // in a ServiceGroup, or: Task { try await publisher.run() }
/// await publisher.subscribed()
/// try await manager.addIoNode(node)
/// await publisher.publish(.double(21.5))
/// ```
public final class IoSourcePublisher<C: Clock>: Service, Sendable where C.Duration == Duration {
    /// The manager it observes and publishes with.
    public let communicationManager: CommunicationManager
    /// The IoSource.
    public let source: IoSource
    /// The IO context name of the IoNode holding the source.
    public let ioContextName: String
    /// The clock timing the sample and throttle strategies.
    public let clock: C
    private let logger: Logger
    private let follower: AssociationFollower
    private let state: CoatyMutex<SourceState<C.Instant>>

    /// Creates the publisher and subscribes the Associate events of the context.
    ///
    /// - Parameters:
    ///   - communicationManager: the agent's manager.
    ///   - source: the IoSource (one of the agent's IoNodes).
    ///   - ioContextName: the IO context name (the IoNode's `name`).
    ///   - clock: the clock of the sample and throttle strategies.
    ///   - logger: where to log failed publications; the manager's logger when `nil`.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` when the name cannot be a topic level.
    public init(
        communicationManager: CommunicationManager,
        source: IoSource,
        ioContextName: String,
        clock: C,
        logger: Logger? = nil
    ) throws(CommunicationError) {
        self.communicationManager = communicationManager
        self.source = source
        self.ioContextName = ioContextName
        self.clock = clock
        self.logger = logger ?? communicationManager.logger
        self.follower = try AssociationFollower(communicationManager, ioContextName: ioContextName)
        self.state = CoatyMutex(SourceState())
    }

    /// Waits until the broker acknowledged the subscription of the Associate events.
    public func subscribed() async {
        await follower.associates.subscribed()
    }

    /// Whether at least one IoActor is associated with the source.
    public var isAssociated: Bool { follower.state.value }

    /// The route values are published on, while associated.
    public var route: String? { state.withLock { $0.route } }

    /// The update rate of the latest Associate, in milliseconds.
    public var updateRate: Double? { state.withLock { $0.updateRate } }

    /// The association state now and at every change (distinct values).
    /// - Returns: a stream that ends when the publisher stops.
    public func associationStates() -> IoAssociationStates {
        IoAssociationStates(follower.state.stream())
    }

    /// Publishes a JSON value, or schedules it by the update strategy; discards it when the
    /// source is not associated.
    /// - Parameter value: the value.
    public func publish(_ value: JSONValue) async {
        await publish(rawBytes: value.serializedBytes())
    }

    /// Publishes raw bytes (a source with `useRawIoValues`), or schedules them by the update
    /// strategy; discards them when the source is not associated.
    /// - Parameter rawBytes: the value's bytes.
    public func publish(rawBytes: [UInt8]) async {
        let now = clock.now
        let action = state.withLock { state -> ScheduledAction in
            guard let route = state.route else { return .discard }
            switch state.mode {
            case .direct:
                return .send(route)
            case .sample(let interval):
                state.samples[state.interval(at: now, of: interval)] = rawBytes
                return .discard
            case .throttle(let interval):
                if let deadline = state.pendingDeadline, deadline <= now, let pending = state.pending {
                    state.due.append(pending)  // it was quiet long enough before this value came
                }
                state.pending = rawBytes
                state.pendingDeadline = now.advanced(by: interval)
                return state.signal.map { .wake($0) } ?? .discard
            }
        }
        switch action {
        case .discard: break
        case .send(let route): await send(rawBytes, on: route)
        case .wake(let signal): signal.yield()
        }
    }

    /// Stops ``run()``.
    public func stop() {
        follower.stop()
    }

    /// Follows the Associate events of the source and times the publications until graceful
    /// shutdown, ``stop()`` or cancellation. Run it once.
    public func run() async throws {
        await follower.run {
            var driver: Task<Void, Never>?
            for await event in self.follower.associates where event.data.ioSourceId == self.source.objectId {
                guard let epoch = self.apply(event.data) else { continue }
                driver?.cancel()
                driver = self.makeDriver(epoch)
            }
            driver?.cancel()
        }
        state.withLock { state in
            state.associations = SourceAssociations()
            state.signal?.finish()
        }
    }

    // MARK: Associations

    /// Applies an Associate for the source; returns the new epoch when the association state or
    /// the rate changed (a new driver is needed).
    private func apply(_ data: AssociateEventData) -> SourceEpoch<C.Instant>? {
        let now = clock.now
        let strategy = source.updateStrategy ?? .default
        let (epoch, associated) = state.withLock { state -> (SourceEpoch<C.Instant>?, Bool) in
            let wasAssociated = state.route != nil
            let previousRate = state.updateRate
            state.associations.apply(data)
            let associated = state.route != nil
            guard associated != wasAssociated || state.updateRate != previousRate else { return (nil, associated) }
            state.pending = nil
            state.pendingDeadline = nil
            state.due = []
            state.samples = [:]
            state.epochStart = now
            state.signal?.finish()
            state.signal = nil
            state.mode = SourceMode(strategy: strategy, updateRate: state.updateRate)
            var epoch = SourceEpoch<C.Instant>(mode: state.mode, start: now, signal: nil)
            if associated, case .throttle = state.mode {
                let (signal, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
                state.signal = continuation
                epoch.signal = signal
            }
            return (associated ? epoch : SourceEpoch(mode: .direct, start: now, signal: nil), associated)
        }
        follower.state.set(associated)
        return epoch
    }

    private func makeDriver(_ epoch: SourceEpoch<C.Instant>) -> Task<Void, Never>? {
        switch epoch.mode {
        case .direct:
            return nil
        case .sample(let interval):
            // Tick k publishes the latest value given during interval k - 1, i.e. in
            // [start + (k - 1) · rate, start + k · rate), whenever this task gets to run.
            // Owned by run(): cancelled when the rate changes and when the publisher stops.
            return Task { [self] in
                var tick = 0
                while !Task.isCancelled {
                    tick += 1
                    let deadline = epoch.start.advanced(by: interval * tick)
                    do { try await clock.sleep(until: deadline, tolerance: nil) } catch { return }
                    let due = state.withLock { state -> (String, [UInt8])? in
                        let sample = state.samples.removeValue(forKey: tick - 1)
                        guard let route = state.route, let sample else { return nil }
                        return (route, sample)
                    }
                    if let (route, payload) = due, !Task.isCancelled { await send(payload, on: route) }
                }
            }
        case .throttle:
            guard let signal = epoch.signal else { return nil }
            // Owned by run(): cancelled when the rate changes and when the publisher stops.
            return Task { [self] in
                for await _ in signal {
                    while true {
                        let (due, deadline) = state.withLock { state in
                            defer { state.due = [] }
                            return (
                                state.route.map { route in state.due.map { (route, $0) } } ?? [], state.pendingDeadline
                            )
                        }
                        for (route, payload) in due where !Task.isCancelled { await send(payload, on: route) }
                        guard let deadline else { break }
                        do { try await clock.sleep(until: deadline, tolerance: nil) } catch { return }
                        let now = clock.now
                        state.withLock { state in
                            guard let deadline = state.pendingDeadline, deadline <= now, let pending = state.pending
                            else { return }
                            state.due.append(pending)
                            state.pending = nil
                            state.pendingDeadline = nil
                        }
                    }
                }
            }
        }
    }

    private func send(_ payload: [UInt8], on route: String) async {
        do {
            switch CoatyTopic.classify(route) {
            case .coaty(let topic) where topic.eventType == .ioValue:
                try await communicationManager.send(TransportMessage(topic: route, payload: payload))
            case .raw:
                try await communicationManager.publishRaw(topic: route, payload: payload)
            default:
                logger.warning("IoSource route is not an IoValue route", metadata: ["route": "\(route)"])
            }
        } catch {
            logger.warning(
                "IoSource failed to publish a value",
                metadata: ["ioSourceId": "\(source.objectId)", "route": "\(route)", "error": "\(error)"]
            )
        }
    }
}

extension IoSourcePublisher where C == ContinuousClock {
    /// Creates the publisher on the continuous clock and subscribes the Associate events.
    ///
    /// - Parameters:
    ///   - communicationManager: the agent's manager.
    ///   - source: the IoSource (one of the agent's IoNodes).
    ///   - ioContextName: the IO context name (the IoNode's `name`).
    ///   - logger: where to log failed publications; the manager's logger when `nil`.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` when the name cannot be a topic level.
    public convenience init(
        communicationManager: CommunicationManager,
        source: IoSource,
        ioContextName: String,
        logger: Logger? = nil
    ) throws(CommunicationError) {
        try self.init(
            communicationManager: communicationManager,
            source: source,
            ioContextName: ioContextName,
            clock: ContinuousClock(),
            logger: logger
        )
    }
}

/// What ``IoSourcePublisher/publish(rawBytes:)`` does with a value.
private enum ScheduledAction {
    case discard
    case send(String)
    case wake(AsyncStream<Void>.Continuation)
}

/// How values are timed for one association state.
enum SourceMode: Sendable, Equatable {
    case direct
    case sample(Duration)
    case throttle(Duration)

    /// Coaty JS's choice: no rate (or 0) or `.none` → direct; `.throttle` → debounce; else sample.
    init(strategy: IoSourceUpdateStrategy, updateRate: Double?) {
        guard let rate = updateRate, rate > 0 else {
            self = .direct
            return
        }
        switch strategy {
        case .none: self = .direct
        case .throttle: self = .throttle(.milliseconds(rate))
        case .default, .sample: self = .sample(.milliseconds(rate))
        }
    }
}

struct SourceEpoch<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    var mode: SourceMode
    var start: Instant
    var signal: AsyncStream<Void>?
}

struct SourceState<Instant: InstantProtocol> where Instant.Duration == Duration {
    var associations = SourceAssociations()
    /// The route values are published on, while associated.
    var route: String? { associations.route }
    /// The update rate of the latest Associate.
    var updateRate: Double? { associations.updateRate }
    var mode: SourceMode = .direct
    var epochStart: Instant?
    /// Sample: the latest value of each update interval since the epoch started.
    var samples: [Int: [UInt8]] = [:]
    /// Throttle: the latest value and when it is due unless a newer one comes first.
    var pending: [UInt8]?
    var pendingDeadline: Instant?
    /// Throttle: values that became due, to publish in order.
    var due: [[UInt8]] = []

    /// The index of the update interval `instant` falls in (0 for the first).
    func interval(at instant: Instant, of length: Duration) -> Int {
        guard let epochStart else { return 0 }
        return Int((epochStart.duration(to: instant) / length).rounded(.down))
    }
    var signal: AsyncStream<Void>.Continuation?
}
