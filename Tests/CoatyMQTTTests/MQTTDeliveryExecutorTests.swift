import CoatyMQTT
import CoatySync
import CoatyTesting
import Foundation
import Testing

/// `MQTTDeliveryExecutor`: tasks preferring it run on the client's network thread, right after the batch that
/// resumed them, and never hang when no client runs it.
@Suite(.serialized, .enabled(if: BrokerAvailability.shouldRun, BrokerAvailability.skipMessage))
struct MQTTDeliveryExecutorTests {
    /// A one-shot hand-off from the message handler to a waiting task.
    final class Handoff: Sendable {
        private let waiter = CoatyMutex<CheckedContinuation<UInt, Never>?>(nil)

        func wait() async -> UInt {
            await withCheckedContinuation { continuation in waiter.withLock { $0 = continuation } }
        }

        var isWaiting: Bool { waiter.withLock { $0 != nil } }

        /// Resumes the waiting task (if any) with the calling thread's id.
        func resume() {
            let continuation = waiter.withLock { waiter in
                defer { waiter = nil }
                return waiter
            }
            continuation?.resume(returning: currentThreadId())
        }
    }

    /// Where a task resumed by the message handler runs: returns (handler thread, thread after resumption).
    func resumption(preferring executor: MQTTDeliveryExecutor?) async throws -> (handler: UInt, task: UInt) {
        let broker = try await MosquittoBroker.start()
        let configuration = try MQTTConfiguration(url: broker.url, clientId: uniqueClientId("executor"))
        let client = MQTTClient(configuration: configuration)
        let handoff = Handoff()
        client.setMessageHandler { _ in handoff.resume() }
        let attached = MQTTDeliveryExecutor()
        client.setDeliveryExecutor(attached)
        try await withTimeout(15, "connect") { try await client.connect() }
        try await client.subscribe("executor/#")
        let waiter = Task {
            await withTaskExecutorPreference(executor == nil ? nil : attached) {
                let handlerThread = await handoff.wait()
                return (handlerThread, currentThreadId())
            }
        }
        try await eventually(10, "the waiting task") { handoff.isWaiting }
        try await client.publish("executor/x", payload: Array("x".utf8))
        let result = await waiter.value
        await client.disconnect()
        return (result.0, result.1)
    }

    @Test func aTaskPreferringTheExecutorResumesOnTheNetworkThread() async throws {
        let threads = try await resumption(preferring: MQTTDeliveryExecutor())
        #expect(threads.task == threads.handler)
    }

    /// The control: without the preference the task is handed to another thread.
    @Test func withoutThePreferenceATaskResumesElsewhere() async throws {
        let threads = try await resumption(preferring: nil)
        #expect(threads.task != threads.handler)
    }

    /// Before a client runs it and after its client disconnected, the executor's jobs run on its fallback queue.
    @Test func tasksPreferringAnUnattachedExecutorStillRun() async throws {
        let executor = MQTTDeliveryExecutor()
        let before = await withTaskExecutorPreference(executor) {
            try? await Task.sleep(for: .milliseconds(5))
            return 1
        }
        #expect(before == 1)

        let broker = try await MosquittoBroker.start()
        let configuration = try MQTTConfiguration(url: broker.url, clientId: uniqueClientId("executor-end"))
        let client = MQTTClient(configuration: configuration)
        client.setDeliveryExecutor(executor)
        try await withTimeout(15, "connect") { try await client.connect() }
        let during = await withTaskExecutorPreference(executor) {
            try? await Task.sleep(for: .milliseconds(5))
            return 2
        }
        await client.disconnect()
        let after = try await withTimeout(10, "a job after disconnect") {
            await withTaskExecutorPreference(executor) {
                try? await Task.sleep(for: .milliseconds(5))
                return 3
            }
        }
        #expect(during == 2)
        #expect(after == 3)
    }
}

/// The calling thread's id.
func currentThreadId() -> UInt {
    #if canImport(Glibc)
        UInt(pthread_self())
    #else
        UInt(bitPattern: pthread_self())
    #endif
}
