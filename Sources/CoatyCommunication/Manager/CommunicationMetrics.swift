import CoatyFilter
import CoatyModel
import CoatySync
import Metrics

/// The operator metrics of a ``CommunicationManager`` (besides the drop counters of `Counters`):
/// events received by event type, the connection state, reconnections, and how long requests
/// wait for their first response. Created once per manager from its metrics factory; each
/// update is one handler call (an atomic add with Prometheus), so routing pays no lookup beyond
/// a switch.
///
/// Names and labels (documented in the "Operating a recorder" article of CoatyStore):
/// - `coaty_communication_events_received_total{event}`: messages received on subscribed topics
///   of the agent's namespace (or any with cross-namespacing), before decoding, by event name
///   (`Advertise`, `Discover`, …, `Raw`).
/// - `coaty_communication_online`: 1 while the manager is online, else 0.
/// - `coaty_communication_connections_total`: times the manager came online.
/// - `coaty_communication_reconnects_total`: times it came online again after having been online.
/// - `coaty_communication_response_duration_seconds{event}`: from publishing a request
///   (`Discover`, `Query`, `Update`, `Call`) to its first response.
final class CommunicationMetrics: Sendable {
    /// The received-events counter of each event type, in `CommunicationEventType.allCases` order.
    private let received: [Counter]
    private let online: Gauge
    private let connections: Counter
    private let reconnects: Counter
    private let discoverResponse: Timer
    private let queryResponse: Timer
    private let updateResponse: Timer
    private let callResponse: Timer
    /// Whether the manager was online before (the next connection is a reconnection).
    private let wasOnline = CoatyMutex(false)

    init(factory: any MetricsFactory) {
        var received = [Counter?](repeating: nil, count: CommunicationEventType.allCases.count)
        for eventType in CommunicationEventType.allCases {
            received[Self.index(of: eventType)] = Counter(
                label: "coaty_communication_events_received_total",
                dimensions: [("event", eventType.name)],
                factory: factory
            )
        }
        self.received = received.map { $0! }
        online = Gauge(label: "coaty_communication_online", factory: factory)
        online.record(0)
        connections = Counter(label: "coaty_communication_connections_total", factory: factory)
        reconnects = Counter(label: "coaty_communication_reconnects_total", factory: factory)
        func responseTimer(_ eventType: CommunicationEventType) -> Timer {
            Timer(
                label: "coaty_communication_response_duration_seconds",
                dimensions: [("event", eventType.name)],
                factory: factory
            )
        }
        discoverResponse = responseTimer(.discover)
        queryResponse = responseTimer(.query)
        updateResponse = responseTimer(.update)
        callResponse = responseTimer(.call)
    }

    /// Counts a received message of `eventType`.
    func received(_ eventType: CommunicationEventType) {
        received[Self.index(of: eventType)].increment()
    }

    /// Records an online/offline change.
    func setOnline(_ isOnline: Bool) {
        online.record(isOnline ? 1 : 0)
        guard isOnline else { return }
        connections.increment()
        let again = wasOnline.withLock { was in
            defer { was = true }
            return was
        }
        if again { reconnects.increment() }
    }

    /// Records how long a request of `eventType` waited for its first response.
    func responseArrived(for eventType: CommunicationEventType, after duration: Duration) {
        let timer: Timer
        switch eventType {
        case .discover: timer = discoverResponse
        case .query: timer = queryResponse
        case .update: timer = updateResponse
        case .call: timer = callResponse
        default: return
        }
        let (seconds, attoseconds) = duration.components
        timer.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// The position of `eventType`'s counter (a switch: no search per message).
    private static func index(of eventType: CommunicationEventType) -> Int {
        switch eventType {
        case .advertise: 0
        case .deadvertise: 1
        case .channel: 2
        case .associate: 3
        case .ioValue: 4
        case .discover: 5
        case .resolve: 6
        case .query: 7
        case .retrieve: 8
        case .update: 9
        case .complete: 10
        case .call: 11
        case .return: 12
        case .raw: 13
        }
    }
}
