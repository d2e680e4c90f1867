public import CoatyCore
public import CoatyStore
import CoatySync
import Foundation
public import Logging

/// Takes, stores and serves ``CoatyModel/Snapshot``s of Coaty objects (Coaty's
/// `HistorianController`).
///
/// A snapshot is a `coaty.Snapshot` object holding a copy of an object, the time it was taken
/// (`creationTimestamp`, milliseconds since 1970), the agent that took it (`creatorId`), tags,
/// and the object's id as `parentObjectId`. The controller takes one
///
/// - when you call ``generateSnapshot(of:timestamp:tags:)``,
/// - while ``run()`` runs, for each object received by Advertise of ``Options/coreTypes`` or
///   ``Options/objectTypes`` and by Channel on ``Options/channelIds`` (a CoatyKit addition).
///
/// It stores them through the typed repository in any ``ConnectionType`` (in-memory, SQLite), may
/// advertise them, store snapshots other agents advertise, and answer a Query of core type
/// `Snapshot` (or object type `coaty.Snapshot`) from the store with Coaty's filter semantics
/// (conditions on any member, e.g. `object.objectId` or `parentObjectId`, `creationTimestamp`
/// ranges, ordering, skip, take).
///
/// ```swift
/// let historian = HistorianController(
///     communicationManager: manager,
///     connection: try SQLiteDatabase(path: "history.sqlite").makeConnection(),
///     options: .init(objectTypes: ["com.example.Light"])
/// )
/// // run it in an AgentContainer (or call run() in a task group), then:
/// let history = try await historian.snapshots(of: lightId)   // oldest first
/// ```
///
/// Snapshots this controller takes get strictly increasing timestamps: a timestamp that would
/// not be later than the previous one is the previous one plus 1 ms, so ordering by
/// `creationTimestamp` is the order they were taken in. Coaty JS's `database` option and
/// `onQueryReceived`/`onQueryRetrieved` hooks have no counterpart: the store is given to the
/// initializer, and queries are logged at debug level.
public final class HistorianController: Controller {
    /// What the controller snapshots, stores, advertises and answers. Coaty JS's options have the
    /// same names; their defaults there are all `false`.
    public struct Options: Sendable, Hashable {
        /// Core types whose Advertise events (`ADV:<CoreType>`) are snapshotted. Snapshots
        /// themselves never are: see ``shouldPersistObservedSnapshots``.
        public var coreTypes: [CoreType]
        /// Object types whose Advertise events (`ADV::<objectType>`) are snapshotted.
        public var objectTypes: [String]
        /// Channel ids whose Channel events are snapshotted (each object the event carries).
        public var channelIds: [String]
        /// Tags given to the snapshots taken of received objects.
        public var tags: [String]
        /// Whether each snapshot taken is advertised (after it is stored).
        public var shouldAdvertiseSnapshots: Bool
        /// Whether each snapshot taken is stored.
        public var shouldPersistLocalSnapshots: Bool
        /// Whether snapshots advertised by any agent (`ADV:Snapshot`) are stored.
        public var shouldPersistObservedSnapshots: Bool
        /// Whether Query events of core type `Snapshot` or object type `coaty.Snapshot` are
        /// answered from the store.
        public var shouldReplyToQueries: Bool

        /// Options.
        /// - Parameters:
        ///   - coreTypes: core types to snapshot on Advertise; none by default.
        ///   - objectTypes: object types to snapshot on Advertise; none by default.
        ///   - channelIds: channel ids to snapshot on Channel; none by default.
        ///   - tags: tags of the snapshots of received objects; none by default.
        ///   - shouldAdvertiseSnapshots: advertise snapshots taken; `false` by default.
        ///   - shouldPersistLocalSnapshots: store snapshots taken; `true` by default.
        ///   - shouldPersistObservedSnapshots: store advertised snapshots; `false` by default.
        ///   - shouldReplyToQueries: answer Queries of snapshots; `true` by default.
        public init(
            coreTypes: [CoreType] = [],
            objectTypes: [String] = [],
            channelIds: [String] = [],
            tags: [String] = [],
            shouldAdvertiseSnapshots: Bool = false,
            shouldPersistLocalSnapshots: Bool = true,
            shouldPersistObservedSnapshots: Bool = false,
            shouldReplyToQueries: Bool = true
        ) {
            self.coreTypes = coreTypes.filter { $0 != .snapshot }
            self.objectTypes = objectTypes.filter { $0 != Snapshot.objectType }
            self.channelIds = channelIds
            self.tags = tags
            self.shouldAdvertiseSnapshots = shouldAdvertiseSnapshots
            self.shouldPersistLocalSnapshots = shouldPersistLocalSnapshots
            self.shouldPersistObservedSnapshots = shouldPersistObservedSnapshots
            self.shouldReplyToQueries = shouldReplyToQueries
        }
    }

    /// The communication manager it observes, advertises and answers with.
    public let communicationManager: CommunicationManager
    /// What it snapshots, stores, advertises and answers.
    public let options: Options
    /// The logger.
    public let logger: Logger

    private let repository: AnyRepository<AnyCoatyObject>
    private let lastTimestamp = CoatyMutex<Double>(0)
    private let runOnce = SingleRun()

    /// Creates the controller over a store.
    /// - Parameters:
    ///   - communicationManager: the agent's communication manager.
    ///   - connection: the store's connection (in-memory, SQLite, …); snapshots are stored in the
    ///     collection `coaty.Snapshot`.
    ///   - options: what to snapshot, store, advertise and answer.
    ///   - logger: where to log failures; nothing by default.
    public init(
        communicationManager: CommunicationManager,
        connection: some ConnectionType,
        options: Options = Options(),
        logger: Logger = Logger(label: "coaty.historian", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.communicationManager = communicationManager
        self.options = options
        self.logger = logger
        self.repository = AnyRepository(
            StoreRepository(
                connection: connection,
                coding: Self.snapshotCoding(registry: communicationManager.registry)
            )
        )
    }

    // MARK: Taking snapshots

    /// Takes a snapshot of an object, then stores it (``Options/shouldPersistLocalSnapshots``)
    /// and advertises it (``Options/shouldAdvertiseSnapshots``), in that order, so that whoever
    /// sees the Advertise can query it.
    ///
    /// ```swift
    /// let snapshot = try await historian.generateSnapshot(of: light, tags: ["switched"])
    /// ```
    ///
    /// - Parameters:
    ///   - object: the object; the snapshot holds a copy.
    ///   - timestamp: when, in milliseconds since 1970; now by default (strictly after the
    ///     previous snapshot the controller took).
    ///   - tags: tags for retrieval.
    /// - Returns: the snapshot.
    /// - Throws: an encoding or store error (then nothing is advertised), or a
    ///   ``CoatyCommunication/CommunicationError`` when the Advertise cannot be published.
    @discardableResult
    public func generateSnapshot(
        of object: some CoatyObject,
        timestamp: Double? = nil,
        tags: [String] = []
    ) async throws -> Snapshot {
        let object = try AnyCoatyObject(object)
        let snapshot = Snapshot(
            of: object,
            creatorId: communicationManager.identity.objectId,
            creationTimestamp: timestamp ?? nextTimestamp(),
            name: "\(object.objectType) \(object.name)",
            tags: tags
        )
        if options.shouldPersistLocalSnapshots { try await repository.save(AnyCoatyObject(snapshot)) }
        if options.shouldAdvertiseSnapshots { try await communicationManager.publishAdvertise(snapshot) }
        return snapshot
    }

    // MARK: Reading snapshots

    /// The stored snapshots of one object, oldest first (by `creationTimestamp`).
    ///
    /// - Parameters:
    ///   - objectId: the object's id (the snapshots' `parentObjectId`).
    ///   - timestamps: only snapshots taken in this range (milliseconds since 1970); all by default.
    /// - Returns: the snapshots.
    /// - Throws: a store error.
    public func snapshots(of objectId: CoatyUUID, takenIn timestamps: ClosedRange<Double>? = nil) async throws
        -> [Snapshot]
    {
        var filter = ObjectFilter.where("parentObjectId", .equals(.string(objectId.uuidString)))
        if let timestamps {
            filter = filter.and(
                "creationTimestamp",
                .between(.double(timestamps.lowerBound), .double(timestamps.upperBound))
            )
        }
        return try await snapshots(matching: filter.orderBy("creationTimestamp"))
    }

    /// The stored snapshots a filter selects (Coaty JS's `findSnapshotsByFilter`).
    ///
    /// ```swift
    /// let latest = try await historian.snapshots(
    ///     matching: ObjectFilter.where("tags", .contains(["switched"])).orderBy("creationTimestamp", .descending).take(1)
    /// )
    /// ```
    ///
    /// - Parameter filter: conditions, ordering, skip and take over the snapshots' members.
    /// - Returns: the snapshots.
    /// - Throws: a store error, or a decoding error for a stored row that is no snapshot.
    public func snapshots(matching filter: ObjectFilter) async throws -> [Snapshot] {
        try await repository.fetch(FetchOptions(filter: filter)).map { object in
            guard let snapshot = object.as(Snapshot.self) else { throw HistorianError.notASnapshot(object.objectId) }
            return snapshot
        }
    }

    // MARK: Running

    /// Returns once ``run()`` has subscribed to everything it observes.
    public func started() async {
        await runOnce.waitUntilReady()
    }

    /// Runs ``run()``.
    /// - Parameter context: unused.
    /// - Throws: ``CoatyRuntime/AgentRuntimeError/controllerAlreadyRan(_:)`` on a second run;
    ///   ``CoatyCommunication/CommunicationError`` for an invalid object type or channel id.
    public func run(_ context: ControllerContext) async throws {
        try await run()
    }

    /// Snapshots received objects, stores advertised snapshots and answers Queries, as the
    /// options say, until the task is cancelled. Call it once; it returns at once when the
    /// options observe nothing.
    /// - Throws: ``CoatyRuntime/AgentRuntimeError/controllerAlreadyRan(_:)`` on a second call;
    ///   ``CoatyCommunication/CommunicationError`` for an invalid object type or channel id.
    public func run() async throws {
        try runOnce.begin(name)
        defer { runOnce.markReady() }
        let manager = communicationManager
        var advertises: [EventObservation<AdvertiseEvent<AnyCoatyObject>>] = []
        for coreType in options.coreTypes { advertises.append(try manager.observeAdvertise(coreType: coreType)) }
        for objectType in options.objectTypes {
            advertises.append(try manager.observeAdvertise(objectType: objectType))
        }
        let channels = try options.channelIds.map { try manager.observeChannel($0) }
        let observedSnapshots =
            options.shouldPersistObservedSnapshots ? try manager.observeAdvertise(coreType: .snapshot) : nil
        let queries = options.shouldReplyToQueries ? try manager.observeQuery() : nil
        let advertiseObservations = advertises

        await withTaskGroup(of: Void.self) { group in
            for observation in advertiseObservations {
                group.addTask {
                    for await event in observation { await self.snapshotReceived(event.object) }
                }
            }
            for observation in channels {
                group.addTask {
                    for await event in observation {
                        for object in event.data.objects { await self.snapshotReceived(object) }
                    }
                }
            }
            if let observedSnapshots {
                group.addTask {
                    for await event in observedSnapshots { await self.store(observed: event.object) }
                }
            }
            if let queries {
                group.addTask {
                    for await query in queries { await self.answer(query) }
                }
            }
            group.addTask {
                for observation in advertiseObservations { await observation.subscribed() }
                for observation in channels { await observation.subscribed() }
                await observedSnapshots?.subscribed()
                await queries?.subscribed()
                self.runOnce.markReady()
            }
        }
    }

    // MARK: Internals

    /// The coding of the snapshot collection: every object of core type `Snapshot`, decoded with
    /// the manager's registry so the copied objects keep every member.
    private static func snapshotCoding(registry: CoatyObjectRegistry) -> StoreCoding<AnyCoatyObject, ReceiptMetadata> {
        var coding = AnyCoatyObject.coatyStoreCoding(registry: registry)
        coding.scope = .coreTypes([CoreType.snapshot.rawValue])
        return coding
    }

    /// Now in milliseconds since 1970, strictly after the previous timestamp taken.
    private func nextTimestamp() -> Double {
        let now = (Date().timeIntervalSince1970 * 1000).rounded(.down)
        return lastTimestamp.withLock { last in
            last = max(now, last + 1)
            return last
        }
    }

    private func snapshotReceived(_ object: AnyCoatyObject) async {
        guard object.coreType != .snapshot else { return }
        do {
            try await generateSnapshot(of: object, tags: options.tags)
        } catch {
            logger.error(
                "Could not take a snapshot",
                metadata: ["objectId": "\(object.objectId)", "error": "\(error)"]
            )
        }
    }

    private func store(observed snapshot: AnyCoatyObject) async {
        do {
            try await repository.save(snapshot)
        } catch {
            logger.error(
                "Could not store an observed snapshot",
                metadata: ["objectId": "\(snapshot.objectId)", "error": "\(error)"]
            )
        }
    }

    /// Answers a Query of snapshots with one Retrieve; on a store error, not at all (as Coaty JS:
    /// the querying agent times out).
    private func answer(_ query: QueryEvent) async {
        let data = query.data
        let queriesSnapshots =
            data.coreTypes?.contains(.snapshot) ?? data.objectTypes?.contains(Snapshot.objectType) ?? false
        guard queriesSnapshots else { return }
        logger.debug("Query of snapshots", metadata: ["filter": "\(String(describing: data.objectFilter))"])
        do {
            let snapshots = try await repository.fetch(
                FetchOptions(filter: data.objectFilter, joins: data.objectJoinConditions?.conditions ?? [])
            )
            try await query.retrieve(objects: snapshots.filter { data.matchesType(of: $0) })
        } catch {
            logger.error("Could not answer a Query of snapshots", metadata: ["error": "\(error)"])
        }
    }
}

/// Why a ``HistorianController`` failed.
public enum HistorianError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A row of core type `Snapshot` in the store does not decode as a ``CoatyModel/Snapshot``
    /// (e.g. it lacks `object` or `parentObjectId`); remove or repair it.
    case notASnapshot(CoatyUUID)

    /// What went wrong and what to do.
    public var description: String {
        switch self {
        case .notASnapshot(let id):
            "the stored object \(id) of core type Snapshot is not a valid snapshot (object, parentObjectId, "
                + "creationTimestamp, creatorId are required); remove or repair it"
        }
    }
}
