public import CoatyCore
import CoatyStore
public import CoatyRecording

/// The answer of a readiness check: ready, or not ready with a short reason for the operator.
///
/// `/health/ready` of an ``OperatorEndpoint`` answers 200 when ready and 503 with the reason
/// otherwise. Build one from what the process runs:
///
/// ```swift
/// let endpoint = OperatorEndpoint(registry: registry) { .of(recorder) }
/// let agentEndpoint = OperatorEndpoint(registry: registry) { .of(manager) }
/// ```
public struct OperatorReadiness: Sendable, Hashable {
    /// Whether the process is ready.
    public var isReady: Bool
    /// Why it is not ready (one short line); `nil` when ready.
    public var reason: String?

    /// Ready.
    public static let ready = OperatorReadiness(isReady: true, reason: nil)

    /// Not ready, for `reason`.
    /// - Parameter reason: why, one short line (it is sent to the prober).
    /// - Returns: the readiness.
    public static func notReady(_ reason: String) -> OperatorReadiness {
        OperatorReadiness(isReady: false, reason: reason)
    }

    /// Readiness of an agent: ready while its manager is online (connected to the broker, its
    /// subscriptions made, its identity advertised).
    /// - Parameter manager: the agent's communication manager.
    /// - Returns: the readiness now.
    public static func of(_ manager: CommunicationManager) -> OperatorReadiness {
        manager.communicationState == .online ? .ready : .notReady("not connected to the broker")
    }

    /// Readiness of a recorder (its `readiness`): it runs, its manager is
    /// online, its subscriptions are acknowledged, its store takes writes and its writer is not
    /// stalled.
    /// - Parameter recorder: the recorder.
    /// - Returns: the readiness now.
    public static func of(_ recorder: CoatyRecorder) -> OperatorReadiness {
        let readiness = recorder.readiness
        return OperatorReadiness(isReady: readiness.isReady, reason: readiness.reason)
    }
}
