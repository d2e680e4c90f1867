public import CoatyCore
import CoatySync
import Foundation
public import Logging
import Synchronization

/// Whether and how ``SensorSourceController`` publishes a sensor's observations by itself;
/// Coaty JS's `ObservationPublicationType` with its `samplingInterval`.
public enum ObservationPublication: Sendable, Hashable {
    /// Publish only when asked (``SensorSourceController/publishChanneledObservation(sensorId:resultQuality:validTime:parameters:featureOfInterestId:)``).
    case none
    /// Read the sensor every interval and advertise an ``Observation``.
    case advertise(every: Duration)
    /// Read the sensor every interval and publish an ``Observation`` on the sensor's channel.
    case channel(every: Duration)
}

/// A sensor registered with a ``SensorSourceController`` and the IO that reads it; Coaty JS's
/// `SensorContainer`.
public struct SensorRegistration: Sendable {
    /// The sensor.
    public var sensor: Sensor
    /// The IO that reads its values.
    public var io: any SensorIo
    /// How its observations are published by the controller.
    public var publication: ObservationPublication
}

/// Errors of the Sensor Things controllers.
public enum SensorThingsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No sensor with this id is registered with the controller.
    case sensorNotRegistered(CoatyUUID)
    /// A periodic publication needs a positive sampling interval.
    case invalidSamplingInterval(Duration)
    /// The controller's `run()` was called while it runs or after it ran.
    case alreadyRan

    /// What went wrong and what to do.
    public var description: String {
        switch self {
        case .sensorNotRegistered(let id):
            "sensor \(id) is not registered with this SensorSourceController; register it first"
        case .invalidSamplingInterval(let interval):
            "a sensor's observations can only be published periodically with a positive interval, not \(interval)"
        case .alreadyRan:
            "the controller's run() was called a second time; create a new controller to run it again"
        }
    }
}

/// Makes sensors available to a Coaty network and publishes their observations; Coaty JS's
/// `SensorSourceController`, the counterpart of ``SensorObserverController``.
///
/// Registering a sensor advertises it; ``run()`` answers Discovers (by the sensor's objectId,
/// or by the object type `coaty.sensorThings.Sensor`) with one Resolve per sensor and Queries for
/// that object type with the registered sensors matching the query's filter, and publishes the
/// observations of sensors registered with a periodic ``ObservationPublication``. Observations
/// on a channel use the sensor's objectId as the channel id (see
/// ``Options-swift.struct/channelId``).
///
/// ```swift
/// let source = SensorSourceController(communicationManager: manager)
/// try await source.register(sensor, io: MockSensorIo(values: [20.5, 21]), publication: .channel(every: .seconds(1)))
/// try await AgentContainer(communicationManager: manager, controllers: [source]).run()
/// ```
///
/// In an ``AgentContainer`` the container calls ``onInit(_:)``, which also registers the sensors
/// of the `sensors` option of the agent configuration (Coaty JS's ``SensorDefinition``s, their IOs
/// made by ``Options-swift.struct/sensorIos``), and then ``run(_:)``; otherwise run ``run()`` in a
/// task of your own (it returns when cancelled).
public final class SensorSourceController: Controller {
    /// Coaty JS's controller options (all `false` by default), the IO factories its `sensors`
    /// option may name, and its overridable hooks (`getChannelId`, `createObservation`,
    /// `onObservationWillPublish`, `onObservationDidPublish`) as closures.
    public struct Options: Sendable {
        /// Do not answer Discovers for sensors (`ignoreSensorDiscoverEvents`).
        public var ignoreSensorDiscoverEvents = false
        /// Do not answer Queries for sensors (`ignoreSensorQueryEvents`).
        public var ignoreSensorQueryEvents = false
        /// Do not advertise a sensor when it is registered (`skipSensorAdvertise`).
        public var skipSensorAdvertise = false
        /// Do not deadvertise a sensor when it is unregistered (`skipSensorDeadvertise`).
        public var skipSensorDeadvertise = false
        /// The channel id of a sensor's channeled observations: its objectId by default, as in
        /// Coaty JS.
        public var channelId: @Sendable (Sensor) -> String = { $0.objectId.uuidString }
        /// The IO factories the `sensors` option of the agent configuration may name (see
        /// ``SensorDefinition``): ``SensorIoRegistry/standard`` by default.
        public var sensorIos = SensorIoRegistry.standard
        /// Coaty JS's `createObservation` hook: gets the sensor and the observation the controller
        /// made of a reading (Coaty JS's: named `Observation of <sensor name>`, the sensor as
        /// parent, both times now) and returns the observation to publish; unchanged by default.
        public var createObservation: @Sendable (SensorRegistration, Observation) -> Observation = { $1 }
        /// Coaty JS's `onObservationWillPublish` hook: called just before an observation is
        /// published (advertised or channeled); nothing by default.
        public var observationWillPublish: (@Sendable (SensorRegistration, Observation) -> Void)?
        /// Coaty JS's `onObservationDidPublish` hook: called once an observation is published;
        /// nothing by default.
        public var observationDidPublish: (@Sendable (SensorRegistration, Observation) -> Void)?

        /// The defaults.
        public init() {}
    }

    private struct Entry {
        var registration: SensorRegistration
        var stop: StopSignal?
        let values = Broadcast<JSONValue>()
    }

    private struct State {
        var entries: [CoatyUUID: Entry] = [:]
        var order: [CoatyUUID] = []
        var discovers: EventObservation<DiscoverEvent>?
        var queries: EventObservation<QueryEvent>?
    }

    private struct Sampling: Sendable {
        let sensorId: CoatyUUID
        let interval: Duration
        let channeled: Bool
        let stop: StopSignal
    }

    /// The communication manager it publishes with.
    public let communicationManager: CommunicationManager
    /// The options: those given to the initializer, with the flags set in the agent
    /// configuration's controller options applied by ``onInit(_:)``.
    public var options: Options { currentOptions.withLock { $0 } }
    private let currentOptions: CoatyMutex<Options>
    private let logger: Logger
    private let state = CoatyMutex(State())
    private let hasRun = Atomic(false)
    private let samplings: AsyncStream<Sampling>
    private let samplingContinuation: AsyncStream<Sampling>.Continuation

    /// Creates the controller; nothing is published until a sensor is registered.
    /// - Parameters:
    ///   - communicationManager: the agent's communication manager.
    ///   - options: the options.
    ///   - logger: where failed periodic publications are logged; the manager's logger by default.
    public init(communicationManager: CommunicationManager, options: Options = Options(), logger: Logger? = nil) {
        self.communicationManager = communicationManager
        self.currentOptions = CoatyMutex(options)
        self.logger = logger ?? communicationManager.logger
        (samplings, samplingContinuation) = AsyncStream.makeStream(of: Sampling.self)
    }

    deinit {
        samplingContinuation.finish()
    }

    // MARK: Registered sensors

    /// The registered sensors with their IO, in registration order.
    public var registeredSensorContainers: [SensorRegistration] {
        state.withLock { state in state.order.compactMap { state.entries[$0]?.registration } }
    }

    /// The registered sensors, in registration order.
    public var registeredSensors: [Sensor] { registeredSensorContainers.map(\.sensor) }

    /// The first registered sensor (in registration order) a predicate accepts; Coaty JS's
    /// `findSensor`.
    /// - Parameter predicate: whether a sensor is the one looked for.
    /// - Returns: the sensor, or `nil`.
    public func findSensor(where predicate: (Sensor) throws -> Bool) rethrows -> Sensor? {
        try registeredSensors.first(where: predicate)
    }

    /// Whether a sensor with this id is registered.
    /// - Parameter sensorId: the sensor's objectId.
    /// - Returns: whether it is registered.
    public func isRegistered(_ sensorId: CoatyUUID) -> Bool {
        state.withLock { $0.entries[sensorId] != nil }
    }

    /// The registration of a sensor, if it is registered.
    /// - Parameter sensorId: the sensor's objectId.
    /// - Returns: the sensor and its IO.
    public func sensorContainer(_ sensorId: CoatyUUID) -> SensorRegistration? {
        state.withLock { $0.entries[sensorId]?.registration }
    }

    /// Registers a sensor with the IO that reads it, and advertises it (unless
    /// ``Options-swift.struct/skipSensorAdvertise``). A sensor already registered (same
    /// objectId) is left as it is, as in Coaty JS.
    ///
    /// - Parameters:
    ///   - sensor: the sensor.
    ///   - io: the IO that reads its values.
    ///   - publication: whether the controller publishes its observations periodically (while
    ///     ``run()`` runs; the first one after one interval).
    /// - Throws: ``SensorThingsError/invalidSamplingInterval(_:)`` for a non-positive interval;
    ///   ``CommunicationError`` when the Advertise cannot be published.
    public func register(
        _ sensor: Sensor,
        io: any SensorIo,
        publication: ObservationPublication = .none
    ) async throws {
        var sampling: Sampling?
        switch publication {
        case .none: break
        case .advertise(let interval), .channel(let interval):
            guard interval > .zero else { throw SensorThingsError.invalidSamplingInterval(interval) }
            let isChannel = if case .channel = publication { true } else { false }
            sampling = Sampling(sensorId: sensor.objectId, interval: interval, channeled: isChannel, stop: StopSignal())
        }
        let registration = SensorRegistration(sensor: sensor, io: io, publication: publication)
        let added = state.withLock { state -> Bool in
            guard state.entries[sensor.objectId] == nil else { return false }
            state.entries[sensor.objectId] = Entry(registration: registration, stop: sampling?.stop)
            state.order.append(sensor.objectId)
            return true
        }
        guard added else { return }
        if let sampling { samplingContinuation.yield(sampling) }
        if !options.skipSensorAdvertise {
            try await communicationManager.publishAdvertise(sensor)
        }
    }

    /// Registers the sensor of a definition with the IO made by the factory the definition names
    /// in ``Options-swift.struct/sensorIos``; see ``register(_:io:publication:)``.
    /// - Parameter definition: the definition.
    /// - Throws: ``AgentConfigurationError`` naming `io` for an unknown IO name or `parameters`
    ///   when the IO cannot be made; otherwise as ``register(_:io:publication:)``.
    public func register(_ definition: SensorDefinition) async throws {
        let io = try definition.makeIo(with: options.sensorIos)
        try await register(definition.sensor, io: io, publication: definition.publication)
    }

    /// Unregisters a sensor: stops its periodic publication, ends its value sequences, and
    /// deadvertises it (unless ``Options-swift.struct/skipSensorDeadvertise``).
    /// - Parameter sensorId: the sensor's objectId.
    /// - Throws: ``SensorThingsError/sensorNotRegistered(_:)``; ``CommunicationError`` when
    ///   the Deadvertise cannot be published.
    public func unregister(_ sensorId: CoatyUUID) async throws {
        let entry = state.withLock { state -> Entry? in
            state.order.removeAll { $0 == sensorId }
            return state.entries.removeValue(forKey: sensorId)
        }
        guard let entry else { throw SensorThingsError.sensorNotRegistered(sensorId) }
        entry.stop?.stop()
        entry.values.finish()
        if !options.skipSensorDeadvertise {
            try await communicationManager.publishDeadvertise([sensorId])
        }
    }

    /// The values read for a sensor's published observations from now on (Coaty JS's
    /// `getSensorValueObservable`); reading the IO directly yields nothing. The sequence ends
    /// when the sensor is unregistered.
    /// - Parameter sensorId: the sensor's objectId.
    /// - Returns: the values.
    /// - Throws: ``SensorThingsError/sensorNotRegistered(_:)``.
    public func sensorValues(_ sensorId: CoatyUUID) throws(SensorThingsError) -> SensorValues {
        guard let values = state.withLock({ $0.entries[sensorId]?.values }) else {
            throw .sensorNotRegistered(sensorId)
        }
        return SensorValues(values.stream())
    }

    // MARK: Publishing observations

    /// Reads a registered sensor and publishes the observation on its channel (the sensor's
    /// objectId unless ``Options-swift.struct/channelId`` says otherwise).
    /// - Parameters:
    ///   - sensorId: the sensor's objectId.
    ///   - resultQuality: the quality of the result.
    ///   - validTime: the period during which the result may be used.
    ///   - parameters: the environmental conditions.
    ///   - featureOfInterestId: the id of the feature of interest.
    /// - Returns: the observation published.
    /// - Throws: ``SensorThingsError/sensorNotRegistered(_:)``, the IO's error, or
    ///   ``CommunicationError``.
    @discardableResult
    public func publishChanneledObservation(
        sensorId: CoatyUUID,
        resultQuality: [String]? = nil,
        validTime: CoatyTimeInterval? = nil,
        parameters: JSONObject? = nil,
        featureOfInterestId: CoatyUUID? = nil
    ) async throws -> Observation {
        try await publishObservation(
            sensorId: sensorId,
            channeled: true,
            Observation.Details(resultQuality, validTime, parameters, featureOfInterestId)
        )
    }

    /// Reads a registered sensor and advertises the observation.
    /// - Parameters:
    ///   - sensorId: the sensor's objectId.
    ///   - resultQuality: the quality of the result.
    ///   - validTime: the period during which the result may be used.
    ///   - parameters: the environmental conditions.
    ///   - featureOfInterestId: the id of the feature of interest.
    /// - Returns: the observation published.
    /// - Throws: ``SensorThingsError/sensorNotRegistered(_:)``, the IO's error, or
    ///   ``CommunicationError``.
    @discardableResult
    public func publishAdvertisedObservation(
        sensorId: CoatyUUID,
        resultQuality: [String]? = nil,
        validTime: CoatyTimeInterval? = nil,
        parameters: JSONObject? = nil,
        featureOfInterestId: CoatyUUID? = nil
    ) async throws -> Observation {
        try await publishObservation(
            sensorId: sensorId,
            channeled: false,
            Observation.Details(resultQuality, validTime, parameters, featureOfInterestId)
        )
    }

    private func publishObservation(
        sensorId: CoatyUUID,
        channeled: Bool,
        _ details: Observation.Details
    ) async throws -> Observation {
        guard let registration = sensorContainer(sensorId) else {
            throw SensorThingsError.sensorNotRegistered(sensorId)
        }
        let value = try await registration.io.read()
        state.withLock { $0.entries[sensorId]?.values }?.yield(value)
        let options = self.options
        let observation = options.createObservation(
            registration,
            Observation(of: registration.sensor, result: value, details)
        )
        options.observationWillPublish?(registration, observation)
        if channeled {
            try await communicationManager.publishChannel(options.channelId(registration.sensor), object: observation)
        } else {
            try await communicationManager.publishAdvertise(observation)
        }
        options.observationDidPublish?(registration, observation)
        return observation
    }

    // MARK: Running

    /// Applies the boolean members `ignoreSensorDiscoverEvents`, `ignoreSensorQueryEvents`,
    /// `skipSensorAdvertise` and `skipSensorDeadvertise` of the controller's options (from
    /// ``AgentConfiguration/controllers``, as Coaty JS reads them) over the initializer's, then
    /// registers the sensors of its `sensors` member (Coaty JS's array of ``SensorDefinition``),
    /// in order; their Advertises go out when the agent is online.
    ///
    /// Coaty JS silently ignores the whole `sensors` array when one definition is invalid; here the
    /// agent does not start, and the error names the field.
    /// - Parameter context: the controller's context.
    /// - Throws: ``AgentConfigurationError`` naming the bad member of a definition (e.g.
    ///   `controllers.SensorSourceController.sensors[1].io` for an IO name no factory has).
    public func onInit(_ context: ControllerContext) async throws {
        let flags: [(String, WritableKeyPath<Options, Bool>)] = [
            ("ignoreSensorDiscoverEvents", \.ignoreSensorDiscoverEvents),
            ("ignoreSensorQueryEvents", \.ignoreSensorQueryEvents),
            ("skipSensorAdvertise", \.skipSensorAdvertise), ("skipSensorDeadvertise", \.skipSensorDeadvertise),
        ]
        currentOptions.withLock { options in
            for (name, flag) in flags {
                if let value = context.options[name]?.boolValue { options[keyPath: flag] = value }
            }
        }
        try await registerSensors(inOptions: context.options, at: "controllers." + name)
    }

    /// Registers the sensors that the `sensors` member of controller options defines (Coaty JS's
    /// array of ``SensorDefinition``), in order, after checking every definition and making every
    /// IO (nothing is registered when one is bad). ``onInit(_:)`` does this with the options of
    /// the agent configuration.
    /// - Parameters:
    ///   - options: the controller options, e.g. `AgentConfiguration.controllers["SensorSourceController"]`.
    ///   - path: their field path for errors.
    /// - Throws: ``AgentConfigurationError`` naming the bad member; ``CommunicationError`` when an
    ///   Advertise cannot be published.
    public func registerSensors(inOptions options: JSONObject, at path: String = "") async throws {
        let definitions = try SensorDefinition.definitions(in: options, at: path)
        let registry = self.options.sensorIos
        let field = path.isEmpty ? "sensors" : path + ".sensors"
        var made: [(SensorDefinition, any SensorIo)] = []
        for (index, definition) in definitions.enumerated() {
            made.append((definition, try definition.makeIo(with: registry, at: "\(field)[\(index)]")))
        }
        for (definition, io) in made {
            try await register(definition.sensor, io: io, publication: definition.publication)
        }
    }

    /// Subscribes the Discover and Query observations, so they are in place before the agent
    /// goes online.
    /// - Parameter context: unused.
    /// - Throws: ``CommunicationError`` for an invalid namespace.
    public func onCommunicationManagerStarting(_ context: ControllerContext) async throws {
        try prepareResponders()
    }

    /// Runs ``run()``.
    /// - Parameter context: unused.
    /// - Throws: ``CommunicationError`` for an invalid namespace.
    public func run(_ context: ControllerContext) async throws {
        try await run()
    }

    /// Answers Discovers and Queries for the registered sensors and publishes periodic
    /// observations, until the task is cancelled. Call it once.
    /// - Throws: ``SensorThingsError/alreadyRan`` on a second call; ``CommunicationError`` for an
    ///   invalid namespace.
    public func run() async throws {
        guard !hasRun.exchange(true, ordering: .acquiringAndReleasing) else { throw SensorThingsError.alreadyRan }
        try prepareResponders()
        let (discovers, queries) = state.withLock { ($0.discovers, $0.queries) }
        let samplings = self.samplings
        await withDiscardingTaskGroup { group in
            if let discovers {
                group.addTask { for await discover in discovers { await self.answer(discover) } }
            }
            if let queries {
                group.addTask { for await query in queries { await self.answer(query) } }
            }
            for await sampling in samplings {
                group.addTask { await sampling.stop.run { await self.sample(sampling) } }
            }
            group.cancelAll()
        }
    }

    /// Returns when the broker has acknowledged the Discover and Query subscriptions (made by
    /// ``run()`` or before the agent goes online).
    /// - Throws: ``CommunicationError`` for an invalid namespace.
    public func subscribed() async throws {
        try prepareResponders()
        let (discovers, queries) = state.withLock { ($0.discovers, $0.queries) }
        await discovers?.subscribed()
        await queries?.subscribed()
    }

    private func prepareResponders() throws(CommunicationError) {
        let needsDiscovers = !options.ignoreSensorDiscoverEvents && state.withLock { $0.discovers == nil }
        let needsQueries = !options.ignoreSensorQueryEvents && state.withLock { $0.queries == nil }
        let discovers = needsDiscovers ? try communicationManager.observeDiscover() : nil
        let queries = needsQueries ? try communicationManager.observeQuery() : nil
        state.withLock { state in
            if let discovers { state.discovers = discovers }
            if let queries { state.queries = queries }
        }
    }

    /// Coaty JS's rule: a Discover of an objectId (without externalId) is resolved with that
    /// sensor; a Discover of types only whose object types include the Sensor's is resolved with
    /// every sensor, one Resolve each.
    private func answer(_ discover: DiscoverEvent) async {
        let data = discover.data
        let sensors: [Sensor]
        if data.externalId == nil, let objectId = data.objectId {
            sensors = sensorContainer(objectId).map { [$0.sensor] } ?? []
        } else if data.externalId == nil, data.objectId == nil, data.objectTypes?.contains(Sensor.objectType) == true {
            sensors = registeredSensors
        } else {
            return
        }
        for sensor in sensors {
            do {
                try await discover.resolve(object: sensor)
            } catch {
                logger.warning("Could not resolve a Discover for a sensor", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Coaty JS's rule: a Query whose object types include the Sensor's is answered with the
    /// registered sensors matching its filter (ordered, skipped and taken as it says), unless
    /// none match.
    private func answer(_ query: QueryEvent) async {
        guard query.data.objectTypes?.contains(Sensor.objectType) == true else { return }
        do {
            let sensors = try ObjectMatcher.apply(query.data.objectFilter, to: registeredSensors) {
                try AnyCoatyObject($0).jsonValue
            }
            guard !sensors.isEmpty else { return }
            try await query.retrieve(objects: sensors)
        } catch {
            logger.warning("Could not retrieve sensors for a Query", metadata: ["error": "\(error)"])
        }
    }

    private func sample(_ sampling: Sampling) async {
        while true {
            do {
                try await Task.sleep(for: sampling.interval)
            } catch {
                return
            }
            do {
                _ = try await publishObservation(sensorId: sampling.sensorId, channeled: sampling.channeled, .init())
            } catch SensorThingsError.sensorNotRegistered {
                return
            } catch {
                logger.warning(
                    "Could not publish a sensor observation",
                    metadata: ["sensor": "\(sampling.sensorId)", "error": "\(error)"]
                )
            }
        }
    }
}

extension Observation {
    /// The optional details of an observation made by ``SensorSourceController``.
    struct Details: Sendable {
        var resultQuality: [String]?
        var validTime: CoatyTimeInterval?
        var parameters: JSONObject?
        var featureOfInterestId: CoatyUUID?

        init(
            _ resultQuality: [String]? = nil,
            _ validTime: CoatyTimeInterval? = nil,
            _ parameters: JSONObject? = nil,
            _ featureOfInterestId: CoatyUUID? = nil
        ) {
            self.resultQuality = resultQuality
            self.validTime = validTime
            self.parameters = parameters
            self.featureOfInterestId = featureOfInterestId
        }
    }

    /// Coaty JS's `createObservation`: named after the sensor, its child, both times now (whole
    /// milliseconds since 1970).
    init(of sensor: Sensor, result: JSONValue, _ details: Details) {
        let now = (Date().timeIntervalSince1970 * 1000).rounded(.down)
        self.init(
            name: "Observation of " + sensor.name,
            phenomenonTime: now,
            result: result,
            resultTime: now,
            resultQuality: details.resultQuality,
            validTime: details.validTime,
            parameters: details.parameters,
            featureOfInterestId: details.featureOfInterestId,
            parentObjectId: sensor.objectId
        )
    }
}
