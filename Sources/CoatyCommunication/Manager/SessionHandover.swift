import CoatyFilter
public import CoatyModel
import CoatySync

/// Resuming, and then ending, the broker session of another agent of the same shared-subscription
/// group: what a member of a recorder group does for a member that is gone, so that nothing the
/// broker had given that member is lost.
///
/// A member of a group keeps a persistent broker session. When it is gone (its last will, a
/// Deadvertise, arrives), the broker still holds what it had given it and not yet got an
/// acknowledgement for, and keeps giving it a share of the group's events. One surviving member
/// resumes that session with a manager from ``resume`` (the broker redelivers everything
/// unacknowledged), handles what arrives, leaves the group's subscriptions on the broker
/// (``CommunicationManager/leaveSharedSubscriptionGroup()``) so no new event goes there, and ends
/// the session with ``end``.
///
/// CoatyKit's MQTT binding makes one from an MQTT configuration (`SessionHandover.mqtt(…)`).
public struct SessionHandover: Sendable {
    /// Makes a manager (not started) that resumes the persistent session of the agent with
    /// `identityId`, in the same shared-subscription group, and does not announce an identity
    /// (``CommunicationManager/Options/announcesIdentity`` off).
    public var resume: @Sendable (_ identityId: CoatyUUID) throws -> CommunicationManager
    /// Ends the broker session of the agent with `identityId` (MQTT: a clean connection under its
    /// client id), so the broker forgets its subscriptions and what it held for it.
    public var end: @Sendable (_ identityId: CoatyUUID) async throws -> Void

    /// A handover from its two operations.
    /// - Parameters:
    ///   - resume: makes the manager that resumes a session.
    ///   - end: ends a session.
    public init(
        resume: @escaping @Sendable (_ identityId: CoatyUUID) throws -> CommunicationManager,
        end: @escaping @Sendable (_ identityId: CoatyUUID) async throws -> Void
    ) {
        self.resume = resume
        self.end = end
    }
}

extension CommunicationManager {
    /// Unsubscribes, at the broker, every subscription this manager holds in its
    /// shared-subscription group, while the observations stay registered: the broker gives this
    /// agent no further event of the group; what it had already queued for it still arrives and
    /// is delivered as usual. Used when a session is handed over (``SessionHandover``). Does
    /// nothing without a group.
    ///
    /// - Throws: ``CommunicationError/transport(_:)`` when an unsubscription fails.
    public func leaveSharedSubscriptionGroup() async throws(CommunicationError) {
        guard let group = options.sharedSubscriptionGroup else { return }
        let filters = state.withLock { state in state.sharedFilters.intersection(state.established).sorted() }
        for filter in filters {
            do {
                try await transport.unsubscribe(Self.sharedSubscriptionFilter(filter, group: group))
            } catch {
                throw .transportFailure(error)
            }
        }
    }
}
