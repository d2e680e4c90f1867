import CoatyCore
import CoatySync
import Logging

// MARK: - Recorder groups

/// The observations of a member of a recorder group (see ``CoatyRecorder/init(manager:storage:configuration:indexing:handover:logger:)``).
struct GroupMembership: Sendable {
    /// The shared-subscription group.
    let group: String
    /// How this member resumes and ends the sessions of members that are gone.
    let handover: SessionHandover
    /// The members' announcements: retained on `coatykit/recorder-groups/<group>/members/<id>`.
    let announcements: EventObservation<RawEvent>
    /// Who takes over whose session: retained on `coatykit/recorder-groups/<group>/takers/<id>`.
    let takers: EventObservation<RawEvent>
    /// Deadvertise events (not shared): members that are gone.
    let deadvertises: EventObservation<DeadvertiseEvent>
    /// This member's barrier topic, for leaving the group.
    let barrierTopic: String
    /// Its observation.
    let barrier: EventObservation<RawEvent>
}

/// A ``GroupView`` shared by the tasks of a member.
final class GroupViewBox: Sendable {
    let mutex: CoatyMutex<GroupView>

    init(_ view: GroupView) {
        mutex = CoatyMutex(view)
    }
}

/// What a member knows of its group.
struct GroupView {
    /// The members announced (this one included; possibly some that are gone unnoticed).
    var members: Set<CoatyUUID>
    /// Members that are gone and whose session is not handed over yet.
    var gone: Set<CoatyUUID> = []
    /// The member taking over each gone member's session, as it announced.
    var takers: [CoatyUUID: CoatyUUID] = [:]
    /// Gone members whose session this member is waiting to take over, or taking over.
    var attempting: Set<CoatyUUID> = []

    /// The gone members this member starts attempting to take over now, each with the delay
    /// before the attempt: the rank of this member among those alive (by identity id) × 3 s, so
    /// that normally the first takes over at once and the others only if it does not.
    mutating func startAttempts(by me: CoatyUUID) -> [(member: CoatyUUID, delay: Duration)] {
        let alive = members.subtracting(gone).sorted { $0.uuidString < $1.uuidString }
        let rank = alive.firstIndex(of: me) ?? alive.count
        let due = gone.subtracting(attempting).sorted { $0.uuidString < $1.uuidString }
        attempting.formUnion(due)
        return due.map { ($0, .seconds(3 * min(rank, 10))) }
    }

    /// What an attempt to take over `member`'s session does next.
    enum AttemptStep: Equatable {
        /// Take it over: it is still announced and gone, and no other live member is at it.
        case takeOver
        /// Wait: another live member announced taking it over.
        case wait
        /// Nothing: it was handed over (its announcement cleared), or it came back.
        case done
    }

    /// What this member's attempt to take over `member`'s session does next.
    func nextStep(for member: CoatyUUID, by me: CoatyUUID) -> AttemptStep {
        guard members.contains(member), gone.contains(member) else { return .done }
        if let taker = takers[member], taker != me, !gone.contains(taker) { return .wait }
        return .takeOver
    }
}

extension CoatyRecorder {
    /// The topic prefix of a recorder group's own messages (Raw topics, outside `coaty/`).
    static func groupTopic(_ group: String) -> String { "coatykit/recorder-groups/\(group)" }

    /// The retained announcement topic of a member.
    static func memberTopic(_ group: String, _ id: CoatyUUID) -> String {
        "\(groupTopic(group))/members/\(id.uuidString)"
    }

    /// The retained topic naming the member that takes over the session of gone member `id`.
    static func takerTopic(_ group: String, _ id: CoatyUUID) -> String {
        "\(groupTopic(group))/takers/\(id.uuidString)"
    }

    /// A barrier topic (only the one who publishes to it subscribes it).
    static func barrierTopic(_ group: String, _ id: CoatyUUID) -> String {
        "\(groupTopic(group))/barriers/\(id.uuidString)"
    }

    /// The observations a group member needs, registered with the others before the manager
    /// starts; `nil` when this recorder is not a group member.
    func makeGroupMembership() throws -> GroupMembership? {
        guard let handover, let group = manager.options.sharedSubscriptionGroup else { return nil }
        let barrierTopic = Self.barrierTopic(group, manager.identity.objectId)
        return GroupMembership(
            group: group,
            handover: handover,
            announcements: try manager.observeRaw("\(Self.groupTopic(group))/members/+"),
            takers: try manager.observeRaw("\(Self.groupTopic(group))/takers/+"),
            deadvertises: try manager.observeDeadvertise(),
            barrierTopic: barrierTopic,
            barrier: try manager.observeRaw(barrierTopic)
        )
    }

    /// The id at the end of a group topic.
    private static func lastId(_ topic: String) -> CoatyUUID? {
        CoatyUUID(String(topic.split(separator: "/").last ?? ""))
    }

    /// Announces this member, follows the others, and takes over the session of each member that
    /// is gone when it is this member's turn; until cancelled.
    func serveGroup(_ membership: GroupMembership) async {
        let me = manager.identity.objectId
        let view = GroupViewBox(GroupView(members: [me]))
        let (signals, signal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                for await event in membership.announcements {
                    guard let id = Self.lastId(event.topic) else { continue }
                    view.mutex.withLock { view in
                        if event.payload.isEmpty {
                            view.members.remove(id)
                            view.takers[id] = nil
                        } else {
                            view.members.insert(id)
                        }
                        view.gone.remove(id)
                    }
                    signal.yield()
                }
            }
            tasks.addTask {
                for await event in membership.takers {
                    guard let id = Self.lastId(event.topic) else { continue }
                    let taker = CoatyUUID(String(decoding: event.payload, as: UTF8.self))
                    view.mutex.withLock { $0.takers[id] = taker }
                    signal.yield()
                }
            }
            tasks.addTask {
                for await event in membership.deadvertises {
                    let changed = view.mutex.withLock { view -> Bool in
                        let gone = event.objectIds.filter { $0 != me && view.members.contains($0) }
                        view.gone.formUnion(gone)
                        return !gone.isEmpty
                    }
                    if changed { signal.yield() }
                }
            }
            tasks.addTask {
                // On every connection: a broker restarted without persistence forgot the retained announcement.
                for await state in self.manager.communicationStates() where state == .online {
                    do {
                        try await self.manager.publishRaw(
                            topic: Self.memberTopic(membership.group, me),
                            payload: Array(me.uuidString.utf8),
                            retain: true,
                            qos: .atLeastOnce
                        )
                    } catch {
                        self.logger.error(
                            "Recorder group: cannot announce this member",
                            metadata: ["error": "\(error)"]
                        )
                    }
                }
            }
            for await _ in signals {
                for (member, delay) in view.mutex.withLock({ $0.startAttempts(by: me) }) {
                    tasks.addTask {
                        defer {
                            view.mutex.withLock { _ = $0.attempting.remove(member) }
                            signal.yield()
                        }
                        try? await Task.sleep(for: delay)
                        // Someone else may be at it (or done): wait while a live member says it takes it over.
                        var step = view.mutex.withLock { $0.nextStep(for: member, by: me) }
                        while step == .wait, !Task.isCancelled {
                            try? await Task.sleep(for: .seconds(1))
                            step = view.mutex.withLock { $0.nextStep(for: member, by: me) }
                        }
                        if step != .takeOver || Task.isCancelled { return }
                        if !(await self.handOver(member, membership)) { try? await Task.sleep(for: .seconds(1)) }
                    }
                }
            }
            tasks.cancelAll()
        }
    }

    /// Resumes the session of the gone member `id`, stores and answers what the broker held for
    /// it, leaves the group's subscriptions of that session, and ends it. Returns whether it did.
    func handOver(_ id: CoatyUUID, _ membership: GroupMembership) async -> Bool {
        let metadata: Logger.Metadata = ["group": "\(membership.group)", "member": "\(id)"]
        logger.warning("Recorder group: a member is gone; taking over its broker session", metadata: metadata)
        let takerTopic = Self.takerTopic(membership.group, id)
        do {
            // Tell the others, so they do not take it at the same time (the broker would end the session of
            // whichever connected first under the client id).
            try await manager.publishRaw(
                topic: takerTopic,
                payload: Array(manager.identity.objectId.uuidString.utf8),
                retain: true,
                qos: .atLeastOnce
            )
            let taker = try membership.handover.resume(id)
            var configuration = self.configuration
            configuration.acknowledgesAfterCommit = true
            let drain = CoatyRecorder(
                manager: taker,
                storage: storage,
                configuration: configuration,
                indexing: indexing,
                logger: logger
            )
            let barrierTopic = Self.barrierTopic(membership.group, CoatyUUID())
            let barrier = try taker.observeRaw(barrierTopic)
            let statistics = try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await drain.run() }
                await drain.registered()
                do {
                    try await taker.start()
                    // A connection lost meanwhile (another client took the session) ends the attempt.
                    tasks.addTask {
                        for await state in taker.communicationStates() where state != .online {
                            throw RecorderError.groupHandoverInterrupted
                        }
                    }
                    await drain.ready()
                    // The drain's own writer acknowledges meanwhile.
                    let crossed = try await leave(taker, barrier: barrier, topic: barrierTopic)
                    drain.stop()
                    try await tasks.next()
                    tasks.cancelAll()
                    await taker.stop()
                    guard crossed else { throw RecorderError.groupBarrierTimedOut }
                    return drain.statistics
                } catch {
                    // Never left connected: a retry connects under the same client id.
                    drain.stop()
                    await taker.stop()
                    throw error
                }
            }
            try await membership.handover.end(id)
            for topic in [Self.memberTopic(membership.group, id), takerTopic] {
                try await manager.publishRaw(topic: topic, payload: [], retain: true, qos: .atLeastOnce)
            }
            stats.withLock { stats in
                stats.received += statistics.received
                stats.stored += statistics.stored
                stats.removed += statistics.removed
                stats.handedOverSessions += 1
            }
            logger.warning(
                "Recorder group: took over the broker session of a gone member",
                metadata: metadata.merging(["statistics": "\(statistics)"]) { $1 }
            )
            return true
        } catch {
            logger.error(
                "Recorder group: taking over a gone member's session failed; retrying",
                metadata: metadata.merging(["error": "\(error)"]) { $1 }
            )
            return false
        }
    }

    /// Leaves the group's subscriptions of `manager`'s session at the broker, then waits until a
    /// message published to `topic` after that comes back: everything the broker had queued for
    /// the session arrived before it (it delivers a session's messages in order). Returns whether
    /// the barrier came back within a minute. Someone must acknowledge what arrives meanwhile
    /// (with held acknowledgements nothing more is read otherwise, not even the PUBACK of the
    /// barrier).
    func leave(_ manager: CommunicationManager, barrier: EventObservation<RawEvent>, topic: String) async throws -> Bool
    {
        await barrier.subscribed()
        try await manager.leaveSharedSubscriptionGroup()
        return try await withThrowingTaskGroup(of: Bool.self) { tasks in
            tasks.addTask {
                for await _ in barrier { return true }
                return false
            }
            tasks.addTask {
                try? await Task.sleep(for: .seconds(60))
                return false
            }
            try await manager.publishRaw(topic: topic, payload: [1], qos: .atLeastOnce)
            let crossed = try await tasks.next() ?? false
            tasks.cancelAll()
            return crossed
        }
    }

    /// A member that stops leaves its group: the broker gives it no more of the group's events,
    /// everything it had queued for it is stored and acknowledged, and its announcement is
    /// cleared (so no other member takes over its session). Its session itself is ended by
    /// whoever stops the manager (``SessionHandover/end``).
    func leaveGroup(_ membership: GroupMembership) async {
        await withTaskGroup(of: Void.self) { helpers in
            // The writer's acknowledgements stopped with the stop request; until the member has left,
            // acknowledge what is committed, or the transport reads nothing more.
            if configuration.acknowledgesAfterCommit {
                helpers.addTask {
                    while !Task.isCancelled {
                        await self.acknowledgeIfCommitted()
                        try? await Task.sleep(for: .milliseconds(1))
                    }
                }
            }
            do {
                let crossed = try await leave(manager, barrier: membership.barrier, topic: membership.barrierTopic)
                if !crossed {
                    logger.warning("Recorder group: leaving timed out", metadata: ["group": "\(membership.group)"])
                }
                try await manager.publishRaw(
                    topic: Self.memberTopic(membership.group, manager.identity.objectId),
                    payload: [],
                    retain: true,
                    qos: .atLeastOnce
                )
            } catch {
                logger.warning(
                    "Recorder group: leaving failed",
                    metadata: ["group": "\(membership.group)", "error": "\(error)"]
                )
            }
            helpers.cancelAll()
        }
    }
}
