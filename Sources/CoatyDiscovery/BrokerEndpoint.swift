/// A broker found over DNS-SD: where to connect.
///
/// ```swift
/// let broker = try await BrokerDiscovery().find(timeout: .seconds(5))
/// print(broker.url)  // mqtt://192.168.1.20:1883
/// ```
public struct BrokerEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The service instance name, e.g. `Coaty MQTT Broker`.
    public var name: String
    /// The host to connect to: the IPv4 address the host name resolved to, else the host name itself.
    public var host: String
    /// The host target of the service's SRV record (a `.local` host name, or the address Coaty JS
    /// publishes when given a host), without the trailing dot.
    public var hostName: String
    /// The MQTT port.
    public var port: Int
    /// The broker's WebSocket port from the TXT record's `ws-port`, when it has one.
    public var webSocketPort: Int?
    /// Every key/value pair of the TXT record.
    public var txtRecord: [String: String]

    /// Creates an endpoint.
    /// - Parameters:
    ///   - name: the service instance name.
    ///   - host: the address (or host name) to connect to.
    ///   - hostName: the SRV record's host target.
    ///   - port: the MQTT port.
    ///   - webSocketPort: the WebSocket port, if advertised.
    ///   - txtRecord: the TXT record's pairs.
    public init(
        name: String,
        host: String,
        hostName: String,
        port: Int,
        webSocketPort: Int?,
        txtRecord: [String: String] = [:]
    ) {
        self.name = name
        self.host = host
        self.hostName = hostName
        self.port = port
        self.webSocketPort = webSocketPort
        self.txtRecord = txtRecord
    }

    /// The broker URL for an MQTT client, `mqtt://HOST:PORT` (an IPv6 address in brackets).
    public var url: String { "mqtt://\(Self.authority(host, port))" }

    /// The WebSocket URL, `ws://HOST:WSPORT`, when the broker advertises a WebSocket port.
    public var webSocketURL: String? { webSocketPort.map { "ws://\(Self.authority(host, $0))" } }

    /// `name at url`.
    public var description: String { "\(name) at \(url)" }

    private static func authority(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// The TXT record format of DNS-SD (RFC 6763 §6): a sequence of length-prefixed `key=value` strings.
enum TXTRecord {
    /// Encodes `pairs` in order.
    /// - Throws: ``BrokerDiscoveryError/invalidArgument(_:)`` for an entry over 255 bytes or a key with `=`.
    static func encode(_ pairs: [(key: String, value: String)]) throws -> [UInt8] {
        var bytes: [UInt8] = []
        for (key, value) in pairs {
            guard !key.isEmpty, !key.contains("=") else {
                throw BrokerDiscoveryError.invalidArgument("TXT key '\(key)' must be non-empty and contain no '='")
            }
            let entry = Array("\(key)=\(value)".utf8)
            guard entry.count <= 255 else {
                throw BrokerDiscoveryError.invalidArgument("TXT entry '\(key)' is longer than 255 bytes")
            }
            bytes.append(UInt8(entry.count))
            bytes.append(contentsOf: entry)
        }
        return bytes
    }

    /// Decodes a TXT record; a key without `=` has the empty value, the first occurrence of a key wins
    /// (RFC 6763 §6.4), and a truncated entry ends the record.
    static func decode(_ bytes: [UInt8]) -> [String: String] {
        var pairs: [String: String] = [:]
        var index = 0
        while index < bytes.count {
            let length = Int(bytes[index])
            let start = index + 1
            let end = start + length
            guard end <= bytes.count else { break }
            index = end
            guard length > 0 else { continue }
            let entry = bytes[start..<end]
            let separator = entry.firstIndex(of: UInt8(ascii: "="))
            let key = String(decoding: entry[start..<(separator ?? end)], as: UTF8.self).lowercased()
            let value = separator.map { String(decoding: entry[($0 + 1)..<end], as: UTF8.self) } ?? ""
            guard !key.isEmpty, pairs[key] == nil else { continue }
            pairs[key] = value
        }
        return pairs
    }
}
