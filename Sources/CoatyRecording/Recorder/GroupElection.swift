import CoatyCore
import CoatyStore

/// Who takes over the broker session of a gone recorder-group member, as one member sees it: a
/// pure state machine (events in, actions out), so that its argument can be checked without a
/// broker (see "Running a recorder", *One taker per gone member*).
///
/// The decision is the broker's order, not anyone's timing. A member that wants a gone member's
/// session publishes a claim (QoS 1) on the group's claims topic; every member is subscribed to it
/// and receives every claim in the one order the broker processed them, so every member agrees on
/// the **first** claim of a round, and only its author takes the session over. Rank delays only
/// save claims (normally one member claims); they decide nothing. When the winner is gone before it
/// finished, the next round starts, again decided by its first claim.
struct GroupElection: Sendable {
    /// A member's claim to take over the session of the gone `member`.
    struct Claim: Equatable, Sendable {
        /// The gone member.
        var member: CoatyUUID
        /// The gone member's incarnation (its announcement's run id) the claim is about: claims
        /// about an earlier death of the same member are ignored.
        var incarnation: String
        /// The round: 0, then one more each time a round's winner is gone before it finished.
        var round: Int
        /// The member that claims.
        var taker: CoatyUUID

        /// The claim's wire form: `member incarnation round taker`, space-separated.
        var payload: [UInt8] {
            Array("\(member.uuidString) \(incarnation) \(round) \(taker.uuidString)".utf8)
        }

        /// Reads a claim's wire form; `nil` for anything else.
        init?(payload: [UInt8]) {
            let parts = String(decoding: payload, as: UTF8.self).split(separator: " ", omittingEmptySubsequences: false)
            guard parts.count == 4, let member = CoatyUUID(String(parts[0])), let round = Int(parts[2]), round >= 0,
                let taker = CoatyUUID(String(parts[3]))
            else { return nil }
            self.init(member: member, incarnation: String(parts[1]), round: round, taker: taker)
        }

        init(member: CoatyUUID, incarnation: String, round: Int, taker: CoatyUUID) {
            self.member = member
            self.incarnation = incarnation
            self.round = round
            self.taker = taker
        }
    }

    /// What the member learned, in the order its group subscriptions delivered it.
    enum Event: Equatable, Sendable {
        /// A member's retained announcement (its incarnation: one id per run).
        case announced(CoatyUUID, incarnation: String)
        /// A member's announcement was cleared: it left, or its session was handed over.
        case cleared(CoatyUUID)
        /// Deadvertise events (a last will, or a member that stopped without leaving).
        case deadvertised([CoatyUUID])
        /// A claim, as the broker delivered it.
        case claimed(Claim)
        /// The rank delay of an attempt ran out (after ``Action/scheduleClaim(_:round:after:)``).
        case claimDue(CoatyUUID, round: Int)
        /// This member's take-over of `member` ended: `completed`, or interrupted / failed.
        case takeOverEnded(CoatyUUID, completed: Bool)
        /// The wait after a failed take-over ran out (after ``Action/scheduleRetry(_:after:)``).
        case retryDue(CoatyUUID)
    }

    /// What the member does next.
    enum Action: Equatable, Sendable {
        /// Report ``Event/claimDue(_:round:)`` after the delay.
        case scheduleClaim(CoatyUUID, round: Int, after: Duration)
        /// Publish the claim (QoS 1) on the claims topic.
        case publishClaim(Claim)
        /// Take over the member's session (this member won the round), then report
        /// ``Event/takeOverEnded(_:completed:)``.
        case takeOver(CoatyUUID)
        /// Report ``Event/retryDue(_:)`` after the delay.
        case scheduleRetry(CoatyUUID, after: Duration)
    }

    /// One gone member's election.
    struct Election: Equatable, Sendable {
        /// The incarnation of the gone member it is about.
        var incarnation: String
        /// The latest round claimed (0 before any claim).
        var round = 0
        /// The author of the round's first claim.
        var winner: CoatyUUID?
        /// The rounds this member claimed (or decided to claim).
        var claimed: Set<Int> = []
        /// This member's take-over is under way.
        var takingOver = false
        /// This member's failed take-overs of the round.
        var failures = 0
    }

    /// The rank delay step: the member of rank k (by identity id among those alive) claims after
    /// k × this, unless a claim of the round arrived first.
    static let rankStep: Duration = .seconds(2)
    /// The wait after a take-over that did not complete, before the winner tries again (the
    /// member may be coming back: its connection takes the session, then it announces).
    static let retryDelay: Duration = .seconds(2)

    /// This member.
    let me: CoatyUUID
    /// The members announced, with their incarnations (this one included, whose own is not needed).
    private(set) var members: [CoatyUUID: String]
    /// Members known gone (deadvertised, or claimed, since their last announcement).
    private(set) var dead: Set<CoatyUUID> = []
    /// The elections under way, by gone member.
    private(set) var elections: [CoatyUUID: Election] = [:]

    /// A member's view before it learned anything: only itself.
    init(me: CoatyUUID) {
        self.me = me
        members = [me: ""]
    }

    /// The delay before this member claims: its rank among the members alive × ``rankStep``.
    private func rankDelay() -> Duration {
        let alive = members.keys.filter { !dead.contains($0) }.sorted { $0.uuidString < $1.uuidString }
        let rank = alive.firstIndex(of: me) ?? alive.count
        return Self.rankStep * min(rank, 5)
    }

    /// Applies one event; returns what to do.
    ///
    /// Announcements, clears and claims must be applied in the order the broker delivered them
    /// (they share one subscription); Deadvertise events and timers only make this member claim,
    /// so their order relative to the others does not matter.
    mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .announced(let id, let incarnation):
            // The retained announcement of a member known gone, delivered again (a resubscription).
            if dead.contains(id), members[id] == incarnation { return [] }
            // New, or back (its connection took its session from any taker): nothing to take over.
            members[id] = incarnation
            dead.remove(id)
            elections[id] = nil
            return []
        case .cleared(let id):
            members[id] = nil
            dead.remove(id)
            elections[id] = nil
            return []
        case .deadvertised(let ids):
            var actions: [Action] = []
            let gone = Set(ids).subtracting([me])
            for id in gone.sorted(by: { $0.uuidString < $1.uuidString }) where members[id] != nil {
                dead.insert(id)
                if elections[id] == nil, let incarnation = members[id] {
                    elections[id] = Election(incarnation: incarnation)
                    actions.append(.scheduleClaim(id, round: 0, after: rankDelay()))
                }
            }
            // A round whose winner is gone before it finished: claim the next round.
            for (member, election) in elections.sorted(by: { $0.key.uuidString < $1.key.uuidString }) {
                guard let winner = election.winner, gone.contains(winner) else { continue }
                actions.append(.scheduleClaim(member, round: election.round + 1, after: rankDelay()))
            }
            return actions
        case .claimed(let claim):
            // Only claims about the member's current incarnation count (not an earlier death's).
            guard claim.member != me, members[claim.member] == claim.incarnation else { return [] }
            dead.insert(claim.member)  // its claimer saw it gone
            var election = elections[claim.member] ?? Election(incarnation: claim.incarnation)
            let decides = claim.round > election.round || (claim.round == election.round && election.winner == nil)
            if decides {
                // The first claim of a round decides it: every member sees the claims in one order.
                election.round = claim.round
                election.winner = claim.taker
                election.failures = 0
                election.takingOver = claim.taker == me
            }
            elections[claim.member] = election
            return decides && claim.taker == me ? [.takeOver(claim.member)] : []
        case .claimDue(let member, let round):
            guard var election = elections[member], !election.claimed.contains(round) else { return [] }
            // Round 0 before anyone claimed it, or the next round after the winner of the current one is gone.
            let open =
                (round == election.round && election.winner == nil)
                || (round == election.round + 1 && election.winner.map(dead.contains) == true)
            guard open else { return [] }
            election.claimed.insert(round)
            elections[member] = election
            return [.publishClaim(Claim(member: member, incarnation: election.incarnation, round: round, taker: me))]
        case .takeOverEnded(let member, let completed):
            guard var election = elections[member], election.winner == me, election.takingOver else { return [] }
            if completed {
                elections[member] = nil
                members[member] = nil
                dead.remove(member)
                return []
            }
            election.takingOver = false
            election.failures += 1
            elections[member] = election
            return [.scheduleRetry(member, after: Self.retryDelay * min(election.failures, 5))]
        case .retryDue(let member):
            // Only the current round's winner tries again; one that lost the session to a later
            // round's winner (or to the member itself, back) stops.
            guard var election = elections[member], election.winner == me, !election.takingOver else { return [] }
            election.takingOver = true
            elections[member] = election
            return [.takeOver(member)]
        }
    }
}
