@testable import CoatyMQTT
import Testing

/// The client's session logic as a value: connect, CONNACK, lost connections, acknowledgements and the
/// operations waiting for them, with a fake network side. Needs no broker.
@Suite struct MQTTSessionStateMachineTests {
    typealias Machine = MQTTSessionStateMachine

    /// A fake network side: hands out message ids and records the packets queued.
    final class Wire {
        var nextMid: Int32 = 0
        var sent: [Machine.SubscribeChunk] = []
        var outcome: Machine.SendOutcome?

        func send(_ chunk: Machine.SubscribeChunk) -> Machine.SendOutcome {
            if let outcome { return outcome }
            sent.append(chunk)
            nextMid += 1
            return .sent(mid: nextMid)
        }
    }

    static let lost = MQTTError(.brokerUnreachable, "lost")
    static let ended = MQTTError(.notConnected, "ended")

    /// A machine whose first attempt `connect()` waits for under `token`.
    static func connecting(_ machine: inout Machine) -> UInt64 {
        var actions = Machine.Actions()
        let started = machine.startSession(&actions)
        #expect(started)
        #expect(actions.states == [.connecting])
        let token = machine.makeToken()
        let attempt = machine.awaitFirstAttempt(token: token)
        #expect(attempt == .waiting)
        return token
    }

    static func tokens(_ actions: Machine.Actions) -> [UInt64] { actions.resolved.map(\.token) }

    static func failures(_ actions: Machine.Actions) -> [MQTTError.Kind?] {
        actions.resolved.map { entry in
            if case .failure(let error) = entry.result { return error.kind }
            return nil
        }
    }

    @Test func aConnackWithoutSubscriptionsConnectsAndResolvesConnect() {
        var machine = Machine()
        let wire = Wire()
        let connect = Self.connecting(&machine)
        var actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        #expect(wire.sent.isEmpty)
        #expect(actions.states == [.connected])
        #expect(Self.tokens(actions) == [connect])
        #expect(Self.failures(actions) == [nil])
        #expect(actions.logs == [.connected(reconnect: false, subscriptions: 0)])
        #expect(machine.connection == .connected)
    }

    @Test func aSecondStartIsRefusedWhileASessionRuns() {
        var machine = Machine()
        _ = Self.connecting(&machine)
        var actions = Machine.Actions()
        let started = machine.startSession(&actions)
        #expect(!started)
        #expect(actions.states.isEmpty)
    }

    @Test func subscribingBeforeTheConnackWaitsForTheResubscription() {
        var machine = Machine()
        let wire = Wire()
        let connect = Self.connecting(&machine)
        let subscribe = machine.makeToken()
        let outcome = machine.subscribe(token: subscribe, filters: [("a/#", .atLeastOnce)], send: wire.send)
        #expect(outcome == .waiting)
        #expect(wire.sent.isEmpty)  // nothing on the wire before the CONNACK
        var actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        #expect(wire.sent == [.init(qos: .atLeastOnce, filters: ["a/#"])])
        #expect(actions.resolved.isEmpty)
        #expect(actions.states.isEmpty)  // still connecting until the SUBACK
        actions = Machine.Actions()
        machine.subscribed(mid: 1, refusedIndex: nil, refusal: { _ in Self.lost }, &actions)
        #expect(Set(Self.tokens(actions)) == [connect, subscribe])
        #expect(actions.states == [.connected])
    }

    @Test func aSubscriptionInChunksResolvesAfterItsLastSuback() {
        var machine = Machine()
        let wire = Wire()
        _ = Self.connecting(&machine)
        var actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        let filters = (0..<450).map { ("t/\($0)", MQTTQoS.atMostOnce) } + [("q/1", .atLeastOnce)]
        let token = machine.makeToken()
        let outcome = machine.subscribe(token: token, filters: filters, send: wire.send)
        #expect(outcome == .waiting)
        #expect(wire.sent.map(\.filters.count) == [200, 200, 50, 1])
        #expect(wire.sent.map(\.qos) == [.atMostOnce, .atMostOnce, .atMostOnce, .atLeastOnce])
        for mid in Int32(1)...3 {
            actions = Machine.Actions()
            machine.subscribed(mid: mid, refusedIndex: nil, refusal: { _ in Self.lost }, &actions)
            #expect(actions.resolved.isEmpty)
        }
        actions = Machine.Actions()
        machine.subscribed(mid: 4, refusedIndex: nil, refusal: { _ in Self.lost }, &actions)
        #expect(Self.tokens(actions) == [token])
        #expect(machine.subscriptions.count == 451)
    }

    @Test func aRefusedFilterFailsItsSubscriptionAndIsNotKept() {
        var machine = Machine()
        let wire = Wire()
        _ = Self.connecting(&machine)
        var actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        let token = machine.makeToken()
        _ = machine.subscribe(token: token, filters: [("ok", .atMostOnce), ("denied", .atMostOnce)], send: wire.send)
        actions = Machine.Actions()
        machine.subscribed(
            mid: 1,
            refusedIndex: 1,
            refusal: { MQTTError(.subscriptionRefused, "refused \($0)") },
            &actions
        )
        #expect(Self.tokens(actions) == [token])
        guard case .failure(let error) = actions.resolved.first?.result else {
            Issue.record("the subscription did not fail")
            return
        }
        #expect(error.message == "refused denied")
        #expect(machine.subscriptions.keys.sorted() == ["ok"])
    }

    @Test func aSendFailureKeepsNothingOfTheCall() {
        var machine = Machine()
        let wire = Wire()
        _ = Self.connecting(&machine)
        var actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        _ = machine.subscribe(token: machine.makeToken(), filters: [("kept", .atMostOnce)], send: wire.send)
        wire.outcome = .failed("out of memory")
        let outcome = machine.subscribe(token: machine.makeToken(), filters: [("new", .atMostOnce)], send: wire.send)
        #expect(outcome == .failed(firstFilter: "new", reason: "out of memory"))
        #expect(machine.subscriptions.keys.sorted() == ["kept"])
    }

    @Test func aLostConnectionMovesPendingSubscriptionsToTheResubscriptionAndEndsUnsubscribes() {
        var machine = Machine()
        let wire = Wire()
        _ = Self.connecting(&machine)
        var actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        let subscribe = machine.makeToken()
        _ = machine.subscribe(token: subscribe, filters: [("a", .atLeastOnce)], send: wire.send)
        let unsubscribe = machine.makeToken()
        let outcome = machine.unsubscribe(token: unsubscribe, filter: "old") { .sent(mid: 99) }
        #expect(outcome == .waiting)

        actions = Machine.Actions()
        machine.connectionLost(reason: "broken pipe", error: Self.lost, briefSessions: 1, &actions)
        #expect(Self.tokens(actions) == [unsubscribe])
        #expect(actions.states == [.reconnecting])
        #expect(actions.logs == [.connectionLost(reason: "broken pipe", briefSessions: 1)])
        // The SUBACK of the old session means nothing now.
        actions = Machine.Actions()
        machine.subscribed(mid: 1, refusedIndex: nil, refusal: { _ in Self.lost }, &actions)
        #expect(actions.resolved.isEmpty)

        actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        #expect(wire.sent.last == .init(qos: .atLeastOnce, filters: ["a"]))
        actions = Machine.Actions()
        machine.subscribed(mid: wire.nextMid, refusedIndex: nil, refusal: { _ in Self.lost }, &actions)
        #expect(Self.tokens(actions) == [subscribe])
        #expect(actions.states == [.connected])
        #expect(actions.logs == [.connected(reconnect: true, subscriptions: 1)])
    }

    @Test func theFirstAttemptFailsOnlyAfterTheLastBroker() {
        var machine = Machine()
        let connect = Self.connecting(&machine)
        let refused = MQTTError(.connectionRefused, "refused")
        let all = MQTTError(.connectionRefused, "all refused")
        var actions = Machine.Actions()
        machine.connectAttemptFailed(refused, firstAttemptError: all, broker: 0, brokerCount: 2, &actions)
        #expect(actions.resolved.isEmpty)
        #expect(actions.logs == [.tryingNextBroker(reason: "refused")])
        #expect(!actions.stopNetworkLoop)
        actions = Machine.Actions()
        machine.connectAttemptFailed(refused, firstAttemptError: all, broker: 1, brokerCount: 2, &actions)
        #expect(Self.tokens(actions) == [connect])
        guard case .failure(let error) = actions.resolved.first?.result else {
            Issue.record("connect did not fail")
            return
        }
        #expect(error == all)
        #expect(actions.stopNetworkLoop)
    }

    @Test func aFailedReconnectCountsAttemptsUntilTheNextConnack() {
        var machine = Machine()
        let wire = Wire()
        _ = Self.connecting(&machine)
        var actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        machine.connectionLost(reason: "eof", error: Self.lost, briefSessions: 1, &actions)
        for attempt in 1...3 {
            actions = Machine.Actions()
            machine.connectAttemptFailed(Self.lost, firstAttemptError: Self.lost, broker: 0, brokerCount: 1, &actions)
            #expect(actions.logs == [.reconnectFailed(reason: "lost", attempt: attempt)])
            #expect(!actions.stopNetworkLoop)
        }
        #expect(machine.reconnectAttempts == 3)
        actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        #expect(machine.reconnectAttempts == 0)
        #expect(machine.connection == .connected)
    }

    @Test func aFirstAttemptDecidedBeforeConnectWaitsIsKeptForIt() {
        var machine = Machine()
        let wire = Wire()
        var actions = Machine.Actions()
        let started = machine.startSession(&actions)
        #expect(started)
        machine.connected(send: wire.send, &actions)
        #expect(actions.resolved.isEmpty)  // nobody waited yet
        let token = machine.makeToken()
        let attempt = machine.awaitFirstAttempt(token: token)
        #expect(attempt == .succeeded)
        // Read once only.
        let next = machine.makeToken()
        let again = machine.awaitFirstAttempt(token: next)
        #expect(again == .waiting)
    }

    @Test func theEndOfASessionFailsEverythingAndKeepsSubscriptions() {
        var machine = Machine()
        let wire = Wire()
        _ = Self.connecting(&machine)
        var actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        _ = machine.subscribe(token: machine.makeToken(), filters: [("a", .atMostOnce)], send: wire.send)
        let publish = machine.makeToken()
        machine.publicationQueued(mid: 7, token: publish)
        actions = Machine.Actions()
        machine.sessionEnded(Self.ended, &actions)
        #expect(actions.failEverything == Self.ended)
        #expect(actions.states == [.disconnected])
        #expect(!machine.running)
        #expect(machine.subscriptions.keys.sorted() == ["a"])
        // A late acknowledgement of the ended session is ignored.
        actions = Machine.Actions()
        machine.published(mid: 7, refusal: nil, &actions)
        #expect(actions.resolved.isEmpty)
        // Ended twice: nothing more.
        actions = Machine.Actions()
        machine.sessionEnded(Self.ended, &actions)
        #expect(actions.failEverything == nil)
        #expect(actions.states.isEmpty)
    }

    @Test func anEndBeforeConnectWaitsIsWhatConnectThrows() {
        var machine = Machine()
        var actions = Machine.Actions()
        let started = machine.startSession(&actions)
        #expect(started)
        machine.sessionEnded(Self.ended, &actions)
        let token = machine.makeToken()
        let attempt = machine.awaitFirstAttempt(token: token)
        #expect(attempt == .failed(Self.ended))
        let next = machine.makeToken()
        let again = machine.awaitFirstAttempt(token: next)
        #expect(again == .notRunning)
    }

    @Test func publicationsResolveOnTheirAcknowledgementOrFailOnARefusal() {
        var machine = Machine()
        let wire = Wire()
        _ = Self.connecting(&machine)
        var actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        let accepted = machine.makeToken()
        let refused = machine.makeToken()
        machine.publicationQueued(mid: 1, token: accepted)
        machine.publicationQueued(mid: 2, token: refused)
        actions = Machine.Actions()
        machine.published(mid: 2, refusal: MQTTError(.publishRefused, "quota"), &actions)
        machine.published(mid: 1, refusal: nil, &actions)
        machine.published(mid: 1, refusal: nil, &actions)  // a duplicate acknowledgement: nothing
        #expect(Self.tokens(actions) == [refused, accepted])
        #expect(Self.failures(actions) == [.publishRefused, nil])
    }

    @Test func lostAcknowledgementsFailEveryWaitingPublication() {
        var machine = Machine()
        _ = Self.connecting(&machine)
        machine.publicationQueued(mid: 1, token: 10)
        machine.publicationQueued(mid: 2, token: 11)
        var actions = Machine.Actions()
        machine.acknowledgementsMayBeLost(MQTTError(.protocolError, "lost"), &actions)
        #expect(Set(Self.tokens(actions)) == [10, 11])
        #expect(Self.failures(actions) == [.protocolError, .protocolError])
        actions = Machine.Actions()
        machine.published(mid: 1, refusal: nil, &actions)
        #expect(actions.resolved.isEmpty)
    }

    @Test func drainWaitersResumeTogetherOnce() {
        var machine = Machine()
        _ = Self.connecting(&machine)
        machine.awaitDrain(token: 5)
        machine.awaitDrain(token: 6)
        var actions = Machine.Actions()
        machine.drained(&actions)
        #expect(Set(Self.tokens(actions)) == [5, 6])
        actions = Machine.Actions()
        machine.drained(&actions)
        #expect(actions.resolved.isEmpty)
    }

    @Test func unsubscribingWithoutAConnectionForgetsTheFilterAtOnce() {
        var machine = Machine()
        let wire = Wire()
        _ = Self.connecting(&machine)
        _ = machine.subscribe(token: machine.makeToken(), filters: [("a", .atMostOnce)], send: wire.send)
        var sent = false
        let outcome = machine.unsubscribe(token: machine.makeToken(), filter: "a") {
            sent = true
            return .sent(mid: 1)
        }
        #expect(outcome == .done)
        #expect(!sent)
        #expect(machine.subscriptions.isEmpty)
    }

    @Test func subscribeNowQueuesOnlyOnALiveConnection() {
        var machine = Machine()
        let wire = Wire()
        _ = Self.connecting(&machine)
        let queued = machine.subscribeNow(token: 1, filter: "x", qos: .atMostOnce, send: wire.send)
        #expect(!queued)
        #expect(machine.subscriptions.isEmpty)
        var actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        let queuedWhenUp = machine.subscribeNow(token: 2, filter: "x", qos: .atMostOnce, send: wire.send)
        #expect(queuedWhenUp)
        actions = Machine.Actions()
        machine.subscribed(mid: wire.nextMid, refusedIndex: nil, refusal: { _ in Self.lost }, &actions)
        #expect(Self.tokens(actions) == [2])
    }

    @Test func aResubscriptionThatCannotBeQueuedIsLoggedAndDoesNotHoldTheConnection() {
        var machine = Machine()
        let wire = Wire()
        _ = Self.connecting(&machine)
        _ = machine.subscribe(token: machine.makeToken(), filters: [("a", .atMostOnce)], send: wire.send)
        wire.outcome = .failed("oversize")
        var actions = Machine.Actions()
        machine.connected(send: wire.send, &actions)
        #expect(actions.logs.first == .resubscribeFailed(filter: "a", reason: "oversize"))
        #expect(machine.connection == .connected)
    }

    @Test func chunksGroupByQoSAndKeepTheFirstQoSOfARepeatedFilter() {
        let chunks = Machine.chunks([("a", .exactlyOnce), ("b", .atMostOnce), ("a", .atMostOnce)])
        #expect(chunks == [.init(qos: .atMostOnce, filters: ["b"]), .init(qos: .exactlyOnce, filters: ["a"])])
    }
}
