// The client's core: its state under one mutex, the session's dispatch, and ClientCore, which owns
// the libmosquitto handle; its operations are in ClientCore+*.swift.

import CMosquittoShim
import CoatySync
import Foundation
import Logging
import Metrics
import Synchronization

// MARK: - Core

/// The mutable state of a client, guarded by `ClientCore.state`: the session logic (a value, see
/// `MQTTSessionStateMachine`) and what its tokens stand for.
struct ClientState: ~Copyable {
    var session = MQTTSessionStateMachine()
    var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    /// Completion callbacks of operations that nobody awaits (`subscribeNow`, `unsubscribeNow`).
    var callbacks: [UInt64: @Sendable ((any Error)?) -> Void] = [:]
    var observers: [UInt64: AsyncStream<MQTTConnectionState>.Continuation] = [:]

    mutating func makeToken() -> UInt64 { session.makeToken() }
}

/// Continuations to resume after the state lock is released.
struct Resumptions {
    var list: [(CheckedContinuation<Void, any Error>, Result<Void, any Error>)] = []

    mutating func resolve(_ token: UInt64, _ result: Result<Void, any Error>, in state: inout ClientState) {
        if let continuation = state.waiters.removeValue(forKey: token) {
            list.append((continuation, result))
        } else if let callback = state.callbacks.removeValue(forKey: token) {
            calls.append((callback, result))
        }
    }

    var calls: [(@Sendable ((any Error)?) -> Void, Result<Void, any Error>)] = []

    func resume() {
        for (continuation, result) in list { continuation.resume(with: result) }
        for (callback, result) in calls {
            switch result {
            case .success: callback(nil)
            case .failure(let error): callback(error)
            }
        }
    }
}

/// The single-consumer hand-off of message batches.
struct MessageChannel: ~Copyable {
    var waiter: CheckedContinuation<[MQTTMessage]?, Never>?
    var closed = false
}

/// One session's dispatcher: the network loop thread calls `dispatchRound()` between its steps, so received messages
/// and events reach Swift on that thread, with no hand-off to another thread. The calls come from the loop itself,
/// never from inside a libmosquitto callback, so no libmosquitto lock is held and the round may publish, subscribe
/// or stop. The loop holds this object (retained through the C boundary) until its last call, `loopEnded()`.
final class SessionDispatch: Sendable {
    let core: ClientCore
    let handle: MosquittoHandle
    let executor: MQTTDeliveryExecutor?
    let executorToken: UInt64?
    /// Set when the session stopped or was abandoned: later rounds do nothing, the executor is detached.
    private let ended = Atomic<Bool>(false)

    init(core: ClientCore, handle: MosquittoHandle, executor: MQTTDeliveryExecutor?, executorToken: UInt64?) {
        self.core = core
        self.handle = handle
        self.executor = executor
        self.executorToken = executorToken
    }

    /// A round between two loop steps (loop thread).
    func dispatchRound() {
        guard !ended.load(ordering: .acquiring) else { return }
        if core.dispatchRound(handle, executor) { end() }
    }

    /// The loop's last call (loop thread).
    func loopEnded() { end() }

    /// Ends the session's dispatching (any thread, idempotent): the executor's jobs move to its fallback queue, and
    /// the core forgets this session (which holds the core: a reference cycle until now).
    func end() {
        guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if let executor, let executorToken { executor.detach(executorToken) }
        core.currentSession.withLock { current in
            if current === self { current = nil }
        }
    }
}

/// A message handler, boxed so that reading it under a lock does not re-wrap the closure.
final class MessageHandler: Sendable {
    let deliver: @Sendable ([MQTTMessage]) -> Void

    init(_ deliver: @escaping @Sendable ([MQTTMessage]) -> Void) {
        self.deliver = deliver
    }
}

/// Drop accounting, touched by the network thread's dispatch rounds only (a Mutex keeps it Sendable).
struct DropReport {
    var counted: UInt64 = 0
    var unsentCounted: UInt64 = 0
    var eventsLostCounted: UInt64 = 0
    var logged: UInt64 = 0
    var lastLog: ContinuousClock.Instant?
}

/// The shared engine behind ``MQTTClient``; the network loop holds it (through `SessionDispatch`), not the client,
/// so the client can deinit.
final class ClientCore: Sendable {
    let configuration: MQTTConfiguration
    let logger: Logger
    let setup: Result<MosquittoHandle, MQTTError>
    let droppedCounter: Counter
    let unsentCounter: Counter
    let state = CoatyMutex(ClientState())
    let channel = CoatyMutex(MessageChannel())
    let dropReport = CoatyMutex(DropReport())
    /// Set by `MQTTClient.setMessageHandler(_:)`: the dispatch rounds deliver batches to it.
    let messageHandler = CoatyMutex<MessageHandler?>(nil)
    /// Set by `MQTTClient.setDeliveryExecutor(_:)`: the dispatch rounds run its jobs.
    let deliveryExecutor = CoatyMutex<MQTTDeliveryExecutor?>(nil)
    /// The session the network loop thread dispatches for (the last one started).
    let currentSession = CoatyMutex<SessionDispatch?>(nil)
    /// `MQTTConfiguration.consumerWaitBeforeSuspending` in microseconds.
    let blockingWaitMicroseconds: Int32
    /// Mirrors `ClientState.running` for the lock-free QoS 0 publish path.
    let running = Atomic<Bool>(false)
    /// `configuration.brokers` as URLs: the primary first, then the fallbacks.
    let brokerURLs: [String]
    /// The index into `brokerURLs` of the broker in use, or last tried (updated from the shim's connection events).
    let currentBroker = Atomic<Int>(0)

    /// How long after the flush timeout `disconnect()` abandons a network thread that did not stop.
    static let stopGrace: Duration = .seconds(3)
    static let dropLogInterval: Duration = .seconds(5)

    init(configuration: MQTTConfiguration, logger: Logger, metricsFactory: (any MetricsFactory)?) {
        self.configuration = configuration
        brokerURLs = configuration.brokers.map(\.url)
        let (seconds, attoseconds) = configuration.consumerWaitBeforeSuspending.components
        blockingWaitMicroseconds = Int32(
            clamping: max(0, min(seconds, 1) * 1_000_000 + attoseconds / 1_000_000_000_000)
        )
        var logger = logger
        logger[metadataKey: "mqtt.client_id"] = .string(configuration.clientId)
        self.logger = logger
        let dimensions = [("client_id", configuration.clientId)]
        func counter(_ label: String) -> Counter {
            if let metricsFactory { return Counter(label: label, dimensions: dimensions, factory: metricsFactory) }
            return Counter(label: label, dimensions: dimensions)
        }
        droppedCounter = counter("coaty_mqtt_dropped_messages_total")
        unsentCounter = counter("coaty_mqtt_unsent_messages_total")
        do {
            setup = .success(try MosquittoHandle(configuration: configuration))
        } catch let error as MQTTError {
            setup = .failure(error)
        } catch {
            setup = .failure(MQTTError(.invalidConfiguration, "\(error)"))
        }
    }

    /// The URL of the broker in use (or last tried), for messages and logs.
    var url: String { brokerURLs[min(currentBroker.load(ordering: .relaxed), brokerURLs.count - 1)] }

    func requireHandle() throws(MQTTError) -> MosquittoHandle {
        switch setup {
        case .success(let handle): return handle
        case .failure(let error): throw error
        }
    }

    var droppedMessageCount: Int {
        guard case .success(let handle) = setup else { return 0 }
        return Int(clamping: handle.droppedCount)
    }

    /// Stops everything without waiting (client deinit).
    func shutdown() {
        if case .success(let handle) = setup { handle.stop() }
        closeMessages()
        let observers = state.withLock { state in
            let observers = state.observers
            state.observers = [:]
            return observers
        }
        for observer in observers.values { observer.finish() }
    }
}
