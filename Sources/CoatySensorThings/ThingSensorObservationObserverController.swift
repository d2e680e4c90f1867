public import CoatyCore
import CoatySync
public import Logging
import Synchronization

/// A sensor registered with a ``ThingSensorObservationObserverController``, with the thing it
/// belongs to (Coaty JS augments the sensor with a `thing` property instead).
public struct RegisteredSensor: Sendable, Hashable {
    /// The sensor as last received.
    public var sensor: Sensor
    /// The thing it belongs to.
    public var thing: Thing

    /// Pairs a sensor with its thing.
    /// - Parameters:
    ///   - sensor: the sensor.
    ///   - thing: the thing it belongs to.
    public init(sensor: Sensor, thing: Thing) {
        self.sensor = sensor
        self.thing = thing
    }
}

/// A change of the sensors registered with a ``ThingSensorObservationObserverController``;
/// Coaty JS's `RegisteredSensorsChangeInfo`.
public struct RegisteredSensorsChangeInfo: Sendable, Hashable {
    /// Sensors registered by this change.
    public var added: [RegisteredSensor]
    /// Sensors removed by this change.
    public var removed: [RegisteredSensor]
    /// Registered sensors received again (some fields may have changed).
    public var changed: [RegisteredSensor]
    /// Every registered sensor after the change.
    public var total: [RegisteredSensor]

    /// Describes a change.
    /// - Parameters:
    ///   - added: sensors registered.
    ///   - removed: sensors removed.
    ///   - changed: sensors received again.
    ///   - total: every registered sensor after the change.
    public init(
        added: [RegisteredSensor] = [],
        removed: [RegisteredSensor] = [],
        changed: [RegisteredSensor] = [],
        total: [RegisteredSensor] = []
    ) {
        self.added = added
        self.removed = removed
        self.changed = changed
        self.total = total
    }
}

/// An observation received for a registered sensor.
public struct SensorObservation: Sendable, Hashable {
    /// The observation.
    public var observation: Observation
    /// The sensor that made it.
    public var sensor: Sensor
    /// The thing the sensor belongs to.
    public var thing: Thing
}

/// Tracks the things of a network, their sensors, and the sensors' channeled observations;
/// Coaty JS's `ThingSensorObservationObserverController`.
///
/// While ``run()`` runs it discovers things and observes advertised ones; for each thing its
/// filter accepts, it queries the thing's sensors and observes advertised ones; for each sensor
/// its filter accepts, it registers the sensor (reporting the change on
/// ``registeredSensorsChanges()``) and observes its channeled observations (reported on
/// ``sensorObservations()``). A Deadvertise of a thing's parent (its agent, usually), of the
/// thing, or of a sensor removes the sensors concerned (Coaty JS reacts to the thing's parent
/// only).
///
/// ```swift
/// let things = ThingSensorObservationObserverController(communicationManager: manager)
/// let observations = things.sensorObservations()
/// try await AgentContainer(communicationManager: manager, controllers: [things]).run()
/// // elsewhere: for await item in observations { print(item.thing.name, item.sensor.name, item.observation.result) }
/// ```
public final class ThingSensorObservationObserverController: Controller {
    private struct State {
        var registered: [CoatyUUID: RegisteredSensor] = [:]
        var order: [CoatyUUID] = []
        var thingSignals: [CoatyUUID: StopSignal] = [:]
        var observationSignals: [CoatyUUID: StopSignal] = [:]
        var lastChange = RegisteredSensorsChangeInfo()

        var total: [RegisteredSensor] { order.compactMap { registered[$0] } }
    }

    /// The communication manager it observes and requests with.
    public let communicationManager: CommunicationManager
    /// The thing side: discovering and observing things.
    public let thingObserver: ThingObserverController
    /// The sensor side: querying sensors and observing observations.
    public let sensorObserver: SensorObserverController
    private let thingFilter: @Sendable (Thing) -> Bool
    private let sensorFilter: @Sendable (Sensor, Thing) -> Bool
    private let logger: Logger
    private let state = CoatyMutex(State())
    private let hasRun = Atomic(false)
    private let changes = Broadcast<RegisteredSensorsChangeInfo>()
    private let observations = Broadcast<SensorObservation>()

    /// Creates the controller.
    /// - Parameters:
    ///   - communicationManager: the agent's communication manager.
    ///   - thingFilter: whether a thing is relevant; every thing by default.
    ///   - sensorFilter: whether a sensor of a relevant thing is relevant; every one by default.
    ///   - logger: where failed requests are logged; the manager's logger by default.
    public init(
        communicationManager: CommunicationManager,
        thingFilter: @escaping @Sendable (Thing) -> Bool = { _ in true },
        sensorFilter: @escaping @Sendable (Sensor, Thing) -> Bool = { _, _ in true },
        logger: Logger? = nil
    ) {
        self.communicationManager = communicationManager
        self.thingObserver = ThingObserverController(communicationManager: communicationManager)
        self.sensorObserver = SensorObserverController(communicationManager: communicationManager)
        self.thingFilter = thingFilter
        self.sensorFilter = sensorFilter
        self.logger = logger ?? communicationManager.logger
    }

    /// The sensors registered now, in registration order.
    public var registeredSensors: [RegisteredSensor] { state.withLock { $0.total } }

    /// The changes of the registered sensors: the latest change first (an empty one before any),
    /// then each later one (Coaty JS's `registeredSensorsChangeInfo$`, a behaviour subject).
    /// - Returns: the changes; the sequence ends when the consumer stops.
    public func registeredSensorsChanges() -> RegisteredSensorsChanges {
        RegisteredSensorsChanges(state.withLock { state in changes.stream(initial: state.lastChange) })
    }

    /// The observations received for registered sensors from now on (Coaty JS's
    /// `sensorObservation$`).
    /// - Returns: the observations; the sequence ends when the consumer stops.
    public func sensorObservations() -> SensorObservations {
        SensorObservations(observations.stream())
    }

    /// Runs ``run()``.
    /// - Parameter context: unused.
    /// - Throws: ``CommunicationError`` for an invalid namespace.
    public func run(_ context: ControllerContext) async throws {
        try await run()
    }

    /// Tracks things, sensors and observations until the task is cancelled; then reports every
    /// registered sensor removed. Call it once.
    /// - Throws: ``SensorThingsError/alreadyRan`` on a second call; ``CommunicationError`` for an
    ///   invalid namespace.
    public func run() async throws {
        guard !hasRun.exchange(true, ordering: .acquiringAndReleasing) else { throw SensorThingsError.alreadyRan }
        let advertised = try thingObserver.observeAdvertisedThings()
        let deadvertises = try communicationManager.observeDeadvertise()
        await advertised.subscribed()
        await deadvertises.subscribed()
        let (things, thingSink) = AsyncStream.makeStream(of: Thing.self)
        await withDiscardingTaskGroup { group in
            group.addTask { for await thing in advertised { thingSink.yield(thing) } }
            group.addTask { for await event in deadvertises { self.deadvertised(event.objectIds) } }
            group.addTask {
                do {
                    for try await thing in self.thingObserver.discoverThings() { thingSink.yield(thing) }
                } catch {
                    self.logger.warning("Could not discover things", metadata: ["error": "\(error)"])
                }
            }
            for await thing in things where thingFilter(thing) {
                let signal = StopSignal()
                let isNew = state.withLock { state in
                    guard state.thingSignals[thing.objectId] == nil else { return false }
                    state.thingSignals[thing.objectId] = signal
                    return true
                }
                guard isNew else { continue }
                group.addTask { await signal.run { await self.trackSensors(of: thing) } }
            }
            group.cancelAll()
        }
        removeAll()
    }

    /// Queries and observes the sensors of a thing, and observes their observations.
    private func trackSensors(of thing: Thing) async {
        let advertised: SensorThingsEvents<Sensor>
        do {
            advertised = try sensorObserver.observeAdvertisedSensors()
        } catch {
            logger.warning("Could not observe sensors", metadata: ["error": "\(error)"])
            return
        }
        await advertised.subscribed()
        let (sensors, sensorSink) = AsyncStream.makeStream(of: Sensor.self)
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await sensor in advertised where sensor.parentObjectId == thing.objectId {
                    sensorSink.yield(sensor)
                }
            }
            group.addTask {
                do {
                    for try await retrieved in self.sensorObserver.querySensorsOfThing(thing.objectId) {
                        for sensor in retrieved { sensorSink.yield(sensor) }
                    }
                } catch {
                    self.logger.warning("Could not query the sensors of a thing", metadata: ["error": "\(error)"])
                }
            }
            for await sensor in sensors where sensorFilter(sensor, thing) {
                guard let signal = register(RegisteredSensor(sensor: sensor, thing: thing)) else { continue }
                group.addTask { await signal.run { await self.observeObservations(of: sensor, thing: thing) } }
            }
            group.cancelAll()
        }
    }

    /// Registers a received sensor and reports the change; returns the signal for a new
    /// observation of its observations, or `nil` when they are observed already.
    private func register(_ item: RegisteredSensor) -> StopSignal? {
        state.withLock { state in
            let isRegistered = state.registered[item.sensor.objectId] != nil
            state.registered[item.sensor.objectId] = item
            if !isRegistered { state.order.append(item.sensor.objectId) }
            report(
                RegisteredSensorsChangeInfo(
                    added: isRegistered ? [] : [item],
                    changed: isRegistered ? [item] : [],
                    total: state.total
                ),
                in: &state
            )
            guard state.observationSignals[item.sensor.objectId] == nil else { return nil }
            let signal = StopSignal()
            state.observationSignals[item.sensor.objectId] = signal
            return signal
        }
    }

    private func observeObservations(of sensor: Sensor, thing: Thing) async {
        do {
            let channeled = try sensorObserver.observeChanneledObservations(sensorId: sensor.objectId)
            for await observation in channeled {
                let current = state.withLock { $0.registered[sensor.objectId] }
                observations.yield(
                    SensorObservation(observation: observation, sensor: current?.sensor ?? sensor, thing: thing)
                )
            }
        } catch {
            logger.warning("Could not observe a sensor's observations", metadata: ["error": "\(error)"])
        }
    }

    /// Removes the sensors whose thing's parent, thing or own id is among `objectIds`.
    private func deadvertised(_ objectIds: [CoatyUUID]) {
        let ids = Set(objectIds)
        state.withLock { state in
            var removed: [RegisteredSensor] = []
            var thingIds = Set(state.thingSignals.keys.filter { ids.contains($0) })
            for item in state.total {
                let thingGone =
                    item.thing.parentObjectId.map(ids.contains) == true || ids.contains(item.thing.objectId)
                guard thingGone || ids.contains(item.sensor.objectId) else { continue }
                if thingGone { thingIds.insert(item.thing.objectId) }
                removed.append(item)
                state.registered[item.sensor.objectId] = nil
                state.observationSignals.removeValue(forKey: item.sensor.objectId)?.stop()
            }
            for id in thingIds { state.thingSignals.removeValue(forKey: id)?.stop() }
            state.order.removeAll { state.registered[$0] == nil }
            guard !removed.isEmpty else { return }
            report(RegisteredSensorsChangeInfo(removed: removed, total: state.total), in: &state)
        }
    }

    private func removeAll() {
        state.withLock { state in
            let removed = state.total
            for signal in state.thingSignals.values { signal.stop() }
            for signal in state.observationSignals.values { signal.stop() }
            state = State()
            report(RegisteredSensorsChangeInfo(removed: removed), in: &state)
        }
    }

    private func report(_ change: RegisteredSensorsChangeInfo, in state: inout State) {
        state.lastChange = change
        changes.yield(change)
    }
}
