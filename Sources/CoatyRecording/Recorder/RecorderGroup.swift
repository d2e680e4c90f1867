import CoatyCore
import CoatyStore
import CoatySync
import Logging

// MARK: - Recorder groups

/// The observations of a member of a recorder group (see ``CoatyRecorder/init(manager:storage:configuration:indexing:handover:logger:)``).
struct GroupMembership: Sendable {
    /// The shared-subscription group.
    let group: String
    /// How this member resumes and ends the sessions of members that are gone.
    let handover: SessionHandover
    /// The group's election messages, in the broker's order: the members' retained
    /// announcements (`coatykit/recorder-groups/<group>/election/members/<id>`) and the claims to
    /// take over a gone member's session (`…/election/claims/<id>`), on one subscription.
    let election: EventObservation<RawEvent>
    /// Deadvertise events (not shared): members that are gone.
    let deadvertises: EventObservation<DeadvertiseEvent>
    /// This member's barrier topic, for leaving the group.
    let barrierTopic: String
    /// Its observation.
    let barrier: EventObservation<RawEvent>
}

extension CoatyRecorder {
    /// The topic prefix of a recorder group's own messages (Raw topics, outside `coaty/`).
    static func groupTopic(_ group: String) -> String { "coatykit/recorder-groups/\(group)" }

    /// The prefix of a group's election topics (announcements and claims, one subscription).
    static func electionTopic(_ group: String) -> String { "\(groupTopic(group))/election" }

    /// The retained announcement topic of a member: `<id> <incarnation>` while it is a member.
    static func memberTopic(_ group: String, _ id: CoatyUUID) -> String {
        "\(electionTopic(group))/members/\(id.uuidString)"
    }

    /// The topic of the claims to take over the session of gone member `id` (see ``GroupElection``).
    static func claimTopic(_ group: String, _ id: CoatyUUID) -> String {
        "\(electionTopic(group))/claims/\(id.uuidString)"
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
            election: try manager.observeRaw("\(Self.electionTopic(group))/#"),
            deadvertises: try manager.observeDeadvertise(),
            barrierTopic: barrierTopic,
            barrier: try manager.observeRaw(barrierTopic)
        )
    }

    /// The id at the end of a group topic.
    private static func lastId(_ topic: String) -> CoatyUUID? {
        CoatyUUID(String(topic.split(separator: "/").last ?? ""))
    }

    /// The election event a message on the group's election topics carries, if any.
    static func electionEvent(_ event: RawEvent) -> GroupElection.Event? {
        let levels = event.topic.split(separator: "/")
        guard levels.count >= 2, let id = lastId(event.topic) else { return nil }
        switch levels[levels.count - 2] {
        case "members":
            if event.payload.isEmpty { return .cleared(id) }
            let parts = String(decoding: event.payload, as: UTF8.self).split(separator: " ")
            guard CoatyUUID(String(parts.first ?? "")) == id else { return nil }
            return .announced(id, incarnation: parts.count > 1 ? String(parts[1]) : "")
        case "claims":
            return GroupElection.Claim(payload: event.payload).map { .claimed($0) }
        default:
            return nil
        }
    }

    /// Announces this member, follows the others, and takes over the session of each member that
    /// is gone when this member wins its election (``GroupElection``); until cancelled.
    func serveGroup(_ membership: GroupMembership) async {
        let me = manager.identity.objectId
        let group = membership.group
        var election = GroupElection(me: me)
        let (inbox, post) = AsyncStream<GroupElection.Event>.makeStream()
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                // One subscription, consumed in order: every member applies the same claims in the same order.
                for await event in membership.election {
                    if let electionEvent = Self.electionEvent(event) { post.yield(electionEvent) }
                }
            }
            tasks.addTask {
                for await event in membership.deadvertises { post.yield(.deadvertised(event.objectIds)) }
            }
            tasks.addTask {
                // On every connection, with a new incarnation: the others then tell this member's return (after a
                // last will its connection may have sent) from its retained announcement delivered again.
                for await state in self.manager.communicationStates() where state == .online {
                    do {
                        try await self.manager.publishRaw(
                            topic: Self.memberTopic(group, me),
                            payload: Array("\(me.uuidString) \(CoatyUUID().uuidString)".utf8),
                            retain: true,
                            qos: .atLeastOnce
                        )
                    } catch {
                        self.logger.error("Recorder group: cannot announce this member", metadata: ["error": "\(error)"])
                    }
                }
            }
            for await event in inbox {
                // A stopping member claims and takes over nothing more (it may be one of a group stopped at once).
                let stopping = control.withLock { $0.stopRequested }
                for action in election.handle(event) {
                    switch action {
                    case .scheduleClaim(let member, let round, let delay):
                        tasks.addTask {
                            try? await Task.sleep(for: delay)
                            post.yield(.claimDue(member, round: round))
                        }
                    case .publishClaim(let claim):
                        if stopping { continue }
                        logger.info(
                            "Recorder group: claiming the broker session of a gone member",
                            metadata: ["group": "\(group)", "member": "\(claim.member)", "round": "\(claim.round)"]
                        )
                        tasks.addTask {
                            do {
                                try await self.manager.publishRaw(
                                    topic: Self.claimTopic(group, claim.member),
                                    payload: claim.payload,
                                    qos: .atLeastOnce
                                )
                            } catch {
                                self.logger.error(
                                    "Recorder group: cannot publish a claim",
                                    metadata: ["member": "\(claim.member)", "error": "\(error)"]
                                )
                            }
                        }
                    case .takeOver(let member):
                        if stopping { continue }
                        tasks.addTask {
                            let completed = await self.handOver(member, membership)
                            post.yield(.takeOverEnded(member, completed: completed))
                        }
                    case .scheduleRetry(let member, let delay):
                        tasks.addTask {
                            try? await Task.sleep(for: delay)
                            post.yield(.retryDue(member))
                        }
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
        do {
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
                    // The drain's own writer acknowledges meanwhile. A member that stops meanwhile ends
                    // the take-over: the drain commits and acknowledges what it has, and the session
                    // keeps the rest (for another taker, or the member's return).
                    let crossed = try await leave(taker, barrier: barrier, topic: barrierTopic) {
                        self.control.withLock { $0.stopRequested }
                    }
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
            try await manager.publishRaw(
                topic: Self.memberTopic(membership.group, id),
                payload: [],
                retain: true,
                qos: .atLeastOnce
            )
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
            if control.withLock({ $0.stopRequested }) {
                logger.info(
                    "Recorder group: stopping; the take-over ends and the gone member's session keeps the rest",
                    metadata: metadata
                )
            } else {
                logger.error(
                    "Recorder group: taking over a gone member's session did not complete",
                    metadata: metadata.merging(["error": "\(error)"]) { $1 }
                )
            }
            return false
        }
    }

    /// Leaves the group's subscriptions of `manager`'s session at the broker, then waits until a
    /// message published to `topic` after that comes back: everything the broker had queued for
    /// the session arrived before it (it delivers a session's messages in order). Returns whether
    /// the barrier came back within `limit` (and before `abandoned()` said so: checked every
    /// 10 ms). Someone must acknowledge what arrives meanwhile
    /// (with held acknowledgements nothing more is read otherwise, not even the PUBACK of the
    /// barrier).
    func leave(
        _ manager: CommunicationManager,
        barrier: EventObservation<RawEvent>,
        topic: String,
        within limit: Duration = .seconds(60),
        abandoned: @escaping @Sendable () -> Bool = { false }
    ) async throws -> Bool {
        await barrier.subscribed()
        // Leaving and the barrier's publication wait for the broker's answers, which come behind
        // everything it had already sent this session: under a flood, longer than `limit`. The
        // attempt goes on (until the session ends) while this returns at the limit.
        let (outcomes, outcome) = AsyncStream<Result<Bool, any Error>>.makeStream()
        let attempt = Task {
            do {
                try await manager.leaveSharedSubscriptionGroup()
                try await manager.publishRaw(topic: topic, payload: [1], qos: .atLeastOnce)
                for await _ in barrier {
                    outcome.yield(.success(true))
                    return
                }
                outcome.yield(.success(false))
            } catch {
                outcome.yield(.failure(error))
            }
        }
        let timer = Task {
            let deadline = ContinuousClock.now + limit
            while ContinuousClock.now < deadline, !abandoned(), !Task.isCancelled {
                try? await Task.sleep(for: min(.milliseconds(10), deadline - ContinuousClock.now))
            }
            outcome.yield(.success(false))
        }
        var results = outcomes.makeAsyncIterator()
        let result = await results.next() ?? .success(false)
        timer.cancel()
        attempt.cancel()
        return try result.get()
    }

    /// A member that stops leaves its group: the broker gives it no more of the group's events;
    /// when everything it had queued for it arrives within ``Configuration/groupLeaveTimeout`` it
    /// is stored and acknowledged and the announcement cleared (so no other member takes over the
    /// session, and whoever stops the manager ends it: ``leftGroupDrained``). Otherwise the rest
    /// stays in its session, and its announcement with it: its Deadvertise then makes another
    /// member take the session over, as for a member that died.
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
                let crossed = try await leave(
                    manager,
                    barrier: membership.barrier,
                    topic: membership.barrierTopic,
                    within: configuration.groupLeaveTimeout
                )
                if crossed {
                    try await manager.publishRaw(
                        topic: Self.memberTopic(membership.group, manager.identity.objectId),
                        payload: [],
                        retain: true,
                        qos: .atLeastOnce
                    )
                    control.withLock { $0.leftGroupDrained = true }
                } else {
                    logger.notice(
                        "Recorder group: left with messages still queued for this member; another member takes over its session",
                        metadata: ["group": "\(membership.group)"]
                    )
                }
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
