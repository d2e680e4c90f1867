import CoatySync
import Dispatch
import Synchronization

/// A task executor that runs tasks on the network thread of the MQTT client it is attached to, the thread that
/// reads received messages and hands them to the client's message handler.
///
/// A task that prefers this executor (`withTaskExecutorPreference(executor) { … }`) and waits for something the
/// message handler provides (an event it routes, a response it completes) resumes on the same thread right after
/// the handler's batch, instead of being handed to another thread. That saves a thread wake-up per message, which
/// dominates request/response latency on a small machine. The price: while such a task runs, the client reads and
/// writes nothing, so code running on it must be short and must not block (awaiting is fine: the thread is free
/// while the task is suspended).
///
/// Attach it with ``MQTTClient/setDeliveryExecutor(_:)`` before connecting. It outlives clients: it can be attached
/// to the next client of a reconnecting application. While no client's network thread runs it (before connecting,
/// after disconnecting), its jobs run on a serial fallback queue, so a task preferring it never hangs.
public final class MQTTDeliveryExecutor: TaskExecutor {
    private struct Host {
        let token: UInt64
        let wake: @Sendable () -> Void
    }

    private struct State {
        var jobs: [UnownedJob] = []
        var host: Host?
        var nextToken: UInt64 = 0
        var fallbackScheduled = false
    }

    private let state = CoatyMutex(State())
    private let fallback = DispatchQueue(label: "coaty.mqtt.delivery-executor.fallback")

    /// Creates an executor, not attached to a client yet.
    public init() {}

    /// Queues a job; it runs on the attached network thread after its current batch (or on the fallback queue).
    /// - Parameter job: The job.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let wake = state.withLock { state -> (@Sendable () -> Void)? in
            state.jobs.append(job)
            // Only the first queued job wakes; the rest run in the same round.
            guard state.jobs.count == 1 else { return nil }
            return wakeLocked(&state)
        }
        wake?()
    }

    /// Makes the network thread woken by `wake` run the jobs from now on; returns the token for ``detach(_:)``.
    func attach(wake: @escaping @Sendable () -> Void) -> UInt64 {
        let (token, pending) = state.withLock { state -> (UInt64, Bool) in
            state.nextToken += 1
            state.host = Host(token: state.nextToken, wake: wake)
            return (state.nextToken, !state.jobs.isEmpty)
        }
        if pending { wake() }
        return token
    }

    /// Stops running jobs on the network thread attached with `token` (a later attachment stays); what is queued then
    /// runs on the fallback queue.
    func detach(_ token: UInt64) {
        let wake = state.withLock { state -> (@Sendable () -> Void)? in
            guard state.host?.token == token else { return nil }
            state.host = nil
            return state.jobs.isEmpty ? nil : wakeLocked(&state)
        }
        wake?()
    }

    /// Runs the jobs queued so far (one round: jobs they queue wait for the next wake-up, so messages keep flowing).
    func runJobs() {
        let jobs = state.withLock { state -> [UnownedJob] in
            var taken: [UnownedJob] = []
            swap(&taken, &state.jobs)
            return taken
        }
        for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
    }

    /// The wake-up for queued jobs: the attached network thread, else one round on the fallback queue.
    private func wakeLocked(_ state: inout State) -> (@Sendable () -> Void)? {
        if let host = state.host { return host.wake }
        guard !state.fallbackScheduled else { return nil }
        state.fallbackScheduled = true
        return { [self] in fallback.async { self.runFallbackRound() } }
    }

    private func runFallbackRound() {
        let host = state.withLock { state -> Host? in
            state.fallbackScheduled = false
            return state.host
        }
        // A network thread attached meanwhile takes the jobs (a later detach hands them back here).
        if let host { return host.wake() }
        runJobs()
    }
}
