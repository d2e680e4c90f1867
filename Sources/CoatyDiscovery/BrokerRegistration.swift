/// A broker advertised over DNS-SD; withdrawn by ``cancel()`` or when released.
///
/// Returned by ``BrokerDiscovery/publish(name:port:webSocketPort:host:)``; keep it as long as the
/// broker should be found.
public final class BrokerRegistration: Sendable {
    /// The name the service is registered under: the requested one, or mDNSResponder's rename
    /// (e.g. `Coaty MQTT Broker (2)`) when another service of the type already had it (Avahi
    /// refuses a taken name instead).
    public let name: String
    /// The service type, e.g. `_coaty-mqtt._tcp`.
    public let serviceType: String
    /// The advertised MQTT port.
    public let port: Int
    /// The advertised WebSocket port (TXT `ws-port`).
    public let webSocketPort: Int
    private let operation: DNSServiceOperation

    init(name: String, serviceType: String, port: Int, webSocketPort: Int, operation: DNSServiceOperation) {
        self.name = name
        self.serviceType = serviceType
        self.port = port
        self.webSocketPort = webSocketPort
        self.operation = operation
    }

    /// Withdraws the advertisement (browsers see the broker lost). Idempotent.
    public func cancel() {
        operation.cancel()
    }

    deinit {
        operation.cancel()
    }
}
