import CMosquittoShim
import CoatySync
import Foundation
import Logging
import Metrics
import Synchronization

extension ClientCore {
    // MARK: Subscribe / unsubscribe / publish

    func subscribe(_ filters: [(String, MQTTQoS)]) async throws {
        let handle = try requireHandle()
        guard !filters.isEmpty else { return }
        for (filter, _) in filters { try MQTTError.checkFilter(filter) }
        try await suspend { state, token in
            switch state.session.subscribe(token: token, filters: filters, send: subscribeSender(handle)) {
            case .notRunning:
                throw notConnected("subscribe to \"\(filters[0].0)\"\(filters.count > 1 ? " and more" : "")")
            case .waiting:
                return false
            case .failed(let firstFilter, let reason):
                throw MQTTError(.protocolError, "Cannot subscribe to \"\(firstFilter)\" on \(url): \(reason).")
            }
        }
    }

    /// Queues SUBSCRIBE packets on `handle` for the session logic.
    func subscribeSender(_ handle: MosquittoHandle) -> (MQTTSessionStateMachine.SubscribeChunk)
        -> MQTTSessionStateMachine.SendOutcome
    {
        { chunk in
            let (rc, mid) = handle.subscribe(chunk.filters, qos: chunk.qos)
            return Self.sendOutcome(rc, mid)
        }
    }

    /// What a libmosquitto return code means to the session logic.
    static func sendOutcome(_ rc: Int32, _ mid: Int32) -> MQTTSessionStateMachine.SendOutcome {
        switch rc {
        case MosquittoCode.success: return .sent(mid: mid)
        case MosquittoCode.noConnection: return .noConnection
        default: return .failed(MosquittoHandle.errorString(rc))
        }
    }

    func unsubscribe(_ filter: String) async throws {
        let handle = try requireHandle()
        try MQTTError.checkFilter(filter)
        try await suspend { state, token in try !queueUnsubscribe(filter, token: token, handle, &state) }
    }

    /// Forgets `filter` for reconnects and, while the connection is up, queues its UNSUBSCRIBE under `token`.
    /// Returns whether an UNSUBACK will resolve `token` (`false`: there was nothing to send).
    func queueUnsubscribe(
        _ filter: String,
        token: UInt64,
        _ handle: MosquittoHandle,
        _ state: inout ClientState
    ) throws(MQTTError) -> Bool {
        let outcome = state.session.unsubscribe(token: token, filter: filter) {
            let (rc, mid) = handle.unsubscribe(filter)
            return Self.sendOutcome(rc, mid)
        }
        switch outcome {
        case .done: return false
        case .waiting: return true
        case .failed(let reason):
            throw MQTTError(.protocolError, "Cannot unsubscribe from \"\(filter)\" on \(url): \(reason).")
        }
    }

    /// Queues a SUBSCRIBE on the live connection without waiting; see `MQTTClient.subscribeNow`.
    func subscribeNow(
        _ filter: String,
        qos: MQTTQoS,
        acknowledged: @escaping @Sendable ((any Error)?) -> Void
    ) -> Bool {
        guard case .success(let handle) = setup, (try? MQTTError.checkFilter(filter)) != nil else { return false }
        return state.withLock { state in
            let token = state.makeToken()
            guard state.session.subscribeNow(token: token, filter: filter, qos: qos, send: subscribeSender(handle))
            else { return false }
            state.callbacks[token] = acknowledged
            return true
        }
    }

    /// Forgets a filter and queues its UNSUBSCRIBE without waiting; see `MQTTClient.unsubscribeNow`.
    func unsubscribeNow(_ filter: String, acknowledged: @escaping @Sendable ((any Error)?) -> Void) {
        let pending = Result { () throws -> Bool in
            let handle = try requireHandle()
            try MQTTError.checkFilter(filter)
            return try state.withLock { state throws(MQTTError) -> Bool in
                let token = state.makeToken()
                guard try queueUnsubscribe(filter, token: token, handle, &state) else { return false }
                state.callbacks[token] = acknowledged
                return true
            }
        }
        switch pending {
        case .success(true): return  // the UNSUBACK (or the end of the session) calls back
        case .success(false): acknowledged(nil)
        case .failure(let error): acknowledged(error)
        }
    }

    func publish(
        _ topic: String,
        payload: some Collection<UInt8>,
        qos: MQTTQoS,
        retain: Bool,
        userProperties: [MQTTUserProperty] = []
    ) async throws {
        let handle = try requireHandle()
        try MQTTError.checkTopicName(topic)
        // MQTT 3.1.1 has no place for user properties: they are left out (see MQTTMessage.userProperties).
        let properties = configuration.protocolVersion == .v5 ? userProperties : []
        if qos == .atMostOnce {
            guard running.load(ordering: .acquiring) else { throw notConnected("publish on \"\(topic)\"") }
            let rc =
                payload.withContiguousStorageIfAvailable { buffer in
                    publishNow(handle, topic, UnsafeRawBufferPointer(buffer), qos, retain, properties).0
                }
                ?? Array(payload).withUnsafeBytes { publishNow(handle, topic, $0, qos, retain, properties).0 }
            if rc != MosquittoCode.success { throw publishError(rc, topic: topic, size: payload.count) }
            let limit = configuration.maxOutstandingPublishes
            if limit > 0, handle.outstandingPublishes > UInt64(limit) {
                await waitForWrites(handle, downTo: UInt64(limit / 2))
            }
            return
        }
        let bytes = Array(payload)
        try await suspend { state, token in
            guard state.session.running else { throw notConnected("publish on \"\(topic)\"") }
            let (rc, mid) = bytes.withUnsafeBytes { publishNow(handle, topic, $0, qos, retain, properties) }
            guard rc == MosquittoCode.success else { throw publishError(rc, topic: topic, size: bytes.count) }
            state.session.publicationQueued(mid: mid, token: token)
            return false
        }
    }

    /// Back-pressure for QoS 0: waits while more than `target` publications are queued but unwritten, and the
    /// loop runs. The network thread signals when the queue is down to `target` (one wake-up per drain, no polling);
    /// a lost connection settles the queue and signals too; cancellation ends the wait.
    func waitForWrites(_ handle: MosquittoHandle, downTo target: UInt64) async {
        while handle.outstandingPublishes > target, running.load(ordering: .acquiring), !Task.isCancelled {
            try? await suspend { state, token in
                guard state.session.running, !handle.armDrain(target) else { return true }
                state.session.awaitDrain(token: token)
                return false
            }
        }
    }

    func publishNow(
        _ handle: MosquittoHandle,
        _ topic: String,
        _ payload: UnsafeRawBufferPointer,
        _ qos: MQTTQoS,
        _ retain: Bool,
        _ userProperties: [MQTTUserProperty] = []
    ) -> (Int32, Int32) {
        guard payload.count <= 268_435_455 - 65_542 else { return (MosquittoCode.payloadSize, 0) }
        return handle.publish(topic: topic, payload: payload, qos: qos, retain: retain, userProperties: userProperties)
    }

    func publishError(_ rc: Int32, topic: String, size: Int) -> MQTTError {
        switch rc {
        case MosquittoCode.noConnection:
            return MQTTError(
                .notConnected,
                "Cannot publish on \"\(topic)\": the connection to \(url) is down (reconnecting); retry later."
            )
        case MosquittoCode.payloadSize, MosquittoCode.oversizePacket:
            return MQTTError(
                .payloadTooLarge,
                "Cannot publish \(size) bytes on \"\(topic)\": the payload exceeds what MQTT or the broker at \(url) allows."
            )
        default:
            return MQTTError(
                .protocolError,
                "Cannot publish on \"\(topic)\" to \(url): \(MosquittoHandle.errorString(rc))."
            )
        }
    }
}
