// MQTT's vocabulary (MQTTMessage, MQTTQoS, MQTTTopicFilter) is part of the client's API.
@_exported public import CoatyMQTTTypes

/// The MQTT protocol version spoken to the broker.
public enum MQTTProtocolVersion: Sendable, Hashable {
    /// MQTT 3.1.1 (the default, and what the Coaty protocol uses).
    case v311
    /// MQTT 5 (opt-in).
    case v5
}

/// TLS settings for an `mqtts://` connection. The broker certificate is verified by default.
public struct MQTTTLSConfiguration: Sendable, Hashable {
    /// A PEM file with the CA certificate(s) that signed the broker certificate; `nil` uses the system CAs.
    public var caFile: String?
    /// A PEM client certificate for mutual TLS (requires `privateKeyFile`).
    public var certificateFile: String?
    /// The PEM private key of `certificateFile`.
    public var privateKeyFile: String?
    /// Whether the broker certificate and host name are verified. Only set `false` explicitly, for testing.
    public var verifyServer: Bool

    /// Creates TLS settings.
    /// - Parameters:
    ///   - caFile: A PEM CA file; `nil` uses the system CAs.
    ///   - certificateFile: A client certificate for mutual TLS.
    ///   - privateKeyFile: The client certificate's private key.
    ///   - verifyServer: Verify the broker certificate (default `true`).
    public init(
        caFile: String? = nil,
        certificateFile: String? = nil,
        privateKeyFile: String? = nil,
        verifyServer: Bool = true
    ) {
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.privateKeyFile = privateKeyFile
        self.verifyServer = verifyServer
    }
}

/// The address of one MQTT broker: host, port and whether the connection uses TLS.
public struct MQTTBrokerAddress: Sendable, Hashable {
    /// The broker host name or IP address.
    public var host: String
    /// The broker port.
    public var port: Int
    /// Whether the broker is reached over TLS (`mqtts://`).
    public var usesTLS: Bool

    /// Creates an address.
    /// - Parameters:
    ///   - host: The host name or IP address.
    ///   - port: The port (1…65535).
    ///   - usesTLS: Whether the connection uses TLS.
    public init(host: String, port: Int, usesTLS: Bool) {
        self.host = host
        self.port = port
        self.usesTLS = usesTLS
    }

    /// Creates an address from a broker URL without credentials.
    ///
    /// ```swift
    /// let fallback = try MQTTBrokerAddress(url: "mqtt://backup.example:1883")
    /// ```
    /// - Parameter url: `mqtt://host[:port]` or `mqtts://host[:port]`, as in ``MQTTConfiguration/init(url:clientId:)``.
    /// - Throws: ``MQTTError`` with kind `.invalidConfiguration` when the URL is malformed or carries credentials
    ///   (credentials belong to the configuration: ``MQTTConfiguration/username``).
    public init(url: String) throws {
        let parsed = try MQTTConfiguration.parse(url)
        guard parsed.username == nil, parsed.password == nil else {
            throw MQTTError(
                .invalidConfiguration,
                "Invalid broker URL \"\(url)\": a fallback broker takes no credentials; set them on the configuration."
            )
        }
        self.init(host: parsed.host, port: parsed.port, usesTLS: parsed.secure)
    }

    /// The broker URL (`mqtt://host:port` or `mqtts://host:port`).
    public var url: String {
        let hostPart = host.contains(":") ? "[\(host)]" : host
        return "\(usesTLS ? "mqtts" : "mqtt")://\(hostPart):\(port)"
    }
}

/// Everything an ``MQTTClient`` needs to connect; defaults follow the Coaty protocol (3.1.1, clean session, 60 s
/// keepalive), except that reconnect attempts back off from 1 s to 30 s (CoatyKit's agents retry every second).
public struct MQTTConfiguration: Sendable {
    /// The client identifier; must be unique per connection on the broker.
    public var clientId: String
    /// The broker host name or IP address.
    public var host: String
    /// The broker port.
    public var port: Int
    /// Brokers tried in order after the primary one (`host`/`port`), for failover (default none).
    ///
    /// Every broker uses this configuration's TLS settings and credentials, so each fallback must use TLS exactly
    /// when `tls` is set (else connecting fails with kind `.invalidConfiguration`). A connection attempt that fails
    /// moves on to the next broker at once; a round through all of them without a connection waits
    /// `reconnectDelay` (doubling up to `maxReconnectDelay`) before the next round. After a lost connection, the lost
    /// broker is retried first, then the others in order. `connect()` fails only when a whole round failed; the
    /// ``MQTTClient`` logs `Connected to <url>` with the broker actually in use.
    public var fallbackBrokers: [MQTTBrokerAddress] = []
    /// The MQTT keepalive interval (default 60 s): 0 (off) or 5…65535 whole seconds, libmosquitto's range; a
    /// client with another value fails to connect with ``MQTTError`` of kind `.invalidConfiguration`.
    public var keepAlive: Duration = .seconds(60)
    /// Whether the broker discards session state on connect (default `true`).
    public var cleanSession: Bool = true
    /// The user name sent in CONNECT.
    public var username: String?
    /// The password sent in CONNECT (never logged).
    public var password: String?
    /// TLS settings; set for `mqtts://` URLs, `nil` for plain TCP.
    public var tls: MQTTTLSConfiguration?
    /// The protocol version (default 3.1.1). MQTT 5 carries `MQTTMessage.userProperties` (CoatyKit's trace
    /// context); payloads, topics and QoS are the same. A persistent session (`cleanSession = false`) needs 3.1.1:
    /// connecting fails with kind `.invalidConfiguration` otherwise.
    public var protocolVersion: MQTTProtocolVersion = .v311
    /// The last will the broker publishes when the connection ends without DISCONNECT.
    public var will: MQTTMessage?
    /// How long one connection attempt may take until CONNACK (default 5 s).
    public var connectTimeout: Duration = .seconds(5)
    /// The first delay between reconnect attempts (default 1 s); it doubles up to `maxReconnectDelay`.
    public var reconnectDelay: Duration = .seconds(1)
    /// The largest delay between reconnect attempts (default 30 s).
    public var maxReconnectDelay: Duration = .seconds(30)
    /// How many received messages are buffered for the consumer before the network thread holds its reads
    /// (back-pressure: nothing is dropped; see ``MQTTClient/isReadingHeld``).
    public var messageBufferCapacity: Int = 10_000
    /// How long a `messages` consumer that finds the buffer empty blocks its thread, waiting for the next message,
    /// before it suspends (default 500 µs; zero always suspends at once).
    ///
    /// A short blocking wait saves the two thread hand-offs of a suspension when messages follow each other
    /// closely (request/response round trips, streams), which roughly halves the latency on a busy machine. It holds
    /// one cooperative thread for at most this long per empty buffer.
    public var consumerWaitBeforeSuspending: Duration = .microseconds(500)
    /// How long ``MQTTClient/disconnect()`` may spend writing the publications libmosquitto still has queued before
    /// it sends DISCONNECT (default 10 s).
    ///
    /// While the connection is up, `disconnect()` waits until every queued message is written to the socket, however
    /// long the backlog, but never longer than this (e.g. when the broker stopped reading). Messages still unsent then
    /// are counted in `coaty_mqtt_unsent_messages_total` and logged at warning level.
    public var disconnectFlushTimeout: Duration = .seconds(10)
    /// How many QoS 0 publications may wait in the client, queued but not yet written to the socket, before
    /// `publish` suspends until half of them are written (back-pressure; default 10 000). Zero disables the limit:
    /// a publisher that outpaces the network then makes the queue, and the process's memory, grow without bound.
    public var maxOutstandingPublishes: Int = 10_000
    /// Whether the socket is tuned for latency (default `true`): `TCP_NODELAY` (no Nagle's algorithm for what this
    /// client writes) and, on Linux, `TCP_QUICKACK` renewed before every wait (received data is acknowledged at once).
    /// While the client only receives (nothing written for 10 ms) and messages arrive faster than about 8 000 per
    /// second, the renewal is paced to once per millisecond, so the broker can batch the stream into fewer segments;
    /// an acknowledgement is then at most about 1 ms late.
    ///
    /// mosquitto keeps Nagle's algorithm on by default, so it holds a small packet written right after another one
    /// (a SUBACK right after an UNSUBACK, as in Coaty's request/response pattern) until the client acknowledged the
    /// first; with the kernel's delayed ACK that costs about 40 ms per round trip, and a client with Nagle pays the
    /// same for its own back-to-back packets. Turn it off only to trade latency for fewer packets.
    public var tcpNoDelay: Bool = true

    /// Durable delivery (opt-in): acknowledge a received QoS 1 message only once the application says it is handled
    /// (``MQTTClient/acknowledge(through:)``), not when it is read. libmosquitto answers a QoS 1 PUBLISH as it reads
    /// it; with this option the network thread holds those answers (and its further reads) after each read step that
    /// brought one, until the application acknowledges. With `cleanSession` off, the broker then keeps and redelivers
    /// every message the application did not handle, also across a crash. Throughput is bounded by how fast the
    /// application handles a read step's messages (one step at a time). See ``MQTTClient/acknowledgementDue``.
    public var holdsAcknowledgements: Bool = false

    /// Creates a configuration from a broker URL.
    ///
    /// ```swift
    /// var configuration = try MQTTConfiguration(url: "mqtt://127.0.0.1:1883", clientId: "sensor-1")
    /// configuration.will = MQTTMessage(topic: "sensors/1/status", payload: Array("offline".utf8))
    /// ```
    /// - Parameters:
    ///   - url: `mqtt://host[:port]` (default port 1883) or `mqtts://host[:port]` (default 8883, TLS verified);
    ///     `user:password@` before the host is accepted. `tcp://`, `ssl://` and `tls://` are aliases.
    ///   - clientId: The client identifier (1…65535 UTF-8 bytes).
    /// - Throws: ``MQTTError`` with kind `.invalidConfiguration` when the URL or client id is malformed.
    public init(url: String, clientId: String) throws {
        guard !clientId.isEmpty, clientId.utf8.count <= 65_535, !clientId.utf8.contains(0) else {
            throw MQTTError(
                .invalidConfiguration,
                "Invalid MQTT client id \"\(clientId)\": use 1…65535 bytes without NUL."
            )
        }
        self.clientId = clientId
        let parsed = try Self.parse(url)
        self.host = parsed.host
        self.port = parsed.port
        self.username = parsed.username
        self.password = parsed.password
        self.tls = parsed.secure ? MQTTTLSConfiguration() : nil
    }

    /// Creates a configuration from an ordered list of broker URLs: the first is the primary broker, the others are
    /// its ``fallbackBrokers``.
    ///
    /// ```swift
    /// let configuration = try MQTTConfiguration(
    ///     urls: ["mqtt://broker-a:1883", "mqtt://broker-b:1883"], clientId: "sensor-1")
    /// ```
    /// - Parameters:
    ///   - urls: One or more broker URLs as in ``init(url:clientId:)``, all `mqtt://` or all `mqtts://`; credentials
    ///   may only be given on the first one (or repeated identically).
    ///   - clientId: The client identifier (1…65535 UTF-8 bytes).
    /// - Throws: ``MQTTError`` with kind `.invalidConfiguration` when the list is empty, a URL is malformed, or the
    ///   URLs mix TLS and plain TCP or different credentials.
    public init(urls: [String], clientId: String) throws {
        guard let first = urls.first else {
            throw MQTTError(.invalidConfiguration, "No broker URL given: use at least one mqtt://HOST:PORT.")
        }
        try self.init(url: first, clientId: clientId)
        for url in urls.dropFirst() {
            let parsed = try Self.parse(url)
            guard parsed.secure == (tls != nil) else {
                throw MQTTError(
                    .invalidConfiguration,
                    "Invalid broker URL \"\(url)\": every broker must use the scheme of the first one (\(self.url));"
                        + " mixing mqtt:// and mqtts:// is not supported."
                )
            }
            if parsed.username != nil || parsed.password != nil,
                parsed.username != username || parsed.password != password
            {
                throw MQTTError(
                    .invalidConfiguration,
                    "Invalid broker URL \"\(url)\": every broker uses the credentials of the first URL; give them once."
                )
            }
            fallbackBrokers.append(MQTTBrokerAddress(host: parsed.host, port: parsed.port, usesTLS: parsed.secure))
        }
    }

    /// The primary broker URL this configuration connects to (`mqtt://host:port` or `mqtts://host:port`), without
    /// credentials.
    public var url: String { primaryBroker.url }

    /// Every broker in the order they are tried: the primary one (`host`/`port`), then the ``fallbackBrokers``.
    public var brokers: [MQTTBrokerAddress] { [primaryBroker] + fallbackBrokers }

    private var primaryBroker: MQTTBrokerAddress { MQTTBrokerAddress(host: host, port: port, usesTLS: tls != nil) }

    static func parse(
        _ url: String
    ) throws -> (host: String, port: Int, secure: Bool, username: String?, password: String?) {
        func invalid(_ why: String) -> MQTTError {
            MQTTError(
                .invalidConfiguration,
                "Invalid broker URL \"\(url)\": \(why). Use mqtt://HOST:PORT or mqtts://HOST:PORT."
            )
        }
        let parts = url.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw invalid("missing scheme") }
        let scheme = parts[0].lowercased()
        let secure: Bool
        switch scheme {
        case "mqtt", "tcp": secure = false
        case "mqtts", "ssl", "tls": secure = true
        default: throw invalid("unknown scheme \"\(scheme)\"")
        }
        var rest = parts[1]
        if let slash = rest.firstIndex(of: "/") {
            guard rest[slash...].allSatisfy({ $0 == "/" }) else { throw invalid("a path is not allowed") }
            rest = rest[..<slash]
        }
        var username: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                username = String(credentials[..<colon])
                password = String(credentials[credentials.index(after: colon)...])
            } else {
                username = String(credentials)
            }
        }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("unterminated IPv6 address") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("unexpected text after the host") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty, !host.contains(where: { $0.isWhitespace }) else { throw invalid("missing host") }
        var port = secure ? 8883 : 1883
        if let portText {
            guard let value = Int(portText), (1...65_535).contains(value) else {
                throw invalid("port must be 1…65535")
            }
            port = value
        }
        return (String(host), port, secure, username, password)
    }
}

/// The state of an ``MQTTClient``'s connection.
public enum MQTTConnectionState: Sendable, Hashable {
    /// Not connected, and not trying (before `connect()` or after `disconnect()`).
    case disconnected
    /// The first connection attempt of `connect()` is under way.
    case connecting
    /// Connected, and every remembered subscription is acknowledged.
    case connected
    /// The connection was lost; reconnecting with backoff (and re-subscribing) until `disconnect()`.
    case reconnecting
}

/// An error of the MQTT client, with a message naming the broker or topic and what to do.
public struct MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Hashable {
        /// The URL, client id or another setting is malformed.
        case invalidConfiguration
        /// No broker accepted a connection at the configured address.
        case brokerUnreachable
        /// The TLS handshake failed, typically because the broker certificate could not be verified.
        case tlsVerificationFailed
        /// The broker refused the credentials (bad user name or password, or not authorized).
        case authenticationRefused
        /// The broker refused the connection for another reason (e.g. client id rejected).
        case connectionRefused
        /// A topic or topic filter is invalid.
        case invalidTopic
        /// The operation needs a connection; call `connect()` first or wait for the reconnect.
        case notConnected
        /// The client is already connected or connecting.
        case alreadyConnected
        /// The broker refused a subscription.
        case subscriptionRefused
        /// The broker refused a QoS 1/2 publication (MQTT 5 reason code).
        case publishRefused
        /// The payload is larger than MQTT allows.
        case payloadTooLarge
        /// A protocol error or another libmosquitto failure.
        case protocolError
        /// An operation did not finish in time.
        case timeout
    }

    /// What went wrong.
    public var kind: Kind
    /// A human-readable explanation naming the broker or topic involved and what to do.
    public var message: String

    /// Creates an error.
    /// - Parameters:
    ///   - kind: What went wrong.
    ///   - message: A human-readable explanation.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

extension MQTTError {
    /// Checks a topic name for a publication (``MQTTTopicFilter/validateTopicName(_:)``).
    /// - Parameter topic: the topic name.
    /// - Throws: an error of kind `.invalidTopic` naming the topic and the rule it breaks.
    static func checkTopicName(_ topic: String) throws(MQTTError) {
        do {
            try MQTTTopicFilter.validateTopicName(topic)
        } catch {
            throw invalidTopic(topic, error, what: "topic")
        }
    }

    /// Checks a topic filter for a subscription (``MQTTTopicFilter/validate(_:)``).
    /// - Parameter filter: the topic filter.
    /// - Throws: an error of kind `.invalidTopic` naming the filter and the rule it breaks.
    static func checkFilter(_ filter: String) throws(MQTTError) {
        do {
            try MQTTTopicFilter.validate(filter)
        } catch {
            throw invalidTopic(filter, error, what: "topic filter")
        }
    }

    private static func invalidTopic(_ topic: String, _ error: MQTTTopicError, what: String) -> MQTTError {
        let shown = topic.utf8.count > 200 ? String(topic.prefix(200)) + "…" : topic
        return MQTTError(.invalidTopic, "Invalid MQTT \(what) \"\(shown)\": \(error)")
    }
}
